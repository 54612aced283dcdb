"""Inference that starts at once: the ONNX export made on first use and cached by the weights' hash, the torch-free
path, the scoring pipeline (order, bounds, errors) and the engine line of the CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from electra_detect.calibrators import TemperatureScaling, save_calibration
from electra_detect.detector import Detector
from electra_detect.errors import CliError, DetectorError
from electra_detect.onnx import locate as inference
from electra_detect.onnx.cache import export_key
from tests.tolerance import assert_close_probs, assert_close_sums

TEXTS = ["The farmer saw a red house yesterday.", "A doctor", "Every student painted the river again and again.",
         " ".join(["The children visited the quiet village before the storm."] * 12)]  # several windows


def test_first_use_exports_once_into_the_cache_keyed_by_the_weights(run_copy: Path, empty_cache: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    reference = Detector.load(run_copy)  # torch
    detector = Detector.load(run_copy, engine="auto")
    key = export_key(run_copy)
    assert detector.engine.name == "onnx" and detector.engine.export_dir == empty_cache / key
    assert detector.model_dir == run_copy  # ged.json and calibration.json are read beside the weights
    chosen = json.loads((empty_cache / key / "export.json").read_text())["preferred"]["cpu"]  # measured there
    assert detector.engine.variant == chosen and detector.note == ""
    assert detector.describe() == f"engine: onnxruntime {chosen} (CPU) from {empty_cache / key}"
    exact = Detector.load(run_copy, engine="onnx", variant="fp32")
    for a, b in zip(exact.score(TEXTS), reference.score(TEXTS), strict=True):
        assert_close_probs([t.p_replaced for t in a.tokens], [t.p_replaced for t in b.tokens])

    def no_second_export(*args, **kwargs):
        raise AssertionError("exported again although the cache holds this model's export")

    monkeypatch.setattr(inference, "export_to_cache", no_second_export)
    assert Detector.load(run_copy, engine="auto").engine.export_dir == empty_cache / key
    (run_copy / "model.safetensors").write_bytes((run_copy / "model.safetensors").read_bytes() + b" ")
    with pytest.raises(AssertionError, match="exported again"):  # new weights, new hash: the old export is not used
        inference.locate(run_copy)


def test_calibration_of_a_cached_export_is_read_beside_the_weights(run_copy: Path, empty_cache: Path) -> None:
    Detector.load(run_copy, engine="auto")  # exported (no calibration yet) ...
    save_calibration(run_copy, TemperatureScaling(4.0))  # ... then calibrated: the cache copy knows nothing of it
    torch_det, onnx_det = Detector.load(run_copy), Detector.load(run_copy, engine="onnx", variant="fp32")
    assert onnx_det.calibration == "temperature"
    a, b = torch_det.score(TEXTS[0])[0], onnx_det.score(TEXTS[0])[0]
    assert_close_probs([t.p_replaced for t in b.tokens], [t.p_replaced for t in a.tokens])
    (run_copy / "calibration.json").write_text(json.dumps({"method": "temperature", "temperature": 2.0,
                                                           "weights_sha256": "0" * 64}))
    with pytest.raises(DetectorError, match="fitted for other weights"):
        Detector.load(run_copy, engine="onnx")


def test_int8_failing_the_parity_gate_is_left_out_of_the_cache_by_the_export_rule(
        run_copy: Path, empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from electra_detect.onnx import export

    calls: list[list[str]] = []
    real = export.export_model

    def one_export_with_int8_failing(*args, **kwargs):
        calls.append(list(kwargs["variants"]))
        return real(*args, **{**kwargs, "min_agreement": 1.01})

    monkeypatch.setattr(export, "export_model", one_export_with_int8_failing)
    messages: list[str] = []
    source = inference.locate(run_copy, log=messages.append)
    assert calls == [list(inference.CACHE_VARIANTS)]  # one export, no retry: the export's own rule drops int8
    assert source.origin == "exported" and messages[-1].startswith("left out of the export, it failed the parity")
    assert "int8: " in messages[-1]
    assert sorted(json.loads((source.export_dir / "export.json").read_text())["variants"]) == ["fp32", "optimized"]
    assert not list(empty_cache.glob("*.parity_failed.json"))
    assert Detector.load(run_copy, engine="auto").engine.variant in ("fp32", "optimized")  # no int8 to run


def test_no_export_to_be_had_falls_back_to_torch_loudly(run_copy: Path, empty_cache: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(model_dir, target, log):
        raise DetectorError("cannot export here (no onnx)")

    monkeypatch.setattr(inference, "export_to_cache", broken)
    detector = Detector.load(run_copy, engine="auto")
    assert detector.engine.name == "torch" and "cannot export here" in detector.note
    assert detector.describe().splitlines()[1].startswith("⚠️ the ONNX engine cannot serve this model")
    with pytest.raises(DetectorError, match="cannot export here"):
        Detector.load(run_copy, engine="onnx")


def test_the_onnx_path_imports_neither_torch_nor_transformers(micro_run: Path) -> None:
    """The CLI verb end to end, from the cache filled by an earlier process: no torch, no transformers."""
    env = {**os.environ}
    subprocess.run([sys.executable, "-m", "electra_detect.cli", "ged", "--model", str(micro_run), "warm the cache"],
                   check=True, capture_output=True, env=env, timeout=300)
    code = ("import sys; from electra_detect.cli import main; "
            f"rc = main(['ged', '--model', {str(micro_run)!r}, 'The farmer saw a red house.']); "
            "print('RESULT', rc, 'torch' in sys.modules, 'transformers' in sys.modules, 'scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=True)
    assert out.stdout.splitlines()[-1] == "RESULT 0 False False False"
    assert re.match(r"engine: onnxruntime (int8|fp32|optimized) \(CPU\) from ", out.stderr)  # the measured variant


def test_stream_keeps_input_order_and_equals_score(micro_run: Path) -> None:
    # fp32: int8's dynamic quantisation scales activations per model call, so its scores move slightly with the
    # batch a text shares; exact numerics make the comparison exact
    detector = Detector.load(micro_run, engine="auto", variant="fp32", threads=1)
    texts = [f"{TEXTS[i % 4]} {'again ' * (i % 7)}".strip() for i in range(60)]  # lengths mixed across batches
    batches = [texts[i:i + 7] for i in range(0, len(texts), 7)]
    expected = [s.to_dict() for s in detector.score(texts)]
    for workers in (1, 3):
        streamed = [s.to_dict() for batch in detector.stream(iter(batches), workers=workers) for s in batch]
        assert [s["text"] for s in streamed] == texts
        assert len(streamed) == len(expected)
        for a, b in zip(streamed, expected, strict=True):
            assert [(w["word"], w["start"], w["end"]) for w in a["words"]] == \
                   [(w["word"], w["start"], w["end"]) for w in b["words"]]
            probs = [t["p_replaced"] for t in b["tokens"]]
            assert_close_probs([w["score"] for w in a["words"]], [w["score"] for w in b["words"]], len(probs))
            assert_close_sums(a["sentence_sum"], b["sentence_sum"], probs)


def test_stream_reads_ahead_a_bounded_number_of_batches_and_passes_errors_on(micro_run: Path) -> None:
    detector = Detector.load(micro_run, engine="auto", threads=1)
    read = []

    def endless():
        while True:
            read.append(1)
            yield ["The farmer saw a red house."]

    stream = detector.stream(endless(), workers=2)
    next(stream)
    stream.close()  # the consumer stops early: the reader stops, nothing hangs
    # the yielded batch, workers + 1 queued, one blocked on the full queue, one more read while close() drains it
    assert len(read) <= 1 + (2 + 1) + 1 + 1

    def failing():
        yield ["fine"]
        raise CliError("a line that cannot be read")  # what text_batches raises

    with pytest.raises(CliError):
        list(detector.stream(failing(), workers=2))


def test_cli_prints_the_engine_line_and_refuses_bad_workers(micro_run: Path, capsys) -> None:
    from electra_detect.cli import main

    assert main(["ged", "--output-format", "json", "--model", str(micro_run), "--engine", "torch",
                 "He go to school."]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith(f"engine: torch (cpu) from {micro_run / 'discriminator'}")
    assert json.loads(captured.out)["text"] == "He go to school."
    assert main(["ged", "--model", str(micro_run), "--workers", "-1", "He go to school."]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --workers must be >= 0 (0 = one per core)"]


def test_cache_root_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert inference.cache_root() == tmp_path / "electra-detect" / "onnx"
    monkeypatch.setenv("XDG_CACHE_HOME", "")  # empty counts as unset (XDG base directory spec)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert inference.cache_root() == tmp_path / "home" / ".cache" / "electra-detect" / "onnx"
