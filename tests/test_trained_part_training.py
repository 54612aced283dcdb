"""`ged train --part` saves only what training changed on a base encoder, and base + part is the trained model.

A tiny random MPNet stands in for all-mpnet-base-v2; each run is captured right before its part is written (the
model's logits on fixed inputs, its full state), so the part applied to the base is checked against the very model
that was trained.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from electra_detect.fileio import sha256_file
from electra_detect.training.finetune import ged_finetune
from tests.conftest import OBJECTS, SUBJECTS, VERBS
from tests.test_mpnet import MPNET_SPECIALS, POSITIONS

# fp16 keeps 11 bits of mantissa: each stored weight is off by at most 2**-11 of itself (~5e-4), which moved the
# logits of this 2-layer, 32-wide model by ~4e-4 here; 1e-2 leaves a margin of 25 and is far below what the part changes
# (checked below: base + heads alone, without the LoRA or top layer, misses by more than 10x this).
LOGIT_TOLERANCE = 1e-2
SAMPLE = ["the farmer saw a red house .", "my sister painted the small garden .", "a doctor likes a heavy box ."]
COMMON_FILES = {"trained_part.json", "config.json", "part.safetensors", "ged.json", "edit_tags.json",
                "inflections.json"}
ADAPTER_FILES = {"adapter_model.safetensors", "adapter_config.json"}


def write_base(folder: Path) -> Path:
    """A tiny random MPNet saved as sentence-transformers ships all-mpnet-base-v2: hidden 32, 2 layers, 2 heads,
    intermediate 37 (no size shared with another, so a tensor in the wrong place fails on its shape)."""
    import torch
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizerFast

    torch.manual_seed(7)
    words = sorted({w for phrase in SUBJECTS + VERBS + OBJECTS for w in phrase.split()} | {".", ",", "##s"})
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(MPNET_SPECIALS + words) + "\n", encoding="utf-8")
    tokenizer = MPNetTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    config = MPNetConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=37, max_position_embeddings=POSITIONS, pad_token_id=1, bos_token_id=0,
                         eos_token_id=2)
    MPNetModel(config).save_pretrained(str(folder), safe_serialization=True)
    tokenizer.save_pretrained(str(folder))
    return folder


def write_tagged(path: Path, count: int = 48) -> Path:
    """Edit-tagged sentences (edit_tag_data's JSON lines): a ``red`` to delete, a ``saw`` to make ``sees``."""
    rng = random.Random(3)
    lines = []
    for _ in range(count):
        tokens = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} .".split()
        tags = ["$DELETE" if t == "red" else "$FORM_VBZ" if t == "saw" else "$KEEP" for t in tokens]
        edits = [[i, i + 1, "" if tag == "$DELETE" else "sees", "U:ADJ" if tag == "$DELETE" else "R:VERB:TENSE"]
                 for i, tag in enumerate(tags) if tag != "$KEEP"]
        lines.append(json.dumps({"tokens": tokens, "labels": [int(t != "$KEEP") for t in tags], "tags": tags,
                                 "edits": edits}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sample_inputs(base: Path) -> dict[str, Any]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(base))
    return dict(tokenizer(SAMPLE, padding=True, return_tensors="pt", return_token_type_ids=False))


def train_part(base: Path, folder: Path, part: str) -> tuple[Path, dict[str, Any]]:
    """`ged train --tags --part PART` in this process, its threshold tuned on held-out sentences; (OUT, what the
    model was right before its part was saved: its logits on SAMPLE and its full model's state)."""
    import torch

    from electra_detect.cli import main
    from electra_detect.training.finetune.trained_part import full_model

    captured: dict[str, Any] = {}
    real = ged_finetune.save_trained_part

    def capture(model: Any, out_dir: Path, base_name: str, spec: Any) -> None:
        with torch.no_grad():
            captured["logits"] = model(**sample_inputs(base)).logits.clone()
        captured["state"] = {k: v.clone() for k, v in full_model(model).state_dict().items()}
        captured["training"] = model.training
        real(model, out_dir, base_name, spec)

    out = folder / "ged"
    with pytest.MonkeyPatch.context() as patch:  # the real save, with the model captured right before it
        patch.setattr(ged_finetune, "save_trained_part", capture)
        assert main(["ged", "train", "--model", str(base), "--tags", "--data", f"{write_tagged(folder / 't.jsonl')}"
                     ":tagged", "--dev-split", "0.25", "--max-steps", "8", "--batch-size", "8", "--lr", "3e-2",
                     "--out", str(out), "--part", part, "--no-progress"]) == 0
    return out, captured


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_base(tmp_path_factory.mktemp("base") / "encoder")


@pytest.fixture(scope="module")
def lora_run(base_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    return train_part(base_dir, tmp_path_factory.mktemp("lora"), "lora:4")


@pytest.fixture(scope="module")
def top_run(base_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    return train_part(base_dir, tmp_path_factory.mktemp("top"), "top:1")


def base_tensors(base: Path) -> dict[str, Any]:
    """The base's tensors named as in the token classifier (``mpnet.`` before MPNetModel's own names)."""
    from safetensors.torch import load_file

    return {f"mpnet.{k}": v for k, v in load_file(str(base / "model.safetensors")).items()}


def base_model(out: Path, base: Path) -> Any:
    """The full model's class and config (OUT's config.json) with the base's weights: what assembly starts from."""
    from transformers import AutoConfig, AutoModelForTokenClassification

    config = AutoConfig.from_pretrained(str(out))
    return AutoModelForTokenClassification.from_pretrained(str(base), config=config, use_safetensors=True).eval()


def load_part(model: Any, out: Path) -> None:
    """part.safetensors over the model: every tensor of it has its place, none is left out."""
    from safetensors.torch import load_file

    part = load_file(str(out / "part.safetensors"))
    missing, unexpected = model.load_state_dict(part, strict=False)
    assert not unexpected and set(model.state_dict()) - set(missing) == set(part)


def logits_of(model: Any, base: Path) -> Any:
    import torch

    with torch.no_grad():
        return model(**sample_inputs(base)).logits


def test_lora_part_holds_only_the_adapter_and_the_heads(lora_run: tuple[Path, dict[str, Any]], base_dir: Path) -> None:
    from safetensors.torch import load_file

    out, captured = lora_run
    assert {p.name for p in out.iterdir()} == COMMON_FILES | ADAPTER_FILES  # no full weights, no tokenizer
    meta = json.loads((out / "trained_part.json").read_text())
    targets = ["attention.attn.k", "attention.attn.o", "attention.attn.q", "attention.attn.v", "intermediate.dense",
               "output.dense"]
    assert meta == {"format": 1, "base": str(base_dir.resolve()),
                    "base_weights_sha256": sha256_file(base_dir / "model.safetensors"), "part": "lora",
                    "lora": {"rank": 4, "alpha": 8, "target_modules": targets}}
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "mpnet" and config["architectures"] == ["MPNetForTokenClassification"]
    assert [config["id2label"][str(i)] for i in range(3)] == ["error", "tag:$KEEP", "tag:$DELETE"]
    part = load_file(str(out / "part.safetensors"))
    assert set(part) == {"classifier.weight", "classifier.bias"}
    channels = len(config["id2label"])
    assert part["classifier.weight"].shape == (channels, 32) and part["classifier.weight"].dtype.itemsize == 2
    adapter = load_file(str(out / "adapter_model.safetensors"))
    assert len(adapter) == 2 * 6 * 2  # A and B of 6 modules in 2 layers
    sizes = {"attention.attn.q": (32, 32), "intermediate.dense": (32, 37), "output.dense": (37, 32)}
    for name, tensor in adapter.items():
        module = name.split(".layer.", 1)[1].split(".", 1)[1].rsplit(".lora_", 1)[0]
        fan_in, fan_out = sizes.get(module, (32, 32))
        assert name.startswith("base_model.model.mpnet.encoder.layer.") and tensor.dtype.itemsize == 2
        assert tuple(tensor.shape) == ((4, fan_in) if ".lora_A." in name else (fan_out, 4)), name
    assert json.loads((out / "adapter_config.json").read_text())["modules_to_save"] is None  # heads: part.safetensors
    assert "dev" in json.loads((out / "ged.json").read_text())  # dev scored on the full model (LoRA merged)
    base = base_tensors(base_dir)
    assert not captured["training"]
    for name, tensor in captured["state"].items():  # the frozen base did not move: only LoRA and the heads trained
        plain = name.replace(".base_layer.", ".")
        if ".lora_" not in name and not name.startswith("classifier."):
            assert (tensor == base[plain]).all(), name


def test_lora_part_on_its_base_gives_the_trained_logits(lora_run: tuple[Path, dict[str, Any]], base_dir: Path
                                                        ) -> None:
    from peft import PeftModel

    out, captured = lora_run
    heads_only = base_model(out, base_dir)
    load_part(heads_only, out)
    missed = (logits_of(heads_only, base_dir) - captured["logits"]).abs().max()
    assert missed > 10 * LOGIT_TOLERANCE  # the LoRA matrices matter: without them the logits are not the trained ones
    assembled = PeftModel.from_pretrained(base_model(out, base_dir), str(out)).merge_and_unload()
    load_part(assembled, out)
    assert (logits_of(assembled, base_dir) - captured["logits"]).abs().max() < LOGIT_TOLERANCE


def test_top_part_holds_the_top_layer_and_the_heads(top_run: tuple[Path, dict[str, Any]], base_dir: Path) -> None:
    from safetensors.torch import load_file

    out, captured = top_run
    assert {p.name for p in out.iterdir()} == COMMON_FILES
    meta = json.loads((out / "trained_part.json").read_text())
    assert meta == {"format": 1, "base": str(base_dir.resolve()),
                    "base_weights_sha256": sha256_file(base_dir / "model.safetensors"), "part": "top_layers",
                    "top_layers": 1}
    part = load_file(str(out / "part.safetensors"))
    base = base_tensors(base_dir)
    top = {k for k in base if k.startswith("mpnet.encoder.layer.1.")}
    assert set(part) == top | {"classifier.weight", "classifier.bias"}
    assert all(t.dtype.itemsize == 2 for t in part.values()) and "dev" in json.loads((out / "ged.json").read_text())
    assert any(not (captured["state"][k] == base[k]).all() for k in top)  # the top layer trained
    for name, tensor in captured["state"].items():  # and nothing below it moved
        if name not in part:
            assert (tensor == base[name]).all(), name


def test_top_part_on_its_base_gives_the_trained_logits(top_run: tuple[Path, dict[str, Any]], base_dir: Path) -> None:
    from safetensors.torch import load_file

    out, captured = top_run
    heads_only = base_model(out, base_dir)
    heads_only.load_state_dict({k: v for k, v in load_file(str(out / "part.safetensors")).items()
                                if k.startswith("classifier.")}, strict=False)
    assert (logits_of(heads_only, base_dir) - captured["logits"]).abs().max() > 10 * LOGIT_TOLERANCE
    assembled = base_model(out, base_dir)
    load_part(assembled, out)
    assert (logits_of(assembled, base_dir) - captured["logits"]).abs().max() < LOGIT_TOLERANCE


def test_part_needs_a_base_encoder_and_a_valid_spec(top_run: tuple[Path, dict[str, Any]], base_dir: Path,
                                                    tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from electra_detect.cli import main

    run_dir = tmp_path / "run"
    (run_dir / "discriminator").mkdir(parents=True)
    (run_dir / "run_config.json").write_text("{}")
    data = write_tagged(tmp_path / "t.jsonl", count=4)
    cases = [(run_dir, "lora", "not on the run dir"), (top_run[0], "lora", "not on the trained model"),
             (base_dir, "lora:x", "expected lora[:RANK] or top:N"), (base_dir, "top:0", "expected lora[:RANK]"),
             (base_dir, "top:3", "has 2 layers"), (base_dir, "middle:2", "expected lora[:RANK]")]
    for model, part, message in cases:
        out = tmp_path / f"out-{part}"
        assert main(["ged", "train", "--model", str(model), "--tags", "--data", f"{data}:tagged", "--max-steps", "1",
                     "--out", str(out), "--part", part, "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and message in err and "\n" not in err, err
        assert not out.exists()
