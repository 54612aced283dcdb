"""A Triton Inference Server model repository from an ONNX export (``export --triton``)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from electra_detect.errors import ExportError
from electra_detect.fileio import atomic_write_dir, atomic_write_text
from electra_detect.onnx.export import INPUT_NAMES, PARITY_FILE, TRAVELLING_FILES
from electra_detect.onnx.manifest import MANIFEST, VARIANT_FILES


def triton_config(name: str, max_batch_size: int = 64, preferred: Sequence[int] = (8, 16, 32),
                  max_queue_delay_us: int = 2000, inputs: Sequence[str] = INPUT_NAMES) -> str:
    """config.pbtxt for Triton's onnxruntime backend: [batch, seq] int64 inputs, [batch, seq] logits,
    server-side dynamic batching (Triton pads nothing: clients send equal-length rows per request)."""
    inputs = ",\n".join(f'  {{\n    name: "{n}"\n    data_type: TYPE_INT64\n    dims: [ -1 ]\n  }}' for n in inputs)
    sizes = ", ".join(str(s) for s in preferred if s <= max_batch_size)
    return (f'name: "{name}"\nbackend: "onnxruntime"\nmax_batch_size: {max_batch_size}\n'
            f"input [\n{inputs}\n]\n"
            f'output [\n  {{\n    name: "logits"\n    data_type: TYPE_FP32\n    dims: [ -1 ]\n  }}\n]\n'
            f"dynamic_batching {{\n  preferred_batch_size: [ {sizes} ]\n"
            f"  max_queue_delay_microseconds: {max_queue_delay_us}\n}}\n"
            f"version_policy: {{ latest {{ num_versions: 1 }} }}\n")


def write_triton_repo(export_dir: str | Path, repo: str | Path, variant: str = "optimized",
                      name: str = "electra_detect", max_batch_size: int = 64, max_queue_delay_us: int = 2000) -> Path:
    """A Triton model repository: ``repo/name/config.pbtxt``, ``repo/name/1/model.onnx``, and the
    tokenizer, config and calibration under ``repo/name/tokenizer/`` (clients tokenize; Triton skips
    non-numeric folders). Written atomically as a whole model folder."""
    from electra_detect.onnx.manifest import read_manifest

    export_dir = Path(export_dir)
    manifest = read_manifest(export_dir)
    exported = ", ".join(manifest.get("variants", {}))
    if variant not in manifest.get("variants", {}):
        raise ExportError(f"variant {variant!r} is not in {export_dir}; exported: {exported}")
    if not name.replace("_", "").replace("-", "").isalnum():
        raise ExportError(f"bad Triton model name {name!r}: letters, digits, - and _ only")
    if max_batch_size < 1:
        raise ExportError("max batch size must be >= 1")

    def fill(tmp: Path) -> None:
        (tmp / "1").mkdir()
        shutil.copy2(export_dir / VARIANT_FILES[variant], tmp / "1" / "model.onnx")
        (tmp / "tokenizer").mkdir()
        for file in (*TRAVELLING_FILES, MANIFEST, PARITY_FILE, "backend_tokenizer.json"):
            if (export_dir / file).exists():
                shutil.copy2(export_dir / file, tmp / "tokenizer" / file)
        config = triton_config(name, max_batch_size, max_queue_delay_us=max_queue_delay_us,  # io stays fp32
                               inputs=manifest.get("inputs", INPUT_NAMES))
        atomic_write_text(tmp / "config.pbtxt", config)

    target = Path(repo) / name
    atomic_write_dir(target, fill)
    return target
