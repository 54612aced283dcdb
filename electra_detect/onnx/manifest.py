"""An export dir as written by ``electra_detect.onnx.export``: its manifest (``export.json``: the variants and the
source weights' hash), its variant files, tokenizer and calibration; and where a model path keeps its export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from electra_detect.errors import DetectorError

MANIFEST = "export.json"
VARIANT_FILES = {"fp32": "model.onnx", "optimized": "model_optimized.onnx", "fp16": "model_fp16.onnx",
                 "int8": "model_int8.onnx"}


def find_export_dir(path: str | Path) -> Path:
    """The export dir for ``path``: the dir itself, or ``onnx/`` in it or in its ``discriminator/``."""
    path = Path(path)
    if not path.exists():
        raise DetectorError(f"model path not found: {path}")
    for candidate in (path, path / "onnx", path / "discriminator" / "onnx"):
        if (candidate / MANIFEST).exists():
            return candidate
    raise DetectorError(f"no ONNX export in {path} (no {MANIFEST}); create one with "
                        f"`electra-detect export --model {path}`")


def read_manifest(export_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((Path(export_dir) / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DetectorError(f"{export_dir}/{MANIFEST} is unreadable: {exc}") from exc


def verified_path(export_dir: Path, variant: str, manifest: dict[str, Any] | None = None) -> Path:
    """The variant's file, once its bytes (and those of the small files the export copied: config, tokenizer)
    match the SHA-256 the manifest recorded; ``CorruptExport`` naming the file otherwise. Hashes are remembered
    per file stamp (``cache.file_sha256``), so a process re-reads only what changed since it was last checked.
    ``manifest``: the export's, when the caller has read it."""
    from electra_detect.errors import CorruptExport
    from electra_detect.onnx.cache import file_sha256

    export_dir = Path(export_dir)
    manifest = manifest if manifest is not None else read_manifest(export_dir)
    name = VARIANT_FILES[variant]
    expected = {name: (manifest.get("variants", {}).get(variant) or {}).get("sha256"), **manifest.get("files", {})}
    for file, sha in expected.items():
        path = export_dir / file
        if not sha:
            raise CorruptExport(f"{path}: the export's manifest records no hash for it (an export older than the "
                                f"check, or edited)")
        if not path.exists():
            raise CorruptExport(f"{path} is missing from the export")
        if file_sha256(path) != sha:
            raise CorruptExport(f"{path} is not the file that was exported (its SHA-256 differs from the "
                                f"manifest's: replaced, truncated or edited)")
    return export_dir / name


def load_export_calibration(export_dir: Path, manifest: dict[str, Any] | None = None):
    """The calibration for the exported weights, checked against the source-weights hash the manifest
    recorded (there are no safetensors here).

    An export inside its model dir (``<model>/onnx``) prefers the model dir's ``calibration.json`` when that
    one is for the same weights: a ``calibrate`` run after ``export`` writes there, and the torch and ONNX
    engines must then still agree. Otherwise the copy that travelled with the export is used."""
    from electra_detect.calibrators import CALIBRATION_FILE, read_calibration

    expected = (manifest if manifest is not None else read_manifest(export_dir)).get("source_weights_sha256", "")
    path = Path(export_dir) / CALIBRATION_FILE
    beside_weights = Path(export_dir).parent / CALIBRATION_FILE
    if beside_weights.exists():
        try:
            if json.loads(beside_weights.read_text()).get("weights_sha256") == expected:
                path = beside_weights
        except json.JSONDecodeError:
            pass  # a broken file beside the weights is the torch engine's error to report; keep the export's copy
    if not path.exists():
        return None
    try:
        return read_calibration(path, expected, "re-export after calibrating")
    except ValueError as exc:
        raise DetectorError(str(exc)) from exc


def load_tokenizer(export_dir: Path, manifest: dict[str, Any] | None = None) -> Any:
    """The export's tokenizer, without transformers when the export carries its backend (``manifest``: the export's,
    when the caller has read it)."""
    from electra_detect.tokenizer import load_tokenizer as load

    return load(export_dir, (manifest if manifest is not None else read_manifest(export_dir)).get("tokenizer"))
