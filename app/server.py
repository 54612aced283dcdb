"""HTTP inference server over one ``Detector`` (the ONNX engine by default), with micro-batching.

Why it is shaped this way:
- One model thread. The engine already uses every core inside a call, so concurrent calls would
  only fight; instead concurrent requests queue, and ``MicroBatcher`` runs them a step (about
  ``step_tokens`` model tokens) at a time, short and long requests sharing it by tokens, merging small
  requests that wait together (up to ``max_batch`` texts or ``max_wait_ms``) into one job. A heavy
  request delays the others by about one step, and stops using the model as soon as its deadline
  passes or its client disconnects.
- Every failure is a JSON body ``{"error": {"type", "message"}}`` with a 4xx (bad input, limits,
  auth) or 5xx (timeout, engine failure); nothing a client sends stops the process.
- Limits (texts per request, characters per text, model tokens per request, body bytes, request
  timeout, read timeout) are checked before any text reaches the model; the body limit is enforced on
  the bytes received, not only the header. Every number in a body is checked to a finite range.
- Shutdown (SIGTERM/SIGINT, via uvicorn) stops accepting, lets in-flight requests finish, then the
  batcher drains its queue before the process exits.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from starlette.exceptions import HTTPException as StarletteHTTPException

from electra_detect.detector import Detector, ScoringJob, TextScores

log = logging.getLogger("electra_detect.server")

API_KEY_HEADER = "x-api-key"
LONG_SLOTS = 2  # long requests (more than one step) that take turns at a time; the others wait in arrival order


@dataclass
class ServerSettings:
    max_texts: int = 64  # texts per request (hypotheses, for /v1/rerank)
    max_chars: int = 10_000  # characters per text
    max_body_bytes: int = 1 << 20
    max_tokens: int = 32_768  # model tokens per request: its texts' windows, [CLS]/[SEP] and window overlap counted
    timeout_s: float = 30.0  # per request, queueing included
    step_tokens: int = 1024  # model tokens per scheduling step: how long a request can hold up another one
    read_timeout_s: float = 10.0  # to send a request's head, and again its body; slower clients are dropped
    batching: bool = True
    max_batch: int = 32  # texts merged into one model call when batching
    model_batch: int = 4  # rows per engine run inside a call, length-sorted: on CPU small runs pad least
    max_wait_ms: float = 0.0  # how long the first request holds a batch open; 0 = merge only what already waits
    api_key: str | None = None  # required in the X-API-Key header when set
    ged_threshold: float | None = None  # default /v1/ged threshold; None = the Detector's tuned one


class ApiError(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def error_response(status: int, kind: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message, **extra}}, status_code=status)


# ------------------------------------------------------------------------------------------ metrics

class Metrics:
    """Prometheus metrics in a registry of their own (several apps may live in one test process)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

        self.registry = CollectorRegistry()
        self.requests = Counter("electra_requests", "HTTP requests", ["path", "status"], registry=self.registry)
        self.latency = Histogram("electra_request_seconds", "request latency", ["path"], registry=self.registry,
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.batch_texts = Histogram("electra_batch_texts", "texts per model call", registry=self.registry,
                                     buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))
        self.model_seconds = Histogram("electra_model_seconds", "seconds per model call", registry=self.registry,
                                       buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10))
        self.texts = Counter("electra_texts", "texts scored", registry=self.registry)
        self.tokens = Counter("electra_tokens", "tokens scored", registry=self.registry)
        self.queue = Gauge("electra_queue_requests", "requests waiting for the model", registry=self.registry)
        self.inflight = Gauge("electra_inflight_requests", "requests being handled", registry=self.registry)
        self.abandoned = Counter("electra_abandoned_requests", "requests given up before they were scored",
                                 ["reason"], registry=self.registry)
        self.dropped = Counter("electra_dropped_requests", "abandoned requests the model stopped working on",
                               registry=self.registry)
        self.info = Info("electra_engine", "engine the server runs", registry=self.registry)

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


# ------------------------------------------------------------------------------------- the model worker

@dataclass
class _Pending:
    job: ScoringJob
    future: asyncio.Future  # set to (batch job, first text index); the handler cancels it to abandon the request


