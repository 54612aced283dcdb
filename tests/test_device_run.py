"""scripts/device_run.py: what travels to the device and what comes back fits the tool's limits and loses nothing
but fp16 rounding."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("device_run", ROOT / "scripts" / "device_run.py")
device_run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(device_run)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A small run dir whose generator shares the discriminator's embeddings (as a warm start's does)."""
    torch.manual_seed(0)
    config = ElectraConfig(vocab_size=1000, embedding_size=32, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    disc = ElectraForPreTraining(config)
    gen = ElectraForMaskedLM(ElectraConfig(**{**config.to_dict(), "num_hidden_layers": 1}))
    gen.electra.embeddings = disc.electra.embeddings
    run = tmp_path / "run"
    disc.save_pretrained(run / "discriminator")
    gen.save_pretrained(run / "generator")
    (run / "summary.json").write_text(json.dumps({"steps": 3}))
    (run / "metrics.jsonl").write_text('{"step": 3, "split": "val"}\n')
    return run


def test_pack_then_unpack_gives_the_run_back_in_fp16(run_dir: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(device_run, "PART_BYTES", 50_000)  # several parts from a small model
    out, back = tmp_path / "out", tmp_path / "back"
    log = tmp_path / "pretrain.log"
    log.write_text("trained\n")
    device_run.pack(run_dir, out, [log])
    files = sorted(out.iterdir())
    assert len([f for f in files if f.name.startswith("discriminator.part")]) > 1
    assert all(f.stat().st_size <= 50_000 for f in files if f.name.startswith("discriminator.part"))
    own = load_file(str(out / "generator_own.safetensors"))
    assert not any(k.startswith("electra.embeddings.") for k in own)  # tied tensors travel once
    args = type("Args", (), {"files": str(out), "run_dir": str(back)})
    device_run.unpack(args)
    assert not back.with_name("back.partial").exists()
    with pytest.raises(SystemExit, match="exists"):  # never over a run dir that is there
        device_run.unpack(args)
    for part in ("discriminator", "generator"):
        original = load_file(str(run_dir / part / "model.safetensors"))
        restored = load_file(str(back / part / "model.safetensors"))
        assert set(restored) == set(original)
        for key, value in original.items():
            assert torch.equal(restored[key], value.half()), (part, key)
    assert json.loads((back / "summary.json").read_text()) == {"steps": 3}
    assert (back / "device" / f"{tmp_path.name}-pretrain.log").read_text() == "trained\n"
    disc = ElectraForPreTraining.from_pretrained(back / "discriminator")
    assert disc.electra.embeddings.word_embeddings.weight.dtype == torch.float32  # fp16 on disk, fp32 on load


def test_only_unused_transformers_models_are_left_behind() -> None:
    assert device_run.carried("transformers/models/electra/modeling_electra.py")
    assert device_run.carried("transformers/models/auto/tokenization_auto.py")
    assert device_run.carried("transformers/models/albert/__init__.py")  # the auto lookup imports every package
    assert not device_run.carried("transformers/models/albert/modeling_albert.py")
    assert device_run.carried("transformers/modeling_utils.py")
    assert device_run.carried("tokenizers/__init__.py")
