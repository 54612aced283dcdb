"""One flag threshold per universal POS tag.

The discriminator flags some word classes more readily than others on clean text (see
``calibration/pos_bias.py``). One threshold per universal POS tag can undo part of that bias; it
is adopted only when it beats the single threshold on held-out folds of the tuning data, since
~17 extra parameters overfit a few hundred sentences easily.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from electra_detect.tasks.ged.metrics import f_beta, token_metrics, tune_threshold
from electra_detect.tasks.ged.nlp import load_tagger
from electra_detect.tasks.ged.readers import GedSentence

NEVER = 2.0  # a threshold no probability reaches: the tag is never flagged


def tag_pos(sentences: Sequence[GedSentence], nlp=None) -> list[list[str]]:
    """Universal POS tag of every whitespace token, tagged in context with the tokens kept as they are."""
    from spacy.tokens import Doc

    nlp = nlp or load_tagger()
    docs = (Doc(nlp.vocab, words=list(s.tokens)) for s in sentences)
    return [[token.pos_ for token in doc] for doc in nlp.pipe(docs)]


def _f05_counts(tp: np.ndarray, fp: np.ndarray, errors: int) -> np.ndarray:
    tp, fp = np.asarray(tp, dtype=np.float64), np.asarray(fp, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        recall = tp / errors if errors else np.zeros_like(tp)
        f = 1.25 * precision * recall / (0.25 * precision + recall)
    return np.nan_to_num(f)


def thresholds_for(pos: Sequence[str], thresholds: dict[str, float], default: float) -> np.ndarray:
    """Per-token thresholds: the token's tag threshold, else ``default``."""
    return np.array([thresholds.get(tag, default) for tag in pos], dtype=np.float64)


def tune_pos_thresholds(labels: np.ndarray, scores: np.ndarray, pos: Sequence[str], min_errors: int = 10,
                        passes: int = 3) -> tuple[float, dict[str, float]]:
    """(global threshold, {tag: threshold}) maximising token F0.5 over all tokens together.

    Starts from the best single threshold, then coordinate ascent: each tag in turn takes the
    threshold (one of its own scores, or never-flag) that maximises the *overall* F0.5 with the
    other tags fixed. Tags with fewer than ``min_errors`` errors keep the global threshold.
    """
    labels = np.asarray(labels).astype(bool)
    scores = np.asarray(scores, dtype=np.float64)
    pos_arr = np.asarray(list(pos))
    errors = int(labels.sum())
    base = tune_threshold(labels.astype(int), scores)
    current = {tag: base for tag in np.unique(pos_arr)}
    tunable = [t for t in current if labels[pos_arr == t].sum() >= min_errors]
    candidates = {}
    for tag in tunable:  # flagged counts for every candidate threshold of this tag, by sorting
        member = pos_arr == tag
        s, y = scores[member], labels[member]
        order = np.argsort(-s, kind="stable")
        s, y = s[order], y[order]
        last = np.r_[s[1:] != s[:-1], True]  # flag all scores >= s[i]: counts at the last tie
        tp = np.cumsum(y)[last]
        fp = np.cumsum(~y)[last]
        candidates[tag] = (np.r_[NEVER, s[last]], np.r_[0, tp], np.r_[0, fp])

    def counts(tag: str, threshold: float) -> np.ndarray:
        member = pos_arr == tag
        flagged = scores[member] >= threshold
        return np.array([(flagged & labels[member]).sum(), (flagged & ~labels[member]).sum()])

    own = {tag: counts(tag, threshold) for tag, threshold in current.items()}  # (tp, fp) per tag
    for _ in range(passes):
        changed = False
        for tag in tunable:
            total = sum(own.values())
            rest = total - own[tag]
            values, tp, fp = candidates[tag]
            f = _f05_counts(rest[0] + tp, rest[1] + fp, errors)
            best = int(np.argmax(f))
            if f[best] > _f05_counts(total[:1], total[1:], errors)[0] + 1e-12:
                current[tag], own[tag], changed = float(values[best]), np.array([tp[best], fp[best]]), True
        if not changed:
            break
    return base, {tag: float(t) for tag, t in current.items() if t != base}


def select_pos_thresholds(sentences: Sequence[GedSentence], scores: Sequence[np.ndarray], pos: Sequence[list[str]],
                          seed: int = 13, min_errors: int = 10) -> dict:
    """Per-POS thresholds and whether to use them, decided on the tuning data alone.

    Two-fold cross-validation inside the tuning sentences: tune global and per-POS thresholds on
    one fold, count TP/FP/FN on the other, pool both folds. Per-POS thresholds are adopted when
    their pooled F0.5 beats the single threshold's; the thresholds returned are then re-tuned on
    all tuning sentences.
    """
    order = list(range(len(sentences)))
    random.Random(seed).shuffle(order)
    folds = [sorted(order[: len(order) // 2]), sorted(order[len(order) // 2:])]
    pooled = {"global": np.zeros(3), "per_pos": np.zeros(3)}  # tp, fp, fn

    def gather(idx: Sequence[int]) -> tuple[np.ndarray, np.ndarray, list[str]]:
        return (np.concatenate([np.asarray(sentences[i].labels) for i in idx]),
                np.concatenate([scores[i] for i in idx]), [t for i in idx for t in pos[i]])

    for fit_idx, held_idx in (folds, folds[::-1]):
        if not fit_idx or not held_idx:
            continue
        base, per_tag = tune_pos_thresholds(*gather(fit_idx), min_errors=min_errors)
        labels, values, tags = gather(held_idx)
        for name, threshold in (("global", np.full(len(values), base)),
                                ("per_pos", thresholds_for(tags, per_tag, base))):
            flagged = values >= threshold
            pooled[name] += [(flagged & (labels == 1)).sum(), (flagged & (labels == 0)).sum(),
                             (~flagged & (labels == 1)).sum()]
    cv = {}
    for name, (tp, fp, fn) in pooled.items():
        cv[name] = f_beta(tp / (tp + fp) if tp + fp else 0.0, tp / (tp + fn) if tp + fn else 0.0)
    base, per_tag = tune_pos_thresholds(*gather(range(len(sentences))), min_errors=min_errors)
    return {"adopted": bool(cv["per_pos"] > cv["global"]), "cv_f05_global": cv["global"],
            "cv_f05_per_pos": cv["per_pos"], "global_threshold": base, "thresholds": per_tag,
            "min_errors": min_errors}


def pos_threshold_metrics(labels: np.ndarray, scores: np.ndarray, pos: Sequence[str], thresholds: dict[str, float],
                          default: float) -> dict[str, float]:
    """:func:`token_metrics` with one threshold per token (from its POS tag)."""
    report = token_metrics(labels, scores, thresholds_for(pos, thresholds, default))
    report["threshold"] = default
    report["pos_thresholds"] = thresholds
    return report
