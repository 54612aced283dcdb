"""``ged eval``'s report: token metrics of a Detector on labelled sentences, the threshold given, tuned or the
model's, optionally with per-POS thresholds chosen on the tuning data."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from electra_detect.detector import Detector
from electra_detect.tasks.ged.alignment import score_tokens, score_typed_tokens
from electra_detect.tasks.ged.metrics import flatten, per_type_recall, token_metrics, tune_threshold, type_metrics
from electra_detect.tasks.ged.nlp import load_tagger
from electra_detect.tasks.ged.pos_thresholds import (
    pos_threshold_metrics,
    select_pos_thresholds,
    tag_pos,
    thresholds_for,
)
from electra_detect.tasks.ged.readers import GedSentence


def evaluate(detector: Detector, sentences: Sequence[GedSentence], tuning: Sequence[GedSentence] = (),
             threshold: float | None = None, per_pos: bool = False, seed: int = 13) -> dict[str, Any]:
    """Precision, recall, F0.5 and average precision on ``sentences`` at ``threshold``: given, else tuned for
    max F0.5 on ``tuning``, else the model's. ``per_pos``: also tune per-POS thresholds on ``tuning`` (which
    it needs, with no ``threshold``); the headline metrics are then those of the choice adopted."""
    given = threshold
    needs_tuning = tuning and (threshold is None or per_pos)
    tune_scores = score_tokens(detector, tuning) if needs_tuning else []
    if threshold is None and tuning:
        threshold = tune_threshold(*flatten(tuning, tune_scores))
    threshold = detector.threshold() if threshold is None else threshold
    started = time.perf_counter()
    typed = score_typed_tokens(detector, sentences) if detector.channels else None  # the same pass, with types
    scores = [t.scores for t in typed] if typed else score_tokens(detector, sentences)
    seconds = time.perf_counter() - started
    report = token_metrics(*flatten(sentences, scores), threshold)
    report.update(sentences=len(sentences), seconds=round(seconds, 3),
                  sentences_per_s=round(len(sentences) / max(seconds, 1e-9), 2),
                  threshold_source="given" if given is not None else ("tuned" if tuning else "model"),
                  per_type=per_type_recall(sentences, scores, threshold), calibration=detector.calibration,
                  model_dir=str(detector.model_dir))
    if typed:  # operation / main-type accuracy on the detected error tokens, per main type
        report["types"] = type_metrics(sentences, typed, threshold)
    if per_pos:
        report = _with_pos_thresholds(report, tuning, tune_scores, sentences, scores, seed)
    return report


def _with_pos_thresholds(report: dict[str, Any], tuning: Sequence[GedSentence], tune_scores: list[np.ndarray],
                         sentences: Sequence[GedSentence], scores: list[np.ndarray], seed: int) -> dict[str, Any]:
    """Choose single vs per-POS thresholds on the tuning data; report both on the report data.

    The headline metrics are those of the adopted choice (``threshold_source`` says which)."""
    nlp = load_tagger()
    choice = select_pos_thresholds(tuning, tune_scores, tag_pos(tuning, nlp), seed=seed)
    labels, values = flatten(sentences, scores)
    pos = [tag for tags in tag_pos(sentences, nlp) for tag in tags]
    per_pos = pos_threshold_metrics(labels, values, pos, choice["thresholds"], choice["global_threshold"])
    choice.update(report_single={k: report[k] for k in ("f05", "precision", "recall", "threshold")},
                  report_per_pos={k: per_pos[k] for k in ("f05", "precision", "recall")})
    if choice["adopted"]:
        report.update({k: per_pos[k] for k in ("precision", "recall", "f05", "flagged")},
                      threshold_source="tuned per POS")
        flags = values >= thresholds_for(pos, choice["thresholds"], choice["global_threshold"])
        start = 0
        per_sentence = []
        for sentence in sentences:  # per-type recall under the per-POS flags: flags as 0/1 scores
            per_sentence.append(flags[start:start + len(sentence.tokens)].astype(float))
            start += len(sentence.tokens)
        report["per_type"] = per_type_recall(sentences, per_sentence, 0.5)
    report["per_pos"] = choice
    return report


# -- what ``ged`` shows ---------------------------------------------------------------------------------------------
def shown_token_labels(sentences: Sequence[GedSentence], flagged: Sequence[Sequence[Any]]) -> list[np.ndarray]:
    """0/1 per whitespace token of each sentence: 1 where a word ``ged`` shows (``FlaggedWord``: its character
    span in the sentence's text, ``" ".join(tokens)``) overlaps the token."""
    from electra_detect.tasks.ged.alignment import flags_to_token_labels

    return [flags_to_token_labels(s.tokens, [(w.start, w.end) for w in words])
            for s, words in zip(sentences, flagged, strict=True)]


def shown_metrics(sentences: Sequence[GedSentence], flagged: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """Token precision, recall and F0.5 of what ``ged`` shows, its flags (words shown) and flags per 1,000 tokens."""
    labels, values = flatten(sentences, shown_token_labels(sentences, flagged))
    report = token_metrics(labels, values, 0.5)
    flags = sum(len(words) for words in flagged)
    report.update(threshold=None, shown=flags, flags_per_1000=round(1000 * flags / max(len(labels), 1), 3),
                  sentences=len(sentences))
    return report


def evaluate_shown(detector: Detector, sentences: Sequence[GedSentence], options: Any = None,
                   checker: Any = None, batch_size: int = 64) -> dict[str, Any]:
    """``ged eval``'s metrics of what ``ged`` shows: each sentence checked as ``ged`` checks it (``GedChecker`` with
    ``options``, default ``build_ged_options()``: the model's threshold at the default level, its quiet rule, the
    writer's dictionary left out), a token counted flagged when a shown word overlaps it. The flag ``ged eval
    --as-shown`` would call this (with ``--level`` and ``--threshold`` passed to ``build_ged_options``)."""
    from electra_detect.tasks.ged.check import GedChecker
    from electra_detect.tasks.ged.options import build_ged_options

    options = options or build_ged_options(use_dictionary_file=False)
    checker = checker or GedChecker(detector)
    started = time.perf_counter()
    flagged: list[list[Any]] = []
    texts = [s.text for s in sentences]
    for i in range(0, len(texts), batch_size):
        flagged += checker.check_texts(texts[i:i + batch_size], options)
    seconds = time.perf_counter() - started
    report = shown_metrics(sentences, flagged)
    report.update(threshold=checker.threshold(options), level=options.level, seconds=round(seconds, 3),
                  threshold_source="as shown", model_dir=str(detector.model_dir))
    return report
