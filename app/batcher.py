"""The model worker: one thread runs the model a step at a time, merging small requests when batching, and
serving clients in turn so that one client's flood cannot starve another's requests."""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from electra_detect.app.metrics import Metrics
from electra_detect.app.settings import ServerSettings
from electra_detect.detector import Detector, ScoringJob, TextScores

LONG_SLOTS = 2  # long requests (more than one step) that take turns at a time; the others wait in arrival order
ANONYMOUS = "-"  # the client of a request submitted without one


@dataclass
class _Pending:
    job: ScoringJob
    future: asyncio.Future  # set to (batch job, first text index); the handler cancels it to abandon the request
    client: str = ANONYMOUS


class RoundRobin:
    """Queues per client, popped a client at a time in turn (each client's own items first come first served):
    a client with a thousand items waiting delays another's next one by one item, not a thousand."""

    def __init__(self) -> None:
        self.queues: dict[str, deque] = {}  # in turn order: the next client to serve first

    def __bool__(self) -> bool:
        return bool(self.queues)

    def __len__(self) -> int:
        return sum(len(queue) for queue in self.queues.values())

    def push(self, client: str, item: object) -> None:
        self.queues.setdefault(client, deque()).append(item)

    def pop(self) -> object:
        client = next(iter(self.queues))
        queue = self.queues.pop(client)
        item = queue.popleft()
        if queue:
            self.queues[client] = queue  # back of the turn order
        return item


def interleave(arrivals: list[_Pending]) -> list[_Pending]:
    """Requests one from each client in turn (each client's in arrival order): what merging and the queues see."""
    turns = RoundRobin()
    for pending in arrivals:
        turns.push(pending.client, pending)
    return [turns.pop() for _ in range(len(arrivals))]


def long_slots(batches: list[_Batch], slots: int) -> list[_Batch]:
    """The long batches that take turns now: each client's first before any client's second, then arrival order;
    at most ``slots`` of them."""
    seen: Counter[str] = Counter()
    ranked = []
    for index, batch in enumerate(batches):
        ranked.append((seen[batch.client], index))
        seen[batch.client] += 1
    return [batches[index] for _, index in sorted(ranked)[:slots]]


class _Batch:
    """Requests scored as one job (one request, or several merged when batching)."""

    def __init__(self, requests: list[_Pending]) -> None:
        self.requests = requests
        self.job = requests[0].job if len(requests) == 1 else ScoringJob.merge([r.job for r in requests])
        self.client = requests[0].client  # a merged batch (short requests only) counts as its first one's
        self.merged = len(requests) > 1
        self.seconds = 0.0

    @property
    def live(self) -> bool:
        return any(not r.future.done() for r in self.requests)


