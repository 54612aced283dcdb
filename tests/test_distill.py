"""Distillation: text sets cut in halves, resumable teacher labels through the Detector, a student that learns."""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from electra_detect.detector import Detector
from electra_detect.tasks.ged.alignment import score_tokens
from electra_detect.tasks.ged.readers import GedSentence, read_m2, read_token_tsv
from electra_detect.training.finetune.distill import DistillConfig, distill
from electra_detect.training.finetune.distill_labels import label_text_set, load_labelled_set
from electra_detect.training.finetune.distill_text import build_text_sets, corrupt_in_chunks, parse_data_spec, read_set
from electra_detect.training.finetune.ged_finetune import FinetuneConfig, finetune
from tests.conftest import synthetic_text

KINDS = {"house": "R:NOUN:NUM", "red": "U:ADJ"}
DEVICE_SCRIPTS = Path(__file__).resolve().parent.parent / "scripts" / "device"


def _script(name: str):
    """A module of scripts/device/ (run there as scripts: they import each other by bare name)."""
    sys.path.insert(0, str(DEVICE_SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, DEVICE_SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


@pytest.mark.parametrize("value", ["5", "-0.1", "nan"])
def test_distill_tagged_refuses_a_threshold_outside_0_1(tmp_path: Path, value: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from electra_detect.cli import main
    from electra_detect.errors import DetectorError
    from electra_detect.training.cli.distill import add_distill

    argv = ["distill", "tagged", str(tmp_path / "set.jsonl.gz"), "--labels", str(tmp_path / "labels"), "--out",
            str(tmp_path / "tagged.jsonl"), "--threshold", value]
    parser = argparse.ArgumentParser()
    add_distill(parser.add_subparsers(dest="verb", required=True))
    args = parser.parse_args(argv)
    with pytest.raises(DetectorError, match=r"^--threshold must be a number in \[0, 1\]"):
        args.func(args)  # checked before the labels are read
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --threshold must be a number in [0, 1]"), err
    assert not (tmp_path / "tagged.jsonl").exists()


def _rows(path: Path) -> list[dict]:
    return list(read_set(path))


def test_corrupted_chunks_resume_and_do_not_depend_on_the_workers(tmp_path: Path, corpus_file: Path) -> None:
    one = build_text_sets(tmp_path / "one", (), [str(corpus_file)], corrupted=30, clean=6, seed=3, chunk_size=8)
    two = build_text_sets(tmp_path / "two", (), [str(corpus_file)], corrupted=30, clean=6, seed=3, chunk_size=8,
                          workers=2)
    rows = _rows(tmp_path / "one" / "corrupted.jsonl.gz")
    assert len(rows) == 30 and rows == _rows(tmp_path / "two" / "corrupted.jsonl.gz")  # one gzip stream of 4
    assert one["sets"]["corrupted"]["chunk_size"] == 8 and two["sets"] == one["sets"]
    assert _rows(tmp_path / "one" / "clean.jsonl.gz") == _rows(tmp_path / "two" / "clean.jsonl.gz")
    assert not (tmp_path / "one" / "corrupted.chunks").exists()  # the set is whole: its chunks are gone
    assert sum(sum(r["labels"]) for r in rows) > 0
    # a stopped run: chunk 2 missing; a re-run makes only it, the same as before
    sentences = [r["tokens"] for r in _rows(tmp_path / "one" / "clean.jsonl.gz")] * 3
    folder = tmp_path / "chunks"
    paths = corrupt_in_chunks(sentences, folder, 3, None, chunk_size=5)
    before = [_rows(p) for p in paths]
    paths[2].unlink()
    stamp = paths[1].stat().st_mtime_ns
    messages: list[str] = []
    corrupt_in_chunks(sentences, folder, 3, None, chunk_size=5, log=messages.append)
    assert [_rows(p) for p in paths] == before and paths[1].stat().st_mtime_ns == stamp
    assert messages[0].startswith("corrupted: 3/4 chunks already there; 1 to make") and len(messages) == 2
    with pytest.raises(ValueError, match="other sentences or settings"):
        corrupt_in_chunks(sentences, folder, 4, None, chunk_size=5)


def test_tags_are_the_full_pipelines(corpus_file: Path) -> None:
    from spacy.tokens import Doc

    from electra_detect.tasks.ged.nlp import load_tagger
    from electra_detect.training.synthetic.realistic_corpus import clean_sentences, tag_tokens

    sentences = clean_sentences([str(corpus_file)], 40, 1)
    nlp = load_tagger()
    full = [[t.tag_ for t in doc] for doc in nlp.pipe(Doc(nlp.vocab, words=list(s)) for s in sentences)]
    assert tag_tokens(sentences, nlp) == full and any(tag.startswith("VB") for tags in full for tag in tags)


def test_payload_base_and_text_parts_unpack_on_the_device(tmp_path: Path, monkeypatch) -> None:
    build_payload, device = _script("build_payload"), _script("distill_device")
    monkeypatch.setattr(build_payload, "PART_BYTES", 20_000)
    base = tmp_path / "stage" / "payload"
    (base / "data").mkdir(parents=True)
    (base / "data" / "a.tsv").write_bytes(bytes(range(256)) * 200)
    text = tmp_path / "stage-text" / "text"
    text.mkdir(parents=True)
    (text / "manifest.json").write_text('{"sets": {}}')
    parts = tmp_path / "parts"
    made = build_payload.pack(base, parts, prefix="p")
    build_payload.pack(text, parts, prefix="t", arcname="payload/text")
    listing = json.loads((parts / "p.json").read_text())["parts"]
    assert len(made) >= 3 and [p["part"] for p in listing] == [p.name for p in made]
    assert [p["bytes"] for p in listing] == [p.stat().st_size for p in made]
    args = type("Args", (), {"root": str(tmp_path / "device"), "parts": str(parts), "install": False})()
    log = device.Log(tmp_path / "setup.log")
    payload = device.setup(args, log)
    assert (payload / "data" / "a.tsv").read_bytes() == bytes(range(256)) * 200
    assert (payload / "text" / "manifest.json").exists()
    device.setup(args, log)  # unpacked once: a second call (call 2) reuses it
    assert log.path.read_text().count("unpacked") == 2
    (tmp_path / "device" / ".unpacked-t").unlink()
    (parts / "t00").unlink()
    with pytest.raises(SystemExit, match="no text payload parts"):
        device.setup(args, log)
    (tmp_path / "device" / ".unpacked-p").unlink()
    (parts / "p01").write_bytes(b"cut")
    with pytest.raises(SystemExit, match="do not unpack"):
        device.setup(args, log)


TAGS = {"house": "$REPLACE_houses", "red": "$DELETE"}


@pytest.fixture(scope="module")
def tag_teacher(tmp_path_factory: pytest.TempPathFactory, micro_run: Path) -> Path:
    """A stand-in edit-tag teacher: "house" wants $REPLACE_houses, "red" $DELETE (docs/edit_tags.md)."""
    from electra_detect.training.finetune.tag_vocabulary import write_tag_files

    vocabulary = ("$KEEP", "$DELETE", "$SPELL", "$REPLACE_houses")
    train = [GedSentence(t, [int(w in TAGS) for w in t], [[] for _ in t], [], [TAGS.get(w, "$KEEP") for w in t])
             for t in _sentences(160, 5)]
    out = tmp_path_factory.mktemp("tag_teacher") / "ged"
    finetune(micro_run, out, train, config=FinetuneConfig(epochs=4, batch_size=16, lr=3e-3, tags=vocabulary,
                                                          tag_weight=1.0), show_progress=False)
    write_tag_files(out, vocabulary, {"$KEEP": "R:OTHER", "$DELETE": "U:ADJ", "$SPELL": "R:SPELL",
                                      "$REPLACE_houses": "R:NOUN:NUM"}, {}, {}, {w for t in train for w in t.tokens},
                    source="test")
    return out


def test_a_tag_teachers_labels_keep_its_tags_and_become_tagged_data(tmp_path: Path, tag_teacher: Path) -> None:
    from electra_detect.training.finetune.distill_labels import TAG_FLOOR, teacher_tagged
    from electra_detect.training.finetune.edit_tag_data import TaggedSentence

    build_text_sets(tmp_path / "text", _learner_files(tmp_path), seed=3)
    text = tmp_path / "text" / "learner.jsonl.gz"
    manifest = label_text_set(text, tmp_path / "labels", [tag_teacher], shard_size=16, show_progress=False)
    assert manifest["tags"] == ["$KEEP", "$DELETE", "$SPELL", "$REPLACE_houses"] and manifest["tag_floor"] == TAG_FLOOR
    rows = list(read_set(text))
    p, tag = [], []
    for shard in sorted((tmp_path / "labels").glob("shard-*.npz")):
        with np.load(shard) as arrays:
            p.append(arrays["p"].astype(np.float32))
            tag.append(arrays["tag"])
    p, tag = np.concatenate(p), np.concatenate(tag)
    words = [w for r in rows for w in r["tokens"]]
    assert len(words) == len(p) == len(tag)
    assert np.all(tag[p < TAG_FLOOR] == -1)  # a tag only where the teacher suspects the word
    house = [manifest["tags"][t] for w, t in zip(words, tag, strict=True) if w == "house" and t >= 0]
    assert len(house) >= 0.8 * words.count("house") > 0 and all(t == "$REPLACE_houses" for t in house)
    tagged = teacher_tagged(text, tmp_path / "labels", 0.5)
    assert [s.tokens for s in tagged] == [r["tokens"] for r in rows]
    flat = [(w, y, t) for s in tagged for w, y, t in zip(s.tokens, s.labels, s.tags, strict=True)]
    assert all(t == "$KEEP" for _, y, t in flat if not y)
    assert np.mean([y == 1 and t == "$REPLACE_houses" for w, y, t in flat if w == "house"]) > 0.8
    assert np.mean([y for w, y, _ in flat if w not in TAGS]) < 0.1
    with pytest.raises(ValueError, match="without edit tags"):
        teacher_tagged(text, _typed_labels(tmp_path, text), 0.5)
    # soft: the teacher's p itself is the target, the tags as the hard view's
    soft = teacher_tagged(text, tmp_path / "labels", 0.5, soft=True)
    assert [s.tags for s in soft] == [s.tags for s in tagged]
    assert np.allclose([y for s in soft for y in s.labels], np.round(p, 2), atol=1e-6)
    assert any(0 < y < 1 for s in soft for y in s.labels)
    # mixed with the set's own gold sentences: their tags, half the teacher's p and half the gold label
    gold = [TaggedSentence(list(r["tokens"]), list(r["labels"]), ["$DELETE"] * len(r["tokens"])) for r in rows]
    mixed = teacher_tagged(text, tmp_path / "labels", 0.5, gold=gold, teacher_share=0.5)
    assert all(m.tags == g.tags for m, g in zip(mixed, gold, strict=True))
    expected = 0.5 * p + 0.5 * np.array([y for r in rows for y in r["labels"]])
    assert np.allclose([y for s in mixed for y in s.labels], expected, atol=0.006)
    with pytest.raises(ValueError, match="not the labelled text's"):
        teacher_tagged(text, tmp_path / "labels", 0.5, gold=gold[1:] + gold[:1])
    with pytest.raises(ValueError, match="gold sentences for"):
        teacher_tagged(text, tmp_path / "labels", 0.5, gold=gold[:-1])


def _typed_labels(tmp_path: Path, text: Path) -> Path:
    """Labels of ``text`` whose manifest names no tags (a typed teacher's)."""
    from electra_detect.fileio import sha256_file

    folder = tmp_path / "typed"
    folder.mkdir()
    (folder / "labels.json").write_text(json.dumps({"sentences": 1, "shard_size": 10, "tags": [],
                                                    "text_sha256": sha256_file(text)}))
    return folder


def test_device_starts_no_labelling_for_a_set_labelled_whole(tmp_path: Path) -> None:
    device = _script("distill_device")
    payload, labels = tmp_path / "payload", tmp_path / "labels"
    (payload / "text").mkdir(parents=True)
    (payload / "text" / "manifest.json").write_text(json.dumps({"sets": {"learner": {}, "clean": {}}}))
    for name, shards in (("learner", 3), ("clean", 2)):  # 25 sentences in shards of 10: 3 shards make a set whole
        (labels / name).mkdir(parents=True)
        (labels / name / "labels.json").write_text(json.dumps({"sentences": 25, "shard_size": 10}))
        for index in range(shards):
            (labels / name / f"shard-{index:05d}.npz").write_bytes(b"")
    args = type("Args", (), {"limit": 0, "shard_size": 10})()
    assert sorted(device.label_jobs(payload, labels, "t", [], device.PROFILES["h100"], args)) == ["label-clean-0"]


def test_payload_learner_text_keeps_each_essay_in_one_half(tmp_path: Path) -> None:
    build_payload = _script("build_payload")
    tags = tmp_path / "tags"
    tags.mkdir()
    fce = [{"tokens": ["w", str(i)], "labels": [0, 1], "tags": ["$KEEP", "$DELETE"], "essay": i // 5, "edits": []}
           for i in range(40)]
    wi = [{"tokens": ["v", str(i)], "labels": [0, 0], "tags": ["$KEEP", "$KEEP"], "essay": -1, "edits": []}
          for i in range(30)]
    for name, rows in (("fce_train.jsonl", fce), ("wi_train.jsonl", wi)):
        (tags / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "text"
    assert build_payload.learner_text(tags, out) == 70
    rows = list(read_set(out / "learner.jsonl.gz"))
    assert [r["tokens"] for r in rows] == [r["tokens"] for r in fce + wi]
    halves = {}
    for row, source in zip(rows, fce, strict=False):
        halves.setdefault(source["essay"], set()).add(row["half"])
    assert all(len(h) == 1 for h in halves.values()) and {r["half"] for r in rows} == {0, 1}
    for half in (0, 1):  # each half's tagged file holds exactly that half's sentences, in order
        lines = [json.loads(line) for line in (out / "learner" / f"half{half}.jsonl").read_text().splitlines()]
        assert [x["tokens"] for x in lines] == [r["tokens"] for r in rows if r["half"] == half]
    again = tmp_path / "again"
    build_payload.learner_text(tags, again)
    assert (again / "learner" / "half0.jsonl").read_text() == (out / "learner" / "half0.jsonl").read_text()
