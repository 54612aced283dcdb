"""A trained-part model directory assembled into an ordinary one (electra_detect/trained_part.py, part_weights.py):
base + part is the trained model, the base is checked by its hash, the assembly is cached, and the fronts that must
not assemble say which command does.

A tiny random MPNet (tests/test_mpnet.py's) stands in for all-mpnet-base-v2; each part is made here by hand, as the
format says, from a token classifier whose LoRA B matrices, top layer and heads were moved off their start so that
the part changes the logits.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from electra_detect.detector import Detector
from electra_detect.edit_tags import TAG_PREFIX
from electra_detect.errors import DetectorError
from electra_detect.fileio import sha256_file
from electra_detect.trained_part import assembled_dir, is_trained_part, read_trained_part
from tests.test_mpnet import write_mpnet

pytest.importorskip("peft", reason="peft (the teacher extra) merges LoRA parts")

CHANNELS = ["error", f"{TAG_PREFIX}$KEEP", f"{TAG_PREFIX}$DELETE"]
SAMPLE = ["the farmer saw a red house .", "the doctor painted the river again ."]
# The part is stored fp16, each tensor rounded to within 2**-11 of itself; through this 2-layer, 32-wide model that
# moves the logits by ~1.2 * 2**-11 of the largest one (measured: 5e-4 to 6e-4 of it), so 4 * 2**-11 of the largest
# logit leaves a margin of 3, yet is 50x below what the part changes (test_the_part_changes_the_logits).
FP16_RELATIVE = 4 * 2 ** -11
STEP = re.compile(r"^assembling .* from .*: [1-4]/4 ", re.MULTILINE)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_mpnet(tmp_path_factory.mktemp("base") / "encoder", seed=5)


def classifier(base_dir: Path) -> Any:
    """The stock token classifier over the base, with the edit-tag channels (as `ged train --tags` starts one)."""
    from transformers import AutoModelForTokenClassification

    return AutoModelForTokenClassification.from_pretrained(
        str(base_dir), num_labels=len(CHANNELS), id2label=dict(enumerate(CHANNELS)),
        label2id={c: i for i, c in enumerate(CHANNELS)}, use_safetensors=True)


def tolerance(expected: Any) -> float:
    return FP16_RELATIVE * float(expected.abs().max())


def logits(model: Any, base_dir: Path) -> Any:
    import torch
    from transformers import AutoTokenizer

    inputs = AutoTokenizer.from_pretrained(str(base_dir))(SAMPLE, padding=True, return_tensors="pt",
                                                          return_token_type_ids=False)
    model.eval()
    with torch.no_grad():
        return model(**inputs).logits.float()


def write_common(out: Path, full: Any, base_dir: Path, base_name: str, part: dict[str, Any]) -> None:
    """trained_part.json, the full config and the tag files beside the part's tensors."""
    out.mkdir(parents=True, exist_ok=True)
    full.config.architectures = [type(full).__name__]
    full.config.to_json_file(str(out / "config.json"))
    (out / "trained_part.json").write_text(json.dumps({
        "format": 1, "base": base_name, "base_weights_sha256": sha256_file(base_dir / "model.safetensors"), **part}))
    (out / "ged.json").write_text(json.dumps({"threshold": 0.4, "space": "raw"}))
    (out / "edit_tags.json").write_text(json.dumps({"types": {"$DELETE": "U:OTHER"}}))
    (out / "inflections.json").write_text(json.dumps({"lemmas": {}, "forms": {}}))
    (out / "README.md").write_text("a tiny test part\n")


