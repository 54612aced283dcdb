"""The ONNX cache proves what it serves: every input of an export in its key, every served file checked against
its manifest, a corrupt file exported again (or refused when there are no weights), and exports that take turns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from electra_detect.detector import Detector
from electra_detect.errors import DetectorError
from electra_detect.onnx import cache
from electra_detect.onnx.manifest import VARIANT_FILES
from tests.tolerance import assert_close_probs

TEXT = "The farmer saw a red house yesterday."


def replace_keeping_stamp(path: Path, data: bytes) -> None:
    """Rewrite a file with bytes of the same length and put its mtime back (as reproducible images do)."""
    info = path.stat()
    assert len(data) == info.st_size
    path.write_bytes(data)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def flipped(data: bytes) -> bytes:
    """Another model of the same size: the last bytes of the graph's weights changed."""
    return data[:-64] + bytes((b + 1) % 256 for b in data[-64:])


def test_a_replaced_cached_variant_with_the_same_size_and_mtime_is_exported_again(
        run_copy: Path, empty_cache: Path) -> None:
    detector = Detector.load(run_copy, engine="onnx", variant="int8")
    expected = [w.score for w in detector.score(TEXT)[0].words]
    target = detector.engine.export_dir / VARIANT_FILES["int8"]
    good = target.read_bytes()
    replace_keeping_stamp(target, flipped(good))
    with pytest.warns(RuntimeWarning, match="model_int8.onnx is not the file that was exported"):
        again = Detector.load(run_copy, engine="onnx", variant="int8")
    assert_close_probs([w.score for w in again.score(TEXT)[0].words], expected, len(detector.score(TEXT)[0].tokens))
    assert target.read_bytes() != flipped(good)  # the cache holds a fresh export now


def test_a_truncated_cached_variant_is_detected(run_copy: Path, empty_cache: Path) -> None:
    detector = Detector.load(run_copy, engine="onnx", variant="fp32")
    target = detector.engine.export_dir / VARIANT_FILES["fp32"]
    target.write_bytes(target.read_bytes()[:1000])
    with pytest.warns(RuntimeWarning, match="model.onnx is not the file that was exported"):
        Detector.load(run_copy, engine="auto", variant="fp32")


def test_a_tampered_shipped_export_without_weights_is_refused(run_copy: Path, empty_cache: Path,
                                                              tmp_path: Path) -> None:
    from electra_detect.onnx.export import export_model

    shipped = export_model(run_copy, tmp_path / "shipped", variants=("fp32", "int8"), progress=False).out_dir
    chosen = Detector.load(shipped, engine="onnx").engine.variant  # the one the export measured fastest here
    target = shipped / VARIANT_FILES[chosen]
    replace_keeping_stamp(target, flipped(target.read_bytes()))
    for engine in ("onnx", "auto"):
        with pytest.raises(DetectorError, match=f"refusing a corrupt ONNX export: .*{target.name}.*no weights"):
            Detector.load(shipped, engine=engine)


def test_a_tampered_shipped_export_with_weights_is_exported_once_into_the_cache(
        run_copy: Path, empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every later load finds the corrupt shipped export again: the cache's export of the weights serves from the
    second load on, without exporting again."""
    from electra_detect.onnx import locate
    from electra_detect.onnx.export import export_model

    shipped = export_model(run_copy, run_copy / "onnx", variants=("fp32",), progress=False).out_dir
    target = shipped / VARIANT_FILES["fp32"]
    replace_keeping_stamp(target, flipped(target.read_bytes()))
    exports: list[Path] = []
    real = locate.export_to_cache
    monkeypatch.setattr(locate, "export_to_cache", lambda model_dir, out, log: (exports.append(out),
                                                                               real(model_dir, out, log)))
    for _ in range(2):
        with pytest.warns(RuntimeWarning, match="model.onnx is not the file that was exported"):
            detector = Detector.load(run_copy, engine="onnx", variant="fp32")
        assert detector.engine.export_dir != shipped and detector.score(TEXT)[0].words
    assert len(exports) == 1


def test_a_tokenizer_change_is_a_new_export(run_copy: Path, empty_cache: Path) -> None:
    first = Detector.load(run_copy, engine="onnx").engine.export_dir
    spec = json.loads((run_copy / "tokenizer.json").read_text())
    assert spec["normalizer"]["lowercase"] is True
    spec["normalizer"]["lowercase"] = False  # "He" is no longer read as "he"
    (run_copy / "tokenizer.json").write_text(json.dumps(spec))
    second = Detector.load(run_copy, engine="onnx").engine.export_dir
    assert second != first
    assert json.loads((second / "tokenizer.json").read_text())["normalizer"]["lowercase"] is False


def test_the_key_holds_the_tools_versions(run_copy: Path, empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before, real = cache.export_key(run_copy), cache.tool_versions()
    assert {"onnxruntime", "torch", "transformers"} <= set(real)
    monkeypatch.setattr(cache, "tool_versions", lambda: {**real, "onnxruntime": "0.0.0"})
    assert cache.export_key(run_copy) != before


def test_a_remembered_hash_is_not_believed_after_a_rewrite(tmp_path: Path, empty_cache: Path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(b"a" * 4096)
    first = cache.file_sha256(path)
    replace_keeping_stamp(path, b"b" * 4096)
    assert cache.file_sha256(path) != first


@pytest.mark.slow
def test_two_processes_exporting_into_one_cache_both_succeed(run_copy: Path, empty_cache: Path) -> None:
    code = ("import sys; from electra_detect.detector import Detector; "
            "d = Detector.load(sys.argv[1], engine='onnx'); print(d.engine.export_dir)")
    env = {**os.environ}
    racers = [subprocess.Popen([sys.executable, "-c", code, str(run_copy)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [racer.communicate(timeout=600) for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], [err[-2000:] for _, err in outs]
    assert outs[0][0] == outs[1][0]
    exports = [line for _, err in outs for line in err.splitlines() if line.startswith("exporting ")]
    assert len(exports) == 1  # the second waited for the first and used its export
