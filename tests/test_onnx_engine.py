"""The onnxruntime engine: same outputs as the torch engine, provider reporting, CUDA fallback, errors."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from electra_detect.detector import Detector
from electra_detect.errors import DetectorError
from electra_detect.onnx import engine as onnx_engine
from electra_detect.onnx.export import export_model
from tests.tolerance import assert_close_probs, assert_close_sums, mean_tolerance

TEXTS = ["The farmer saw a red house yesterday.", "A doctor", "Every student painted the river again and again.",
         " ".join(["The children visited the quiet village before the storm."] * 12)]  # several windows


@pytest.fixture(scope="module")
def export_dir(micro_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_model(micro_run, tmp_path_factory.mktemp("onnx") / "onnx", progress=False).out_dir


@pytest.fixture(scope="module")
def torch_detector(micro_run: Path) -> Detector:
    return Detector.load(micro_run)


@pytest.mark.parametrize("variant", ["fp32", "optimized"])
def test_same_outputs_as_torch_engine(export_dir: Path, torch_detector: Detector, variant: str) -> None:
    detector = Detector.load(export_dir, engine="onnx", variant=variant, device="cpu")
    assert detector.engine.name == "onnx" and detector.engine.variant == variant
    assert detector.max_length == torch_detector.max_length
    for a, b in zip(torch_detector.score(TEXTS, batch_size=3), detector.score(TEXTS, batch_size=3), strict=True):
        assert [t.token for t in a.tokens] == [t.token for t in b.tokens]
        probs = [t.p_replaced for t in a.tokens]  # two engines: float32's bounds (tests/tolerance.py)
        assert_close_probs([t.p_replaced for t in b.tokens], probs)
        assert [(w.word, w.start, w.end) for w in a.words] == [(w.word, w.start, w.end) for w in b.words]
        assert abs(b.sentence_mean - a.sentence_mean) <= mean_tolerance(probs)
        assert_close_sums(b.sentence_sum, a.sentence_sum, probs)


def test_raw_logits_match(export_dir: Path, torch_detector: Detector) -> None:
    detector = Detector.load(export_dir, engine="onnx", variant="fp32", device="cpu")
    ids, mask = torch_detector.pad_batch(torch_detector.window_ids(TEXTS))
    import numpy as np

    diff = np.abs(detector.raw_logits(ids, mask) - torch_detector.raw_logits(ids, mask))[mask.astype(bool)]
    assert diff.max() <= 1e-4


@pytest.mark.parametrize("variant", ["fp16", "int8"])
def test_reduced_precision_variants_close(export_dir: Path, torch_detector: Detector, variant: str) -> None:
    detector = Detector.load(export_dir, engine="onnx", variant=variant, device="cpu")
    a, b = torch_detector.score(TEXTS[0])[0], detector.score(TEXTS[0])[0]
    assert [t.p_replaced for t in b.tokens] == pytest.approx([t.p_replaced for t in a.tokens], abs=0.02)


def measured_cpu_choice(export_dir: Path) -> str:
    """The variant the export measured fastest on this machine's CPU (the engine runs it by default)."""
    return json.loads((export_dir / "export.json").read_text())["preferred"]["cpu"]


def test_cpu_provider_reported_and_default_variant(export_dir: Path, tmp_path: Path) -> None:
    detector = Detector.load(export_dir, engine="onnx")
    assert detector.engine.provider == "CPUExecutionProvider"
    chosen = measured_cpu_choice(export_dir)
    assert detector.engine.variant == chosen
    assert detector.describe() == f"engine: onnxruntime {chosen} (CPU) from {export_dir}"
    exact = tmp_path / "exact"  # an export whose int8 failed the gate (so holds none), measured nowhere: exact fp32
    shutil.copytree(export_dir, exact)
    (exact / "model_int8.onnx").unlink()
    manifest = json.loads((exact / "export.json").read_text())
    del manifest["preferred"]
    (exact / "export.json").write_text(json.dumps(manifest))
    assert Detector.load(exact, engine="onnx").engine.variant == "fp32"


def test_the_measured_variant_runs_on_cpu_and_cuda_keeps_its_end_to_end_order() -> None:
    from electra_detect.onnx.preference import pick_variant

    exported = ["fp32", "optimized", "fp16", "int8"]
    assert pick_variant({}, exported, cuda=False) == "int8" and pick_variant({}, exported, cuda=True) == "optimized"
    measured = {"preferred": {"cpu": "optimized", "cuda": "fp16"}}  # "cuda": what an older export timed
    assert pick_variant(measured, exported, cuda=False) == "optimized"
    assert pick_variant(measured, exported, cuda=True) == "optimized"  # the engine-alone timing is not read
    assert pick_variant({}, ["fp16", "int8"], cuda=True) == "fp16"
    assert pick_variant({}, ["int8"], cuda=True) == "int8"  # int8 on CUDA only when nothing else was exported
    assert pick_variant({"preferred": {"cpu": "fp16"}}, ["fp32", "int8"], cuda=False) == "int8"  # not exported


