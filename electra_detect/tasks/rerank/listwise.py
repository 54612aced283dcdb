"""A reranker trained on the task: token probabilities pooled into hypothesis features, weighted beside the
recogniser's score, the weights (and the encoder under them) learned list-wise by ``rerank train``.

    total = asr + Σ_f weight_f · feature_f

A reranker directory is a model directory whose ``discriminator/`` (the encoder fine-tuned on the recogniser's
lists) holds ``reranker.json`` beside the weights, as ``calibration.json`` and ``ged.json`` sit beside theirs: the
weights and how they were learned. ``rerank --model DIR`` and ``/v1/rerank`` use them as they are; the Detector
scores the tokens as for any model, with raw probabilities (the space the weights were learned in; a reranker has no
calibration).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.errors import RerankError
from electra_detect.fileio import atomic_write_json

RERANKER_FILE = "reranker.json"
# Pooled over a hypothesis's tokens (p = p(replaced)); "words" is its length. "count" has no gradient: only its
# weight learns, the encoder learns through the others.
FEATURES = ("words", "sum", "mean", "min", "expected", "count")
COUNT_THRESHOLD = 0.5
_EPS = 1e-7


def pooled_features(p: np.ndarray, words: int) -> np.ndarray:
    """A hypothesis's features, in FEATURES order, from its tokens' p(replaced) [tokens].

    sum / mean / min of log(1 - p), expected wrong tokens Σp, tokens with p ≥ 0.5; an empty hypothesis has 0s."""
    if len(p) == 0:
        return np.array([words, 0.0, 0.0, 0.0, 0.0, 0.0])
    log_ok = np.log1p(-np.clip(p, 0.0, 1.0 - _EPS))
    return np.array([words, log_ok.sum(), log_ok.mean(), log_ok.min(), p.sum(), float((p >= COUNT_THRESHOLD).sum())])


@dataclass
class Reranker:
    """The weights of ``total = asr + Σ weight_f · feature_f``; ``training`` records how they were learned."""

    weights: dict[str, float]
    training: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.weights) - set(FEATURES)
        if unknown:
            raise RerankError(f"{RERANKER_FILE}: unknown features {sorted(unknown)} (known: {', '.join(FEATURES)})")
        for name, value in self.weights.items():
            if not isinstance(value, int | float) or not np.isfinite(value):
                raise RerankError(f"{RERANKER_FILE}: weight {name!r} must be a finite number, got {value!r}")

    @property
    def vector(self) -> np.ndarray:
        return np.array([float(self.weights.get(name, 0.0)) for name in FEATURES])

    def lm_scores(self, results: Sequence[Any]) -> list[float]:
        """Σ weight_f · feature_f of each hypothesis (everything but the recogniser's score), from its Detector
        scores (``TextScores`` with raw probabilities)."""
        weights = self.vector
        return [float(pooled_features(np.array([t.p_replaced for t in r.tokens], dtype=np.float64),
                                      len(r.text.split())) @ weights) for r in results]

    @classmethod
    def load(cls, model_dir: str | Path) -> Reranker | None:
        """The reranker beside a model's weights (the Detector's ``model_dir``), or None for an ordinary model."""
        path = Path(model_dir) / RERANKER_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise RerankError(f"{path}: unreadable ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("weights"), dict):
            raise RerankError(f"{path}: no 'weights' object")
        return cls(data["weights"], data.get("training", {}))

    def save(self, model_dir: str | Path) -> Path:
        path = Path(model_dir) / RERANKER_FILE
        atomic_write_json(path, {"features": list(FEATURES), **asdict(self)})
        return path


def reranker_scorer(detector: Any, reranker: Reranker, batch_size: int = 64):
    """An ``LmScorer`` (fusion's interface): the reranker's Σ weight · feature of each text, from one Detector pass
    with raw probabilities."""
    def score(texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        return reranker.lm_scores(detector.score(list(texts), batch_size=batch_size, calibrated=False))

    return score
