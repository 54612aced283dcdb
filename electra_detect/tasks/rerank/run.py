"""``electra-detect rerank``'s pass over an n-best file: utterances scored a chunk at a time, weights tuned on a dev
set when there is one, one JSONL row per utterance, and a summary with WER before, after and oracle."""

from __future__ import annotations

import contextlib
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from electra_detect.errors import RerankError
from electra_detect.fileio import atomic_open
from electra_detect.tasks.rerank.fusion import (
    LmScorer,
    WerTally,
    choose,
    score_utterances,
    tune_weights,
    utterance_row,
    word_confidence,
)
from electra_detect.tasks.rerank.nbest import Utterance

Item = TypeVar("Item")
Confidence = Callable[[list[str]], list[list[dict[str, Any]]]]


def chunked(items: Iterable[Item], size: int) -> Iterator[list[Item]]:
    """``items`` in lists of ``size`` (the last shorter), read as they are needed."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def detector_confidence(detector: Any, batch_size: int, calibrated: bool) -> Confidence:
    """Word confidence of chosen hypotheses: one more Detector pass, over the chosen texts only."""
    def confidence(texts: list[str]) -> list[list[dict[str, Any]]]:
        return [word_confidence(r) for r in detector.score(texts, batch_size=batch_size, calibrated=calibrated)]

    return confidence


def rerank_chunks(chunks: Iterable[Sequence[Utterance]], out: Path | None, scorer: LmScorer,
                  lm_name: str = "electra_score",
                  dev: Iterable[Sequence[Utterance]] | None = None, lm_weight: float | None = None,
                  length_weight: float | None = None, confidence: Confidence | None = None, source: str = "",
                  progress: bool = True) -> dict[str, Any]:
    """Rerank every utterance of ``chunks``: one JSONL row each, written to ``out`` atomically (a temp file beside
    it replaces it only when every utterance was scored), or to stdout, a chunk at a time, when ``out`` is None.
    Weights: tuned on ``dev`` by WER when given, else
    ``lm_weight`` (default 1) and ``length_weight`` (default 0). The summary: utterances, hypotheses, weights,
    WER figures (with references), seconds; ``tuned`` holds the tuning's figures when ``dev`` was given."""
    from tqdm import tqdm

    started = time.perf_counter()
    scoring_seconds = 0.0
    tuned: dict | None = None
    lm_weight = 1.0 if lm_weight is None else lm_weight
    length_weight = length_weight or 0.0
    if dev is not None:
        tuned = tune_weights([item for chunk in dev for item in score_utterances(chunk, scorer)])
        lm_weight, length_weight = tuned["lm_weight"], tuned["length_weight"]
    tally = WerTally()
    hypotheses = 0
    rows = atomic_open(out) if out is not None else contextlib.nullcontext(sys.stdout)
    with rows as handle, tqdm(desc="rerank", unit="utt", disable=not progress) as bar:
        for chunk in chunks:
            t0 = time.perf_counter()
            items = score_utterances(chunk, scorer)
            scoring_seconds += time.perf_counter() - t0
            chosen = [choose(item, lm_weight, length_weight) for item in items]
            words = confidence([item.utt.hyps[c].text for item, c in zip(items, chosen, strict=True)]) \
                if confidence else None
            for index, item in enumerate(items):
                tally.add(item, chosen[index])
                hypotheses += len(item.utt.hyps)
                row = utterance_row(item, lm_weight, length_weight, lm_name)
                if words is not None:
                    row["confidence"] = words[index]
                handle.write(json.dumps(row) + "\n")
            if out is None:
                handle.flush()  # a pipe downstream gets each chunk's rows as they are scored
            bar.update(len(items))
        if tally.utterances == 0:
            raise RerankError(f"{source} holds no utterances")
    summary = {"utterances": tally.utterances, "hypotheses": hypotheses, "lm_weight": lm_weight,
               "length_weight": length_weight, **tally.summary(), "seconds": round(time.perf_counter() - started, 3),
               "scoring_seconds": round(scoring_seconds, 3),
               "seconds_per_utterance": round(scoring_seconds / tally.utterances, 5)}
    if tuned is not None:
        summary["tuned"] = tuned
    return summary
