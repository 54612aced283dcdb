"""Scoring a stream of texts with every core at work and memory flat.

Reading → tokenising → the model → assembling and writing, with a bound on the batches between them: a
reader thread takes the input batches, worker threads tokenise (``tokenizers`` releases the GIL) and run
the engine (onnxruntime releases it too), and the caller's thread assembles and writes finished batches,
in input order. Each worker runs whole batches through a single-threaded onnxruntime call: on the shared
2-core CPU this beat one call spread over two threads, which wait on each other at every operator
(benchmarks/results/cli_speed).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


def cores() -> int:
    """The cores this process may run on (its affinity mask; a container's limit when it sets one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def default_workers(detector: Any) -> int:
    """One worker per core (either engine releases the GIL while it computes)."""
    return cores()


def score_stream(detector: Any, batches: Iterable[Sequence[str]], batch_size: int = 32, calibrated: bool = True,
                 workers: int | None = None) -> Iterator[list[Any]]:
    """Each batch's ``TextScores``, in input order; at most ``workers + 1`` batches are read ahead. A reader
    thread takes the batches, so a finished batch goes out while the next one is still being read (a pipe
    that has sent part of its input gets its results before it sends the rest)."""
    workers = workers or default_workers(detector)

    def run(texts: Sequence[str]) -> Any:
        job = detector.job(list(texts), batch_size, calibrated)  # tokenise: the batch encode, off this thread
        job.step()
        return job

    pool = ThreadPoolExecutor(workers, thread_name_prefix="electra-detect-score")
    ahead: queue.Queue = queue.Queue(maxsize=workers + 1)  # the bound: futures read ahead of the writer
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                ahead.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for texts in batches:
                if not put(pool.submit(run, texts)):
                    return
            put(_END)
        except BaseException as exc:  # noqa: BLE001 - SystemExit (a bad line's `error:`) included: re-raised below
            put(_Failed(exc))

    reader = threading.Thread(target=read, name="electra-detect-read", daemon=True)
    reader.start()
    try:
        while (item := ahead.get()) is not _END:
            if isinstance(item, _Failed):
                raise item.exc
            yield item.result().results()
    finally:
        stop.set()  # the consumer stopped early or an error went up: the reader puts nothing more
        while True:
            try:
                item = ahead.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, Future):
                item.cancel()
        reader.join(timeout=5)
        pool.shutdown(wait=True, cancel_futures=True)


def process_stream(start: Callable[..., None], work: Callable[[Sequence[str]], Any], start_args: tuple,
                   batches: Iterable[Sequence[str]], processes: int) -> Iterator[Any]:
    """``work(texts)`` of each batch, in input order, from ``processes`` worker processes that each ran
    ``start(*start_args)`` once (loading their own model): one process's GIL caps its host work, so a fast
    engine (a GPU) needs several. ``start`` and ``work`` must be importable module-level functions (spawned
    workers import them; no forked onnxruntime threads). At most ``2 * processes`` batches are in flight; an
    error reading the input is raised after the batches read before it have been yielded."""
    import collections
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from electra_detect.errors import DetectorError

    pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"), initializer=start,
                               initargs=start_args)
    pending: collections.deque[Future] = collections.deque()
    failed: list[Exception] = []
    try:
        for texts in _until_error(batches, failed):
            pending.append(pool.submit(work, list(texts)))
            if len(pending) > 2 * processes:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BrokenProcessPool:
        raise DetectorError("a scoring process died (out of memory?); the results stop here") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if failed:
        raise failed[0]


def _until_error(batches: Iterable[Sequence[str]], failed: list[Exception]) -> Iterator[Sequence[str]]:
    """``batches`` until one cannot be read (a bad line's CliError), which goes into ``failed``: the batches
    read before it still go out."""
    try:
        yield from batches
    except Exception as exc:  # noqa: BLE001 - raised by the caller once the earlier results are out
        failed.append(exc)


_END = object()


class _Failed:
    """An exception of the reader thread, carried to the consumer's thread."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
