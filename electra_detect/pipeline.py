"""Scoring a stream of texts with every core at work and memory flat.

Reading → tokenising → the model → assembling and writing, with a bound on the batches between them: the
caller's thread reads the next batch and writes finished ones while worker threads tokenise (``tokenizers``
releases the GIL) and run the engine (onnxruntime releases it too). Each worker runs whole batches through a
single-threaded onnxruntime call: on the shared 2-core CPU this beat one call spread over two threads, which
wait on each other at every operator (benchmarks/results/cli_speed). Results come back in input order.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


def cores() -> int:
    """The cores this process may run on (its affinity mask; a container's limit when it sets one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def default_workers(detector: Any) -> int:
    """One worker per core for onnxruntime; one for torch, whose own thread pool already spans the cores."""
    return cores() if detector.engine.name == "onnx" else 1


def score_stream(detector: Any, batches: Iterable[Sequence[str]], batch_size: int = 32, calibrated: bool = True,
                 workers: int | None = None) -> Iterator[list[Any]]:
    """Each batch's ``TextScores``, in input order; at most ``workers + 1`` batches are read ahead."""
    workers = workers or default_workers(detector)

    def run(texts: Sequence[str]) -> Any:
        job = detector.job(list(texts), batch_size, calibrated)  # tokenise: the batch encode, off this thread
        job.step()
        return job

    pending: deque[Future] = deque()
    pool = ThreadPoolExecutor(workers, thread_name_prefix="electra-detect-score")
    try:
        for texts in batches:
            pending.append(pool.submit(run, texts))
            while pending and (pending[0].done() or len(pending) > workers + 1):  # bounded; finished ones go out now
                yield pending.popleft().result().results()
        while pending:
            yield pending.popleft().result().results()
    finally:
        for future in pending:  # the reader stopped early (an error, or the consumer gave up): drop queued work
            future.cancel()
        pool.shutdown(wait=True)