class _Batch:
    """Requests scored as one job (one request, or several merged when batching)."""

    def __init__(self, requests: list[_Pending]) -> None:
        self.requests = requests
        self.job = requests[0].job if len(requests) == 1 else ScoringJob.merge([r.job for r in requests])
        self.seconds = 0.0

    @property
    def live(self) -> bool:
        return any(not r.future.done() for r in self.requests)


class MicroBatcher:
    """Runs the model on one worker thread, a step (about ``step_tokens`` model tokens) at a time.

    Between two steps the worker takes new requests, drops requests whose client has gone (timed
    out or disconnected: their handler cancelled them), and picks the next step: short requests (one
    step or less; first come, first served) and long ones (in arrival order, the first ``LONG_SLOTS``
    a step each in turn) share the model by tokens, a step's worth each in turn. So a heavy request
    delays a small one by about one step, not by its whole run, a flood of small requests cannot
    starve it either, and it stops using the model once its deadline has passed.

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
        self.rate = 0.0  # model tokens per second while the model runs, a moving average over full steps
        self.long_log: deque[tuple[float, int]] = deque()  # (time, tokens) of long requests' steps, last 10 s

    def _is_long(self, job: ScoringJob) -> bool:
        return job.cost > self.settings.step_tokens

    def _spent(self, job: ScoringJob, tokens: int) -> None:
        self.backlog -= tokens
        if self._is_long(job):
            self.long_backlog -= tokens

    def wait_estimate(self, cost: int) -> float:
        """Seconds until a long request of ``cost`` tokens, queued now, would be done: the long work queued
        before it and its own, at the rate long work actually got over the last 10 s (short requests take
        their share first); at half the model's rate when there was no long work lately; 0 before any step."""
        now = time.monotonic()
        while self.long_log and now - self.long_log[0][0] > 10:
            self.long_log.popleft()
        span = now - self.long_log[0][0] if self.long_log else 0.0
        # Without recent long work: half the model's rate, what long work gets when short requests keep coming.
        rate = sum(tokens for _, tokens in self.long_log) / span if span >= 2 else self.rate / 2
        return (self.long_backlog + cost) / rate if rate else 0.0

    async def start(self) -> None:
        self.worker = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Score everything still queued or in progress, then release the model thread."""
        if self.worker is not None:
            await self.queue.put(None)
            await self.worker
        self.executor.shutdown(wait=True)

    def submit(self, job: ScoringJob) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self.metrics.queue.inc()
        self.backlog += job.cost
        if self._is_long(job):
            self.long_backlog += job.cost
        self.queue.put_nowait(_Pending(job, future))
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
        for pending in arrivals:
            if pending.future.done():  # abandoned while queued: never scored
                self._spent(pending.job, pending.job.cost)
                continue
            if not self._mergeable(pending):
                batches.append(_Batch([pending]))
                continue
            if merged and count + len(pending.job.texts) > self.settings.max_batch:
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
        fresh: deque[_Batch] = deque()  # requests of one step or less, first come first served
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
            stopping = stopping or seen_stop
            self.metrics.queue.dec(len(arrivals))
            for batch in self._group(arrivals):  # a request of more than one step goes to the long queue at once
                (fresh if batch.job.cost <= self.settings.step_tokens else started).append(batch)
            for batch in [b for b in started if not b.live]:  # every client gave up: stop spending the model on it
                started.remove(batch)
                self.metrics.dropped.inc(len(batch.requests))
                self._spent(batch.job, batch.job.remaining)
            if not (fresh or started):
                continue
            use_fresh = bool(fresh) and (fresh_credit > 0 or not started)
            if use_fresh:
                batch = fresh.popleft()
                if not batch.live:
                    self.metrics.dropped.inc(len(batch.requests))
                    self._spent(batch.job, batch.job.remaining)
                    continue
            else:
                batch = started[long_turn % min(len(started), LONG_SLOTS)]
                long_turn += 1
            try:
                ran = await loop.run_in_executor(self.executor, self._step, batch)
                fresh_credit = fresh_credit - ran if use_fresh else self.settings.step_tokens
                self._spent(batch.job, ran)
                if self._is_long(batch.job):
                    self.long_log.append((time.monotonic(), ran))
            except Exception as exc:  # an engine failure fails these requests, not the server
                self._spent(batch.job, batch.job.remaining)
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


# --------------------------------------------------------------------------------------- request bodies

WEIGHT_LIMIT = 1e6  # |lm_weight|, |length_weight|
SCORE_LIMIT = 1e12  # |recogniser score|


def _finite(limit: float, low: float | None = None) -> AfterValidator:
    """A JSON number (int or float) in [low, limit] (low defaults to -limit), as a float. Checked before any
    arithmetic, so a 400-digit integer or 1e308 is a 422, not an OverflowError or an infinite total."""
    low = -limit if low is None else low

    def check(value: float | int) -> float:
        if isinstance(value, float) and not math.isfinite(value) or not low <= value <= limit:
            raise ValueError(f"must be a finite number in [{low:g}, {limit:g}]")
        return float(value)

    return AfterValidator(check)


Number = StrictFloat | StrictInt  # bool is not a number here: StrictInt rejects true/false
# A text with a character outside Python's str.isspace() set, spelled out so that the server's check, pydantic's
# (Rust) regex and a client's JSON-schema regex all agree on what "blank" means.
NOT_BLANK = r"[^\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
Text = Annotated[StrictStr, Field(json_schema_extra={"pattern": NOT_BLANK})]  # checked in _check_texts, after
# pydantic: a lone surrogate must still reach the text check and its invalid_text answer

# The one-string n-best form as the rerank reader parses it (str.splitlines, then an optional score after the first
# TAB or " ||| "), spelled as a regex so the schema and the server's check agree: a hypothesis per line, blank lines
# skipped, a score a plain decimal below 1e9. Every line ends at one terminator character (a CRLF is a line and a
# blank one), so the regex has one parse and no catastrophic backtracking.
_END = r"\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029"
_INLINE_BLANK = r"\x1f \xa0\u1680\u2000-\u200a\u202f\u205f\u3000"
_NO_SEP = r"(?! \|\|\| )"
_HYPOTHESIS_LINE = (rf"(?:{_NO_SEP}[{_INLINE_BLANK}])*{NOT_BLANK}(?:{_NO_SEP}[^\t{_END}])*"
                    rf"(?:(?:\t| \|\|\| )[\t{_INLINE_BLANK}]*-?[0-9]{{1,9}}(?:\.[0-9]{{1,9}})?[\t{_INLINE_BLANK}]*)?")
NBEST_LINES = rf"^(?=[\s\S]*{NOT_BLANK})(?:(?:{_HYPOTHESIS_LINE}|[\t{_INLINE_BLANK}]*)[{_END}])*" \
              rf"(?:{_HYPOTHESIS_LINE}|[\t{_INLINE_BLANK}]*)$"
NbestLines = Annotated[StrictStr, Field(json_schema_extra={"pattern": NBEST_LINES})]  # checked in the handler


def _bounds(limit: float, low: float | None = None) -> Any:
    """The same bounds as :func:`_finite`, declared in the OpenAPI schema (the check itself stays _finite's)."""
    return Field(json_schema_extra={"minimum": -limit if low is None else low, "maximum": limit})


Weight = Annotated[Number, _finite(WEIGHT_LIMIT), _bounds(WEIGHT_LIMIT)]
Threshold = Annotated[Number, _finite(1.0, 0.0), _bounds(1.0, 0.0)]
AsrScore = Annotated[Number, _finite(SCORE_LIMIT), _bounds(SCORE_LIMIT)]


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    texts: list[Text] = Field(min_length=1,
                              description="texts to score (1 to max_texts, each 1 to max_chars characters, "
                                          "together at most max_tokens model tokens)")
    tokens: StrictBool = Field(True, description="include per-subword scores (true or false; not 1 or \"yes\")")


class GedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    texts: list[Text] = Field(min_length=1, description="texts to check (limits as for /v1/score)")
    threshold: Threshold | None = Field(None, description="in [0, 1]; default: the model's ged.json, else 0.5")


class Hypothesis(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: Text
    score: AsrScore | None = Field(None, description=f"recogniser (ASR) log score, |score| <= {SCORE_LIMIT:g}")


class RerankRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lists: list[Annotated[list[Hypothesis | Text], Field(min_length=1)] | NbestLines] = Field(
        min_length=1,
        description="n-best lists: each a list of hypotheses ({text, score} or plain text), or one string "
                    "with a hypothesis per line and an optional score after a TAB or ' ||| ' (a plain decimal, "
                    "at most 9 digits before the point). All hypotheses together count against max_texts and "
                    "max_tokens")
    lm_weight: Weight = Field(1.0, description=f"weight of the ELECTRA score, |lm_weight| <= {WEIGHT_LIMIT:g}")
    length_weight: Weight = Field(0.0, description=f"weight per word, |length_weight| <= {WEIGHT_LIMIT:g}")
    confidence: StrictBool = Field(False, description="add each word of the top hypothesis with its probability of "
                                                      "being wrong (word confidence for the recogniser)")


# ------------------------------------------------------------------------------------------ the app

def _check_texts(texts: list[str], settings: ServerSettings, what: str = "texts") -> None:
    if not texts:
        raise ApiError(422, "invalid_request", f"{what} must be a non-empty list")
    if len(texts) > settings.max_texts:
        raise ApiError(413, "too_many_texts", f"{len(texts)} {what} in one request; the limit is {settings.max_texts}")
    for index, text in enumerate(texts):
        if not re.search(NOT_BLANK, text):
            raise ApiError(422, "invalid_request", f"{what}[{index}] is empty")
        if len(text) > settings.max_chars:
            raise ApiError(413, "text_too_long", f"{what}[{index}] has {len(text)} characters; "
                                                 f"the limit is {settings.max_chars}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(422, "invalid_text", f"{what}[{index}] is not valid Unicode (lone surrogate)") from None


def _result(scores: TextScores, tokens: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"text": scores.text, "sentence_mean": scores.sentence_mean,
                           "sentence_sum": scores.sentence_sum,
                           "words": [{"word": w.word, "start": w.start, "end": w.end, "score": w.score}
                                     for w in scores.words]}
    if tokens:
        row["tokens"] = [{"token": t.token, "start": t.start, "end": t.end, "p_replaced": t.p_replaced}
                         for t in scores.tokens]
    return row


class _Guard:
    """ASGI middleware: API key, Content-Type, body-size limit on received bytes, body read timeout,
    request metrics, and the last word on an unexpected exception (a JSON 500 on a connection that stays
    usable, one log line with its traceback).

    Pure ASGI (not BaseHTTPMiddleware) so the body can be counted as it arrives and a 413 sent
    before the app sees an oversized payload.
    """

    def __init__(self, app: Any, settings: ServerSettings, metrics: Metrics) -> None:
        self.app, self.settings, self.metrics = app, settings, metrics

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]], send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        label = path if path in ("/v1/score", "/v1/ged", "/v1/rerank", "/healthz", "/metrics") else "other"
        started = time.perf_counter()
        status_box = {"status": 500, "started": False}

        async def send_counted(message: dict) -> None:
            if message["type"] == "http.response.start":
                status_box["status"] = message["status"]
                status_box["started"] = True
            await send(message)

        self.metrics.inflight.inc()
        try:
            rejection = self._reject(scope)
            if rejection is None and scope["method"] in ("POST", "PUT", "PATCH"):
                rejection = self._content_type(scope)
            if rejection is None and scope["method"] in ("POST", "PUT", "PATCH"):
                body, rejection = await self._read_body(scope, receive)
                if rejection is None and body.strip() and b"content-type" not in dict(scope.get("headers") or []):
                    rejection = error_response(415, "unsupported_media_type",
                                               "send JSON with a Content-Type: application/json header")
                if rejection is None:
                    receive = _replay(body, receive)
            if rejection is not None:
                await rejection(scope, receive, send_counted)
            else:
                await self.app(scope, receive, send_counted)
        except Exception as exc:  # a bug, not the client's fault: answer it, keep the connection and the process
            log.exception("internal error on %s %s", scope["method"], path)
            if not status_box["started"]:
                await error_response(500, "internal_error", f"{type(exc).__name__}: {exc}")(scope, receive,
                                                                                            send_counted)
        finally:
            self.metrics.inflight.dec()
            self.metrics.requests.labels(label, str(status_box["status"])).inc()
            self.metrics.latency.labels(label).observe(time.perf_counter() - started)

    def _reject(self, scope: dict) -> JSONResponse | None:
        if self.settings.api_key and scope["path"] != "/healthz":
            headers = dict(scope.get("headers") or [])
            given = headers.get(API_KEY_HEADER.encode(), b"")
            if not hmac.compare_digest(given, self.settings.api_key.encode()):
                return error_response(401, "unauthorized", f"missing or wrong {API_KEY_HEADER} header")
        return None

    @staticmethod
    def _content_type(scope: dict) -> JSONResponse | None:
        """A Content-Type other than JSON is a 415; a missing one is judged once the body is read (a POST
        with no body at all is the app's 422, with a body it is a 415)."""
        kind = dict(scope.get("headers") or []).get(b"content-type", b"application/json").decode("latin-1")
        media = kind.split(";")[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            return error_response(415, "unsupported_media_type", f"send JSON (Content-Type: application/json), "
                                                                  f"not {media or 'nothing'}")
        return None

    async def _read_body(self, scope: dict, receive: Callable) -> tuple[bytes, JSONResponse | None]:
        limit = self.settings.max_body_bytes
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        too_big = error_response(413, "body_too_large", f"request body over {limit} bytes")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return b"", too_big
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.read_timeout_s
        chunks, size = [], 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:  # a slow (or stalled) client: answer and close, do not hold the connection
                late = error_response(408, "request_timeout", f"the request body did not arrive within "
                                                              f"{self.settings.read_timeout_s:g} s")
                late.headers["connection"] = "close"
                return b"", late
            if message["type"] == "http.disconnect":
                return b"", error_response(400, "disconnected", "client disconnected")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return b"", too_big
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), None


def _replay(body: bytes, original: Callable[[], Awaitable[dict]]) -> Callable[[], Awaitable[dict]]:
    """The body we already read, then the real channel (which reports a disconnect)."""
    sent = False

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await original()

    return receive


async def _disconnect(request: Request) -> None:
    """Returns when the client has gone (the body was read already: the channel only reports that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _json_error(exc: BaseException | None) -> tuple[str, str]:
    """(type, message) for a body the JSON parser rejected, from the parser's own exception."""
    if isinstance(exc, UnicodeDecodeError):
        return "bad_request", "the body is not valid UTF-8"
    if isinstance(exc, RecursionError):
        return "json_too_deep", "the JSON body is nested too deeply (arrays or objects inside each other)"
    if isinstance(exc, ValueError) and "digits" in str(exc):
        return "number_too_long", f"a number in the JSON body has too many digits ({exc})"
    return "bad_request", "the body is not valid UTF-8 JSON"


LIMITS_DOC = (
    "Limits (each a JSON error): more than max_texts texts or hypotheses: 413 too_many_texts; a text over max_chars "
    "characters: 413 text_too_long; more than max_tokens model tokens in one request (the texts' windows with "
    "[CLS]/[SEP], overlap counted): 413 too_many_tokens; a body over max_body_bytes: 413 body_too_large; a body "
    "not sent within read_timeout: 408 request_timeout (and a request head not sent within it: the connection is "
    "closed); not scored within timeout, queueing included: 504 timeout (the model stops working on it); a "
    "request of more than step_tokens that could not finish before its deadline at the present load: 503 "
    "overloaded (Retry-After); a body "
    "without Content-Type: application/json: 415 unsupported_media_type; malformed JSON: 400 malformed_json, "
    "bad_request (not UTF-8), json_too_deep, number_too_long; a field of the wrong type or out of range (numbers "
    "must be finite and in range, booleans true/false): 422 invalid_request. See docs/serving.md.")


def create_app(detector: Detector, settings: ServerSettings | None = None) -> FastAPI:
    """The FastAPI app over ``detector``; the batcher lives from startup to the end of shutdown."""
    from electra_detect.tasks.rerank import (
        RerankError,
        parse_hypothesis_lines,
        rank_hypotheses,
        sentence_score,
        word_confidence,
    )

    settings = settings or ServerSettings()
    metrics = Metrics()
    engine = detector.engine
    info = {"engine": engine.name, "provider": str(getattr(engine, "provider", "?")),
            "variant": str(getattr(engine, "variant", "torch")), "calibration": detector.calibration,
            "model": str(detector.model_dir), "batching": str(settings.batching)}
    metrics.info.info(info)
    default_threshold = detector.threshold() if settings.ged_threshold is None else settings.ged_threshold
    state: dict[str, MicroBatcher] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        batcher = MicroBatcher(detector, settings, metrics)
        await batcher.start()
        state["batcher"] = app.state.batcher = batcher
        try:
            yield
        finally:
            await batcher.stop()

    limits = (f"This server: max_texts {settings.max_texts}, max_chars {settings.max_chars}, max_tokens "
              f"{settings.max_tokens}, max_body_bytes {settings.max_body_bytes}, timeout {settings.timeout_s:g} s, "
              f"read_timeout {settings.read_timeout_s:g} s.")
    app = FastAPI(title="electra-detect", version="0.1.0", lifespan=lifespan,
                  description="Per-token replaced probabilities from an ELECTRA discriminator: scores, "
                              "grammatical error flags and n-best reranking. Errors are JSON: "
                              '{"error": {"type", "message"}}. ' + LIMITS_DOC + " " + limits)
    errors = {400: {"description": "malformed_json or bad_request: the body is not JSON (or not UTF-8)"},
              413: {"description": "too_many_texts, text_too_long, too_many_tokens or body_too_large"},
              415: {"description": "unsupported_media_type: send Content-Type: application/json"},
              422: {"description": "invalid_request: a field is missing, of the wrong type or out of range"},
              503: {"description": "overloaded: a long request that could not finish before its deadline"},
              504: {"description": "timeout: not scored within the server's timeout"}}

    async def scored(request: Request, texts: list[str]) -> list[TextScores]:
        """Scores of ``texts`` within the request's deadline; a client that goes away or times out stops
        the model's work on its request at the next step."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.timeout_s
        timeout = ApiError(504, "timeout", f"not scored within {settings.timeout_s:g} s")
        try:  # tokenizing a large request takes a while: off the event loop
            job = await asyncio.wait_for(asyncio.to_thread(detector.job, texts, settings.model_batch),
                                         settings.timeout_s)
        except TimeoutError:
            raise timeout from None
        if job.cost > settings.max_tokens:
            raise ApiError(413, "too_many_tokens",
                           f"the request needs {job.cost} model tokens ({job.tokens} text tokens in windows of "
                           f"{detector.max_length}); the limit is {settings.max_tokens}: send fewer or shorter texts")
        batcher = state["batcher"]
        wait = batcher.wait_estimate(job.cost)
        if job.cost > settings.step_tokens and wait > 0.8 * (deadline - loop.time()):
            # Long requests queue behind each other: one that cannot finish before its deadline at the
            # present rate would only take model time from the others and then get a 504. (Short requests go
            # ahead of the queue, so they are always taken.)
            metrics.abandoned.labels("overloaded").inc()
            raise ApiError(503, "overloaded", f"the server has about {wait:.0f} s of work for this request and the "
                                              f"ones queued before it (timeout {settings.timeout_s:g} s); retry later "
                                              f"or send less text")
        future = batcher.submit(job)
        gone = asyncio.ensure_future(_disconnect(request))
        try:
            await asyncio.wait({future, gone}, timeout=max(0.0, deadline - loop.time()),
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if not future.done():
            future.cancel()  # the worker drops the request at its next step
            reason = "disconnect" if gone.done() and not gone.cancelled() else "timeout"
            metrics.abandoned.labels(reason).inc()
            if reason == "disconnect":
                raise ApiError(499, "client_closed_request", "the client disconnected")
            raise timeout
        batch_job, start = future.result()
        return await asyncio.to_thread(batch_job.results, start, start + len(texts))

    async def reply(build: Callable[[], dict[str, Any]]) -> Response:
        """A large answer is built and serialised off the event loop (other requests keep flowing)."""
        body = await asyncio.to_thread(
            lambda: json.dumps(build(), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode())
        return Response(body, media_type="application/json")

    @app.exception_handler(ApiError)
    async def _api_error(_, exc: ApiError) -> JSONResponse:
        response = error_response(exc.status, exc.kind, exc.message)
        if exc.status == 503:
            response.headers["retry-after"] = "2"  # below the 5-s keep-alive: a client that waits keeps its connection
        return response

    @app.exception_handler(RequestValidationError)
    async def _invalid(_, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return error_response(400, "malformed_json", "the body is not valid JSON")
        details = [{"loc": [str(p) for p in e.get("loc", ())], "message": e.get("msg", "")} for e in errors[:20]]
        first = details[0] if details else {"loc": [], "message": "invalid request"}
        return error_response(422, "invalid_request", f"{'.'.join(first['loc'])}: {first['message']}",
                              details=details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            kind, message = _json_error(exc.__cause__)
            return error_response(400, kind, message)
        kind = "not_found" if exc.status_code == 404 else "http_error"
        response = error_response(exc.status_code, kind, str(exc.detail))
        response.headers.update(exc.headers or {})  # a 405 must say which methods are allowed (Allow)
        return response

    @app.exception_handler(Exception)
    async def _crash(_, exc: Exception) -> JSONResponse:
        return error_response(500, "internal_error", f"{type(exc).__name__}: {exc}")

    @app.get("/healthz", summary="liveness and what is loaded")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", **info}

    @app.get("/metrics", summary="Prometheus metrics (text format)", response_class=Response,
             responses={200: {"description": "Prometheus text exposition format",
                              "content": {"text/plain": {"schema": {"type": "string"}}}}})
    async def prometheus() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/score", summary="token, word and sentence scores", responses=errors)
    async def score(body: ScoreRequest, request: Request) -> Response:
        _check_texts(body.texts, settings)
        results = await scored(request, body.texts)
        head = {k: info[k] for k in ("engine", "provider", "variant", "calibration")}
        return await reply(lambda: {**head, "results": [_result(r, body.tokens) for r in results]})

    @app.post("/v1/ged", summary="words flagged as grammatical errors", responses=errors)
    async def ged(body: GedRequest, request: Request) -> Response:
        _check_texts(body.texts, settings)
        threshold = default_threshold if body.threshold is None else float(body.threshold)
        if not 0 <= threshold <= 1:
            raise ApiError(422, "invalid_request", "threshold must be in [0, 1]")
        results = await scored(request, body.texts)
        return await reply(lambda: {
            "threshold": threshold, "calibration": detector.calibration,
            "results": [{"text": r.text, "flagged": r.flagged(threshold)} for r in results]})

    @app.post("/v1/rerank", summary="rerank n-best lists with the sentence score", responses=errors)
    async def rerank(body: RerankRequest, request: Request) -> Response:
        for name in ("lm_weight", "length_weight"):
            if not math.isfinite(float(getattr(body, name))):
                raise ApiError(422, "invalid_request", f"{name} must be finite")
        if not body.lists:
            raise ApiError(422, "invalid_request", "lists must be a non-empty list of n-best lists")
        parsed: list[list[tuple[str, float | None]]] = []
        for index, nbest in enumerate(body.lists):
            try:
                hyps = parse_hypothesis_lines(nbest) if isinstance(nbest, str) else [
                    (h, None) if isinstance(h, str) else (h.text, None if h.score is None else float(h.score))
                    for h in nbest]
            except RerankError as exc:  # the reader names the line
                raise ApiError(422, "invalid_request", f"lists[{index}]: {exc}") from None
            if isinstance(nbest, str) and not re.search(NBEST_LINES, nbest):  # what the schema's pattern refuses
                raise ApiError(422, "invalid_request", f"lists[{index}]: a score in the one-string form is a plain "
                                                       f"decimal with at most 9 digits before the point")
            if not hyps:
                raise ApiError(422, "invalid_request", f"lists[{index}] holds no hypotheses")
            if any(s is not None and not (math.isfinite(s) and abs(s) <= SCORE_LIMIT) for _, s in hyps):
                raise ApiError(422, "invalid_request", f"lists[{index}]: scores must be finite numbers in "
                                                       f"[{-SCORE_LIMIT:g}, {SCORE_LIMIT:g}]")
            parsed.append(hyps)
        texts = [text for hyps in parsed for text, _ in hyps]
        _check_texts(texts, settings, "hypotheses")
        unique = list(dict.fromkeys(texts))
        results = dict(zip(unique, await scored(request, unique), strict=True))
        lm = {text: sentence_score(result) for text, result in results.items()}
        try:
            rows = [rank_hypotheses(hyps, [lm[text] for text, _ in hyps], float(body.lm_weight),
                                    float(body.length_weight)) for hyps in parsed]
        except RerankError as exc:
            raise ApiError(422, "invalid_request", str(exc)) from None
        if not all(math.isfinite(h["total"]) for row in rows for h in row):  # bounded inputs keep it finite
            raise ApiError(422, "invalid_request", "the weights and scores give a total that is not finite")

        def result(ranked: list[dict[str, Any]]) -> dict[str, Any]:
            top = {"confidence": word_confidence(results[ranked[0]["text"]])} if body.confidence else {}
            return {"hypotheses": ranked, **top}

        return await reply(lambda: {"lm_weight": float(body.lm_weight), "length_weight": float(body.length_weight),
                                    "results": [result(r) for r in rows]})

    app.state.settings, app.state.metrics = settings, metrics
    app.add_middleware(_Guard, settings=settings, metrics=metrics)
    generate = app.openapi
    app.openapi = lambda: app.openapi_schema or declare_limits(generate(), settings)  # cached by FastAPI
    return app


def declare_limits(schema: dict[str, Any], settings: ServerSettings) -> dict[str, Any]:
    """This server's limits in its OpenAPI schema, where JSON Schema can state them: texts and n-best lists per
    request and hypotheses per list (maxItems), characters per text (maxLength). Model tokens and body bytes
    per request cannot be stated there: they are answered 413, as the description says."""
    models = schema.get("components", {}).get("schemas", {})
    for name in ("ScoreRequest", "GedRequest"):
        texts = models.get(name, {}).get("properties", {}).get("texts", {})
        texts["maxItems"] = settings.max_texts
        texts.get("items", {})["maxLength"] = settings.max_chars
    models.get("Hypothesis", {}).get("properties", {}).get("text", {})["maxLength"] = settings.max_chars
    lists = models.get("RerankRequest", {}).get("properties", {}).get("lists", {})
    lists["maxItems"] = settings.max_texts
    for form in lists.get("items", {}).get("anyOf", []):
        if form.get("type") == "array":
            form["maxItems"] = settings.max_texts
            for item in form.get("items", {}).get("anyOf", []):
                if item.get("type") == "string":
                    item["maxLength"] = settings.max_chars
    schema.setdefault("info", {})["x-limits"] = {"max_texts": settings.max_texts, "max_chars": settings.max_chars,
                                                "max_tokens": settings.max_tokens,
                                                "max_body_bytes": settings.max_body_bytes}
    return schema


def slow_client_protocol(read_timeout_s: float) -> type:
    """uvicorn's h11 protocol, closing a connection whose request head has not arrived within
    ``read_timeout_s`` of the connection opening or of the previous response (uvicorn's keep-alive
    timer is cancelled by any byte, so a client trickling a header a byte at a time was held forever)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class SlowClientTimeout(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            if not self.transport.is_closing():
                self._head_timer = self.loop.call_later(read_timeout_s, self._head_timeout)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timeout(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return SlowClientTimeout


def serve(detector: Detector, settings: ServerSettings, host: str = "127.0.0.1", port: int = 8000,
          log_level: str = "info") -> None:
    """Run uvicorn until SIGINT/SIGTERM; in-flight requests get ``timeout_s`` + 5 s to finish, then the
    process returns normally (exit 0, like ``pretrain`` after a signal)."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            self._captured_signals.clear()  # uvicorn re-raises the signal after draining; we exit 0 instead

    detector.score(["warm up the engine"])  # the first call allocates; keep it out of request latency
    config = uvicorn.Config(create_app(detector, settings), host=host, port=port, log_level=log_level,
                            timeout_graceful_shutdown=int(settings.timeout_s) + 5, access_log=False,
                            http=slow_client_protocol(settings.read_timeout_s))
    server = DrainingServer(config)
    try:
        server.run()
    except SystemExit:  # uvicorn exits 3 itself when it cannot bind; report it as our one-line error instead
        server.started = False
    if not server.started:
        raise OSError(f"the server could not start on {host}:{port} (port in use, or not an address here?)")
