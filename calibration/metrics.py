"""Calibration metrics for binary probabilities: ECE (equal-width and adaptive bins), MCE, Brier, NLL.

ECE = sum over bins of (bin share) * |mean confidence - observed frequency|, with the confidence of
a binary prediction taken as p(positive) itself (a reliability diagram of p(replaced)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from electra_detect.calibration import CalibrationError


@dataclass
class ReliabilityBins:
    edges: np.ndarray  # [n_bins + 1]
    counts: np.ndarray  # tokens per bin
    mean_prob: np.ndarray  # mean predicted probability per bin (nan when empty)
    frequency: np.ndarray  # observed positive rate per bin (nan when empty)


def _as_arrays(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(probs, dtype=np.float64).ravel()
    y = np.asarray(labels, dtype=np.float64).ravel()
    if p.shape != y.shape or not len(p):
        raise CalibrationError("probabilities and labels must be non-empty and of the same length")
    if ((p < 0) | (p > 1)).any():
        raise CalibrationError("probabilities must lie in [0, 1]")
    return p, y


def reliability_bins(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15,
                     adaptive: bool = False) -> ReliabilityBins:
    """Equal-width bins on [0, 1], or (adaptive) bins holding equal numbers of tokens."""
    p, y = _as_arrays(probs, labels)
    edges = np.quantile(p, np.linspace(0, 1, n_bins + 1)) if adaptive else np.linspace(0, 1, n_bins + 1)
    edges[0], edges[-1] = 0.0, 1.0
    index = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, n_bins - 1)
    counts = np.bincount(index, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_prob = np.bincount(index, weights=p, minlength=n_bins) / counts
        frequency = np.bincount(index, weights=y, minlength=n_bins) / counts
    return ReliabilityBins(edges, counts, mean_prob, frequency)


def ece(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15, adaptive: bool = False) -> float:
    bins = reliability_bins(probs, labels, n_bins, adaptive)
    filled = bins.counts > 0
    gaps = np.abs(bins.mean_prob[filled] - bins.frequency[filled])
    return float((bins.counts[filled] * gaps).sum() / bins.counts.sum())


def mce(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15) -> float:
    bins = reliability_bins(probs, labels, n_bins)
    filled = bins.counts > 0
    return float(np.abs(bins.mean_prob[filled] - bins.frequency[filled]).max())


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    p, y = _as_arrays(probs, labels)
    return float(np.mean((p - y) ** 2))


def nll(probs: np.ndarray, labels: np.ndarray, eps: float = 1e-12) -> float:
    p, y = _as_arrays(probs, labels)
    p = np.clip(p, eps, 1 - eps)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def all_metrics(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15) -> dict[str, float]:
    from sklearn.metrics import roc_auc_score

    p, y = _as_arrays(probs, labels)
    both = 0 < y.sum() < len(y)
    return {"ece": ece(p, y, n_bins), "ece_adaptive": ece(p, y, n_bins, adaptive=True), "mce": mce(p, y, n_bins),
            "brier": brier(p, y), "nll": nll(p, y), "auc": float(roc_auc_score(y, p)) if both else float("nan"),
            "tokens": len(p), "positive_rate": float(y.mean())}
