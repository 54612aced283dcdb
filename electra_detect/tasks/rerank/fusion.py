"""Fusion of the recogniser's score with a sentence score: hypotheses scored, ranked and chosen, weights tuned
on corpus WER, and the chosen hypothesis's words with their probability of being wrong.

    total = asr_score + lm_weight * lm_score + length_weight * words
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from electra_detect.errors import RerankError
from electra_detect.tasks.rerank.listwise import Reranker, reranker_scorer
from electra_detect.tasks.rerank.nbest import Utterance
from electra_detect.tasks.rerank.wer import word_errors


@dataclass
class Scored:
    """An utterance with its features: one row per hypothesis."""

    utt: Utterance
    asr: np.ndarray
    lm: np.ndarray
    length: np.ndarray
    errors: np.ndarray | None = None  # word errors against the reference, per hypothesis
    ref_words: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def word_count(text: str) -> int:
    return len(text.split())


def electra_scores(detector: Any, texts: Sequence[str], score: str = "sum", batch_size: int = 64,
                   calibrated: bool = True) -> list[float]:
    """The Detector's sentence score for each text (higher = more fluent)."""
    if score not in ("sum", "mean"):
        raise RerankError(f"unknown sentence score {score!r} (use 'sum' or 'mean')")
    if not texts:
        return []
    results = detector.score(list(texts), batch_size=batch_size, calibrated=calibrated)
    return [sentence_score(r, score) for r in results]


def sentence_score(result: Any, score: str = "sum") -> float:
    """``sum`` or ``mean`` of log(1 - p) over a text's tokens (a ``TextScores``)."""
    return result.sentence_sum if score == "sum" else result.sentence_mean


def rerank_hypotheses(detector: Any, hyps: list[tuple[str, float | None]], lm_weight: float = 1.0,
                      length_weight: float = 0.0, score: str = "sum", calibrated: bool = True,
                      chosen: HypothesisScore | None = None) -> list[dict]:
    """Rows best first: text, asr_score (None -> 0.0), the model's :class:`HypothesisScore` (``chosen``, else
    the model's own choice: a `rerank train` model's learned ``reranker_score``, else the sentence ``score`` as
    ``electra_score``), length (words), total, rank (1 = best)."""
    _check_rerank(hyps, lm_weight, length_weight)
    chosen = chosen or HypothesisScore.for_model(detector.model_dir, score)
    texts = [text for text, _ in hyps]
    results = detector.score(texts, batch_size=64, calibrated=calibrated and chosen.calibrated)
    return rank_hypotheses(hyps, chosen.of(results), lm_weight, length_weight, chosen.name)


@dataclass
class HypothesisScore:
    """The sentence score hypotheses are ranked by, chosen once for a model: a `rerank train` model's learned score
    (``reranker.json`` beside its weights), else the Detector's sentence score (``sum`` or ``mean`` of
    log(1 - p)). Every front (CLI, server, demo) takes the same choice from here."""

    reranker: Reranker | None
    score: str = "sum"

    def __post_init__(self) -> None:
        if self.score not in ("sum", "mean"):
            raise RerankError(f"unknown sentence score {self.score!r} (use 'sum' or 'mean')")

    @classmethod
    def for_model(cls, model_dir: Any, score: str = "sum") -> HypothesisScore:
        """The choice for the model at ``model_dir`` (a Detector's ``model_dir``)."""
        return cls(Reranker.load(model_dir), score)

    @property
    def name(self) -> str:
        """The score's key in a row: ``reranker_score`` or ``electra_score``."""
        return "reranker_score" if self.reranker is not None else "electra_score"

    @property
    def calibrated(self) -> bool:
        """Whether the scores may be calibrated: a reranker's weights were learned on raw probabilities."""
        return self.reranker is None

    def of(self, results: Sequence[Any]) -> list[float]:
        """The score of each scored hypothesis (``TextScores``)."""
        if self.reranker is not None:
            return self.reranker.lm_scores(results)
        return [sentence_score(r, self.score) for r in results]

    def scorer(self, detector: Any, batch_size: int = 64) -> LmScorer:
        """An ``LmScorer`` (texts -> scores) through ``detector``, one pass a call."""
        if self.reranker is not None:
            return reranker_scorer(detector, self.reranker, batch_size)
        return detector_scorer(detector, self.score, batch_size)


def _check_rerank(hyps: Sequence[tuple[str, float | None]], lm_weight: float, length_weight: float) -> None:
    if not hyps:
        raise RerankError("no hypotheses to rerank")
    for weight, name in ((lm_weight, "lm_weight"), (length_weight, "length_weight")):
        if not isinstance(weight, int | float) or not math.isfinite(weight):
            raise RerankError(f"{name} must be a finite number, got {weight!r}")


