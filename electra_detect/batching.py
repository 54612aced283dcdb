"""The batch stage: every model window of a job's texts, ordered and laid out for the engine.

Windows are sorted by length (stable: a long text's equal-length windows keep their order), so a batch pads
little: padding to the longest row wasted up to half the compute on mixed-length sentences. Where windows of
one sentence overlap, each token takes its probability from the window in which it sits farthest from an edge
(the first such window in engine order); the plan decides that once, so a batch's results are written into the
job's flat arrays with one indexed assignment. Sorted by length, a batch of windows [first, stop) is as wide as
its last window: the run stage pads it with one scatter (``pad_ids`` pads rows for everyone else).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np


@dataclass
class WindowPlan:
    """Windows in engine order, laid out for the engine, and where each one's scores go.

    ``ids``: every window's ids wrapped in [CLS] ... [SEP], end to end in engine order; window w is
    ``ids[starts[w]:starts[w + 1]]`` (``sizes[w]`` model tokens); ``pad_id`` fills a batch's shorter rows.
    ``tokens``: the texts' tokens end to end. ``targets``/``columns``/``owners``: for every token, the flat index
    it fills, the column (1 + position) and the window it is read from, grouped by window: window w's entries
    are ``bounds[w]:bounds[w + 1]``."""

    ids: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray
    pad_id: int
    tokens: int
    targets: np.ndarray
    columns: np.ndarray
    owners: np.ndarray
    bounds: np.ndarray

    cls_id: int
    sep_id: int

    @property
    def window_count(self) -> int:
        return len(self.sizes)


def plan_windows(windows: Sequence[tuple[int, list[int]]], tokens: int, cls_id: int, sep_id: int,
                 pad_id: int) -> WindowPlan:
    """The windows (``windows.cut_windows``: first token, ids) of texts holding ``tokens`` tokens, sorted by
    length, wrapped for the engine, with the token each of their positions fills when it is the farthest from an
    edge among the windows holding it."""
    sizes = np.fromiter((len(chunk) for _, chunk in windows), dtype=np.int64, count=len(windows))
    order = np.argsort(sizes, kind="stable")  # stable: equal lengths keep text order
    chunks = [windows[w][1] for w in order.tolist()]
    lengths = sizes[order]
    firsts = np.fromiter((first for first, _ in windows), dtype=np.int64, count=len(windows))[order]
    starts = np.concatenate([[0], np.cumsum(lengths + 2)])
    ids = np.full(int(starts[-1]), sep_id, dtype=np.int64)  # every window: [CLS] its ids [SEP]
    ids[starts[:-1]] = cls_id
    body = np.ones(len(ids), dtype=bool)
    body[starts[:-1]] = body[starts[1:] - 1] = False
    ids[body] = np.fromiter(chain.from_iterable(chunks), dtype=np.int64, count=int(lengths.sum()))
    owners = np.repeat(np.arange(len(chunks)), lengths)
    positions = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    targets = firsts[owners] + positions
    edge = np.minimum(positions, lengths[owners] - 1 - positions)  # distance from the window's edge
    # one winner per token: the largest edge distance, then the first window in engine order
    ranked = np.lexsort((owners, -edge, targets))
    keep = np.zeros(len(targets), dtype=bool)
    if len(targets):  # texts without a token (empty, or control characters only) still run, as [CLS] [SEP]
        keep[ranked[np.r_[True, targets[ranked][1:] != targets[ranked][:-1]]]] = True
    bounds = np.concatenate([[0], np.cumsum(np.bincount(owners[keep], minlength=len(chunks)))])
    return WindowPlan(ids, starts, lengths + 2, pad_id, tokens, targets[keep], positions[keep] + 1, owners[keep],
                      bounds, cls_id, sep_id)


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
