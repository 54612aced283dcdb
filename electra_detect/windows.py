"""The encode stage: texts cut into sentences, tokenised, and split into windows that fit the model's positions.

Pure functions (no model), shared by ``Detector`` and the export parity check so both feed the engines exactly
the same windows (``batching`` then orders and pads them).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from electra_detect.sentences import sentence_spans


def split_windows(ids: list[int], body: int) -> list[tuple[int, list[int]]]:
    """``ids`` cut into windows of at most ``body`` tokens, half-overlapping when it is longer: [(start, chunk)]."""
    if len(ids) <= body:
        return [(0, ids)]
    stride = max(1, body // 2)
    starts = list(range(0, len(ids) - body, stride)) + [len(ids) - body]
    return [(s, ids[s:s + body]) for s in starts]


class TextEncoding:
    """A text's tokens: its sentences' tokenizer encodings (``parts``, beginning at characters ``starts``) joined,
    offsets into the text, word ids unique across sentences; ``segments`` are the sentences' token ranges, and no
    model window crosses one. ``ids`` and ``segments`` are made at once (every text is windowed); ``tokens``,
    ``offsets`` and ``word_ids`` only when read (the assembly reads the parts in bulk: ``assembly.flat_tokens``)."""

    def __init__(self, parts: Sequence[Any], starts: Sequence[int]) -> None:
        self.parts, self.starts = list(parts), list(starts)
        if len(self.parts) == 1:
            self.ids: list[int] = self.parts[0].ids
            self.segments = [(0, len(self.ids))]
        else:
            self.ids, self.segments = [], []
            for enc in self.parts:
                first = len(self.ids)
                self.ids += enc.ids
                self.segments.append((first, len(self.ids)))

    @functools.cached_property
    def tokens(self) -> list[str]:
        return [token for enc in self.parts for token in enc.tokens]

    @functools.cached_property
    def offsets(self) -> list[tuple[int, int]]:
        return [(s + shift, e + shift) for enc, shift in zip(self.parts, self.starts, strict=True)
                for s, e in enc.offsets]

    @functools.cached_property
    def word_ids(self) -> list[int | None]:
        joined: list[int | None] = []
        next_word = 0
        for enc in self.parts:
            word_ids = enc.word_ids
            joined += [None if w is None else w + next_word for w in word_ids]
            next_word += 1 + max((w for w in word_ids if w is not None), default=-1)
        return joined

    def windows(self, body: int) -> list[tuple[int, list[int]]]:
        """(first token, ids) of every model window of at most ``body`` tokens, sentence by sentence; a text with
        no tokens is one empty window (it is still run, as [CLS] [SEP])."""
        if not self.ids:
            return [(0, [])]
        return [(first + start, chunk) for first, last in self.segments if last > first
                for start, chunk in split_windows(self.ids[first:last], body)]


def encode_texts(tokenizer: Any, texts: Sequence[str]) -> list[TextEncoding]:
    """Each text's tokens as the model sees them: its sentences (``electra_detect.sentences``) tokenised apart and
    joined (:class:`TextEncoding`), offsets into the text. The one place a text is cut before the model."""
    spans = [sentence_spans(text) for text in texts]
    pieces = [text[start:end] for text, text_spans in zip(texts, spans, strict=True) for start, end in text_spans]
    encoded = tokenizer(pieces, add_special_tokens=False, return_offsets_mapping=True) if pieces else []
    encodings, first = [], 0
    for text_spans in spans:
        parts = [encoded[first + i] for i in range(len(text_spans))]
        encodings.append(TextEncoding(parts, [start for start, _ in text_spans]))
        first += len(text_spans)
    return encodings


def encode_windows(tokenizer: Any, texts: Sequence[str], body: int) -> tuple[list[TextEncoding],
                                                                             list[tuple[int, list[int]]]]:
    """The encode stage in one call: the texts' encodings (``encode_texts``) and their windows (``cut_windows``)."""
    encodings = encode_texts(tokenizer, texts)
    return encodings, cut_windows(encodings, body)


def cut_windows(encodings: Sequence[TextEncoding], body: int) -> list[tuple[int, list[int]]]:
    """Every window of every text, in text order: (its first token in the texts' tokens laid end to end, ids)."""
    windows, first = [], 0
    for encoding in encodings:
        windows += [(first + start, chunk) for start, chunk in encoding.windows(body)]
        first += len(encoding.ids)
    return windows


def text_windows(tokenizer: Any, texts: Sequence[str], body: int) -> list[list[int]]:
    """Every window (ids without [CLS]/[SEP], at most ``body`` long) of the texts, in text order, as ``Detector``
    runs them."""
    return [chunk for encoding in encode_texts(tokenizer, texts) for _, chunk in encoding.windows(body)]
