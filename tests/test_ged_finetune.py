"""GED fine-tuning keeps the discriminator format and learns what the labels say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from electra_detect.detector import Detector
from electra_detect.tasks.ged.readers import GedSentence
from electra_detect.training.finetune.ged_finetune import FinetuneConfig, finetune, synthetic_examples
from electra_detect.training.pretraining.data import corpus_sentences
from tests.conftest import synthetic_text


def test_finetuned_model_learns_the_labelled_word(tmp_path: Path, micro_run: Path) -> None:
    sentences = [s.split() for s in synthetic_text(80, seed=5).replace(".", " .").split(" .") if s.strip()]
    train = [GedSentence(tokens, [int(t == "house") for t in tokens], [[] for _ in tokens]) for tokens in sentences]
    assert sum(sum(s.labels) for s in train) > 5
    dev = [s for s in train if sum(s.labels)][:10] + [s for s in train if not sum(s.labels)][:20]
    summary = finetune(micro_run, tmp_path / "ged", train, dev=dev,
                       config=FinetuneConfig(epochs=8, batch_size=16, lr=3e-3), show_progress=False)
    assert summary["last_loss"] < summary["first_loss"]
    detector = Detector.load(tmp_path / "ged")  # still a discriminator dir
    words = detector.score("My sister painted a red house in the morning.")[0].words
    house = next(w.score for w in words if w.word == "house")
    others = max(w.score for w in words if w.word != "house")
    assert house > others, [(w.word, round(w.score, 3)) for w in words]
    saved = json.loads((tmp_path / "ged" / "ged.json").read_text())
    assert 0 < saved["threshold"] < 1 and saved["dev"]["f05"] > 0.5


def test_synthetic_examples_from_a_corpus(corpus_file: Path) -> None:
    clean = corpus_sentences([str(corpus_file)], 50)
    assert len(clean) == 50 and all(4 <= len(s) <= 60 for s in clean)
    examples = synthetic_examples([str(corpus_file)], 50, seed=1)
    assert len(examples) == 50 and any(sum(e.labels) for e in examples)
    assert [e.tokens for e in synthetic_examples([str(corpus_file)], 50, seed=1)] == [e.tokens for e in examples]


def test_ged_train_cli_needs_data(tmp_path: Path, micro_run: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "electra_detect.cli", "ged", "train", "--model", str(micro_run),
                             "--out", str(tmp_path / "x")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "nothing to train on" in result.stderr
    assert not (tmp_path / "x").exists()


def test_several_data_files_train_as_one_set_in_their_order(tmp_path: Path) -> None:
    import pytest

    from electra_detect.errors import GedDataError
    from electra_detect.training.finetune.ged_finetune import ged_training_data

    first, second = tmp_path / "fce.tsv", tmp_path / "wi.tsv"
    first.write_text("He\tc\ngo\ti\n\nFine\tc\n")
    second.write_text("She\tc\ndon't\ti\n")
    train, dev = ged_training_data([first, second], "tsv")
    assert [s.tokens for s in train] == [["He", "go"], ["Fine"], ["She", "don't"]] and dev == []
    train, dev = ged_training_data([first, second], "tsv", dev_file=second)
    assert len(train) == 3 and [s.tokens for s in dev] == [["She", "don't"]]
    train, dev = ged_training_data([first, second], "tsv", dev_split=1 / 3, seed=0)
    assert len(train) == 2 and len(dev) == 1
    with pytest.raises(GedDataError, match="one --data file"):
        ged_training_data([first, second], "parallel", refs=[second])


def test_packed_type_labels_round_trip() -> None:
    import torch

    from electra_detect.training.finetune.ged_finetune import type_channels, type_targets, unpack_labels

    sentence = GedSentence(["a", "b", "c", "d"], [0, 1, 1, 1], [[], ["U:DET"], ["R:VERB:SVA", "M:DET"], ["R:ODD"]])
    common = GedSentence(["a", "b"], [1, 1], [["U:DET"], ["R:VERB:SVA"]])
    channels = type_channels([sentence] + [common] * 25)
    assert channels == ["error", "op:M", "op:R", "op:U", "type:DET", "type:VERB:SVA", "type:OTHER"]
    targets = type_targets(sentence, channels)
    assert targets == [(-100, -100), (2, 0), (1, 1), (1, 2)]  # the first edit decides; rare ODD trains as OTHER
    packed = torch.tensor([-1, 0] + [1 + 2 * (1 + op + 3 * (1 + main)) for op, main in targets[1:]])
    label, op, main = unpack_labels(packed)
    assert label.tolist() == [-1, 0, 1, 1, 1]
    assert op.tolist() == [-100, -100, 2, 1, 1] and main.tolist() == [-100, -100, 0, 1, 2]


def test_typed_finetune_learns_operations(tmp_path: Path, micro_run: Path) -> None:

    sentences = [s.split() for s in synthetic_text(160, seed=5).replace(".", " .").split(" .") if s.strip()]
    kinds = {"house": "R:NOUN:NUM", "red": "U:ADJ"}
    train = [GedSentence(tokens, [int(t in kinds) for t in tokens], [[kinds[t]] if t in kinds else [] for t in tokens])
             for tokens in sentences]
    assert sum(t == "house" for s in sentences for t in s) >= 20 and sum(t == "red" for s in sentences for t in s) >= 20
    config = FinetuneConfig(epochs=4, batch_size=16, lr=3e-3, types=True, type_weight=1.0)  # a tiny model: full weight
    summary = finetune(micro_run, tmp_path / "ged", train, config=config, show_progress=False)
    assert summary["types"] == ["error", "op:M", "op:R", "op:U", "type:ADJ", "type:NOUN:NUM", "type:OTHER"]
    words = {w.word: w for w in Detector.load(tmp_path / "ged").score("My sister painted a red house.")[0].words}
    assert (words["red"].operation, words["house"].operation) == ("U", "R")  # one pass gives both heads
    assert words["house"].error_type == "NOUN:NUM" and 0 < words["house"].type_score <= 1
    assert words["house"].score > words["sister"].score

    from electra_detect.onnx.export import export_model

    export_model(tmp_path / "ged", variants=["fp32"], progress=False)
    onnx_words = {w.word: w for w in Detector.load(tmp_path / "ged", engine="onnx").score(
        "My sister painted a red house.")[0].words}
    assert [(w.operation, w.error_type) for w in onnx_words.values()] == \
        [(w.operation, w.error_type) for w in words.values()]
    data = tmp_path / "typed.m2"
    data.write_text("S My sister painted a red house .\nA 4 5|||U:ADJ|||-NONE-|||REQUIRED|||-NONE-|||0\n"
                    "A 5 6|||R:NOUN:NUM|||houses|||REQUIRED|||-NONE-|||0\n\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "electra_detect.cli", "ged", "eval", "--model",
                             str(tmp_path / "ged"), "--data", str(data), "--format", "m2", "--threshold", "0.0"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    types = json.loads(result.stdout)["types"]
    assert types["detected"] == 2 and types["operation_accuracy"] == 1.0
    assert set(types["per_type"]) == {"ADJ", "NOUN:NUM"}


def test_an_interrupted_finetune_resumes_to_the_same_weights(tmp_path: Path, micro_run: Path, monkeypatch) -> None:
    from safetensors.torch import load_file

    from electra_detect.training.finetune import loop

    sentences = [s.split() for s in synthetic_text(40, seed=2).replace(".", " .").split(" .") if s.strip()]
    train = [GedSentence(tokens, [int(t == "house") for t in tokens], [[] for _ in tokens]) for tokens in sentences]
    config = FinetuneConfig(epochs=2, batch_size=8, lr=1e-3, checkpoint_every=2)
    finetune(micro_run, tmp_path / "whole", train, config=config, show_progress=False)

    save = loop.save_resumable  # the one fine-tune loop saves the resumable state

    def save_then_die(path, state):  # the run is killed right after its second checkpoint
        save(path, state)
        if state["step"] == 4:
            raise KeyboardInterrupt

    monkeypatch.setattr(loop, "save_resumable", save_then_die)
    try:
        finetune(micro_run, tmp_path / "resumed", train, config=config, show_progress=False)
    except KeyboardInterrupt:
        pass
    assert not (tmp_path / "resumed").exists() and (tmp_path / "resumed.partial" / "checkpoint.pt").exists()
    monkeypatch.setattr(loop, "save_resumable", save)
    summary = finetune(micro_run, tmp_path / "resumed", train, config=config, show_progress=False)
    assert summary["steps"] > 4 and not (tmp_path / "resumed.partial").exists()
    whole = load_file(str(tmp_path / "whole" / "model.safetensors"))
    resumed = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    assert all(torch_allclose(whole[k], resumed[k]) for k in whole)


def test_tag_finetune_names_the_edit_in_every_engine(tmp_path: Path, micro_run: Path) -> None:
    """A tag head trained beside detection (``tags``): the Detector's words carry their tag, the check tells the
    writer the tag's edit (message, suggestion, type) without ERRANT, and the ONNX export agrees on the tags."""
    from electra_detect.tasks.ged.check import GedChecker
    from electra_detect.tasks.ged.options import build_ged_options
    from electra_detect.training.finetune.tag_vocabulary import write_tag_files

    sentences = [s.split() for s in synthetic_text(160, seed=5).replace(".", " .").split(" .") if s.strip()]
    tags = {"house": "$FORM_NNS", "red": "$DELETE"}
    train = [GedSentence(tokens, [int(t in tags) for t in tokens], [[] for _ in tokens],
                         tags=[tags.get(t, "$KEEP") for t in tokens]) for tokens in sentences]
    config = FinetuneConfig(epochs=4, batch_size=16, lr=3e-3, tags=("$KEEP", "$DELETE", "$FORM_NNS"),
                            tag_weight=1.0)  # a tiny model: full weight
    finetune(micro_run, tmp_path / "ged", train, config=config, show_progress=False)
    write_tag_files(tmp_path / "ged", config.tags, {"$DELETE": "U:ADJ", "$FORM_NNS": "R:NOUN:NUM"}, {}, {},
                    ["house", "houses", "red"], source="test")
    text = "My sister painted a red house."
    detector = Detector.load(tmp_path / "ged")
    words = {w.word: w for w in detector.score(text)[0].words}
    assert (words["house"].tag, words["red"].tag) == ("$FORM_NNS", "$DELETE")
    assert (words["house"].operation, words["house"].error_type, words["red"].operation) == ("R", "NOUN:NUM", "U")
    checked = GedChecker(detector).check_texts([text], build_ged_options(threshold=0.5, use_dictionary_file=False))
    told = {w.word: w for w in checked[0]}
    assert told["house"].message == "Noun number: *house* may need to be *houses*."
    assert told["house"].best.value == "houses" and told["red"].message == "Adjective: *red* may be unnecessary."
    assert not GedChecker(detector).typer.__dict__.get("annotator")  # ERRANT was never loaded

    from electra_detect.onnx.export import export_model

    report = export_model(tmp_path / "ged", variants=["fp32"], progress=False)
    assert report.parity["variants"]["fp32"]["tag_agreement"] == 1.0
    onnx_words = {w.word: w for w in Detector.load(tmp_path / "ged", engine="onnx").score(text)[0].words}
    assert [w.tag for w in onnx_words.values()] == [w.tag for w in words.values()]