def rank_hypotheses(hyps: Sequence[tuple[str, float | None]], lm: Sequence[float], lm_weight: float = 1.0,
                    length_weight: float = 0.0, lm_name: str = "electra_score") -> list[dict]:
    """``rerank_hypotheses`` over sentence scores already computed (the server scores in its batcher): the rows of
    :func:`hypothesis_rows`, best first."""
    return sorted(hypothesis_rows(hyps, lm, lm_weight, length_weight, lm_name), key=lambda row: row["rank"])


def hypothesis_rows(hyps: Sequence[tuple[str, float | None]], lm: Sequence[float], lm_weight: float = 1.0,
                    length_weight: float = 0.0, lm_name: str = "electra_score") -> list[dict]:
    """The ranker every front uses. Rows in the recogniser's order: text, asr_score (None -> 0.0), the sentence
    score (under ``lm_name``), length (words), total (:func:`fused_totals`), rank (1 = best; :func:`rank_order`)."""
    _check_rerank(hyps, lm_weight, length_weight)
    asr = [0.0 if score is None else float(score) for _text, score in hyps]
    lengths = [word_count(text) for text, _ in hyps]
    total = fused_totals(asr, lm, lengths, lm_weight, length_weight)
    rows = [{"text": text, "asr_score": asr[i], lm_name: float(lm[i]), "length": lengths[i], "total": float(total[i])}
            for i, (text, _) in enumerate(hyps)]
    for rank, index in enumerate(rank_order(total), start=1):
        rows[index]["rank"] = rank
    return rows


def fused_totals(asr: Sequence[float], lm: Sequence[float], length: Sequence[float], lm_weight: float,
                 length_weight: float) -> np.ndarray:
    """``asr + lm_weight * lm + length_weight * length`` per hypothesis: the one fusion every front ranks by."""
    return (np.asarray(asr, dtype=np.float64) + lm_weight * np.asarray(lm, dtype=np.float64)
            + length_weight * np.asarray(length, dtype=np.float64))


def rank_order(total: Sequence[float] | np.ndarray) -> list[int]:
    """Hypothesis indices best first: highest total first, ties in the recogniser's order."""
    values = [float(t) for t in total]
    return sorted(range(len(values)), key=lambda i: (-values[i], i))


def word_confidence(result: Any) -> list[dict[str, Any]]:
    """Each recogniser word (whitespace-separated) of a scored hypothesis (a ``TextScores``) with its probability
    of being wrong: the highest p(replaced) among the Detector's words inside it (its pre-tokenizer splits
    "she'll" into three)."""
    rows, words, index = [], result.words, 0
    for match in re.finditer(r"\S+", result.text):
        start, end = match.span()
        while index < len(words) and words[index].end <= start:  # both are in text order: one pass
            index += 1
        scores = []
        for word in words[index:]:
            if word.start >= end:
                break
            scores.append(word.score)
        rows.append({"word": match.group(), "start": start, "end": end, "p_wrong": max(scores, default=0.0)})
    return rows


LmScorer = Callable[[Sequence[str]], list[float]]


def detector_scorer(detector: Any, score: str = "sum", batch_size: int = 64) -> LmScorer:
    if score not in ("sum", "mean"):
        raise RerankError(f"unknown sentence score {score!r} (use 'sum' or 'mean')")
    return lambda texts: electra_scores(detector, texts, score, batch_size)


def pll_scorer(generator: Any, batch_size: int = 64) -> LmScorer:
    """PLL with our generator (GeneratorScorer): one masked copy per token. Comparison only."""
    def score(texts: Sequence[str]) -> list[float]:
        nonempty = [t for t in texts if t.strip()]
        plls = iter([r.pll for r in generator.score(nonempty, batch_size=batch_size)] if nonempty else [])
        return [next(plls) if t.strip() else 0.0 for t in texts]
    return score


def score_utterances(utts: Sequence[Utterance], scorer: LmScorer) -> list[Scored]:
    """Features for a chunk of utterances; all their hypotheses go to the scorer in one call (batched)."""
    texts = [h.text for u in utts for h in u.hyps]
    lm = scorer(texts)
    if len(lm) != len(texts):
        raise RerankError("scorer returned the wrong number of scores")
    out: list[Scored] = []
    start = 0
    for utt in utts:
        n = len(utt.hyps)
        item = Scored(utt, np.array([h.asr_score for h in utt.hyps], dtype=np.float64),
                      np.asarray(lm[start:start + n], dtype=np.float64),
                      np.array([word_count(h.text) for h in utt.hyps], dtype=np.float64))
        if utt.ref is not None:
            item.errors, item.ref_words = word_errors(utt.ref, [h.text for h in utt.hyps])
        out.append(item)
        start += n
    return out


