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
                      length_weight: float = 0.0, score: str = "sum", calibrated: bool = True) -> list[dict]:
    """Rows best first: text, asr_score (None -> 0.0), electra_score, length (words), total, rank (1 = best)."""
    _check_rerank(hyps, lm_weight, length_weight)
    return rank_hypotheses(hyps, electra_scores(detector, [text for text, _ in hyps], score, calibrated=calibrated),
                           lm_weight, length_weight)


def _check_rerank(hyps: Sequence[tuple[str, float | None]], lm_weight: float, length_weight: float) -> None:
    if not hyps:
        raise RerankError("no hypotheses to rerank")
    for weight, name in ((lm_weight, "lm_weight"), (length_weight, "length_weight")):
        if not isinstance(weight, int | float) or not math.isfinite(weight):
            raise RerankError(f"{name} must be a finite number, got {weight!r}")


def rank_hypotheses(hyps: Sequence[tuple[str, float | None]], lm: Sequence[float], lm_weight: float = 1.0,
                    length_weight: float = 0.0) -> list[dict]:
    """``rerank_hypotheses`` over sentence scores already computed (the server scores in its batcher)."""
    _check_rerank(hyps, lm_weight, length_weight)
    rows = []
    for index, ((text, asr), electra) in enumerate(zip(hyps, lm, strict=True)):
        asr_score = 0.0 if asr is None else float(asr)
        length = word_count(text)
        rows.append({"text": text, "asr_score": asr_score, "electra_score": float(electra), "length": length,
                     "total": asr_score + lm_weight * float(electra) + length_weight * length, "index": index})
    rows.sort(key=lambda row: (-row["total"], row["index"]))  # ties keep the recogniser's order
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
        del row["index"]
    return rows


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
    return item.asr + lm_weight * item.lm + length_weight * item.length


def choose(item: Scored, lm_weight: float, length_weight: float) -> int:
    """Index of the best hypothesis (ties: the recogniser's earlier one)."""
    return int(np.argmax(totals(item, lm_weight, length_weight)))


def utterance_row(item: Scored, lm_weight: float, length_weight: float, lm_name: str = "electra_score") -> dict:
    """The output JSONL row: every hypothesis's component scores, and the chosen one."""
    total = totals(item, lm_weight, length_weight)
    order = sorted(range(len(total)), key=lambda i: (-total[i], i))
    ranks = {index: rank for rank, index in enumerate(order, start=1)}
    hyps = []
    for i, hyp in enumerate(item.utt.hyps):
        row = {"text": hyp.text, "asr_score": float(item.asr[i]), lm_name: float(item.lm[i]),
               "length": int(item.length[i]), "total": float(total[i]), "rank": ranks[i]}
        if item.errors is not None:
            row["word_errors"] = int(item.errors[i])
        hyps.append(row)
    best = order[0]
    out: dict[str, Any] = {"id": item.utt.id, "chosen": item.utt.hyps[best].text, "chosen_index": best + 1,
                           "hyps": hyps}
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
