"""A model directory's conventions: where its weights, tokenizer and tuned threshold live.

Below the ``Detector`` and the exporter, which both read model directories this way.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class GedSettings:
    """What a model's ``ged.json`` (written by ``ged train``) says the check flags at: the threshold per level and
    the probability space it was tuned in, and the tuned harper-py setting (``rules``: weight, threshold) when there
    is one. A model without the file flags at 0.5, raw."""

    threshold: float = 0.5
    space: str = "raw"
    levels: tuple[tuple[str, float], ...] = ()  # ("picky", t): a level's own threshold (tuned to flag more)
    rules: tuple[float, float] | None = None
    found: bool = False  # whether the model directory holds a ged.json

    @classmethod
    def read(cls, model_dir: str | Path) -> GedSettings:
        """The settings of ``model_dir``'s ``ged.json`` (the defaults when there is none); a file that cannot be read
        is a :class:`DetectorError` naming it."""
        path = Path(model_dir) / GED_FILE
        if not path.exists():
            return cls()
        try:
            spec = json.loads(path.read_text())
            threshold, space = float(spec["threshold"]), spec.get("space", "raw")
            levels = tuple((name, float(value)) for name, value in (spec.get("levels") or {}).items()
                           if name in LEVELS)
            rules = spec.get("rules")
            rules = (float(rules["weight"]), float(rules["threshold"])) if isinstance(rules, dict) else None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DetectorError(f"{path} is unreadable: {exc}") from exc
        if space not in SPACES:
            raise DetectorError(f"{path}: unknown probability space {space!r}; expected raw or calibrated")
        return cls(threshold, space, levels, rules, True)

    def at(self, level: str = "default") -> float:
        """The threshold tuned for ``level``, in the space it was tuned in (``picky``: its own when the file names
        one, else the default's)."""
        if level not in LEVELS:
            raise DetectorError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")
        return dict(self.levels).get(level, self.threshold) if level != "default" else self.threshold

    def threshold_for(self, calibrator: Any = None, calibrated: bool = True, level: str = "default") -> float:
        """The flag threshold at ``level`` in the space scores are in: calibrated when ``calibrated`` and there is a
        ``calibrator``, else raw; carried across spaces by the calibrator's monotone map, so a word is flagged alike
        in both."""
        threshold = self.at(level)
        wanted = "calibrated" if calibrated and calibrator is not None else "raw"
        if self.space == wanted or calibrator is None:
            return threshold
        return carried(threshold, calibrator, to_calibrated=wanted == "calibrated")


def carried(threshold: float, calibrator: Any, to_calibrated: bool) -> float:
    """``threshold`` carried between the raw and the calibrated probability space by ``calibrator``'s monotone
    map of logits."""
    p = min(max(threshold, 1e-12), 1 - 1e-12)
    if to_calibrated:  # raw p -> its logit -> the calibrated probability of that logit
        return float(np.asarray(calibrator.transform(np.array([math.log(p / (1 - p))])))[0])
    low, high = -60.0, 60.0  # calibrated -> raw: the smallest logit whose calibrated probability reaches p
    for _ in range(80):
        middle = (low + high) / 2
        if float(np.asarray(calibrator.transform(np.array([middle])))[0]) >= p:
            high = middle
        else:
            low = middle
    return float(1 / (1 + math.exp(-high)))


@dataclass
class ModelFiles:
    """A model directory as a Detector runs it, read once when the Detector loads; everything after reads this
    record, never the directory again: where the weights (or the export) are, the calibrator bound to them, the ONNX
    export the engine runs (``onnx.locate.ExportSource``; None on torch), ``ged.json`` and, for a tag model, its tag
    vocabulary (``edit_tags.EditTags``)."""

    path: Path
    ged: GedSettings = field(default_factory=GedSettings)
    calibrator: Any = None
    export: Any = None
    tags: Any = None

    @functools.cached_property
    def weights_sha256(self) -> str:
        """The weights' hash (what calibration.json and exports are bound to), computed on first use only."""
        if self.export is not None and self.export.weights_dir is not None:
            return self.export.weights_sha256
        from electra_detect.calibrators import weights_sha256

        return weights_sha256(self.path) if any(self.path.glob("*.safetensors")) else ""


def tuned_threshold(model_dir: str | Path, calibrator: Any = None, calibrated: bool = True,
                    level: str = "default") -> float:
    """The flag threshold of ``model_dir``'s ``ged.json`` (:class:`GedSettings`) for scores in the space
    ``calibrated`` and ``calibrator`` give; for the exporter, which reads a directory without a Detector."""
    return GedSettings.read(model_dir).threshold_for(calibrator, calibrated, level)
