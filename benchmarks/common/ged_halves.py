"""The GED sets every GED benchmark reads (FCE dev, JFLEG dev) in fixed tuning and report halves, a model's token
scores on them, F0.5 at a tuned threshold, and the per-sentence counts a paired bootstrap needs."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from electra_detect.detector import Detector
from electra_detect.tasks.ged.alignment import score_tokens
from electra_detect.tasks.ged.metrics import flatten, token_metrics, tune_threshold
from electra_detect.tasks.ged.readers import GedSentence, read_bea_json, read_parallel, split_sentences

BOOTSTRAP = 1000  # paired bootstrap resamples of sentences


# -- data ---------------------------------------------------------------------------------------------
def load_sets(fce: Path, jfleg: Path, seed: int) -> dict[str, dict[str, list[GedSentence]]]:
    """{"FCE dev": {"tune": [...], "report": [...]}, "JFLEG dev": {...}}."""
    sets = {"FCE dev": read_bea_json(fce / "fce-dev.json"),
            "JFLEG dev": read_parallel(jfleg / "dev.src", sorted(jfleg.glob("dev.ref[0-9]")), "majority")}
    out = {}
    for name, sentences in sets.items():
        tune, report = split_sentences(sentences, 0.5, seed)
        out[name] = {"all": sentences, "tune": tune, "report": report}
        print(f"{name}: {len(sentences)} sentences (tune {len(tune)}, report {len(report)})", file=sys.stderr)
    return out


# -- scoring -------------------------------------------------------------------------------------------
def token_scores(model: Path | str, sentences: list[GedSentence]) -> tuple[list[np.ndarray], float]:
    detector = Detector.load(model, engine="torch")
    started = time.perf_counter()
    scores = score_tokens(detector, sentences)
    return scores, len(sentences) / (time.perf_counter() - started)


def metrics(split: dict[str, list], tune_scores: list[np.ndarray], report_scores: list[np.ndarray]) -> dict:
    threshold = tune_threshold(*flatten(split["tune"], tune_scores))
    return {"threshold": threshold, **token_metrics(*flatten(split["report"], report_scores), threshold)}


def sentence_counts(sentences: list[GedSentence], scores: list[np.ndarray], threshold: float) -> dict[str, list[int]]:
    """Per-sentence TP/FP/FN token counts at ``threshold`` (what any bootstrap of F0.5 over sentences needs)."""
    out: dict[str, list[int]] = {"tp": [], "fp": [], "fn": []}
    for sentence, values in zip(sentences, scores, strict=True):
        flagged, gold = np.asarray(values) >= threshold, np.array(sentence.labels) == 1
        out["tp"].append(int((flagged & gold).sum()))
        out["fp"].append(int((flagged & ~gold).sum()))
        out["fn"].append(int((~flagged & gold).sum()))
    return out


def f05_of_counts(counts: dict[str, list[int]], resamples: np.ndarray) -> np.ndarray:
    """F0.5 of each bootstrap resample (rows of sentence indices) from per-sentence counts."""
    tp, fp, fn = (np.asarray(counts[key]) for key in ("tp", "fp", "fn"))
    t, p, n = tp[resamples].sum(-1), fp[resamples].sum(-1), fn[resamples].sum(-1)
    precision, recall = t / np.maximum(t + p, 1), t / np.maximum(t + n, 1)
    return (1.25 * precision * recall) / np.maximum(0.25 * precision + recall, 1e-12)


def f05_per_resample(sentences: list[GedSentence], scores: list[np.ndarray], threshold: float,
                     resamples: np.ndarray) -> np.ndarray:
    """F0.5 of each bootstrap resample (rows of sentence indices): per-sentence TP/FP/FN counts summed."""
    return f05_of_counts(sentence_counts(sentences, scores, threshold), resamples)


