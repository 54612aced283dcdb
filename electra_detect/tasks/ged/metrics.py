"""Token-level GED metrics: precision, recall, F0.5, average precision, threshold tuning, recall per type."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from sklearn.metrics import average_precision_score, precision_recall_curve

from electra_detect.tasks.ged.alignment import TypedTokens
from electra_detect.tasks.ged.error_types import split_type
from electra_detect.tasks.ged.readers import GedSentence


def f_beta(precision: float, recall: float, beta: float = 0.5) -> float:
    if precision + recall == 0:
        return 0.0
    b2 = beta * beta
    return (1 + b2) * precision * recall / (b2 * precision + recall)


def token_metrics(labels: np.ndarray, scores: np.ndarray, threshold: float) -> dict[str, float]:
    predicted = scores >= threshold
    tp = int((predicted & (labels == 1)).sum())
    fp = int((predicted & (labels == 0)).sum())
    fn = int((~predicted & (labels == 1)).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    has_both = 0 < labels.sum() < len(labels)
    return {
        "precision": precision, "recall": recall, "f05": f_beta(precision, recall),
        "average_precision": float(average_precision_score(labels, scores)) if has_both else float("nan"),
        "threshold": threshold, "tokens": len(labels), "errors": int(labels.sum()), "flagged": int(predicted.sum()),
    }


def tune_threshold(labels: np.ndarray, scores: np.ndarray) -> float:
    """The score threshold that maximises token F0.5 on these labels."""
    if not 0 < labels.sum() < len(labels):
        return 0.5  # nothing to tune against
    precision, recall, thresholds = precision_recall_curve(labels, scores)
    f05 = np.array([f_beta(p, r) for p, r in zip(precision[:-1], recall[:-1], strict=True)])
    return float(thresholds[int(np.argmax(f05))]) if len(thresholds) else 0.5


def per_type_recall(sentences: Iterable[GedSentence], scores: Sequence[np.ndarray],
                    threshold: float) -> dict[str, dict[str, float]]:
    hits: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for sentence, values in zip(sentences, scores, strict=True):
        for types, value in zip(sentence.types, values, strict=True):
            for edit_type in set(types):
                hits[edit_type][0] += int(value >= threshold)
                hits[edit_type][1] += 1
    return {t: {"recall": found / total, "tokens": total} for t, (found, total) in sorted(hits.items())}


def type_metrics(sentences: Sequence[GedSentence], predictions: Sequence[TypedTokens],
                 threshold: float) -> dict[str, Any]:
    """Operation (M/R/U) and main-type accuracy on the error tokens the detector flags (``>= threshold``), and per
    gold main type its detection recall and type accuracy. A token's gold type is its first edit's."""
    detected = op_right = type_right = 0
    per_type: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # tokens, found, found and typed right
    for sentence, predicted in zip(sentences, predictions, strict=True):
        for position, edit_types in enumerate(sentence.types):
            if not sentence.labels[position] or not edit_types:
                continue
            op, main = split_type(edit_types[0])
            found = bool(predicted.scores[position] >= threshold)
            counts = per_type[main]
            counts[0] += 1
            counts[1] += found
            if found:
                detected += 1
                op_right += predicted.operations[position] == op
                type_right += predicted.types[position] == main
                counts[2] += predicted.types[position] == main
    return {"detected": detected, "operation_accuracy": op_right / max(detected, 1),
            "type_accuracy": type_right / max(detected, 1),
            "per_type": {name: {"tokens": n, "recall": found / n, "type_accuracy": right / max(found, 1)}
                         for name, (n, found, right) in sorted(per_type.items())}}


def shared_threshold(tunes: Sequence[tuple[np.ndarray, np.ndarray]], beta: float = 0.5) -> float:
    """The threshold with the highest mean token F-beta over several tuning sets (labels, scores): one threshold for
    several learner populations (the distillation trainer's, ``ged train``'s benchmarks'; beta 1 for ``picky``)."""
    grid = np.round(np.arange(0.02, 0.98, 0.005), 3)
    means = []
    for threshold in grid:
        values = []
        for labels, scores in tunes:
            flagged = scores >= threshold
            tp = float((flagged & (labels == 1)).sum())
            values.append(f_beta(tp / max(flagged.sum(), 1), tp / max(labels.sum(), 1), beta))
        means.append(np.mean(values))
    return float(grid[int(np.argmax(means))])


def flatten(sentences: Sequence[GedSentence], scores: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    labels = np.concatenate([np.asarray(s.labels) for s in sentences])
    return labels, np.concatenate(list(scores))