def test_cuda_request_without_cuda_warns_once_then_falls_back(export_dir: Path, monkeypatch) -> None:
    import onnxruntime as ort

    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CPUExecutionProvider"])
    monkeypatch.setattr(onnx_engine, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = Detector.load(export_dir, engine="onnx", device="cuda")
        Detector.load(export_dir, engine="onnx", device="cuda")
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "CUDA was requested" in messages[0]
    assert first.engine.provider == "CPUExecutionProvider"
    with pytest.raises(DetectorError, match="no CUDAExecutionProvider"):
        Detector.load(export_dir, engine="onnx", device="cuda", require_gpu=True)


def test_cuda_listed_but_unusable_falls_back_loudly(export_dir: Path, monkeypatch) -> None:
    """onnxruntime-gpu on a machine without a GPU: CUDA is listed, the session silently runs on CPU."""
    import onnxruntime as ort

    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(onnx_engine, "_warned", set())
    with pytest.warns(RuntimeWarning, match="could not use it"):
        detector = Detector.load(export_dir, engine="onnx")  # auto device: tries CUDA first
    assert detector.engine.provider == "CPUExecutionProvider"
    assert detector.engine.variant == measured_cpu_choice(export_dir)  # re-picked for CPU (fp16 is the GPU default)
    with pytest.raises(DetectorError, match="could not use it"):
        Detector.load(export_dir, engine="onnx", require_gpu=True)


def test_errors(export_dir: Path, micro_run: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    with pytest.raises(DetectorError, match="no ONNX export"):
        Detector.load(micro_run, engine="onnx", export=False)
    with pytest.raises(DetectorError, match="unknown engine"):
        Detector.load(micro_run, engine="tensorrt")
    with pytest.raises(DetectorError, match="ONNX export only"):
        Detector.load(export_dir)  # torch engine on a folder without weights
    with pytest.raises(DetectorError, match="unknown device"):
        Detector.load(export_dir, engine="onnx", device="tpu")
    partial = tmp_path / "partial"
    shutil.copytree(export_dir, partial)
    (partial / "model_int8.onnx").unlink()
    with pytest.raises(DetectorError, match="variant 'int8' is not in"):
        Detector.load(partial, engine="onnx", variant="int8")
    (partial / "model.onnx").write_bytes(b"not an onnx model")  # checked against the manifest before loading
    with pytest.raises(DetectorError, match="refusing a corrupt ONNX export: .*model.onnx is not the file"):
        Detector.load(partial, engine="onnx", variant="fp32")


def test_calibration_travels_and_is_checked(micro_run: Path, tmp_path: Path) -> None:
    import numpy as np

    from electra_detect.calibrators import TemperatureScaling, save_calibration

    source = tmp_path / "disc"
    shutil.copytree(micro_run / "discriminator", source)
    rng = np.random.default_rng(1)
    save_calibration(source, TemperatureScaling().fit(rng.normal(size=300) * 3, (rng.random(300) < 0.5) * 1.0))
    out = export_model(source, tmp_path / "onnx", variants=["fp32"], progress=False).out_dir
    torch_cal, onnx_cal = Detector.load(source), Detector.load(out, engine="onnx")
    assert onnx_cal.calibration == torch_cal.calibration == "temperature"
    a, b = torch_cal.score(TEXTS[0])[0], onnx_cal.score(TEXTS[0])[0]
    assert_close_probs([t.p_replaced for t in b.tokens], [t.p_replaced for t in a.tokens])
    raw = Detector.load(out, engine="onnx", calibrated=False)
    assert raw.calibration == "raw"
    stale = json.loads((out / "calibration.json").read_text())
    stale["weights_sha256"] = "0" * 64
    (out / "calibration.json").write_text(json.dumps(stale))
    with pytest.raises(DetectorError, match="other weights"):
        Detector.load(out, engine="onnx")


def test_calibrating_after_export_reaches_the_onnx_engine(micro_run: Path, tmp_path: Path) -> None:
    """`calibrate` after `export` rewrites the model dir's file; both engines must use the new one."""
    import numpy as np

    from electra_detect.calibrators import TemperatureScaling, save_calibration

    source = tmp_path / "disc"
    shutil.copytree(micro_run / "discriminator", source)
    save_calibration(source, TemperatureScaling(temperature=1.0))
    export_model(source, source / "onnx", variants=["fp32"], progress=False)  # shipped beside it, with the T = 1 copy
    save_calibration(source, TemperatureScaling(temperature=4.0))  # a later `calibrate`
    torch_det, onnx_det = Detector.load(source), Detector.load(source, engine="onnx")
    a, b = torch_det.score(TEXTS[0])[0], onnx_det.score(TEXTS[0])[0]
    assert_close_probs([t.p_replaced for t in b.tokens], [t.p_replaced for t in a.tokens])
    uncalibrated = Detector.load(source, engine="onnx", calibrated=False).score(TEXTS[0])[0]
    raw = np.array([t.p_replaced for t in uncalibrated.tokens])
    logits = np.log(raw / (1 - raw))
    assert_close_probs([t.p_replaced for t in b.tokens], 1 / (1 + np.exp(-logits / 4.0)))  # T = 4, not 1


def test_onnx_path_never_imports_torch(export_dir: Path) -> None:
    """The point of the ONNX engine: score without PyTorch (nor transformers, which would import it)."""
    import subprocess
    import sys

    code = ("import sys; from electra_detect.detector import Detector; "
            f"d = Detector.load({str(export_dir)!r}, engine='onnx'); s = d.score(['The farmer saw a red house.'])[0]; "
            "assert s.tokens and s.words; print(type(d.tokenizer).__name__, 'torch' in sys.modules, "
            "'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["LightTokenizer", "False", "False"]
