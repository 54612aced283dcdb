"""Scoring a stream of texts with every core at work and memory flat.

Reading → tokenising → the model → assembling and writing, with a bound on the batches between them: a
reader thread takes the input batches, worker threads tokenise (``tokenizers`` releases the GIL) and run
the engine (onnxruntime releases it too), and the caller's thread assembles and writes finished batches,
in input order. Each worker runs whole batches through a single-threaded onnxruntime call: on the shared
2-core CPU this beat one call spread over two threads, which wait on each other at every operator
(benchmarks/results/cli_speed). Where one process's GIL is the limit (a GPU's engine), worker processes take
whole batches instead (:func:`process_stream`).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
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
    """Each batch's ``TextScores``, in input order, from ``workers`` threads; at most ``workers + 1`` batches are
    read ahead (:func:`in_order`)."""
    workers = workers or default_workers(detector)

    def run(texts: Sequence[str]) -> Any:
        job = detector.job(list(texts), batch_size, calibrated)  # tokenise: the batch encode, off this thread
        job.step()
        return job

    pool = ThreadPoolExecutor(workers, thread_name_prefix="electra-detect-score")
    for job in in_order(pool, run, batches, workers + 1):
        yield job.results()


def process_stream(start: Callable[..., None], work: Callable[[Sequence[str]], Any], start_args: tuple,
                   batches: Iterable[Sequence[str]], processes: int) -> Iterator[Any]:
    """``work(texts)`` of each batch, in input order, from ``processes`` worker processes that each ran
    ``start(*start_args)`` once (loading their own model): one process's GIL caps its host work, so a fast
    engine (a GPU) needs several. ``start`` and ``work`` must be importable module-level functions (spawned
    workers import them; no forked onnxruntime threads). At most ``2 * processes`` batches are read ahead
    (:func:`in_order`)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from electra_detect.errors import DetectorError

    pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"), initializer=start,
                               initargs=start_args)
    try:
        yield from in_order(pool, work, batches, 2 * processes)
    except BrokenProcessPool:
        raise DetectorError("a scoring process died (killed, or out of memory); the results stop here") from None


def in_order(pool: Executor, work: Callable[[Sequence[str]], Any], batches: Iterable[Sequence[str]],
             ahead: int) -> Iterator[Any]:
    """``work(texts)`` of each batch on ``pool``, in input order, with at most ``ahead`` batches read ahead of
    the consumer. A reader thread takes the batches, so a finished batch goes out while the next one is still
    being read (a pipe that has sent part of its input gets its results before it sends the rest); an error
    reading the input is raised after the batches read before it. Shuts ``pool`` down when done, or when the
    consumer stops early (close this generator: queued batches are cancelled, not run)."""
    futures: queue.Queue = queue.Queue(maxsize=ahead)  # the bound: futures read ahead of the writer
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                futures.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for texts in batches:
                if not put(pool.submit(work, texts)):
                    return
            put(_END)
        except BaseException as exc:  # noqa: BLE001 - SystemExit (a bad line's `error:`) included: re-raised below
            put(_Failed(exc))

    reader = threading.Thread(target=read, name="electra-detect-read", daemon=True)
    reader.start()
    try:
        while (item := futures.get()) is not _END:
            if isinstance(item, _Failed):
                raise item.exc
            yield item.result()
    finally:
        stop.set()  # the consumer stopped early or an error went up: the reader puts nothing more
        while True:
            try:
                item = futures.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, Future):
                item.cancel()
        reader.join(timeout=5)
        pool.shutdown(wait=True, cancel_futures=True)


_END = object()


class _Failed:
    """An exception of the reader thread, carried to the consumer's thread."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