def make_lora_part(base_dir: Path, out: Path, adapter_files: bool = False, base_name: str | None = None) -> Any:
    """A LoRA part of a perturbed peft model, saved fp16 (the matrices inside part.safetensors, or as peft's adapter
    files); the unmerged peft model's logits on SAMPLE."""
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file, save_file

    torch.manual_seed(11)
    targets = ["q", "k", "v", "o"]
    wrapped = get_peft_model(classifier(base_dir), LoraConfig(r=4, lora_alpha=8, target_modules=targets))
    with torch.no_grad():  # a step of training, in effect: B leaves zero (else the merge adds nothing)
        for name, param in wrapped.named_parameters():
            if "lora_B" in name or "classifier" in name:
                param.add_(torch.randn_like(param) * 0.5)
    full = wrapped.get_base_model()
    write_common(out, full, base_dir, base_name or str(base_dir), {
        "part": "lora", "lora": {"rank": 4, "alpha": 8, "target_modules": targets}})
    heads = {k: v.half().contiguous() for k, v in full.state_dict().items() if k.startswith("classifier.")}
    if adapter_files:
        wrapped.save_pretrained(str(out))
        adapter = out / "adapter_model.safetensors"
        save_file({k: v.half().contiguous() for k, v in load_file(str(adapter)).items()}, str(adapter))
        save_file(heads, str(out / "part.safetensors"))
    else:
        from peft.utils import get_peft_model_state_dict

        lora = {k: v.half().contiguous() for k, v in get_peft_model_state_dict(wrapped).items()}
        save_file({**lora, **heads}, str(out / "part.safetensors"))
    return logits(wrapped, base_dir)


def make_top_layers_part(base_dir: Path, out: Path) -> Any:
    """A part holding the top encoder layer and the heads of a perturbed classifier, fp16; its logits on SAMPLE."""
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(12)
    model = classifier(base_dir)
    trained = {k for k in model.state_dict() if k.startswith(("classifier.", "mpnet.encoder.layer.1."))}
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in trained:
                param.add_(torch.randn_like(param) * 0.2)
    write_common(out, model, base_dir, str(base_dir), {"part": "top_layers", "top_layers": 1})
    save_file({k: v.half().contiguous() for k, v in model.state_dict().items() if k in trained},
              str(out / "part.safetensors"))
    return logits(model, base_dir)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the user's cache is untouched
    return tmp_path / "xdg"


@pytest.mark.parametrize("layout", ["inline", "adapter_files", "top_layers"])
def test_assembly_is_a_stock_model_whose_logits_are_the_trained_ones(layout: str, base: Path, tmp_path: Path,
                                                                     cache: Path) -> None:
    from transformers import AutoModelForTokenClassification

    part = tmp_path / "part"
    expected = (make_top_layers_part(base, part) if layout == "top_layers"
                else make_lora_part(base, part, adapter_files=layout == "adapter_files"))
    assert is_trained_part(part) and assembled_dir(part) is None
    detector = Detector.load(part, engine="torch")
    out = assembled_dir(part)
    assert out is not None and detector.model_dir == out and out.is_relative_to(cache / "electra-detect" / "assembled")
    assert {"model.safetensors", "config.json", "vocab.txt", "ged.json", "edit_tags.json", "inflections.json",
            "README.md"} <= {p.name for p in out.iterdir()}
    assert not any("lora" in k for k in json.loads((out / "config.json").read_text()))
    stock = AutoModelForTokenClassification.from_pretrained(str(out), use_safetensors=True)
    assert type(stock).__name__ == "MPNetForTokenClassification" and stock.dtype.is_floating_point
    assert all(p.dtype.itemsize == 4 for p in stock.parameters())  # merged and saved in fp32
    got = logits(stock, base)
    assert (got - expected).abs().max().item() < tolerance(expected)
    scores = detector.score(SAMPLE[0])[0]
    assert [w.word for w in scores.words][:2] == ["the", "farmer"] and detector.threshold(calibrated=False) == 0.4


def test_the_part_changes_the_logits(base: Path, tmp_path: Path) -> None:
    """The tolerance above is meaningful: the base with fresh heads misses the trained logits by far more."""
    from safetensors.torch import load_file

    expected = make_lora_part(base, tmp_path / "part")
    assert all(v.dtype.itemsize == 2 for v in load_file(str(tmp_path / "part" / "part.safetensors")).values())
    assert (logits(classifier(base), base) - expected).abs().max().item() > 50 * tolerance(expected)


