"""The run stage: a job's planned batches through the engine, a step at a time, into flat per-token arrays.

``Detector.job`` encodes the texts and cuts their windows (``windows``), plans them (``batching``) and makes a
``ScoringJob``; the job runs the plan's batches (``step``) and hands its flat arrays to ``assembly`` for the
words (``results``); ``finish`` does both. The server interleaves jobs' steps and can drop a job between two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from electra_detect.assembly import assemble
from electra_detect.batching import WindowPlan, plan_windows
from electra_detect.edit_tags.decoding import TAG_COLUMNS, decode_tags, near_errors
from electra_detect.engines import is_tag_model
from electra_detect.errors import DetectorError
from electra_detect.scores import TextScores
from electra_detect.windows import TextEncoding, cut_windows


def probabilities(engine: Any, calibrator: Any, input_ids: np.ndarray, attention: np.ndarray,
                  calibrated: bool = True, at: tuple[np.ndarray, np.ndarray] | None = None
                  ) -> tuple[np.ndarray, np.ndarray | None]:
    """p(error) [batch, seq] and, for a typed model, [batch, seq, 3]: operation index, main-type index and the
    main type's softmax probability (one engine pass gives both). ``at`` = (rows, columns): those positions only,
    [n] and [n, 3] (padding, and tokens another window scores, are not transformed)."""
    from electra_detect.calibrators import sigmoid

    outputs = getattr(engine, "outputs", None)  # an engine with logits() only is an untyped one
    logits, type_logits = outputs(input_ids, attention) if outputs else (engine.logits(input_ids, attention), None)
    near = None
    if type_logits is not None and is_tag_model(engine.channels):
        # within each window, before its tokens are picked out; padding never counts (its outputs are noise)
        near = near_errors(np.where(attention.astype(bool), sigmoid(logits), 0.0))
    if at is not None:
        logits = logits[at]
        type_logits = None if type_logits is None else type_logits[at]
        near = None if near is None else near[at]
    probs = calibrator.transform(logits) if calibrated and calibrator is not None else sigmoid(logits)
    if type_logits is None:
        return probs, None
    if near is not None:
        return probs, decode_tags(near, type_logits)
    # channels first: numpy reduces a long axis fast and a 22-wide one slowly (this stage's cost halves)
    channels = type_logits.reshape(-1, type_logits.shape[-1]).T.copy()  # [3 operations + main types, positions]
    operation, mains = channels[:3].argmax(0), channels[3:]
    main_type = mains.argmax(0)  # on the logits: a tie that exp would round away is broken by the larger one
    mains -= mains.max(0)
    np.exp(mains, out=mains)
    main_p = 1.0 / mains.sum(0)  # the top type's softmax probability: e^0 over the sum
    return probs, np.stack([operation, main_type, main_p], axis=-1).reshape(*type_logits.shape[:-1], 3)


# Model tokens (padding counted) an engine batch holds per row of ``batch_size``: sentences (under 64 tokens) keep
# ``batch_size`` rows, a text's 512-token windows take fewer. A batch's outputs (a tag model's thousands of logits a
# token) and attention grow with rows x width: 10 KB with no sentence end ran 32 such rows at once, 1.6 GB against
# 180 MB for 10 KB of English.
ROW_TOKENS = 64


class ScoringJob:
    """The engine work of ``Detector.score`` over some texts, done a step at a time: ``batch_size`` windows
    per engine run. ``cost`` is the model tokens the job runs ([CLS] and [SEP] included, window overlap
    counted twice); ``tokens`` the texts' own tokens."""

    def __init__(self, detector: Any, texts: list[str], encodings: list[TextEncoding], plan: WindowPlan,
                 batch_size: int = 32, calibrated: bool = True) -> None:
        if batch_size < 1:
            raise DetectorError("batch_size must be >= 1")
        multiple = detector.width_multiple
        if not isinstance(multiple, int) or isinstance(multiple, bool) or multiple < 1:
            raise DetectorError(f"width_multiple must be a whole number >= 1, not {multiple!r}")
        self.detector, self.texts, self.encodings, self.plan = detector, texts, encodings, plan
        self.batch_size, self.calibrated = batch_size, calibrated
        self.tokens = plan.tokens
        self.cost = int(plan.sizes.sum())
        self.position = 0  # windows scored so far
        self.probs = np.full(self.tokens, np.nan)
        typed = bool(detector.channels)  # operation, main type, its probability per token (a tag model: its top tags)
        width = TAG_COLUMNS if typed and is_tag_model(detector.channels) else 3
        self.types = np.zeros((self.tokens, width)) if typed else None

    @classmethod
    def merge(cls, jobs: Sequence[ScoringJob]) -> ScoringJob:
        """One job over the texts of several jobs not yet started (the server's micro-batching)."""
        if any(job.position for job in jobs):
            raise DetectorError("only jobs not yet started can be merged")
        first = jobs[0]
        if any(job.calibrated != first.calibrated for job in jobs):
            raise DetectorError("only jobs in one probability space (calibrated or raw) can be merged")
        texts, encodings = [t for job in jobs for t in job.texts], [e for job in jobs for e in job.encodings]
        detector = first.detector
        windows = cut_windows(encodings, detector.max_length - 2)
        plan = plan_windows(windows, sum(len(e.ids) for e in encodings), first.plan.cls_id, first.plan.sep_id,
                            first.plan.pad_id)
        return cls(detector, texts, encodings, plan, first.batch_size, first.calibrated)

    @property
    def done(self) -> bool:
        return self.position >= self.plan.window_count

    @property
    def remaining(self) -> int:
        """Model tokens still to run."""
        return int(self.plan.sizes[self.position:].sum())

    def finish(self) -> list[TextScores]:
        """Run what is left and give every text's scores."""
        self.step()
        return self.results()

    def step(self, max_tokens: int = 0) -> int:
        """Run engine batches of up to ``batch_size`` windows (and ``batch_size * ROW_TOKENS`` model tokens, padding
        counted) until the job is done or ``max_tokens`` model tokens ran (0 = run to the end); a batch that would
        overrun the budget runs fewer rows, at least one window. Returns the model tokens run."""
        ran = 0
        while not self.done:
            stop = min(self.position + self.batch_size, self.plan.window_count)
            widths = self.plan.sizes[self.position:stop]  # ascending: a batch is as wide as its last window
            held = widths * np.arange(1, len(widths) + 1)  # the model tokens of its first 1, 2, ... rows
            stop = self.position + max(1, int(np.searchsorted(held, self.batch_size * ROW_TOKENS, side="right")))
            if max_tokens:  # fewer rows when long windows would overrun the budget; the first window always runs
                spent = ran + np.cumsum(self.plan.sizes[self.position:stop])
                fits = int(np.searchsorted(spent, max_tokens, side="right"))
                if fits == 0 and ran:
                    break
                stop = self.position + max(fits, 1)
            self._run(self.position, stop)
            ran += int(self.plan.sizes[self.position:stop].sum())
            self.position = stop
            if max_tokens and ran >= max_tokens:
                break
        return ran

    def _run(self, first: int, stop: int) -> None:
        plan = self.plan
        sizes = plan.sizes[first:stop]  # sorted by length: the batch is as wide as its last window
        rows = np.repeat(np.arange(stop - first), sizes)
        columns = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        longest, multiple = int(sizes.max()), self.detector.width_multiple
        width = max(longest, min(-(-longest // multiple) * multiple, self.detector.max_length))
        input_ids = np.full((stop - first, width), plan.pad_id, dtype=np.int64)
        attention = np.zeros_like(input_ids)
        input_ids[rows, columns] = plan.ids[plan.starts[first]:plan.starts[stop]]
        attention[rows, columns] = 1
        entries = slice(int(plan.bounds[first]), int(plan.bounds[stop]))
        rows, columns, targets = plan.owners[entries] - first, plan.columns[entries], plan.targets[entries]
        p, types = probabilities(self.detector.engine, self.detector.calibrator, input_ids, attention,
                                 self.calibrated, at=(rows, columns))
        self.probs[targets] = p
        if types is not None and self.types is not None:
            self.types[targets] = types

    def results(self, start: int = 0, stop: int | None = None) -> list[TextScores]:
        """The scores of texts[start:stop] (a merged job's requests each take their own slice)."""
        if not self.done:
            raise DetectorError("the job is not finished")
        stop = len(self.texts) if stop is None else stop
        first = sum(len(e.ids) for e in self.encodings[:start])
        last = first + sum(len(e.ids) for e in self.encodings[start:stop])
        return assemble(self.texts[start:stop], self.encodings[start:stop], self.probs[first:last],
                        None if self.types is None else self.types[first:last], self.detector.channels,
                        self.detector.edit_tags)
