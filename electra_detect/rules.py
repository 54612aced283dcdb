"""Rules beside the model: a rule-based checker's flags lift the model's word scores (``ged --with-rules``).

A word that a rule flags gets ``score + weight`` (capped at 1); the weight and the threshold for the lifted scores
are tuned together for F0.5 on labelled data and stored in the GED model's ``ged.json`` under ``"rules"``. The
rule signal is harper-py (Automattic's Harper, rule-based, in-process Rust): its grammar and spelling lints; style,
readability and enhancement lints are not errors and are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from electra_detect.errors import DetectorError, RulesUnavailable
from electra_detect.model_dir import GED_FILE, GedSettings
from electra_detect.scores import TextScores
from electra_detect.tasks.ged.alignment import flags_to_span_labels
from electra_detect.tasks.ged.metrics import token_metrics, tune_threshold

Span = tuple[int, int]
NOT_ERRORS = ("Readability", "Style", "Enhancement")  # harper lint kinds that are advice, not errors


def harper_spans(linter, harper, text: str, exclude_kinds=NOT_ERRORS) -> set[Span]:
    """The (start, end) code-point spans harper-py's ``linter`` flags in ``text``; a lint whose every suggestion
    inserts after its span ("add a comma after X") becomes the insertion point after it."""
    insert_after = harper.SuggestionKind.INSERT_AFTER
    spans: set[Span] = set()
    for lint in linter.lint(text, language=harper.Language.PLAINTEXT):  # the default is Markdown
        if lint.lint_kind in exclude_kinds:
            continue
        start, end = lint.span.start, lint.span.end
        if lint.suggestions and all(s.kind == insert_after for s in lint.suggestions):
            start = end
        spans.add((start, end))
    return spans


def harper_flagger() -> Callable[[Sequence[str]], list[list[Span]]]:
    """texts -> per text, the sorted spans harper-py flags (:func:`harper_spans`)."""
    try:
        import harper
    except ImportError as exc:
        raise RulesUnavailable("--with-rules needs harper-py: pip install 'electra-detect[rules]'") from exc
    linter = harper.Linter(harper.Dialect["AMERICAN"])  # ~1 s: builds the dictionary; reused
    return lambda texts: [sorted(harper_spans(linter, harper, text)) for text in texts]


def lift(scores: np.ndarray, flags: np.ndarray, weight: float) -> np.ndarray:
    """Word scores with each rule-flagged word raised by ``weight`` (capped at 1)."""
    return np.minimum(1.0, np.asarray(scores, dtype=float) + weight * np.asarray(flags, dtype=float))


@dataclass
class RuleSetting:
    weight: float
    threshold: float

    def to_json(self) -> dict[str, float]:
        return {"weight": self.weight, "threshold": self.threshold}


def tune_rules(labels: np.ndarray, scores: np.ndarray, flags: np.ndarray,
               weights: Sequence[float] = tuple(np.round(np.arange(0, 1.01, 0.1), 2))) -> RuleSetting:
    """The weight (and its F0.5 threshold) that gives the best F0.5 on these labelled words."""
    best: tuple[float, RuleSetting] | None = None
    for weight in weights:
        lifted = lift(scores, flags, weight)
        threshold = tune_threshold(labels, lifted)
        value = token_metrics(labels, lifted, threshold)["f05"]
        if best is None or value > best[0]:
            best = (value, RuleSetting(float(weight), float(threshold)))
    assert best is not None
    return best[1]


def rule_setting(model_dir: str | Path, ged: GedSettings | None = None) -> RuleSetting:
    """The weight and threshold tuned for this GED model (``ged.json`` ``"rules"``, benchmarks/quality/ged_rules.py):
    from ``ged``, the model directory's settings a Detector read at load, else read from ``model_dir`` now."""
    try:
        ged = ged or GedSettings.read(model_dir)
    except DetectorError as exc:
        ged, reason = None, str(exc)
    if ged is not None and ged.rules is not None:
        return RuleSetting(*ged.rules)
    reason = "no \"rules\" entry" if ged is not None else reason
    raise RulesUnavailable(f"{Path(model_dir) / GED_FILE} has no tuned rules setting (python -m "
                           f"benchmarks.quality.ged_rules --model {model_dir} --write-setting): {reason}")


def with_rules(scored: Sequence[TextScores], flag: Callable[[Sequence[str]], list[list[Span]]],
               weight: float) -> list[TextScores]:
    """Each text's word scores lifted by ``weight`` where ``flag`` (e.g. :func:`harper_flagger`) marks the word."""
    out = []
    for text, spans in zip(scored, flag([s.text for s in scored]), strict=True):
        hits = flags_to_span_labels([(w.start, w.end) for w in text.words], spans)
        lifted = lift(np.array([w.score for w in text.words]), hits, weight)
        words = [replace(w, score=float(s)) for w, s in zip(text.words, lifted, strict=True)]
        out.append(replace(text, words=words))
    return out
