"""Distillation's text sets: the text a teacher labels, written under ``runs/`` (``electra-detect distill text``).

``build_text_sets`` writes the learner training sentences (gold labels, each assigned to half 0 or 1 by a fixed
seed; the half files are written too, so two half teachers can be trained, each labelling the half it did not see),
corpus sentences with realistic synthetic errors (their synthetic labels kept), and clean corpus sentences. One
gzipped JSONL file per set. The teacher's labels: distill_labels.py; the student: distill.py.
"""

from __future__ import annotations

import gzip
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from electra_detect.errors import GedDataError
from electra_detect.fileio import atomic_open, atomic_write_json, atomic_write_text
from electra_detect.tasks.ged.readers import GedSentence, read_labelled

SETS = ("learner", "corrupted", "clean")
LEARNER_LICENCE = "non-commercial research and education (Cambridge; no redistribution)"


# -- data specs ----------------------------------------------------------------------------------------------
def parse_data_spec(spec: str, default: str = "") -> tuple[Path, str]:
    """``PATH:FORMAT`` (``en_fce_train.tsv:tsv``) -> (path, format); a bare path takes ``default`` or its suffix's."""
    head, _, tail = spec.rpartition(":")
    path, fmt = (head, tail) if head and tail in ("m2", "tsv", "bea") else (spec, "")
    fmt = fmt or default or {".m2": "m2", ".tsv": "tsv", ".json": "bea"}.get(Path(path).suffix, "")
    if fmt not in ("m2", "tsv", "bea"):
        raise GedDataError(f"{spec}: give a format as PATH:m2, PATH:tsv or PATH:bea")
    return Path(path), fmt


def corpus_name(path: Path) -> dict[str, str]:
    """The learner corpus a file belongs to and its licence (named in the student's card)."""
    name = path.name
    if name.startswith(("en_fce", "fce")):
        return {"name": "FCE" + (" (MultiGED-2023 token TSV)" if name.endswith(".tsv") else ""),
                "licence": LEARNER_LICENCE}
    if name[:2] in ("A.", "B.", "C.", "N.") or name.startswith("ABC"):
        return {"name": "W&I+LOCNESS", "licence": LEARNER_LICENCE}
    return {"name": path.stem, "licence": "as distributed (see the file's source)"}


# -- 1. the text sets ----------------------------------------------------------------------------------------
def file_blocks(path: Path, fmt: str) -> list[str]:
    """A labelled file's units in its own text: a sentence block (TSV, M2: blank-line separated) or an essay line
    (BEA JSON). Halves are cut between units, so each half is a valid file of the same format."""
    text = path.read_text(encoding="utf-8")
    if fmt == "bea":
        return [line for line in text.splitlines() if line.strip()]
    return [block for block in text.replace("\r\n", "\n").split("\n\n") if block.strip()]


