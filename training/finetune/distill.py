"""Distillation: a large teacher's word-level p(error), operation and type move into the small shipped student.

Three jobs, each a plain function (``electra-detect distill text|label|train`` call them):

1. ``build_text_sets`` writes the text to label under ``runs/``: the learner training sentences (gold labels,
   each assigned to half 0 or 1 by a fixed seed; the half files are written too, so two half teachers can be
   trained, each labelling the half it did not see), corpus sentences with realistic synthetic errors (their
   synthetic labels kept), and clean corpus sentences. One gzipped JSONL file per set.
2. ``label_text_set`` runs the teacher(s) through ``Detector`` (the one scoring path) on a set, shard by shard:
   per whitespace token p(error), and for a typed teacher the ERRANT operation and main type its most suspicious
   subword names. Each shard is an atomically written ``.npz``; a re-run skips the shards that are there.
3. ``distill`` trains the student (any start ``ged train`` takes) on the teacher's probabilities (soft binary
   cross-entropy, temperature optional), the gold labels where a sentence has them (a weight), and the teacher's
   hard types where it flags a word (gold types where the data has them), then writes an ordinary typed model dir
   (stock ``transformers`` class, tokenizer, ``ged.json`` with the threshold tuned on the dev sets' tuning halves).

The student is trained on words, not subwords: teacher and student need not share a tokenizer (MPNet's and
MiniLM's WordPiece vocabularies differ), every subword of a word takes the word's targets, as ``ged train`` does.
"""

from __future__ import annotations

import gzip
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from electra_detect.errors import GedDataError
from electra_detect.fileio import atomic_open, atomic_write_dir, atomic_write_json, atomic_write_text, sha256_file
from electra_detect.tasks.ged.edit_types import split_type
from electra_detect.tasks.ged.readers import GedSentence, read_labelled, split_sentences

