"""Model windows: token ids split to fit the model's positions, and padded into batches.

Pure functions (no model), shared by ``Detector`` and the export parity check so both feed the engines exactly
the same windows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def split_windows(ids: list[int], body: int) -> list[tuple[int, list[int]]]:
    """``ids`` cut into windows of at most ``body`` tokens, half-overlapping when it is longer: [(start, chunk)]."""
    if len(ids) <= body:
        return [(0, ids)]
    stride = max(1, body // 2)
    starts = list(range(0, len(ids) - body, stride)) + [len(ids) - body]
    return [(s, ids[s:s + body]) for s in starts]


def text_windows(tokenizer: Any, texts: Sequence[str], body: int) -> list[list[int]]:
    """Every window (ids without [CLS]/[SEP], at most ``body`` long) of the texts' sentences, in text order."""
    from electra_detect.sentences import sentence_spans

    pieces = [text[start:end] for text in texts for start, end in sentence_spans(text)]
    encodings = tokenizer(pieces, add_special_tokens=False)
    return [chunk for ids in encodings["input_ids"] for _, chunk in split_windows(ids, body)]


def pad_ids(rows: Sequence[Sequence[int]], pad_id: int, cls_id: int | None = None,
            sep_id: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows of token ids, each wrapped in ``cls_id`` ... ``sep_id`` when given, right-padded with ``pad_id``:
    (input_ids, attention_mask), both int64 [batch, width]. The one padding helper of the project."""
    head = [] if cls_id is None else [cls_id]
    tail = [] if sep_id is None else [sep_id]
    width = max((len(r) for r in rows), default=0) + len(head) + len(tail)
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    attention = np.zeros((len(rows), width), dtype=np.int64)
    for index, row in enumerate(rows):
        seq = [*head, *row, *tail]
        input_ids[index, :len(seq)] = seq
        attention[index, :len(seq)] = 1
    return input_ids, attention