def torch_allclose(a, b) -> bool:
    import torch

    return bool(torch.allclose(a, b, atol=1e-6))


def test_each_data_file_may_name_its_format(tmp_path: Path) -> None:
    from electra_detect.training.finetune.ged_finetune import data_format, ged_training_data

    assert data_format("a/b.tsv:tsv", "bea") == (Path("a/b.tsv"), "tsv")
    assert data_format("a/b.json", "bea") == (Path("a/b.json"), "bea")
    assert data_format("c:/x.m2:m2", "tsv") == (Path("c:/x.m2"), "m2")  # the last colon names the format
    assert data_format("notes:draft", "tsv") == (Path("notes:draft"), "tsv")  # not a format: part of the path
    tsv, m2 = tmp_path / "fce.tsv", tmp_path / "wi.m2"
    tsv.write_text("He\tc\ngo\ti\n", encoding="utf-8")
    m2.write_text("S She go home .\nA 1 2|||R:VERB:SVA|||goes|||REQUIRED|||-NONE-|||0\n\n", encoding="utf-8")
    train, dev = ged_training_data([f"{tsv}:tsv", f"{m2}:m2"], "bea", dev_file=f"{tsv}:tsv")
    assert [s.labels for s in train] == [[0, 1], [0, 1, 0, 0]] and [s.tokens for s in dev] == [["He", "go"]]
    assert not any(train[0].types) and train[1].types[1] == ["R:VERB:SVA"]  # TSV: binary, no types


