"""A model directory's conventions: where its weights, tokenizer and tuned threshold live.

Below the ``Detector`` and the exporter, which both read model directories this way.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.errors import DetectorError


def resolve_model_dir(path: str | Path) -> Path:
    """Accept a run dir (uses its ``discriminator/``), any HF ELECTRA discriminator dir, or an ONNX
    export dir (``export.json`` in place of safetensors weights; only the onnx engine runs it)."""
    path = Path(path)
    if not path.exists():
        raise DetectorError(f"model path not found: {path}")
    if (path / "discriminator").is_dir():
        path = path / "discriminator"
    if not (path / "config.json").exists():
        raise DetectorError(f"{path} is not a model directory (no config.json); train one with "
                            f"`electra-detect pretrain` or pass an ELECTRA discriminator directory")
    if not any((path / name).exists() for name in ("tokenizer.json", "vocab.txt")):
        raise DetectorError(f"{path} has no tokenizer (tokenizer.json or vocab.txt)")
    if not any(path.glob("*.safetensors")) and not (path / "export.json").exists():
        raise DetectorError(f"{path} has no safetensors weights (pickled weights are not loaded)")
    return path


GED_FILE = "ged.json"
GED_DIR = "ged"  # a model directory's fine-tuned GED discriminator (`ged train --out MODEL/ged`)
TASKS = ("score", "ged")
SPACES = ("raw", "calibrated")  # the probability space a ged.json threshold was tuned in
LEVELS = ("default", "picky")  # LanguageTool's levels; picky flags more (its threshold: ged.json "levels")


def task_model_path(path: str | Path, task: str = "score") -> Path:
    """The directory a task runs on: ``ged`` takes a model directory's fine-tuned ``ged/`` when it holds one;
    ``score`` (and any explicit discriminator or ``ged/`` path) takes what it is given."""
    if task not in TASKS:
        raise DetectorError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")
    path = Path(path)
    if task == "ged" and (path / GED_DIR / "config.json").exists():
        return path / GED_DIR
    return path


def check_threshold(value: float, name: str = "threshold") -> float:
    """A flag threshold someone gave: a finite probability in [0, 1] (nan and 5 are refused)."""
    if not (isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 1):
        raise DetectorError(f"{name} must be a number in [0, 1], got {value:g}")
    return float(value)


def tuned_threshold(model_dir: str | Path, calibrator: Any = None, calibrated: bool = True,
                    level: str = "default") -> float:
    """The flag threshold for scores of ``model_dir`` (its ``ged.json``, written by ``ged train``, else 0.5),
    at ``level``: ``picky`` takes ged.json's ``"levels": {"picky": t}`` (tuned to flag more), the default
    threshold where the file names none;
    in the probability space the scores are in: calibrated when ``calibrated`` and there is a ``calibrator``,
    else raw. ``ged.json`` says which space its threshold was tuned in (``"space"``; files without it: raw);
    the threshold is carried across by the calibrator's monotone map, so a word is flagged alike in both."""
    if level not in LEVELS:
        raise DetectorError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")
    path = Path(model_dir) / GED_FILE
    if not path.exists():
        return 0.5
    try:
        spec = json.loads(path.read_text())
        threshold, space = float(spec["threshold"]), spec.get("space", "raw")
        if level != "default":
            threshold = float((spec.get("levels") or {}).get(level, threshold))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DetectorError(f"{path} is unreadable: {exc}") from exc
    if space not in SPACES:
        raise DetectorError(f"{path}: unknown probability space {space!r}; expected raw or calibrated")
    wanted = "calibrated" if calibrated and calibrator is not None else "raw"
    if space == wanted or calibrator is None:
        return threshold
    p = min(max(threshold, 1e-12), 1 - 1e-12)
    if wanted == "calibrated":  # raw p -> its logit -> the calibrated probability of that logit
        return float(np.asarray(calibrator.transform(np.array([math.log(p / (1 - p))])))[0])
    low, high = -60.0, 60.0  # calibrated -> raw: the smallest logit whose calibrated probability reaches p
    for _ in range(80):
        middle = (low + high) / 2
        if float(np.asarray(calibrator.transform(np.array([middle])))[0]) >= p:
            high = middle
        else:
            low = middle
    return float(1 / (1 + math.exp(-high)))