def totals(item: Scored, lm_weight: float, length_weight: float) -> np.ndarray:
    return fused_totals(item.asr, item.lm, item.length, lm_weight, length_weight)


def choose(item: Scored, lm_weight: float, length_weight: float) -> int:
    """Index of the best hypothesis (ties: the recogniser's earlier one)."""
    return rank_order(totals(item, lm_weight, length_weight))[0]


def utterance_row(item: Scored, lm_weight: float, length_weight: float, lm_name: str = "electra_score") -> dict:
    """The output JSONL row: every hypothesis's component scores (in the recogniser's order; :func:`hypothesis_rows`,
    the ranker every front uses), and the chosen one."""
    rows = hypothesis_rows([(hyp.text, float(item.asr[i])) for i, hyp in enumerate(item.utt.hyps)], item.lm,
                           lm_weight, length_weight, lm_name)
    if item.errors is not None:
        for row, errors in zip(rows, item.errors, strict=True):
            row["word_errors"] = int(errors)
    best = next(i for i, row in enumerate(rows) if row["rank"] == 1)
    out: dict[str, Any] = {"id": item.utt.id, "chosen": item.utt.hyps[best].text, "chosen_index": best + 1,
                           "hyps": rows}
    if item.utt.ref is not None:
        out["ref"] = item.utt.ref
    return out


class WerTally:
    """Corpus WER before (1-best), after (reranked) and oracle, accumulated while streaming."""

    def __init__(self) -> None:
        self.ref_words = 0
        self.before = 0.0
        self.after = 0.0
        self.oracle = 0.0
        self.utterances = 0
        self.with_refs = 0

    def add(self, item: Scored, chosen: int) -> None:
        self.utterances += 1
        if item.errors is None:
            return
        self.with_refs += 1
        self.ref_words += item.ref_words
        self.before += item.errors[0]
        self.after += item.errors[chosen]
        self.oracle += item.errors.min()

    def summary(self) -> dict[str, float | None]:
        if not self.ref_words:
            return {"wer_before": None, "wer_after": None, "wer_oracle": None}
        return {"wer_before": self.before / self.ref_words, "wer_after": self.after / self.ref_words,
                "wer_oracle": self.oracle / self.ref_words}


def corpus_wer(items: Sequence[Scored], lm_weight: float, length_weight: float) -> float:
    tally = WerTally()
    for item in items:
        tally.add(item, choose(item, lm_weight, length_weight))
    wer = tally.summary()["wer_after"]
    if wer is None:
        raise RerankError("no references: WER cannot be computed")
    return float(wer)


DEFAULT_LM_GRID = tuple([0.0] + [float(x) for x in np.geomspace(1e-3, 1e3, 61)])


DEFAULT_LENGTH_GRID = tuple(sorted({0.0, *(float(s * x) for s in (-1, 1) for x in np.geomspace(1e-2, 1e3, 31))}))


def tune_weights(items: Sequence[Scored], lm_grid: Sequence[float] = DEFAULT_LM_GRID,
                 length_grid: Sequence[float] = DEFAULT_LENGTH_GRID) -> dict[str, float]:
    """Grid search for (lm_weight, length_weight) minimising corpus WER on a dev set.

    Ties go to the smallest |weights| (fewest changes to the recogniser's choice), so an
    uninformative score keeps lm_weight 0. Vectorised: per-hypothesis errors are computed once.
    """
    items = [item for item in items if item.errors is not None]
    if not items:
        raise RerankError("the tuning set has no references ('ref'): cannot tune by WER")
    width = max(len(item.asr) for item in items)
    n = len(items)

    def pad(name: str, fill: float) -> np.ndarray:
        out = np.full((n, width), fill)
        for row, item in enumerate(items):
            values = getattr(item, name)
            out[row, :len(values)] = values
        return out

    asr, lm, length = pad("asr", -np.inf), pad("lm", 0.0), pad("length", 0.0)
    errors = pad("errors", np.inf)  # padded slots are never chosen (asr = -inf)
    ref_words = sum(item.ref_words for item in items)
    best: tuple[float, float, float, float] | None = None  # (wer, |weights|, lm, length)
    for lw in lm_grid:
        base = asr + lw * lm
        for bw in length_grid:
            chosen = np.argmax(base + bw * length, axis=1)
            wer = float(errors[np.arange(n), chosen].sum() / ref_words)
            key = (wer, abs(lw) + abs(bw), lw, bw)
            if best is None or key[:2] < best[:2]:
                best = key
    assert best is not None
    before = float(errors[:, 0].sum() / ref_words)
    oracle = float(errors.min(axis=1).sum() / ref_words) if width else before
    return {"lm_weight": best[2], "length_weight": best[3], "dev_wer_after": best[0], "dev_wer_before": before,
            "dev_wer_oracle": oracle, "dev_utterances": n}