def test_types_train_only_where_the_data_names_them_and_first_subword_labels(micro_run: Path) -> None:
    """A binary (TSV) error token trains the binary loss alone; an M2 one the type losses too. With
    ``label_subwords="first"`` a word's later subwords are left out of every loss."""
    from transformers import AutoTokenizer

    from electra_detect.training.finetune.ged_finetune import encode, unpack_labels

    tokenizer = AutoTokenizer.from_pretrained(str(micro_run / "discriminator"))
    words = sorted(set(synthetic_text(50, seed=1).replace(".", " ").split()), key=len, reverse=True)
    long_word = next(w for w in words if len(tokenizer.tokenize(w)) > 1 and "[UNK]" not in tokenizer.tokenize(w))
    binary = GedSentence(["He", long_word, "house"], [0, 1, 0])
    typed = GedSentence(["He", long_word, "house"], [0, 1, 0], [[], ["R:SPELL"], []])
    channels = ["error", "op:M", "op:R", "op:U", "type:SPELL", "type:OTHER"]
    for label_subwords in ("all", "first"):
        (_, packed_binary), (_, packed_typed) = encode(tokenizer, [binary, typed], 64, channels, label_subwords)
        label_b, op_b, _ = unpack_labels(torch_tensor(packed_binary))
        label_t, op_t, main_t = unpack_labels(torch_tensor(packed_typed))
        assert label_b.tolist() == label_t.tolist()  # the binary labels do not depend on the types
        assert (op_b == -100).all() and set(op_t[label_t == 1].tolist()) == {1}  # R, on the typed copy only
        assert set(main_t[label_t == 1].tolist()) == {0}  # SPELL
        word_ids = tokenizer([binary.tokens], is_split_into_words=True).word_ids(0)
        pieces = [label_b.tolist()[i] for i, w in enumerate(word_ids) if w == 1]
        assert pieces == ([1] * len(pieces) if label_subwords == "all" else [1] + [-1] * (len(pieces) - 1))


def torch_tensor(values):
    import torch

    return torch.tensor(values)


def test_bf16_autocast_trains_and_saves_fp32_weights(tmp_path: Path, micro_run: Path) -> None:
    from safetensors.torch import load_file

    sentences = [s.split() for s in synthetic_text(20, seed=3).replace(".", " .").split(" .") if s.strip()]
    train = [GedSentence(tokens, [int(t == "house") for t in tokens], [[] for _ in tokens]) for tokens in sentences]
    config = FinetuneConfig(max_steps=2, batch_size=8, lr=1e-3, bf16=True, label_subwords="first")
    summary = finetune(micro_run, tmp_path / "bf16", train, config=config, show_progress=False)
    assert summary["bf16"] is True and summary["label_subwords"] == "first" and summary["steps"] == 2
    weights = load_file(str(tmp_path / "bf16" / "model.safetensors"))
    assert {str(w.dtype) for w in weights.values()} == {"torch.float32"}
    before = load_file(str(micro_run / "discriminator" / "model.safetensors"))
    assert any(not torch_allclose(before[k], weights[k]) for k in before if k in weights)  # it did train
