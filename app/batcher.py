"""The model worker: one thread runs the model a step at a time, merging small requests when batching, and
serving clients in turn so that one client's flood cannot starve another's requests."""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from electra_detect.app.clients import small
from electra_detect.app.metrics import Metrics
from electra_detect.app.settings import ServerSettings
from electra_detect.detector import Detector
from electra_detect.scores import TextScores
from electra_detect.scoring_job import ScoringJob

LONG_SLOTS = 2  # long requests (more than one step) that take turns at a time; the others wait in arrival order
ANONYMOUS = "-"  # the client of a request submitted without one


@dataclass
class _Pending:
    job: ScoringJob
    future: asyncio.Future  # set to (batch job, first text index); the handler cancels it to abandon the request
    client: str = ANONYMOUS


class FairQueue:
    """Short requests waiting. Clients take turns (round-robin: a client with a thousand requests waiting delays
    another's next one by one request, not a thousand); within a client, its small requests (``clients.small``: a
    sentence or a paragraph) go ahead of its bigger ones, up to ``step_tokens`` of them between two of the others so
    that neither starves; each kind first come, first served. So an editor's sentence behind the same address as a
    batch job's pool of 16 or 96 connections waits for the step under way, not for the pool's queue.

    Why by size and not by connection: four orders over a client's connections were tried first. Start-time and
    self-clocked fair queueing tie the pool's connections at the clock each round, and a sentence sent twice in a
    round waited for the round (2.5 s and 8 s under 16 connections); least usage first, or a virtual clock in real
    time, served the sentence at once until the pool's returning connections passed its waiting ones (50 past their
    deadline) or its requests fell behind the clock (p95 3.7 s under 96); and what a connection held in flight made a
    pool's connection that was refused look light. A request's size is what it says itself: no history, no clock."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.clients: dict[str, tuple[deque, deque]] = {}  # client -> (small requests, others); in turn order
        self.credit: dict[str, int] = {}  # client -> tokens its small requests may still take before another's turn

    def __bool__(self) -> bool:
        return bool(self.clients)

    def __len__(self) -> int:
        return sum(len(smalls) + len(others) for smalls, others in self.clients.values())

    def push(self, pending: _Pending) -> None:
        smalls, others = self.clients.setdefault(pending.client, (deque(), deque()))
        (smalls if small(pending.job.cost, self.settings) else others).append(pending)

    def _queue(self, client: str) -> deque:
        smalls, others = self.clients[client]
        return smalls if smalls and (not others or self.credit.get(client, self.settings.step_tokens) > 0) else others

    def peek(self) -> _Pending:
        """The request :meth:`pop` would return."""
        return self._queue(next(iter(self.clients)))[0]

    def pop(self) -> _Pending:
        client = next(iter(self.clients))
        queue = self._queue(client)
        pending = queue.popleft()
        smalls, others = self.clients.pop(client)
        if queue is smalls:
            self.credit[client] = self.credit.get(client, self.settings.step_tokens) - pending.job.cost
        else:
            self.credit[client] = self.settings.step_tokens
        if smalls or others:
            self.clients[client] = (smalls, others)  # back of the turn order
        else:
            del self.credit[client]
        return pending


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
    step or less; client by client in turn, each client's small ones ahead of its bigger ones: ``FairQueue``)
    and long ones (the first ``LONG_SLOTS`` a step each in turn, chosen each client's first before any client's
    second, then in arrival order) share the model by tokens, a step's worth each in turn. So a heavy request
    delays a small one by about one step, not by its whole run, a flood of small requests cannot
    starve it either, one client's queue of requests does not hold up another client's (nor a batch job's pool of
    connections an editor's beside it at the same address), and a request stops using the model once its deadline
    has passed.

    With batching on, small requests (a quarter of a step or less) are merged as they are taken, in the queue's
    order, into one job of at most a step (and ``max_batch`` texts); a heavier request is never merged, so it cannot
    hold small ones.
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
        """Whether a request may share a model call: batching on, and small (``clients.small``: a sentence merged
        with a request of nearly a step waits for all of it; requests that big gain little from merging)."""
        return self.settings.batching and small(pending.job.cost, self.settings)

    def _abandoned(self, pending: _Pending) -> bool:
        """Whether its client gave up on it while it queued (then it is never scored: counted as dropped)."""
        if not pending.future.done():
            return False
        self.metrics.dropped.inc()
        self._spent(pending.job, pending.job.cost, pending.client)
        return True

    def _short_batch(self, fresh: FairQueue) -> _Batch | None:
        """The next short requests to run, in the queue's fair order: the first one still wanted and, when it is
        mergeable, the mergeable ones after it in that order while the batch stays within one step, ``max_batch``
        texts and one probability space (so a short request waits for at most a step of others' work)."""
        first = None
        while fresh and first is None:
            pending = fresh.pop()
            first = None if self._abandoned(pending) else pending
        if first is None:
            return None
        requests, cost, texts = [first], first.job.cost, len(first.job.texts)
        while self._mergeable(first) and fresh:
            pending = fresh.peek()
            if pending.future.done():
                self._abandoned(fresh.pop())
                continue
            if (not self._mergeable(pending) or cost + pending.job.cost > self.settings.step_tokens
                    or texts + len(pending.job.texts) > self.settings.max_batch
                    or pending.job.calibrated != first.job.calibrated):  # one probability space a batch
                break
            requests.append(fresh.pop())
            cost, texts = cost + pending.job.cost, texts + len(pending.job.texts)
        return _Batch(requests)

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
        fresh = FairQueue(self.settings)  # requests of a step or less: clients in turn, each client's small ones first
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
            for pending in arrivals:  # a request of more than one step goes to the long queue at once
                if self._abandoned(pending):
                    continue
                if pending.job.cost <= self.settings.step_tokens:
                    fresh.push(pending)  # merged (when batching) as it is taken: in the queue's order, not arrival's
                else:
                    started.append(_Batch([pending]))
            for batch in [b for b in started if not b.live]:  # every client gave up: stop spending the model on it
                started.remove(batch)
                self.metrics.dropped.inc(len(batch.requests))
                self._spent(batch.job, batch.job.remaining, batch.client, batch.merged)
            if not (fresh or started):
                continue
            use_fresh = bool(fresh) and (fresh_credit > 0 or not started)
            if use_fresh:
                short = self._short_batch(fresh)
                if short is None:  # every short request waiting was abandoned
                    continue
                batch = short
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