def test_a_changed_base_is_refused_naming_both_hashes(base: Path, tmp_path: Path, cache: Path) -> None:
    changed = tmp_path / "changed"
    shutil.copytree(base, changed)
    part = tmp_path / "part"
    make_lora_part(changed, part, base_name=str(changed))
    recorded = sha256_file(changed / "model.safetensors")
    weights = bytearray((changed / "model.safetensors").read_bytes())
    weights[-1] ^= 1  # one byte of the last tensor
    (changed / "model.safetensors").write_bytes(bytes(weights))
    with pytest.raises(DetectorError) as caught:
        Detector.load(part, engine="torch")
    message = str(caught.value)
    assert "\n" not in message and recorded in message and sha256_file(changed / "model.safetensors") in message
    assert assembled_dir(part) is None


def test_a_second_load_reuses_the_assembly(base: Path, tmp_path: Path, cache: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "model"
    make_lora_part(base, model / "ged")  # `ged train --out MODEL/ged`: task ged finds it there
    first = Detector.load(model, task="ged", engine="torch")
    assert len(STEP.findall(capsys.readouterr().err)) == 4
    second = Detector.load(model / "ged", engine="torch")
    assert STEP.findall(capsys.readouterr().err) == [] and second.model_dir == first.model_dir
    (model / "ged" / "ged.json").write_text(json.dumps({"threshold": 0.3, "space": "raw"}))  # a changed part
    third = Detector.load(model, task="ged", engine="torch", assemble=True)
    assert len(STEP.findall(capsys.readouterr().err)) == 4 and third.model_dir != first.model_dir
    assert third.threshold(calibrated=False) == 0.3


def test_no_assembly_when_a_front_may_not_assemble(base: Path, tmp_path: Path, cache: Path) -> None:
    part = tmp_path / "part"
    make_lora_part(base, part)
    with pytest.raises(DetectorError) as caught:
        Detector.load(part, engine="torch", assemble=False)
    assert str(caught.value) == f"{part} is not assembled yet: run `electra-detect export --model {part}` first"
    assert not (cache / "electra-detect" / "assembled").exists()


def test_a_bad_record_is_one_line(base: Path, tmp_path: Path) -> None:
    part = tmp_path / "part"
    make_lora_part(base, part)
    spec = json.loads((part / "trained_part.json").read_text())
    for change, fragment in [({"format": 2}, "format 2"), ({"part": "all"}, "part 'all'"),
                             ({"base_weights_sha256": "abc"}, "not a hex SHA-256"),
                             ({"lora": {"rank": 0, "alpha": 8, "target_modules": ["q"]}}, "lora rank")]:
        (part / "trained_part.json").write_text(json.dumps({**spec, **change}))
        with pytest.raises(DetectorError, match=re.escape(fragment)) as caught:
            read_trained_part(part)
        assert "\n" not in str(caught.value) and "trained_part.json" in str(caught.value)


def test_export_assembles_then_exports(base: Path, tmp_path: Path, cache: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from electra_detect.cli import main

    part = tmp_path / "part"
    make_top_layers_part(base, part)
    out = tmp_path / "onnx"
    assert main(["export", "--model", str(part), "--out", str(out), "--variants", "fp32", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert len(STEP.findall(captured.err)) == 4 and json.loads(captured.out)["out"] == str(out)
    assert (out / "export.json").is_file() and assembled_dir(part) is not None
    onnx = Detector.load(out, engine="onnx", variant="fp32", device="cpu")
    torch_detector = Detector.load(part, engine="torch", assemble=False)  # assembled now: no flag needed
    a, b = onnx.score(SAMPLE[1])[0], torch_detector.score(SAMPLE[1])[0]
    assert [t.p_replaced for t in a.tokens] == pytest.approx([t.p_replaced for t in b.tokens], abs=1e-4)
