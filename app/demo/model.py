"""The demo's model: the Detector loaded on the engine it can run, and the names the page's header gives it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from electra_detect.app.demo.errors import DemoError


def find_export(model: str | Path) -> Path | None:
    """The ONNX export dir ``electra-detect export`` wrote for this model (or the model is one), else None."""
    from electra_detect.errors import DetectorError
    from electra_detect.onnx.manifest import find_export_dir

    try:
        return find_export_dir(model)
    except DetectorError:
        return None


def load_detector(model: str | Path, engine: str = "auto", device: str | None = None,
                  variant: str | None = None, task: str = "score") -> tuple[Any, str]:
    """The Detector on the engine ``Detector.load`` chooses (``auto``: the ONNX export when the model dir
    holds a usable one, else torch). Returns (detector, note); the note says why the torch engine was used
    when ONNX was possible but failed, so the page never hides a fallback."""
    from electra_detect.detector import Detector
    from electra_detect.errors import DetectorError

    try:
        detector = Detector.load(model, device=device, engine=engine, variant=variant, task=task, assemble=False)
    except DetectorError as exc:
        raise DemoError(str(exc)) from exc
    return detector, detector.note


def engine_provider(engine: Any) -> str:
    """The execution provider (ONNX Runtime) or device (torch) the engine runs on (``Engine.provider``)."""
    return str(engine.provider)


def engine_label(engine: Any) -> str:
    """``torch``, or ``onnx (optimized)``: the engine and, for ONNX, which exported variant runs."""
    name = str(getattr(engine, "name", type(engine).__name__))
    variant = getattr(engine, "variant", None)
    return f"{name} ({variant})" if variant else name


def model_label(detector: Any) -> str:
    """A readable name: the model's name (``Detector.name``, as every front says it), with its preset and size
    when the run says them."""
    model_dir, run_dir, name = Path(detector.model_dir), detector.home_dir, detector.name
    details = []
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        details.append(f"hidden {config.get('hidden_size')} × {config.get('num_hidden_layers')} layers")
    except (OSError, ValueError):
        pass
    try:
        run = json.loads((run_dir / "run_config.json").read_text(encoding="utf-8"))
        preset = run.get("model", {}).get("preset")
        if preset:
            details.insert(0, f"preset {preset}")
    except (OSError, ValueError, AttributeError):
        pass
    return f"{name} ({', '.join(details)})" if details else name
