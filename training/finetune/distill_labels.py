"""Distillation's teacher labels: the teacher(s) run over a text set, shard by shard (``electra-detect distill label``).

``label_text_set`` runs the teacher(s) through ``Detector`` (the one scoring path) on a set written by
distill_text.py: per whitespace token p(error), and for a typed teacher the ERRANT operation and main type its most
suspicious subword names. Each shard is an atomically written ``.npz``; a re-run skips the shards that are there.
The labels are read back here too: as the student's examples (distill.py) and as tagged data (``teacher_tagged``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from electra_detect.edit_tags import TAG_PREFIX
from electra_detect.errors import GedDataError
from electra_detect.fileio import atomic_open, atomic_write_json, sha256_file
from electra_detect.tasks.ged.readers import GedSentence
from electra_detect.training.finetune.distill_text import read_set

OPERATIONS = ("M", "R", "U")  # ged_finetune.OPERATIONS: the typed channels' order
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
    tag_names = [c[len(TAG_PREFIX):] for c in channels if c.startswith(TAG_PREFIX)]
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