SETS = ("learner", "corrupted", "clean")
OPERATIONS = ("M", "R", "U")  # ged_finetune.OPERATIONS: the typed channels' order
LEARNER_LICENCE = "non-commercial research and education (Cambridge; no redistribution)"
DEV_SPLIT_SEED = 13  # `ged eval --split`'s seed: tuning and report halves are the ones every GED figure uses


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
    """Realistic errors on ``sentences`` in chunks of ``chunk_size`` (``realistic_errors.corrupt_chunk``, chunk i
    seeded ``"{seed}:{i}"``), each written atomically as ``folder/chunk-NNNNN.jsonl.gz``; ``workers`` processes
    share the chunks. A re-run keeps the chunks there (same sentences and settings) and makes the rest; the text
    does not depend on ``workers`` or on where a run stopped. Returns the chunk files in order."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    from electra_detect.training.synthetic.realistic_errors import corrupt_chunk

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
    from electra_detect.training.synthetic.realistic_errors import clean_sentences

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


# -- 2. the teacher's labels ---------------------------------------------------------------------------------
SHARD = "shard-{:05d}.npz"
TAG_FLOOR = 0.2  # a tag teacher's tag is kept on a word whose p(error) is at least this (issue 60)


def combine_teachers(views: Sequence[Any], typed: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, list, np.ndarray]:
    """Several teachers' views of one sentence (``TypedTokens`` or score arrays) -> (mean p, op, main, tag, tag p):
    the operation, type and (a tag teacher's) tag with its probability of the teacher most sure the word is wrong
    (None and 0 for teachers without tags)."""
    scores = np.stack([np.asarray(v.scores if typed else v, dtype=np.float32) for v in views])
    p = scores.mean(0)
    if not typed:
        return p, np.full(len(p), -1, np.int8), np.full(len(p), -1, np.int16), [None] * len(p), np.zeros(len(p))
    best = scores.argmax(0)
    tags = [views[t].tags[i] if views[t].tags else None for i, t in enumerate(best)]
    tag_p = np.array([views[t].tag_scores[i] if views[t].tag_scores else 0.0 for i, t in enumerate(best)])
    return p, np.array([OPERATIONS.index(views[t].operations[i]) for i, t in enumerate(best)], np.int8), \
        np.array([views[t].types[i] for i, t in enumerate(best)], object), tags, tag_p


def label_text_set(text: str | Path, out: str | Path, teachers: Sequence[str | Path] = (),
                   half_teachers: Sequence[str | Path] = (), shard_size: int = 10_000, batch_size: int = 64,
                   device: str | None = None, limit: int = 0, show_progress: bool = True,
                   part: tuple[int, int] = (0, 1)) -> dict[str, Any]:
    """Label a text set with the teacher(s), shard by shard, into ``out/`` (``labels.json`` + ``shard-N.npz``);
    ``part`` (i, n): only the shards whose index is i modulo n (n processes share a set, one GPU).

    ``teachers``: models whose mean p labels every sentence (one model, or several seeds: their mean).
    ``half_teachers`` (A, B): A trained on learner half 0, B on half 1 (``build_text_sets``' half files); a
    learner sentence of half h is labelled by the teacher that did not see it, and sentences without a half by
    ``teachers`` (or, without them, by A and B together). Each shard holds per sentence its token count and per
    token p(error) (float16), the operation index (M/R/U; -1 untyped) and the main-type index into
    ``labels.json``'s ``types`` (-1 untyped). A re-run continues after the last shard written."""
    from electra_detect.detector import Detector
    from electra_detect.tasks.ged.alignment import score_tokens, score_typed_tokens

    text, out = Path(text), Path(out)
    if not teachers and not half_teachers:
        raise GedDataError("give --teacher DIR (or --half-teachers A B)")
    if half_teachers and len(half_teachers) != 2:
        raise GedDataError("--half-teachers takes two models: A (trained on half 0) and B (trained on half 1)")
    rows = list(read_set(text))
    if limit:
        rows = rows[:limit]
    paths = [str(Path(t)) for t in (*teachers, *half_teachers)]
    detectors = {path: Detector.load(path, device=device, engine="torch", task="ged") for path in dict.fromkeys(paths)}
    channel_sets = {tuple(d.channels) for d in detectors.values()}
    if len(channel_sets) != 1:
        raise GedDataError("the teachers' type channels differ: train them with the same data and --types")
    channels = list(next(iter(channel_sets)))
    typed = bool(channels)
    tag_names = [c[len("tag:"):] for c in channels if c.startswith("tag:")]
    mains = [c[5:] for c in channels if c.startswith("type:")]
    if tag_names:  # a tag teacher names ERRANT types through its tags' table (edit_tags.json)
        mains = sorted(set(detectors[next(iter(detectors))].edit_tags.mains.tolist()) | {"OTHER"})
    everyone = [str(Path(t)) for t in teachers] or [str(Path(t)) for t in half_teachers]
    pick = {-1: everyone}
    if half_teachers:
        pick.update({0: [str(Path(half_teachers[1]))], 1: [str(Path(half_teachers[0]))]})
    setting = {"text": str(text), "text_sha256": sha256_file(text), "sentences": len(rows), "shard_size": shard_size,
               "teachers": [str(t) for t in teachers], "half_teachers": [str(t) for t in half_teachers]}
    manifest_path = out / "labels.json"
    if manifest_path.exists():
        previous = json.loads(manifest_path.read_text())
        changed = [k for k, v in setting.items() if previous.get(k) != v]
        if changed:
            raise GedDataError(f"{out} holds labels made with another {', '.join(changed)}: use a new --out")
    thresholds = [detectors[p].threshold() for p in everyone]
    manifest = {**setting, "types": mains, "operations": list(OPERATIONS) if typed else [],
                "teacher_threshold": float(np.mean(thresholds)), "channels": channels,
                "tags": tag_names, "tag_floor": TAG_FLOOR if tag_names else None}
    atomic_write_json(manifest_path, manifest)
    shards = -(-len(rows) // shard_size)
    mine = [i for i in range(shards) if i % part[1] == part[0]]
    done = sum((out / SHARD.format(i)).exists() for i in mine)
    bar = tqdm(total=len(mine), initial=done, desc=f"distill label {text.name}", unit="shard",
               disable=not show_progress, mininterval=5)
    started, labelled = time.monotonic(), 0
    for index in mine:
        path = out / SHARD.format(index)
        if path.exists():
            continue
        chunk = rows[index * shard_size:(index + 1) * shard_size]
        sentences = [GedSentence(r["tokens"], [0] * len(r["tokens"])) for r in chunk]
        views: dict[str, list[Any]] = {}
        for teacher in dict.fromkeys(t for r in chunk for t in pick.get(r.get("half", -1), everyone)):
            wanted = [i for i, r in enumerate(chunk) if teacher in pick.get(r.get("half", -1), everyone)]
            scorer = score_typed_tokens if typed else score_tokens
            scored = scorer(detectors[teacher], [sentences[i] for i in wanted], batch_size=batch_size)
            views[teacher] = [None] * len(chunk)
            for i, view in zip(wanted, scored, strict=True):
                views[teacher][i] = view
        p_rows, op_rows, main_rows, tag_rows, tag_p_rows = [], [], [], [], []
        tag_index = {name: i for i, name in enumerate(tag_names)}
        for i, row in enumerate(chunk):
            chosen = [views[t][i] for t in pick.get(row.get("half", -1), everyone)]
            p, op, main, tags, tag_p = combine_teachers(chosen, typed)
            p_rows.append(p)
            op_rows.append(op)
            main_rows.append(np.array([mains.index(m) for m in main], np.int16) if typed else main)
            kept = [tag_index.get(t, -1) if t is not None and score >= TAG_FLOOR else -1
                    for t, score in zip(tags, p, strict=True)]
            tag_rows.append(np.array(kept, np.int16))
            tag_p_rows.append(np.where(np.array(kept) >= 0, tag_p, 0.0))
        with atomic_open(path, "wb") as handle:  # compressed: the labels come back from the GPU in <= 4 x 15 MiB
            np.savez_compressed(handle, lengths=np.array([len(r["tokens"]) for r in chunk], np.int32),
                                p=np.concatenate(p_rows).astype(np.float16),
                                op=np.concatenate(op_rows).astype(np.int8),
                                main=np.concatenate(main_rows).astype(np.int16),
                                **({"tag": np.concatenate(tag_rows).astype(np.int16),  # into labels.json's tags
                                    "tag_p": np.concatenate(tag_p_rows).astype(np.float16)} if tag_names else {}))
        labelled += len(chunk)
        bar.update(1)
    bar.close()
    seconds = time.monotonic() - started
    manifest["done"] = all((out / SHARD.format(i)).exists() for i in range(shards))
    manifest["sentences_per_second_last_run"] = round(labelled / seconds, 1) if labelled else None
    atomic_write_json(manifest_path, manifest)
    return manifest


@dataclass
class Example:
    """One sentence to distil on: its words, the teacher's per-word targets, and gold labels where known."""

    tokens: list[str]
    p: np.ndarray  # teacher p(error) per word
    op: np.ndarray  # teacher operation index per word (-1: none)
    main: np.ndarray  # teacher main-type index per word (-1: none)
    gold: list[int] | None = None
    gold_types: list[str] | None = None
    kind: str = "none"  # "learner" (annotated), "synthetic" (made errors) or "none"


def labelled_rows(text: str | Path, labels: str | Path, keys: Sequence[str]) -> tuple[Iterator, dict[str, Any]]:
    """(each text row with its per-word label arrays ``keys`` of the shards, the labels' manifest): the reading of
    ``distill label``'s output that every user of the labels shares; a missing shard or another text is an error."""
    labels = Path(labels)
    try:
        manifest = json.loads((labels / "labels.json").read_text())
    except FileNotFoundError:
        raise GedDataError(f"no teacher labels in {labels} (run `electra-detect distill label` first)") from None
    rows = list(read_set(text))[:manifest["sentences"]]
    if manifest["text_sha256"] != sha256_file(text):
        raise GedDataError(f"{labels} labels another version of {text}: label it again")

    def walk() -> Iterator[tuple[dict[str, Any], dict[str, np.ndarray]]]:
        for index in range(-(-len(rows) // manifest["shard_size"])):
            path = labels / SHARD.format(index)
            if not path.exists():
                raise GedDataError(f"{path} is missing: the labelling did not finish (re-run `distill label`)")
            with np.load(path) as shard:
                ends = np.cumsum(shard["lengths"])[:-1]
                split = {key: np.split(shard[key], ends) for key in keys}
            chunk = rows[index * manifest["shard_size"]:(index + 1) * manifest["shard_size"]]
            for position, row in enumerate(chunk):
                yield row, {key: split[key][position] for key in keys}

    return walk(), manifest


def load_labelled_set(text: str | Path, labels: str | Path, kind: str = "") -> tuple[list[Example], dict[str, Any]]:
    """A text set and its teacher labels as examples; ``kind`` of the gold labels (default: learner when the rows
    carry a half, synthetic when they carry labels only, none otherwise)."""
    walk, manifest = labelled_rows(text, labels, ("p", "op", "main"))
    examples = []
    for row, words in walk:
        gold_kind = kind or ("learner" if "half" in row else "synthetic" if "labels" in row else "none")
        examples.append(Example(row["tokens"], words["p"].astype(np.float32), words["op"].astype(np.int64),
                                words["main"].astype(np.int64), row.get("labels"), row.get("types"),
                                gold_kind if "labels" in row else "none"))
    return examples, manifest


def teacher_tagged(text: str | Path, labels: str | Path, threshold: float, soft: bool = False,
                   gold: Sequence[Any] = (), teacher_share: float = 0.5) -> list[Any]:
    """A set labelled by a tag teacher as ``edit_tag_data``'s tagged sentences, for ``ged train --tags``: a word is
    an error where the teacher's p >= ``threshold``, with the teacher's tag where it kept one (else out of the tag
    loss), and ``$KEEP`` elsewhere. ``soft``: the detection target is the teacher's p itself (to 0.01). ``gold``:
    the set's own tagged sentences (the learner set, in its order), whose tags are kept and whose target is
    ``teacher_share`` x p + the rest x the gold label (BCE is linear in its target: the soft and gold losses
    weighted, as ``distill train``'s ``--gold-weight``)."""
    from electra_detect.edit_tags import KEEP
    from electra_detect.training.finetune.edit_tag_data import TaggedSentence

    walk, manifest = labelled_rows(text, labels, ("p", "tag"))
    if not manifest.get("tags"):
        raise GedDataError(f"{labels} was labelled by a teacher without edit tags")
    if gold and len(gold) != manifest["sentences"]:
        raise GedDataError(f"{len(gold)} gold sentences for {manifest['sentences']} labelled ones")
    out = []
    for index, (row, words) in enumerate(walk):
        p = words["p"].astype(np.float32)
        if gold:
            own = gold[index]
            if list(own.tokens) != list(row["tokens"]):
                raise GedDataError(f"the gold sentence {index + 1} is not the labelled text's: give the set's own "
                                   "tagged files, in its order")
            mixed = teacher_share * p + (1 - teacher_share) * np.asarray(own.labels, np.float32)
            out.append(TaggedSentence(list(row["tokens"]), [round(float(x), 2) for x in mixed], list(own.tags),
                                      own.edits, own.essay))
            continue
        flagged = [int(x >= threshold) for x in p]
        tags = [(manifest["tags"][t] if t >= 0 else None) if f else KEEP if not soft or x < 0.5 else None
                for f, t, x in zip(flagged, words["tag"].tolist(), p, strict=True)]  # a soft 0.5: an error's target
        out.append(TaggedSentence(list(row["tokens"]), [round(float(x), 2) for x in p] if soft else flagged, tags))
    return out


# -- 3. the student ------------------------------------------------------------------------------------------
@dataclass
class DistillConfig:
    epochs: int = 1
    batch_size: int = 32
    lr: float = 1e-4
    warmup_fraction: float = 0.1
    max_length: int = 128
    seed: int = 0
    max_steps: int = 0  # 0: epochs decide
    max_minutes: float = 0.0  # stop training after this long (a device call's limit); 0: none
    temperature: float = 1.0  # softens teacher and student alike (loss scaled by T^2)
    gold_weight: float = 1.0  # of the gold BCE on annotated (learner) words, beside the teacher's soft BCE at 1
    synthetic_weight: float = 0.0  # of the BCE on the made errors' labels in the corrupted set
    type_weight: float = 0.1  # of the operation and main-type cross-entropies (as ged train's --type-weight)
    subwords: str = "all"  # "all": every subword takes its word's targets (ged train's recipe); "first": the first
    fp16: bool = False  # save the weights in float16 (the shipped form)
    teacher_sample: int = 500  # examples on which the student's distance to the teacher is measured


def type_index(edit_type: str, mains: Sequence[str]) -> tuple[int, int]:
    """(operation index, main-type index) of an ERRANT type among the channels' main types (else OTHER)."""
    op, main = split_type(edit_type)
    other = mains.index("OTHER") if "OTHER" in mains else -100
    return OPERATIONS.index(op), mains.index(main) if main in mains else other


@dataclass
class Targets:
    """Per-subword targets of the whole training set, flat; a batch row holds indices into them (-1: none)."""

    soft: np.ndarray  # teacher p (-1: no teacher label)
    gold: np.ndarray  # 0/1 (-1: none)
    weight: np.ndarray  # the gold term's weight at that subword
    op: np.ndarray  # -100: no type target
    main: np.ndarray

    def tensors(self, device: torch.device) -> dict[str, torch.Tensor]:
        return {"soft": torch.tensor(self.soft, dtype=torch.float32, device=device),
                "gold": torch.tensor(self.gold, dtype=torch.float32, device=device),
                "weight": torch.tensor(self.weight, dtype=torch.float32, device=device),
                "op": torch.tensor(self.op, dtype=torch.long, device=device),
                "main": torch.tensor(self.main, dtype=torch.long, device=device)}


def word_targets(example: Example, mains: Sequence[str], teacher_threshold: float,
                 weights: dict[str, float]) -> np.ndarray:
    """[words, 5] per word: teacher p, gold (-1: none), the gold term's weight, operation and main type (-100:
    none). A word's type target: its gold type where it is a gold error, else the teacher's where the teacher
    flags it (p >= its threshold), else none."""
    n = len(example.tokens)
    weight = weights.get(example.kind, 0.0) if example.gold is not None else 0.0
    gold = np.asarray(example.gold, np.float32) if weight > 0 else np.full(n, -1.0, np.float32)
    op, main = np.full(n, -100), np.full(n, -100)
    if mains:
        flagged = (example.p >= teacher_threshold) & (example.op >= 0)
        op[flagged], main[flagged] = example.op[flagged], example.main[flagged]
        if example.gold_types and example.gold:
            for w, (label, edit_type) in enumerate(zip(example.gold, example.gold_types, strict=True)):
                if label and edit_type:
                    op[w], main[w] = type_index(edit_type, mains)
    return np.stack([example.p.astype(np.float32), gold, np.full(n, weight, np.float32), op, main], axis=1)


def encode_examples(tokenizer: Any, examples: Sequence[Example], mains: Sequence[str], teacher_threshold: float,
                    config: DistillConfig) -> tuple[list[tuple[list[int], list[int]]], Targets]:
    """Subword ids and, per subword, an index into the flat :class:`Targets` (-1 on specials and, with
    ``subwords="first"``, on a word's later subwords); every other subword takes its word's targets."""
    weights = {"learner": config.gold_weight, "synthetic": config.synthetic_weight}
    encoded = tokenizer([e.tokens for e in examples], is_split_into_words=True, truncation=True,
                        max_length=config.max_length)
    out, blocks, used = [], [], 0
    for index, example in enumerate(examples):
        words = np.array([-1 if w is None else w for w in encoded.word_ids(index)])
        keep = words >= 0
        if config.subwords == "first":
            keep &= np.r_[True, words[1:] != words[:-1]]
        rows = np.full(len(words), -1)
        rows[keep] = used + np.arange(int(keep.sum()))
        blocks.append(word_targets(example, mains, teacher_threshold, weights)[words[keep]])
        used += int(keep.sum())
        out.append((encoded["input_ids"][index], rows.tolist()))
    flat = np.concatenate(blocks) if blocks else np.zeros((0, 5))
    return out, Targets(flat[:, 0], flat[:, 1], flat[:, 2], flat[:, 3].astype(np.int64), flat[:, 4].astype(np.int64))


def distill_loss(output: torch.Tensor, rows: torch.Tensor, targets: dict[str, torch.Tensor], typed: bool,
                 config: DistillConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """Soft BCE against the teacher's p (temperature T: both sides' logits / T, scaled by T^2) + the weighted gold
    BCE + ``type_weight`` x the operation and main-type cross-entropies. ``output``: [batch, seq] logits or
    [batch, seq, channels]; ``rows``: [batch, seq] indices into the flat targets (-1: none)."""
    from electra_detect.engines.torch_engine import replaced_logits

    logits = replaced_logits(output).float()
    real = rows >= 0
    index = rows[real]
    z = logits[real]
    soft = targets["soft"][index]
    has_soft = soft >= 0
    t = config.temperature
    soft_target = torch.sigmoid(torch.logit(soft[has_soft].clamp(1e-4, 1 - 1e-4)) / t)
    loss_soft = F.binary_cross_entropy_with_logits(z[has_soft] / t, soft_target) * t * t if has_soft.any() \
        else z.sum() * 0
    gold, weight = targets["gold"][index], targets["weight"][index]
    has_gold = (gold >= 0) & (weight > 0)
    loss_gold = (F.binary_cross_entropy_with_logits(z[has_gold], gold[has_gold], reduction="none")
                 * weight[has_gold]).mean() if has_gold.any() else z.sum() * 0
    loss = loss_soft + loss_gold
    parts = {"soft": float(loss_soft.detach()), "gold": float(loss_gold.detach())}
    if typed:
        op, main = targets["op"][index], targets["main"][index]
        channels = output[real].float()
        loss_type = z.sum() * 0
        if (op >= 0).any():
            loss_type = loss_type + F.cross_entropy(channels[:, 1:4][op >= 0], op[op >= 0])
        if (main >= 0).any():
            loss_type = loss_type + F.cross_entropy(channels[:, 4:][main >= 0], main[main >= 0])
        loss = loss + config.type_weight * loss_type
        parts["type"] = float(loss_type.detach())
    return loss, parts


def student_model(source: Path, channels: Sequence[str]) -> Any:
    """The start under its stock token classifier with the teacher's channels; the start's own head rows are kept
    by channel name where it has them (a typed start: ``ged-synthetic``), the rest start fresh."""
    from electra_detect.engines.torch_engine import load_discriminator
    from electra_detect.training.finetune.ged_finetune import model_channels, typed_model

    if not channels:
        return load_discriminator(source)
    own = model_channels(source)
    model = typed_model(source, channels)
    head = getattr(model, "classifier", None)
    if own and list(own) != list(channels) and isinstance(head, torch.nn.Linear):
        start = typed_model(source, own).classifier
        with torch.no_grad():
            for row, name in enumerate(channels):
                if name in own:
                    head.weight[row] = start.weight[own.index(name)]
                    head.bias[row] = start.bias[own.index(name)]
    return model


def teacher_gap(detector: Any, examples: Sequence[Example]) -> dict[str, float]:
    """How far a model's word scores are from the teacher's on these examples: mean |p - p_teacher| and the share
    of words on which both sides of 0.5 agree."""
    from electra_detect.tasks.ged.alignment import score_tokens

    if not examples:
        return {}
    scores = score_tokens(detector, [GedSentence(e.tokens, [0] * len(e.tokens)) for e in examples])
    ours, theirs = np.concatenate(scores), np.concatenate([e.p for e in examples])
    return {"mean_abs_diff": round(float(np.abs(ours - theirs).mean()), 4),
            "agreement": round(float(((ours >= 0.5) == (theirs >= 0.5)).mean()), 4)}


def dev_report(model_dir: Path, dev: dict[str, list[GedSentence]], device: str | None = None) -> dict[str, Any]:
    """Each dev set cut into its tuning and report halves (``ged eval --split``'s seed); the shared threshold tuned
    on the tuning halves; per set F0.5 etc. on both halves at that threshold and at the set's own tuned one."""
    from electra_detect.detector import Detector
    from electra_detect.tasks.ged.alignment import score_tokens
    from electra_detect.tasks.ged.metrics import flatten, shared_threshold, token_metrics, tune_threshold

    detector = Detector.load(model_dir, device=device, engine="torch")
    halves, tunes = {}, []
    for name, sentences in dev.items():
        tune, report = split_sentences(sentences, 0.5, DEV_SPLIT_SEED)
        halves[name] = (flatten(tune, score_tokens(detector, tune, 64)), flatten(report, score_tokens(detector,
                                                                                                      report, 64)))
        tunes.append(halves[name][0])
    threshold = shared_threshold(tunes)
    sets = {}
    for name, ((tl, ts), (rl, rs)) in halves.items():
        own = tune_threshold(tl, ts)
        sets[name] = {"tune": token_metrics(tl, ts, threshold), "report": token_metrics(rl, rs, threshold),
                      "own_threshold": own, "report_at_own": token_metrics(rl, rs, own)}
    return {"threshold": threshold, "threshold_tuned_on": f"the tuning halves of {', '.join(dev)} (split seed "
                                                          f"{DEV_SPLIT_SEED}): the highest mean F0.5", "sets": sets}


def distill(start: str | Path, out: str | Path, labelled: Sequence[tuple[Path, Path]],
            dev: dict[str, list[GedSentence]] | None = None, config: DistillConfig | None = None,
            show_progress: bool = True, card: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train the student from ``start`` on the (text set, labels dir) pairs and write a typed model dir to ``out``
    with ``ged.json``: the threshold tuned on ``dev``'s tuning halves, the figures on both halves, the teacher,
    text sets, data and licences (``card`` adds fields)."""
    from transformers import AutoTokenizer

    from electra_detect.engines import usable_positions
    from electra_detect.model_dir import resolve_model_dir
    from electra_detect.training.finetune.ged_finetune import length_batches
    from electra_detect.training.finetune.loop import train_loop
    from electra_detect.training.optim import optimizer_and_schedule

    config = config or DistillConfig()
    if config.subwords not in ("all", "first"):
        raise GedDataError("subwords must be 'all' or 'first'")
    examples, manifests = [], []
    for text, labels in labelled:
        loaded, manifest = load_labelled_set(text, labels)
        examples += loaded
        manifests.append(manifest)
    if not examples:
        raise GedDataError("nothing to distil on: give labelled text sets")
    if any(m["channels"] != manifests[0]["channels"] for m in manifests):
        raise GedDataError("the sets were labelled by teachers with different type channels")
    channels = ["error", *manifests[0]["channels"]] if manifests[0]["channels"] else []  # the teacher's heads
    mains = manifests[0]["types"]
    teacher_threshold = float(np.mean([m["teacher_threshold"] for m in manifests]))
    source = resolve_model_dir(start)
    torch.manual_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    sample = random.Random(config.seed).sample(examples, min(config.teacher_sample, len(examples)))
    gap_before = _gap(source, sample)
    model = student_model(source, channels)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    model.to(device)
    limit = min(config.max_length, usable_positions(model.config.to_dict()))
    encoded, flat = encode_examples(tokenizer, examples, mains, teacher_threshold,
                                    DistillConfig(**{**asdict(config), "max_length": limit}))
    targets = flat.tensors(device)
    steps_per_epoch = -(-len(encoded) // config.batch_size)
    total = config.max_steps or steps_per_epoch * config.epochs
    optimizer, scheduler = optimizer_and_schedule(model, config.lr, 0.01,
                                                  max(1, round(total * config.warmup_fraction)), total)
    rng = random.Random(config.seed)
    parts: list[dict[str, float]] = []  # each step's loss terms, for the summary

    def loss_of(batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        ids, attention, rows = (t.to(device) for t in batch)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):  # bf16 on a GPU, fp32 weights
            output = model(input_ids=ids, attention_mask=attention).logits
        loss, part = distill_loss(output, rows, targets, bool(channels), config)
        parts.append(part)
        return loss

    started = time.monotonic()
    result = train_loop(model, optimizer, scheduler,
                        lambda: length_batches(encoded, config.batch_size, tokenizer.pad_token_id, rng),
                        loss_of, total, max_minutes=config.max_minutes, desc="distill train",
                        show_progress=show_progress)
    step, losses, stop = result.step, result.losses, result.stopped
    model.eval().cpu()
    if config.fp16:
        model.half()

    def fill(tmp: Path) -> None:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))

    out = Path(out)
    atomic_write_dir(out, fill)
    window = max(1, min(20, len(losses) // 4))
    summary: dict[str, Any] = {
        "base_model": str(start), "recipe": "distillation (training/finetune/distill.py)", "config": asdict(config),
        "train_sentences": len(examples), "steps": step, "planned_steps": total, "stopped_by": stop,
        "minutes": round((time.monotonic() - started) / 60, 3), "first_loss": float(np.mean(losses[:window])),
        "last_loss": float(np.mean(losses[-window:])),
        "last_loss_parts": {k: float(np.mean([p[k] for p in parts[-window:]])) for k in parts[-1]},
        "teacher": {"models": sorted({t for m in manifests for t in (*m["teachers"], *m["half_teachers"])}),
                    "threshold": teacher_threshold},
        "text_sets": [{"text": m["text"], "sentences": m["sentences"]} for m in manifests],
        "teacher_gap": {"before": gap_before, "after": _gap(out, sample)},
        "threshold": 0.5, "space": "raw"}
    if channels:
        summary["types"] = channels
    summary.update(card or {})
    if dev:
        report = dev_report(out, dev)
        summary["threshold"] = report["threshold"]
        summary["threshold_tuned_on"] = report["threshold_tuned_on"]
        summary["dev"] = report["sets"]
    atomic_write_json(out / "ged.json", summary)
    return summary


def _gap(model_dir: Path, sample: Sequence[Example]) -> dict[str, float]:
    from electra_detect.detector import Detector

    return teacher_gap(Detector.load(model_dir, engine="torch"), sample)


def read_dev_sets(specs: Sequence[str]) -> dict[str, list[GedSentence]]:
    """``PATH:FORMAT`` dev files -> {file name: sentences} (MultiGED's en_fce_dev.tsv, JFLEG dev as TSV)."""
    out = {}
    for spec in specs:
        path, fmt = parse_data_spec(spec)
        out[path.name] = read_labelled(path, fmt)
    return out


def card_for(manifest_path: Path | None, sets: Sequence[str]) -> dict[str, Any]:
    """The training data and licences of the text sets used (from ``build_text_sets``' manifest)."""
    if manifest_path is None or not manifest_path.is_file():
        return {}
    manifest = json.loads(manifest_path.read_text())
    data = []
    for name in sets:
        entry = manifest["sets"].get(name)
        if not entry:
            continue
        if name == "learner":
            data += [{"name": f["name"], "files": [f["file"]], "licence": f["licence"], "sentences": f["sentences"]}
                     for f in entry["files"]]
        else:
            data.append({"name": f"{name} corpus text", "sentences": entry["sentences"], "sources": entry["sources"]})
    return {"training_data": data}
