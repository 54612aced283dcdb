"""The batch stage: every model window of a job's texts, ordered for the engine, and padded into batches.

Windows are sorted by length (stable: a long text's equal-length windows keep their order), so a batch pads
little: padding to the longest row wasted up to half the compute on mixed-length sentences. Where windows of
one sentence overlap, each token takes its probability from the window in which it sits farthest from an edge
(the first such window in engine order); the plan decides that once, so a batch's results are written into the
job's flat arrays with one indexed assignment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from electra_detect.windows import TextEncoding


@dataclass
class WindowPlan:
    """Windows in engine order, and where each one's scores go.

    ``chunks[w]``: the ids of window w (no [CLS]/[SEP]); ``text_start[i]``: text i's first token in the job's
    flat token arrays [texts + 1]. ``targets``/``columns``/``owners``: for every token of the job, the flat index
    it fills, the padded column (1 + position) and the window (engine order) it is read from, grouped by window;
    ``bounds[w]:bounds[w + 1]`` are window w's entries."""

    chunks: list[list[int]]
    text_start: np.ndarray
    targets: np.ndarray
    columns: np.ndarray
    owners: np.ndarray
    bounds: np.ndarray

    @property
    def tokens(self) -> int:
        return int(self.text_start[-1])

    def entries(self, first: int, stop: int) -> slice:
        """The entries of windows [first, stop)."""
        return slice(int(self.bounds[first]), int(self.bounds[stop]))


def plan_windows(encodings: Sequence[TextEncoding], body: int) -> WindowPlan:
    """Every window of at most ``body`` tokens of every text (``TextEncoding.windows``), sorted by length, with
    the token each of its positions fills when it is the farthest from an edge among the windows holding it."""
    lengths = np.array([len(e.ids) for e in encodings], dtype=np.int64)
    text_start = np.concatenate([[0], np.cumsum(lengths)])
    windows = [(int(text_start[i]) + start, chunk) for i, encoding in enumerate(encodings)
               for start, chunk in encoding.windows(body)]
    order = sorted(range(len(windows)), key=lambda w: len(windows[w][1]))  # stable: equal lengths keep text order
    chunks = [windows[w][1] for w in order]
    sizes = np.array([len(c) for c in chunks], dtype=np.int64)
    firsts = np.array([windows[w][0] for w in order], dtype=np.int64)
    owners = np.repeat(np.arange(len(chunks)), sizes)
    positions = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    targets = firsts[owners] + positions
    edge = np.minimum(positions, sizes[owners] - 1 - positions)  # distance from the window's edge
    # one winner per token: the largest edge distance, then the first window in engine order
    ranked = np.lexsort((owners, -edge, targets))
    keep = np.zeros(len(targets), dtype=bool)
    keep[ranked[np.r_[True, targets[ranked][1:] != targets[ranked][:-1]]]] = True
    bounds = np.concatenate([[0], np.cumsum(np.bincount(owners[keep], minlength=len(chunks)))])
    return WindowPlan(chunks, text_start, targets[keep], positions[keep] + 1, owners[keep], bounds)


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
