"""How far a float32 score may move when only the order of the arithmetic changes.

Batching, padding, windows, another engine or another x86 host (AVX2 or AVX-512, with or without
VNNI) make torch and onnxruntime pick other kernels, which add the same float32 terms in another
order. Nothing here comes from what one host gives; each bound is float32's precision and the
text's length (docs/tolerances.md says how they were chosen):

- a token's probability: ``2**-16`` for a text of up to 64 tokens, growing as sqrt(n) beyond
  (attention adds n terms, and a reordered sum of n terms drifts like sqrt(n) ulps);
- a sum of log(1 - p) over tokens: each term's share, ``token / (1 - p)``, added up;
- flags: compared exactly, except for a word whose score lies within the token bound of the threshold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)  # 2**-23: one ulp at 1.0
# 2**-16 = 2**7 ulps at 1.0: a 12-layer float32 encoder whose reductions are reordered keeps about 16 bits
TOKEN_BITS_KEPT = 16
SHORT_TEXT = 64  # tokens: up to here the widest sum is a layer's own width, not attention's


def token_tolerance(n_tokens: int) -> float:
    """Bound on |p_a - p_b| for one token of a text of ``n_tokens`` tokens, scored in float32 twice."""
    return 2.0 ** -TOKEN_BITS_KEPT * math.sqrt(max(n_tokens, SHORT_TEXT) / SHORT_TEXT)


def sum_tolerance(probs: Sequence[float] | np.ndarray) -> float:
    """Bound on a sentence sum, sum(log(1 - p)): d/dp log(1 - p) = -1 / (1 - p), so each token adds its share."""
    p = np.clip(np.asarray(probs, dtype=np.float64), 0.0, 1.0 - 1e-12)
    return float(np.sum(token_tolerance(len(p)) / (1.0 - p))) + 64 * EPS32


def mean_tolerance(probs: Sequence[float] | np.ndarray) -> float:
    return sum_tolerance(probs) / max(len(probs), 1)


def assert_close_probs(a: Iterable[float], b: Iterable[float], n_tokens: int | None = None, what: str = "") -> None:
    """Token or word probabilities of one text, equal up to ``token_tolerance`` of the text's length."""
    a, b = np.asarray(list(a), dtype=np.float64), np.asarray(list(b), dtype=np.float64)
    assert a.shape == b.shape, what
    tolerance = token_tolerance(len(a) if n_tokens is None else n_tokens)
    worst = float(np.max(np.abs(a - b))) if a.size else 0.0
    assert worst <= tolerance, f"{what}: scores differ by {worst:.3g}, more than float32 allows ({tolerance:.3g})"


def assert_close_sums(a: float, b: float, probs: Sequence[float] | np.ndarray, what: str = "sentence sum") -> None:
    tolerance = sum_tolerance(probs)
    assert abs(a - b) <= tolerance, f"{what}: {a} vs {b} differ by {abs(a - b):.3g}, more than {tolerance:.3g}"

