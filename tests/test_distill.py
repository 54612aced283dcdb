"""Distillation: text sets cut in halves, resumable teacher labels through the Detector, a student that learns."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from electra_detect.detector import Detector
from electra_detect.tasks.ged.alignment import score_tokens
from electra_detect.tasks.ged.readers import GedSentence, read_m2, read_token_tsv
from electra_detect.training.finetune.distill import (
    DistillConfig,
    build_text_sets,
    distill,
    label_text_set,
    load_labelled_set,
    parse_data_spec,
    read_set,
)
from electra_detect.training.finetune.ged_finetune import FinetuneConfig, finetune
from tests.conftest import synthetic_text

KINDS = {"house": "R:NOUN:NUM", "red": "U:ADJ"}


def _sentences(count: int, seed: int) -> list[list[str]]:
    return [s.split() for s in synthetic_text(count, seed=seed).replace(".", " .").split(" .") if s.strip()]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory, micro_run: Path) -> Path:
    """A stand-in typed teacher: a micro model taught that "house" (R:NOUN:NUM) and "red" (U:ADJ) are errors."""
    train = [GedSentence(t, [int(w in KINDS) for w in t], [[KINDS[w]] if w in KINDS else [] for w in t])
             for t in _sentences(160, 5)]
    out = tmp_path_factory.mktemp("teacher") / "ged"
    finetune(micro_run, out, train, config=FinetuneConfig(epochs=4, batch_size=16, lr=3e-3, types=True,
                                                          type_weight=1.0), show_progress=False)
    return out


def _learner_files(folder: Path) -> list[tuple[Path, str]]:
    """A token TSV (binary labels) and an M2 file (typed edits) of the synthetic sentences: "house" is wrong."""
    sentences = _sentences(60, 7)[:60]
    tsv = folder / "en_fce_train.tsv"
    tsv.write_text("\n\n".join("\n".join(f"{w}\t{'i' if w == 'house' else 'c'}" for w in t) for t in sentences[:30])
                   + "\n", encoding="utf-8")
    m2 = folder / "A.train.m2"
    blocks = []
    for tokens in sentences[30:60]:
        edits = [f"A {i} {i + 1}|||R:NOUN:NUM|||houses|||REQUIRED|||-NONE-|||0" for i, w in enumerate(tokens)
                 if w == "house"]
        blocks.append("\n".join([f"S {' '.join(tokens)}", *edits]))
    m2.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return [(tsv, "tsv"), (m2, "m2")]


def test_text_sets_cut_the_learner_files_into_halves(tmp_path: Path, corpus_file: Path) -> None:
    files = _learner_files(tmp_path)
    manifest = build_text_sets(tmp_path / "text", files, [str(corpus_file)], corrupted=30, clean=10, seed=3)
    rows = list(read_set(tmp_path / "text" / "learner.jsonl.gz"))
    assert manifest["sets"]["learner"]["sentences"] == len(rows) == 60
    for path, fmt in files:  # each half is a valid file of its format; the halves split the file's sentences
        reader = read_token_tsv if fmt == "tsv" else read_m2
        halves = [reader(tmp_path / "text" / "learner" / f"half{h}" / path.name) for h in (0, 1)]
        assert len(halves[0]) == 15 and len(halves[1]) == 15
        texts = [{" ".join(s.tokens) for s in half} for half in halves]
        assert not texts[0] & texts[1] and texts[0] | texts[1] == {" ".join(s.tokens) for s in reader(path)}
        for half, sentences in enumerate(halves):  # every row carries its half and its gold labels and types
            mine = [r for r in rows if r["file"] == path.name and r["half"] == half]
            assert [r["tokens"] for r in mine] == [s.tokens for s in sentences]
            assert [r["labels"] for r in mine] == [s.labels for s in sentences]
    typed = [r for r in rows if r["file"] == "A.train.m2" and 1 in r["labels"]]
    assert typed and all(t == ("R:NOUN:NUM" if w == "house" else "") for r in typed
                         for w, t in zip(r["tokens"], r["types"], strict=True))
    corrupted = list(read_set(tmp_path / "text" / "corrupted.jsonl.gz"))
    clean = list(read_set(tmp_path / "text" / "clean.jsonl.gz"))
    assert len(corrupted) == 30 and len(clean) == 10 and all("labels" not in r for r in clean)
    assert sum(sum(r["labels"]) for r in corrupted) > 0  # made errors keep their labels
    assert all(t for r in corrupted for t, label in zip(r["types"], r["labels"], strict=True) if label)
    with pytest.raises(ValueError, match="distinct sentences"):
        build_text_sets(tmp_path / "more", (), [str(corpus_file)], corrupted=10**6, seed=3)


def test_labels_are_resumable_and_match_the_teachers_scores(tmp_path: Path, teacher: Path) -> None:
    build_text_sets(tmp_path / "text", _learner_files(tmp_path), seed=3)
    text = tmp_path / "text" / "learner.jsonl.gz"
    out = tmp_path / "labels"
    manifest = label_text_set(text, out, [teacher], shard_size=16, show_progress=False)
    assert manifest["types"][-1] == "OTHER" and manifest["operations"] == ["M", "R", "U"]
    shards = sorted(out.glob("shard-*.npz"))
    assert len(shards) == 4  # 60 sentences in shards of 16
    first = shards[0].read_bytes()
    shards[2].unlink()  # an interrupted run: the missing shard is made again, the others are kept
    stamp = shards[1].stat().st_mtime_ns
    label_text_set(text, out, [teacher], shard_size=16, show_progress=False)
    assert shards[2].exists() and shards[1].stat().st_mtime_ns == stamp and shards[0].read_bytes() == first
    examples, _ = load_labelled_set(text, out)
    rows = list(read_set(text))
    detector = Detector.load(teacher)
    expected = score_tokens(detector, [GedSentence(r["tokens"], [0] * len(r["tokens"])) for r in rows])
    assert all(np.allclose(e.p, x, atol=2e-3) for e, x in zip(examples, expected, strict=True))  # float16
    house = [e.main[i] for e in examples for i, w in enumerate(e.tokens) if w == "house"]
    assert np.mean(np.array(house) == manifest["types"].index("NOUN:NUM")) > 0.8
    for index in (1, 0):  # two processes sharing the set, each its own shards, make the same labels
        label_text_set(text, tmp_path / "parts", [teacher], shard_size=16, show_progress=False, part=(index, 2))
    shared, _ = load_labelled_set(text, tmp_path / "parts")
    assert all(np.array_equal(a.p, b.p) and np.array_equal(a.main, b.main) for a, b in zip(shared, examples,
                                                                                         strict=True))
    with pytest.raises(ValueError, match="another shard_size"):
        label_text_set(text, out, [teacher], shard_size=8, show_progress=False)



def test_half_teachers_each_label_the_other_half(tmp_path: Path, teacher: Path) -> None:
    build_text_sets(tmp_path / "text", _learner_files(tmp_path), seed=3)
    text = tmp_path / "text" / "learner.jsonl.gz"
    other = tmp_path / "teacher_b"
    train = [GedSentence(t, [int(w == "dog") for w in t], [["R:NOUN"] if w == "dog" else [] for w in t])
             for t in _sentences(160, 5)]
    finetune(teacher, other, train, config=FinetuneConfig(max_steps=20, batch_size=16, lr=3e-3, types=True),
             show_progress=False)  # the same channels, other scores
    label_text_set(text, tmp_path / "labels", half_teachers=[teacher, other], shard_size=16, show_progress=False)
    examples, _ = load_labelled_set(text, tmp_path / "labels")
    rows = list(read_set(text))
    sentences = [GedSentence(r["tokens"], [0] * len(r["tokens"])) for r in rows]
    by_a, by_b = (score_tokens(Detector.load(m), sentences) for m in (teacher, other))
    assert not all(np.allclose(a, b, atol=2e-3) for a, b in zip(by_a, by_b, strict=True))
    for row, example, a, b in zip(rows, examples, by_a, by_b, strict=True):
        assert np.allclose(example.p, b if row["half"] == 0 else a, atol=2e-3)


def test_student_learns_the_teachers_labels(tmp_path: Path, teacher: Path, micro_run: Path) -> None:
    texts = tmp_path / "text"
    build_text_sets(texts, _learner_files(tmp_path), seed=3)
    label_text_set(texts / "learner.jsonl.gz", tmp_path / "labels" / "learner", [teacher], show_progress=False)
    dev = {"dev.tsv": [GedSentence(t, [int(w in KINDS) for w in t]) for t in _sentences(40, 11)]}
    config = DistillConfig(epochs=6, batch_size=16, lr=3e-3, type_weight=1.0, gold_weight=0.0, fp16=True)
    summary = distill(micro_run, tmp_path / "student", [(texts / "learner.jsonl.gz", tmp_path / "labels" / "learner")],
                      dev, config, show_progress=False, card={"arm": "learner"})
    assert summary["last_loss"] < summary["first_loss"]
    gap = summary["teacher_gap"]
    assert gap["after"]["mean_abs_diff"] < gap["before"]["mean_abs_diff"]  # its scores moved toward the teacher's
    saved = json.loads((tmp_path / "student" / "ged.json").read_text())
    assert saved["types"][0] == "error" and saved["arm"] == "learner" and 0 < saved["threshold"] < 1
    assert set(saved["dev"]["dev.tsv"]) >= {"tune", "report"}
    student = Detector.load(tmp_path / "student")
    words = {w.word: w for w in student.score("My sister painted a red house.")[0].words}
    assert words["house"].score > words["sister"].score and words["red"].score > words["sister"].score
    assert words["red"].operation == "U"  # the teacher's hard types, learnt on the words it flags
    header = json.loads((tmp_path / "student" / "model.safetensors").read_bytes()[8:4096].split(b"}}")[0] + b"}}")
    assert {v["dtype"] for k, v in header.items() if k != "__metadata__"} == {"F16"}


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from electra_detect.cli import main

    text = tmp_path / "set.jsonl.gz"
    with gzip.open(text, "wt") as handle:
        handle.write(json.dumps({"tokens": ["A", "cat", "."]}) + "\n")
    for argv in (["distill", "label", str(text), "--out", str(tmp_path / "l")],
                 ["distill", "train", "--model", "x", "--out", str(tmp_path / "s"), "--texts", str(tmp_path),
                  "--labels", str(tmp_path / "none")],
                 ["distill", "text", "--out", str(tmp_path / "t")]):
        assert main(argv) == 2
        assert capsys.readouterr().err.count("\n") == 1, argv
    assert parse_data_spec("runs/a/en_fce_dev.tsv:tsv") == (Path("runs/a/en_fce_dev.tsv"), "tsv")
    assert parse_data_spec("A.train.gold.bea19.m2") == (Path("A.train.gold.bea19.m2"), "m2")
