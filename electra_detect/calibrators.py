"""Post-hoc calibration of discriminator logits: temperature, Platt and isotonic (scikit-learn).

Each method is fitted on one split and maps raw logits to calibrated probabilities; all are
JSON-serialisable so a ``calibration.json`` can travel with a model. They live in the core
because ``Detector`` applies them; fitting workflows, metrics and plots live in ``calibration/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.errors import DetectorError  # a calibration file the model cannot use


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=np.float64)))


def _bce(logits: np.ndarray, labels: np.ndarray) -> float:
    # log(1 + e^z) - y z, computed stably
    z = np.asarray(logits, dtype=np.float64)
    return float(np.mean(np.logaddexp(0.0, z) - labels * z))


@dataclass
class TemperatureScaling:
    """p = sigmoid(z / T): one parameter, fitted by NLL; never changes the ranking (AUC)."""

    temperature: float = 1.0

    def fit(self, logits: np.ndarray, labels: np.ndarray) -> TemperatureScaling:
        from scipy.optimize import minimize_scalar  # fitting only: scoring never pays scipy's import

        y = np.asarray(labels, dtype=np.float64)
        result = minimize_scalar(lambda log_t: _bce(logits / np.exp(log_t), y), bounds=(-5, 5), method="bounded",
                                 options={"xatol": 1e-6})
        self.temperature = float(np.exp(result.x))
        return self

    def transform(self, logits: np.ndarray) -> np.ndarray:
        return sigmoid(np.asarray(logits) / self.temperature)

    def to_dict(self) -> dict[str, Any]:
        return {"method": "temperature", "temperature": self.temperature}


@dataclass
class PlattScaling:
    """p = sigmoid(a z + b), fitted by (unregularised) logistic regression on the logit."""

    a: float = 1.0
    b: float = 0.0

    def fit(self, logits: np.ndarray, labels: np.ndarray) -> PlattScaling:
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=1e6).fit(np.asarray(logits).reshape(-1, 1), np.asarray(labels))
        self.a, self.b = float(model.coef_[0, 0]), float(model.intercept_[0])
        return self

    def transform(self, logits: np.ndarray) -> np.ndarray:
        return sigmoid(self.a * np.asarray(logits) + self.b)

    def to_dict(self) -> dict[str, Any]:
        return {"method": "platt", "a": self.a, "b": self.b}


@dataclass
class IsotonicCalibration:
    """A monotone step function of the logit (scikit-learn), stored as its breakpoints."""

    x: list[float] | None = None
    y: list[float] | None = None

    def fit(self, logits: np.ndarray, labels: np.ndarray) -> IsotonicCalibration:
        from sklearn.isotonic import IsotonicRegression

        model = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(np.asarray(logits), labels)
        self.x, self.y = model.X_thresholds_.tolist(), model.y_thresholds_.tolist()
        return self

    def transform(self, logits: np.ndarray) -> np.ndarray:
        return np.interp(np.asarray(logits, dtype=np.float64), self.x, self.y)

    def to_dict(self) -> dict[str, Any]:
        return {"method": "isotonic", "x": self.x, "y": self.y}


METHODS = {"temperature": TemperatureScaling, "platt": PlattScaling, "isotonic": IsotonicCalibration}


def from_dict(raw: dict[str, Any]):
    kind = raw.get("method")
    if kind not in METHODS:
        raise DetectorError(f"unknown calibration method {kind!r}; expected one of {sorted(METHODS)}")
    return METHODS[kind](**{k: v for k, v in raw.items() if k != "method"})


CALIBRATION_FILE = "calibration.json"


def weights_sha256(model_dir: Path) -> str:
    """Fingerprint of a model's weights: a calibration file is only valid for these exact weights."""
    from electra_detect.fileio import sha256_files

    return sha256_files(sorted(Path(model_dir).glob("*.safetensors")))


def save_calibration(model_dir: Path, calibrator, report: dict[str, Any] | None = None) -> Path:
    from electra_detect.fileio import atomic_write_json

    path = Path(model_dir) / CALIBRATION_FILE
    atomic_write_json(path, {**calibrator.to_dict(), "weights_sha256": weights_sha256(model_dir),
                             "report": report or {}})
    return path


def read_calibration(path: Path, expected_weights_sha256: str, remedy: str):
    """The calibrator in ``path`` if it was fitted for the weights with that hash; ``ValueError`` otherwise.

    One reader for both engines: the torch engine hashes the weights beside the file, the ONNX engine
    takes the hash its export manifest recorded."""
    import json

    try:
        raw = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise DetectorError(f"{path} is not valid JSON: {exc}") from exc
    if raw.get("weights_sha256") != expected_weights_sha256:
        raise DetectorError(f"{path} was fitted for other weights; {remedy}, or load the model with calibrated=False")
    return from_dict({k: v for k, v in raw.items() if k not in ("weights_sha256", "report")})


def load_calibration(model_dir: Path):
    """The calibrator stored beside the weights, or None; a file for other weights is rejected."""
    path = Path(model_dir) / CALIBRATION_FILE
    if not path.exists():
        return None
    return read_calibration(path, weights_sha256(model_dir), "refit it with `electra-detect calibrate`")
