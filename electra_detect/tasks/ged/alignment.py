"""The Detector's scores on whitespace tokens: a token's score is the max over the subwords that start in it."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from electra_detect.detector import Detector
from electra_detect.errors import GedDataError
from electra_detect.tasks.ged.readers import GedSentence


def token_spans(tokens: Sequence[str]) -> list[tuple[int, int]]:
    """Character spans of whitespace tokens in ``" ".join(tokens)``."""
    spans, cursor = [], 0
    for token in tokens:
        spans.append((cursor, cursor + len(token)))
        cursor += len(token) + 1
    return spans


def to_token_scores(tokens: Sequence[str], pieces: Iterable[tuple[int, float]]) -> np.ndarray:
    """Max over the (start offset, value) pieces that begin inside each whitespace token."""
    values = np.full(len(tokens), -np.inf)
    spans = token_spans(tokens)
    cursor = 0
    for start, value in sorted(pieces):
        while cursor < len(spans) and spans[cursor][1] <= start:
            cursor += 1
        if cursor < len(spans) and start >= spans[cursor][0]:
            values[cursor] = max(values[cursor], value)
    values[np.isneginf(values)] = 0.0  # a token no piece starts in (cannot happen with a fast tokenizer)
    return values


def flags_to_token_labels(tokens: Sequence[str], flagged: Iterable[tuple[int, int]]) -> np.ndarray:
    """Character spans a checker flags -> 0/1 per whitespace token (an empty span marks the next token)."""
    return flags_to_span_labels(token_spans(tokens), flagged)


def flags_to_span_labels(spans: Sequence[tuple[int, int]], flagged: Iterable[tuple[int, int]]) -> np.ndarray:
    """Character spans a checker flags -> 0/1 per word span (an empty span marks the word at or after it, the
    last word at the end)."""
    out = np.zeros(len(spans))
    for start, end in flagged:
        if end <= start:
            hit = [i for i, (s, _e) in enumerate(spans) if s >= start][:1] or [len(spans) - 1]
        else:
            hit = [i for i, (s, e) in enumerate(spans) if s < end and start < e]
        out[hit] = 1.0
    return out


def score_tokens(detector: Detector, sentences: Sequence[GedSentence], batch_size: int = 32) -> list[np.ndarray]:
    """Per whitespace token: max replaced probability over the subwords inside it."""
    results = detector.score([s.text for s in sentences], batch_size=batch_size)
    return [to_token_scores(sentence.tokens, ((t.start, t.p_replaced) for t in result.tokens))
            for sentence, result in zip(sentences, results, strict=True)]


@dataclass
class TypedTokens:
    """A typed detector's view of one sentence: per token p(error), and the operation and main type it names."""

    scores: np.ndarray
    operations: list[str]
    types: list[str]
    tags: list[str | None] | None = None  # a tag model's edit tag per token (its most suspicious word's), else None
    tag_scores: list[float] | None = None  # that tag's probability


def score_typed_tokens(detector: Detector, sentences: Sequence[GedSentence], batch_size: int = 32) -> list[TypedTokens]:
    """A typed detector's per-token view: p(error) as :func:`score_tokens`, and the operation and main type of
    the detector word (inside the token) with the highest score."""
    if not detector.channels:
        raise GedDataError(f"{detector.model_dir} has no error-type channels (train it with `ged train --types`)")
    results = detector.score([s.text for s in sentences], batch_size=batch_size)
    tagged = detector.edit_tags is not None
    out = []
    for sentence, result in zip(sentences, results, strict=True):
        scores = to_token_scores(sentence.tokens, ((t.start, t.p_replaced) for t in result.tokens))
        best: list[tuple[float, str, str, str | None, float]] = [(-1.0, "R", "OTHER", None, 0.0)] * len(sentence.tokens)
        starts = [start for start, _ in token_spans(sentence.tokens)]
        for word in result.words:
            index = bisect.bisect_right(starts, word.start) - 1
            if 0 <= index < len(starts) and word.score > best[index][0]:
                best[index] = (word.score, word.operation or "R", word.error_type or "OTHER", word.tag,
                               float(word.type_score or 0.0))
        out.append(TypedTokens(scores, [b[1] for b in best], [b[2] for b in best],
                               [b[3] for b in best] if tagged else None, [b[4] for b in best] if tagged else None))
    return out
