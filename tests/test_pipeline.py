"""Streamed scoring's plumbing: batches out in input order, read ahead within a bound, from threads or processes."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from electra_detect.errors import CliError, DetectorError
from electra_detect.pipeline import in_order, process_stream


def test_results_come_out_in_input_order_while_the_input_is_still_being_read() -> None:
    # a pipe that has sent one batch and waits: its result goes out before the rest is read
    sent_rest = threading.Event()
    seen: list[str] = []

    def batches():
        yield ["a"]
        assert sent_rest.wait(30)
        yield ["b", "c"]

    results = process_stream(int, len, (), batches(), 2)  # int(): a start that does nothing; len: the work
    for count in results:
        seen.append(f"{count} before" if not sent_rest.is_set() else f"{count} after")
        sent_rest.set()
    assert seen == ["1 before", "2 after"]


def test_a_reading_error_comes_after_the_batches_read_before_it() -> None:
    def batches():
        yield ["a"]
        yield ["b", "c"]
        raise CliError("line 3 is not UTF-8")

    got = []
    with pytest.raises(CliError, match="line 3"):
        for count in in_order(ThreadPoolExecutor(2), len, batches(), 2):
            got.append(count)
    assert got == [1, 2]


def test_a_consumer_that_stops_early_cancels_the_batches_read_ahead() -> None:
    ran: list[int] = []

    def slow(texts: list[str]) -> int:
        time.sleep(0.05)
        ran.append(len(texts))
        return len(texts)

    results = in_order(ThreadPoolExecutor(1), slow, ([str(i)] for i in range(100)), 2)
    assert next(results) == 1
    results.close()  # shuts the pool down: what was queued is cancelled
    assert len(ran) <= 2, ran  # the one returned and the one running; the two queued behind them never ran


def test_a_worker_process_that_dies_is_one_clear_error() -> None:
    with pytest.raises(DetectorError, match="a scoring process died"):
        list(process_stream(os._exit, len, (3,), [["a"], ["b"]], 1))  # the worker exits as it starts