def split_halves(blocks: Sequence[str], seed: int) -> tuple[list[str], list[str]]:
    """A fixed-seed split of a file's units into two halves (file order kept inside each)."""
    order = list(range(len(blocks)))
    random.Random(seed).shuffle(order)
    first = set(order[:len(order) // 2])
    return [b for i, b in enumerate(blocks) if i in first], [b for i, b in enumerate(blocks) if i not in first]


def first_types(sentence: GedSentence) -> list[str]:
    """Per token the first ERRANT type touching it ("" where none): what ``ged_finetune.type_targets`` trains on."""
    return [types[0] if types else "" for types in (sentence.types or [[] for _ in sentence.tokens])]


def write_set(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """One set as gzipped JSONL, atomically (a reader never sees half a set)."""
    with atomic_open(path, "wb") as handle, gzip.open(handle, "wt", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_set(path: str | Path) -> Iterator[dict[str, Any]]:
    """The rows of a set written by :func:`write_set`: ``tokens``, and where known ``labels``, ``types``, ``half``."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                row = json.loads(line)
                if not row.get("tokens"):
                    raise GedDataError(f"{path}:{number}: a row without tokens")
                yield row
    except FileNotFoundError:
        raise GedDataError(f"text set not found: {path}") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise GedDataError(f"{path}: not a distillation text set ({exc})") from None


def learner_rows(files: Sequence[tuple[Path, str]], out: Path, seed: int) -> tuple[list[dict], list[dict]]:
    """Each learner file cut into halves written as ``out/learner/half{0,1}/<name>`` (for the half teachers), and
    the rows of both halves (gold labels, first types, the half). Returns (rows, per-file records)."""
    rows, records = [], []
    for path, fmt in files:
        halves = split_halves(file_blocks(path, fmt), seed)
        counts = []
        for half, blocks in enumerate(halves):
            target = out / "learner" / f"half{half}" / path.name
            atomic_write_text(target, ("\n" if fmt == "bea" else "\n\n").join(blocks) + "\n")
            sentences = read_labelled(target, fmt)
            rows += [{"tokens": s.tokens, "labels": s.labels, "types": first_types(s), "half": half,
                      "file": path.name} for s in sentences]
            counts.append(len(sentences))
        records.append({"file": path.name, "format": fmt, "sentences": sum(counts), "halves": counts,
                        **corpus_name(path)})
    return rows, records


CHUNK = "chunk-{:05d}.jsonl.gz"


def sentences_sha256(sentences: Sequence[Sequence[str]]) -> str:
    """A digest of a list of token lists (which draw a chunk folder was made from)."""
    import hashlib

    digest = hashlib.sha256()
    for tokens in sentences:
        digest.update(("\t".join(tokens) + "\n").encode("utf-8"))
    return digest.hexdigest()


def corrupt_in_chunks(sentences: Sequence[list[str]], folder: Path, seed: int, neighbours_from: str | None,
                      chunk_size: int = 5_000, workers: int = 1,
                      log: Callable[[str], None] | None = None) -> list[Path]:
    """Realistic errors on ``sentences`` in chunks of ``chunk_size`` (``realistic_corpus.corrupt_chunk``, chunk i
    seeded ``"{seed}:{i}"``), each written atomically as ``folder/chunk-NNNNN.jsonl.gz``; ``workers`` processes
    share the chunks. A re-run keeps the chunks there (same sentences and settings) and makes the rest; the text
    does not depend on ``workers`` or on where a run stopped. Returns the chunk files in order."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    from electra_detect.training.synthetic.realistic_corpus import corrupt_chunk

    setting = {"sentences": len(sentences), "sentences_sha256": sentences_sha256(sentences), "seed": seed,
               "neighbours_from": neighbours_from, "chunk_size": chunk_size}
    settings_path = folder / "settings.json"
    if settings_path.exists() and json.loads(settings_path.read_text()) != setting:
        raise GedDataError(f"{folder} holds chunks made with other sentences or settings: rerun with --overwrite")
    atomic_write_json(settings_path, setting)
    paths = [folder / CHUNK.format(i) for i in range(-(-len(sentences) // chunk_size))]
    todo = [i for i, path in enumerate(paths) if not path.exists()]
    say = log or (lambda message: None)
    say(f"corrupted: {len(paths) - len(todo)}/{len(paths)} chunks already there; {len(todo)} to make "
        f"({workers} process{'es' if workers > 1 else ''})")
    started, made = time.monotonic(), 0
    to_make = sum(min(chunk_size, len(sentences) - i * chunk_size) for i in todo)

    def save(index: int, corrupted: list[GedSentence]) -> None:
        nonlocal made
        write_set(paths[index], [{"tokens": s.tokens, "labels": s.labels, "types": first_types(s)} for s in corrupted])
        made += len(corrupted)
        seconds = time.monotonic() - started
        rate = made / max(seconds, 1e-9)
        say(f"corrupted: chunk {index + 1}/{len(paths)} written; {made:,} sentences in {seconds:.0f} s "
            f"({rate:.0f}/s), about {(to_make - made) / rate / 60:.1f} min left")

    def chunk(index: int) -> list[list[str]]:
        return [list(tokens) for tokens in sentences[index * chunk_size:(index + 1) * chunk_size]]

    if workers <= 1:
        for index in todo:
            save(index, corrupt_chunk(chunk(index), f"{seed}:{index}", neighbours_from))
    elif todo:  # spawned: the workers load spaCy and the neighbour table once each, without torch
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(corrupt_chunk, chunk(i), f"{seed}:{i}", neighbours_from): i for i in todo}
            for future in as_completed(futures):
                save(futures[future], future.result())
    return paths


def concatenate_chunks(paths: Sequence[Path], target: Path) -> None:
    """The chunk files as one set, atomically: gzip members back to back are one gzip stream to every reader."""
    with atomic_open(target, "wb") as out:
        for path in paths:
            out.write(path.read_bytes())


def corpus_rows(corpus: Sequence[str], corrupted: int, clean: int, seed: int, neighbours_from: str | None,
                chunks: Path, chunk_size: int = 5_000, workers: int = 1,
                log: Callable[[str], None] | None = None) -> tuple[list[Path], list[dict]]:
    """``corrupted + clean`` distinct corpus sentences drawn by the seed: the first ``corrupted`` given realistic
    synthetic errors (training/synthetic/realistic_errors.py; labels and types kept) in chunk files under
    ``chunks`` (:func:`corrupt_in_chunks`), the rest as they are. Returns (the chunk files, the clean rows)."""
    from electra_detect.training.synthetic.realistic_corpus import clean_sentences

    drawn = clean_sentences(list(corpus), corrupted + clean, seed)
    if len({" ".join(tokens) for tokens in drawn}) < corrupted + clean:  # clean_sentences repeats a small corpus
        raise GedDataError(f"the corpus holds fewer than the {corrupted + clean:,} distinct sentences asked for")
    to_corrupt, kept = drawn[:corrupted], drawn[corrupted:]
    paths = corrupt_in_chunks(to_corrupt, chunks, seed, neighbours_from, chunk_size, workers, log) if to_corrupt else []
    return paths, [{"tokens": tokens} for tokens in kept]


def corpus_licences(corpus: Sequence[str]) -> list[dict[str, Any]]:
    """The sources and licences of built corpus folders (``corpus build``'s manifest.json), else the paths."""
    out = []
    for item in corpus:
        path = Path(item)
        manifest = path / "manifest.json" if (path / "manifest.json").is_file() else path.parent / "manifest.json"
        if manifest.is_file():  # a build folder, or one source's folder inside it
            sources = json.loads(manifest.read_text(encoding="utf-8")).get("sources", {})
            if manifest.parent != path:
                sources = {k: v for k, v in sources.items() if k == path.name}
            out += [{"name": name, "licence": s.get("licence", "?"), "package": s.get("package")}
                    for name, s in sorted(sources.items())]
        else:
            out.append({"name": str(item), "licence": "as distributed"})
    return out


def build_text_sets(out: str | Path, learner: Sequence[tuple[Path, str]] = (), corpus: Sequence[str] = (),
                    corrupted: int = 0, clean: int = 0, seed: int = 0, neighbours_from: str | None = None,
                    overwrite: bool = False, workers: int = 1, chunk_size: int = 5_000,
                    log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Write ``out/{learner,corrupted,clean}.jsonl.gz`` (the sets asked for) and ``out/manifest.json``; a set
    already written is kept unless ``overwrite``. The corrupted set is made in chunks under ``out/corrupted.chunks``
    by ``workers`` processes (200k sentences: minutes a core); a stopped run resumes after the chunks written."""
    out = Path(out)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() and not overwrite else {"sets": {}}
    manifest["sets"] = manifest.get("sets", {})
    if learner and (overwrite or "learner" not in manifest["sets"]):
        rows, records = learner_rows(learner, out, seed)
        write_set(out / "learner.jsonl.gz", rows)
        manifest["sets"]["learner"] = {"sentences": len(rows), "files": records, "half_seed": seed,
                                       "halves": [str(out / "learner" / f"half{h}") for h in (0, 1)]}
        atomic_write_json(manifest_path, manifest)
    wanted = [name for name, n in (("corrupted", corrupted), ("clean", clean)) if n]
    if wanted and (overwrite or any(name not in manifest["sets"] for name in wanted)):
        if not corpus:
            raise GedDataError("--corrupted/--clean need --corpus (a `corpus build` folder or text files)")
        chunks = out / "corrupted.chunks"
        if overwrite and chunks.exists():
            import shutil

            shutil.rmtree(chunks)
        paths, kept = corpus_rows(corpus, corrupted, clean, seed, neighbours_from, chunks, chunk_size, workers, log)
        licences = corpus_licences(corpus)
        if paths:
            concatenate_chunks(paths, out / "corrupted.jsonl.gz")
        if kept:
            write_set(out / "clean.jsonl.gz", kept)
        for name, count in (("corrupted", corrupted if paths else 0), ("clean", len(kept))):
            if count:
                manifest["sets"][name] = {"sentences": count, "corpus": [str(c) for c in corpus],
                                          "sources": licences, "seed": seed,
                                          **({"errors": "realistic", "neighbours_from": neighbours_from,
                                              "chunk_size": chunk_size} if name == "corrupted" else {})}
        atomic_write_json(manifest_path, manifest)
        if paths:  # the set is whole and named in the manifest: the chunks have served
            import shutil

            shutil.rmtree(chunks)
    return manifest