class MicroBatcher:
    """Runs the model on one worker thread, a step (about ``step_tokens`` model tokens) at a time.

    Between two steps the worker takes new requests, drops requests whose client has gone (timed
    out or disconnected: their handler cancelled them), and picks the next step: short requests (one
    step or less; client by client in turn, each client's first come, first served) and long ones (the
    first ``LONG_SLOTS`` a step each in turn, chosen each client's first before any client's second, then
    in arrival order) share the model by tokens, a step's worth each in turn. So a heavy request
    delays a small one by about one step, not by its whole run, a flood of small requests cannot
    starve it either, one client's queue of requests does not hold up another client's, and a request
    stops using the model once its deadline has passed.

    With batching on, requests waiting together whose cost is at most one step are merged into one
    job (up to ``max_batch`` texts); a heavier request is never merged, so it cannot hold small ones.
    With batching off, each request is its own job (still one model thread, so the comparison with
    batching measures merging, not extra parallelism).
    """

    def __init__(self, detector: Detector, settings: ServerSettings, metrics: Metrics) -> None:
        self.detector, self.settings, self.metrics = detector, settings, metrics
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")
        self.queue: asyncio.Queue[_Pending | None] = asyncio.Queue()
        self.worker: asyncio.Task | None = None
        self.backlog = 0  # model tokens submitted and not yet run (or dropped)
        self.long_backlog = 0  # the part of it that belongs to long requests (more than one step)
        self.long_by_client: Counter[str] = Counter()  # the same, per client
        self.rate = 0.0  # model tokens per second while the model runs, a moving average over full steps
        # (time, long tokens run, seconds) of every step the model ran while long work waited, over the last 10 s: the
        # rate long work gets is its tokens over the time the model was busy (idle seconds are no one's work).
        self.long_log: deque[tuple[float, int, float]] = deque()

    def _is_long(self, job: ScoringJob) -> bool:
        return job.cost > self.settings.step_tokens

    def _spent(self, job: ScoringJob, tokens: int, client: str, merged: bool = False) -> None:
        """``tokens`` of ``job`` run or dropped; a merged job holds short requests only, however long it is."""
        self.backlog -= tokens
        if self._is_long(job) and not merged:
            self.long_backlog -= tokens
            self.long_by_client[client] -= tokens
            if self.long_by_client[client] <= 0:
                del self.long_by_client[client]

    def long_rate(self) -> float:
        """Model tokens a second that long work got over the last 10 s: its tokens over the seconds the model
        worked while long work waited (its own steps and the short ones that went ahead of it); half the model's
        rate when there was no long work lately (what long work gets when short requests keep coming); 0 before any
        step."""
        now = time.monotonic()
        while self.long_log and now - self.long_log[0][0] > 10:
            self.long_log.popleft()
        tokens = sum(ran for _, ran, _ in self.long_log)
        seconds = sum(took for _, _, took in self.long_log)
        return tokens / seconds if tokens and seconds > 0 else self.rate / 2

    def wait_estimate(self, cost: int, client: str = ANONYMOUS, others: bool = True) -> float:
        """Seconds until a long request of ``cost`` tokens from ``client``, queued now, would be done: the
        client's own long work queued before it and its own, plus as much of each other client's as runs in
        turn with it (at most the same amount), at :meth:`long_rate`; 0 before any step; ``others=False``: the
        client's own work alone."""
        rate = self.long_rate()
        own = self.long_by_client.get(client, 0) + cost
        ahead = own + others * sum(min(tokens, own) for other, tokens in self.long_by_client.items() if other != client)
        return ahead / rate if rate else 0.0

    def tokens_within(self, seconds: float, client: str = ANONYMOUS) -> int | None:
        """About how many model tokens of new long work ``client`` could have done within ``seconds`` (its own queue
        first, each other client with long work taking turns with it); None before any step (no rate known)."""
        rate = self.long_rate()
        if not rate:
            return None
        turns = 1 + sum(1 for other in self.long_by_client if other != client)
        return max(0, int(max(0.0, seconds) * rate / turns) - self.long_by_client.get(client, 0))

    async def start(self) -> None:
        self.worker = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Score everything still queued or in progress, then release the model thread."""
        if self.worker is not None:
            await self.queue.put(None)
            await self.worker
        self.executor.shutdown(wait=True)

    def submit(self, job: ScoringJob, client: str = ANONYMOUS) -> asyncio.Future:
        """Queue ``job`` for ``client`` (the fairness unit: an API key's name or an address)."""
        future = asyncio.get_running_loop().create_future()
        self.metrics.queue.inc()
        self.backlog += job.cost
        if self._is_long(job):
            self.long_backlog += job.cost
            self.long_by_client[client] += job.cost
        self.queue.put_nowait(_Pending(job, future, client))
        return future

    async def score(self, texts: list[str]) -> list[TextScores]:
        """Score to the end, without a deadline (the handlers use ``submit`` and cancel on timeout)."""
        job, start = await self.submit(self.detector.job(texts, self.settings.model_batch))
        return job.results(start, start + len(texts))

    def _step(self, batch: _Batch) -> int:
        started = time.perf_counter()
        ran = batch.job.step(self.settings.step_tokens)
        seconds = time.perf_counter() - started
        batch.seconds += seconds
        if seconds > 0 and ran >= self.settings.step_tokens // 2:  # full steps: tiny ones measure overhead, not speed
            self.rate = ran / seconds if not self.rate else 0.9 * self.rate + 0.1 * ran / seconds
        return ran

    def _mergeable(self, pending: _Pending) -> bool:
        return self.settings.batching and pending.job.cost <= self.settings.step_tokens

    def _group(self, arrivals: list[_Pending]) -> list[_Batch]:
        batches, merged, count = [], [], 0
        for pending in interleave(arrivals):  # merged batches take each client's requests in turn
            if pending.future.done():  # abandoned while queued: never scored
                self._spent(pending.job, pending.job.cost, pending.client)
                continue
            if not self._mergeable(pending):
                batches.append(_Batch([pending]))
                continue
            if merged and (count + len(pending.job.texts) > self.settings.max_batch
                           or pending.job.calibrated != merged[0].job.calibrated):  # one probability space a batch
                batches.append(_Batch(merged))
                merged, count = [], 0
            merged.append(pending)
            count += len(pending.job.texts)
        if merged:
            batches.append(_Batch(merged))
        return batches

    def _drain(self) -> tuple[list[_Pending], bool]:
        items: list[_Pending] = []
        while True:
            try:
                item = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                return items, False
            if item is None:
                return items, True
            items.append(item)

    async def _collect(self, first: _Pending) -> tuple[list[_Pending], bool]:
        """With batching on and nothing in progress: requests arriving within max_wait (up to max_batch texts)
        join the first; (requests, stop seen)."""
        batch, count = [first], len(first.job.texts)
        if not self._mergeable(first):
            return batch, False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.max_wait_ms / 1000
        while count < self.settings.max_batch:
            try:
                item = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    item = await asyncio.wait_for(self.queue.get(), remaining)
                except TimeoutError:
                    break
            if item is None:
                return batch, True
            batch.append(item)
            count += len(item.job.texts)
        return batch, False

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        fresh = RoundRobin()  # requests of one step or less: client by client, each client's first come first served
        # Longer requests in arrival order; the first LONG_SLOTS take a step each in turn. Round-robin over all of
        # them would have every one finish late (25 long requests together all hit their deadline); in order,
        # they finish one or two at a time, and the 503 estimate of when a new one would finish holds.
        started: list[_Batch] = []
        long_turn = 0
        # With both waiting they share the model by tokens: short requests run until they have used one step's
        # tokens, then one step of a long one. So short requests are not stuck behind long ones, and a flood of
        # short requests cannot starve a long one.
        fresh_credit = self.settings.step_tokens
        stopping = False
        while True:
            if fresh or started:
                arrivals, seen_stop = self._drain()
            elif stopping and self.queue.empty():
                break
            else:
                first = await self.queue.get()
                if first is None:
                    stopping = True
                    continue
                arrivals, seen_stop = await self._collect(first)
                if not seen_stop:  # everything waiting joins the queues now: clients take turns over all of it
                    more, seen_stop = self._drain()
                    arrivals += more
            stopping = stopping or seen_stop
            self.metrics.queue.dec(len(arrivals))
            for batch in self._group(arrivals):  # a request of more than one step goes to the long queue at once
                if batch.job.cost <= self.settings.step_tokens or batch.merged:
                    fresh.push(batch.client, batch)
                else:
                    started.append(batch)
            for batch in [b for b in started if not b.live]:  # every client gave up: stop spending the model on it
                started.remove(batch)
                self.metrics.dropped.inc(len(batch.requests))
                self._spent(batch.job, batch.job.remaining, batch.client, batch.merged)
            if not (fresh or started):
                continue
            use_fresh = bool(fresh) and (fresh_credit > 0 or not started)
            if use_fresh:
                batch = fresh.pop()
                if not batch.live:
                    self.metrics.dropped.inc(len(batch.requests))
                    self._spent(batch.job, batch.job.remaining, batch.client, batch.merged)
                    continue
            else:
                turns = long_slots(started, LONG_SLOTS)
                batch = turns[long_turn % len(turns)]
                long_turn += 1
            long_waiting = bool(started)
            try:
                began = time.monotonic()
                ran = await loop.run_in_executor(self.executor, self._step, batch)
                fresh_credit = fresh_credit - ran if use_fresh else self.settings.step_tokens
                self._spent(batch.job, ran, batch.client, batch.merged)
                long_step = self._is_long(batch.job) and not batch.merged
                if long_waiting or long_step:
                    ended = time.monotonic()
                    self.long_log.append((ended, ran if long_step else 0, ended - began))
            except Exception as exc:  # an engine failure fails these requests, not the server
                self._spent(batch.job, batch.job.remaining, batch.client, batch.merged)
                if batch in started:
                    started.remove(batch)
                for pending in batch.requests:
                    if not pending.future.done():
                        pending.future.set_exception(exc)
                continue
            if not batch.job.done:
                if use_fresh:  # (only when one window is longer than a step)
                    started.append(batch)
                continue
            if not use_fresh:
                started.remove(batch)
            texts = batch.job.texts
            self.metrics.model_seconds.observe(batch.seconds)
            self.metrics.batch_texts.observe(len(texts))
            self.metrics.texts.inc(len(texts))
            self.metrics.tokens.inc(batch.job.tokens)
            start = 0
            for pending in batch.requests:
                if not pending.future.done():
                    pending.future.set_result((batch.job, start))
                start += len(pending.job.texts)
