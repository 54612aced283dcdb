"""HTTP inference server over one ``Detector`` (the ONNX engine by default), with micro-batching.

Why it is shaped this way:
- One model thread. The engine already uses every core inside a call, so concurrent calls would
  only fight; instead concurrent requests queue, and ``MicroBatcher`` merges what is waiting (up to
  ``max_batch`` texts or ``max_wait_ms``) into one ``Detector.score`` call.
- Every failure is a JSON body ``{"error": {"type", "message"}}`` with a 4xx (bad input, limits,
  auth) or 5xx (timeout, engine failure); nothing a client sends stops the process.
- Limits (texts per request, characters per text, body bytes, request timeout) are checked before
  any text reaches the model; the body limit is enforced on the bytes received, not only the header.
- Shutdown (SIGTERM/SIGINT, via uvicorn) stops accepting, lets in-flight requests finish, then the
  batcher drains its queue before the process exits.
"""

from __future__ import annotations

import asyncio
import hmac
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr
from starlette.exceptions import HTTPException as StarletteHTTPException

from electra_detect.detector import Detector, TextScores

API_KEY_HEADER = "x-api-key"


@dataclass
class ServerSettings:
    max_texts: int = 64  # texts per request (hypotheses, for /v1/rerank)
    max_chars: int = 10_000  # characters per text
    max_body_bytes: int = 1 << 20
    timeout_s: float = 30.0  # per request, queueing included
    batching: bool = True
    max_batch: int = 32  # texts merged into one model call when batching
    model_batch: int = 4  # rows per engine run inside a call, length-sorted: on CPU small runs pad least
    max_wait_ms: float = 0.0  # how long the first request holds a batch open; 0 = merge only what already waits
    api_key: str | None = None  # required in the X-API-Key header when set
    ged_threshold: float = 0.5


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
        self.info = Info("electra_engine", "engine the server runs", registry=self.registry)

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


# ------------------------------------------------------------------------------------- micro-batching

@dataclass
class _Pending:
    texts: list[str]
    future: asyncio.Future


class MicroBatcher:
    """Runs ``Detector.score`` on one worker thread; with batching on, merges queued requests.

    With batching off, each request is its own model call (still one at a time, so the comparison
    with batching measures merging, not extra parallelism).
    """

    def __init__(self, detector: Detector, settings: ServerSettings, metrics: Metrics) -> None:
        self.detector, self.settings, self.metrics = detector, settings, metrics
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")
        self.queue: asyncio.Queue[_Pending | None] = asyncio.Queue()
        self.worker: asyncio.Task | None = None

    async def start(self) -> None:
        self.worker = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Score everything still queued, then release the model thread."""
        if self.worker is not None:
            await self.queue.put(None)
            await self.worker
        self.executor.shutdown(wait=True)

    async def score(self, texts: list[str]) -> list[TextScores]:
        future = asyncio.get_running_loop().create_future()
        self.metrics.queue.inc()
        await self.queue.put(_Pending(texts, future))
        return await future

    def _call(self, texts: list[str]) -> list[TextScores]:
        started = time.perf_counter()
        results = self.detector.score(texts, batch_size=self.settings.model_batch)
        self.metrics.model_seconds.observe(time.perf_counter() - started)
        self.metrics.batch_texts.observe(len(texts))
        self.metrics.texts.inc(len(texts))
        self.metrics.tokens.inc(sum(len(r.tokens) for r in results))
        return results

    async def _collect(self, first: _Pending) -> tuple[list[_Pending], bool]:
        """More waiting requests, up to max_batch texts or max_wait; (batch, stop seen)."""
        batch, count = [first], len(first.texts)
        if not self.settings.batching:
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
            count += len(item.texts)
        return batch, False

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        stopping = False
        while not (stopping and self.queue.empty()):
            first = await self.queue.get()
            if first is None:
                stopping = True
                continue
            batch, seen_stop = await self._collect(first)
            stopping = stopping or seen_stop
            self.metrics.queue.dec(len(batch))
            live = [p for p in batch if not p.future.done()]  # timed-out requests are not scored
            if not live:
                continue
            texts = [t for p in live for t in p.texts]
            try:
                results = await loop.run_in_executor(self.executor, self._call, texts)
            except Exception as exc:  # an engine failure fails these requests, not the server
                for pending in live:
                    if not pending.future.done():
                        pending.future.set_exception(exc)
                continue
            start = 0
            for pending in live:
                if not pending.future.done():
                    pending.future.set_result(results[start:start + len(pending.texts)])
                start += len(pending.texts)


class _Prescored:
    """A Detector-shaped view over scores the batcher already computed, for ``rerank_hypotheses``
    (which calls ``detector.score``): reranking goes through the one batched model path."""

    def __init__(self, scores: dict[str, TextScores]) -> None:
        self._scores = scores

    def score(self, texts: Sequence[str], batch_size: int = 32) -> list[TextScores]:
        return [self._scores[t] for t in texts]


# --------------------------------------------------------------------------------------- request bodies

class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    texts: list[StrictStr] = Field(description="texts to score (1 to max_texts)")
    tokens: bool = Field(True, description="include per-subword scores")


class GedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    texts: list[StrictStr]
    threshold: StrictFloat | StrictInt | None = Field(None, description="default: the model's ged.json, else 0.5")


class Hypothesis(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: StrictStr
    score: StrictFloat | StrictInt | None = Field(None, description="recogniser (ASR) log score")


class RerankRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lists: list[list[Hypothesis | StrictStr] | StrictStr] = Field(
        description="n-best lists: each a list of hypotheses ({text, score} or plain text), or one string "
                    "with a hypothesis per line and an optional score after a TAB")
    lm_weight: StrictFloat | StrictInt = 1.0
    length_weight: StrictFloat | StrictInt = 0.0


# ------------------------------------------------------------------------------------------ the app

def _check_texts(texts: list[str], settings: ServerSettings, what: str = "texts") -> None:
    if not texts:
        raise ApiError(422, "invalid_request", f"{what} must be a non-empty list")
    if len(texts) > settings.max_texts:
        raise ApiError(413, "too_many_texts", f"{len(texts)} {what} in one request; the limit is {settings.max_texts}")
    for index, text in enumerate(texts):
        if not text.strip():
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
    """ASGI middleware: API key, body-size limit on received bytes, request metrics.

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
        status_box = {"status": 500}

        async def send_counted(message: dict) -> None:
            if message["type"] == "http.response.start":
                status_box["status"] = message["status"]
            await send(message)

        self.metrics.inflight.inc()
        try:
            rejection = self._reject(scope)
            if rejection is None and scope["method"] in ("POST", "PUT", "PATCH"):
                rejection = self._content_type(scope)
            if rejection is None and scope["method"] in ("POST", "PUT", "PATCH"):
                body, rejection = await self._read_body(scope, receive)
                if rejection is None:
                    receive = _replay(body, receive)
            if rejection is not None:
                await rejection(scope, receive, send_counted)
            else:
                await self.app(scope, receive, send_counted)
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
        chunks, size = [], 0
        while True:
            message = await receive()
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


def create_app(detector: Detector, settings: ServerSettings | None = None) -> FastAPI:
    """The FastAPI app over ``detector``; the batcher lives from startup to the end of shutdown."""
    from electra_detect.rerank import RerankError, parse_hypothesis_lines, rerank_hypotheses

    settings = settings or ServerSettings()
    metrics = Metrics()
    engine = detector.engine
    info = {"engine": engine.name, "provider": str(getattr(engine, "provider", "?")),
            "variant": str(getattr(engine, "variant", "torch")), "calibration": detector.calibration,
            "model": str(detector.model_dir), "batching": str(settings.batching)}
    metrics.info.info(info)
    state: dict[str, MicroBatcher] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        batcher = MicroBatcher(detector, settings, metrics)
        await batcher.start()
        state["batcher"] = batcher
        try:
            yield
        finally:
            await batcher.stop()

    app = FastAPI(title="electra-detect", version="0.1.0", lifespan=lifespan,
                  description="Per-token replaced probabilities from an ELECTRA discriminator: scores, "
                              "grammatical error flags and n-best reranking. Errors are JSON: "
                              '{"error": {"type", "message"}}.')

    async def scored(texts: list[str]) -> list[TextScores]:
        try:
            return await asyncio.wait_for(state["batcher"].score(texts), settings.timeout_s)
        except TimeoutError:
            raise ApiError(504, "timeout", f"not scored within {settings.timeout_s:g} s") from None

    @app.exception_handler(ApiError)
    async def _api_error(_, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.kind, exc.message)

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
        kind = "bad_request" if exc.status_code == 400 else "not_found" if exc.status_code == 404 else "http_error"
        message = "the body is not valid UTF-8 JSON" if exc.status_code == 400 else str(exc.detail)
        return error_response(exc.status_code, kind, message)

    @app.exception_handler(Exception)
    async def _crash(_, exc: Exception) -> JSONResponse:
        return error_response(500, "internal_error", f"{type(exc).__name__}: {exc}")

    @app.get("/healthz", summary="liveness and what is loaded")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", **info}

    @app.get("/metrics", summary="Prometheus metrics (text format)")
    async def prometheus() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/score", summary="token, word and sentence scores")
    async def score(body: ScoreRequest) -> dict[str, Any]:
        _check_texts(body.texts, settings)
        results = await scored(body.texts)
        return {**{k: info[k] for k in ("engine", "provider", "variant", "calibration")},
                "results": [_result(r, body.tokens) for r in results]}

    @app.post("/v1/ged", summary="words flagged as grammatical errors")
    async def ged(body: GedRequest) -> dict[str, Any]:
        _check_texts(body.texts, settings)
        threshold = settings.ged_threshold if body.threshold is None else float(body.threshold)
        if not 0 <= threshold <= 1:
            raise ApiError(422, "invalid_request", "threshold must be in [0, 1]")
        results = await scored(body.texts)
        return {"threshold": threshold, "calibration": detector.calibration,
                "results": [{"text": r.text, "flagged": [{"word": w.word, "start": w.start, "end": w.end,
                                                          "score": w.score} for w in r.words if w.score >= threshold]}
                            for r in results]}

    @app.post("/v1/rerank", summary="rerank n-best lists with the sentence score")
    async def rerank(body: RerankRequest) -> dict[str, Any]:
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
            except RerankError as exc:
                raise ApiError(422, "invalid_request", f"lists[{index}]: {exc}") from None
            if not hyps:
                raise ApiError(422, "invalid_request", f"lists[{index}] holds no hypotheses")
            if any(s is not None and not math.isfinite(s) for _, s in hyps):
                raise ApiError(422, "invalid_request", f"lists[{index}]: scores must be finite")
            parsed.append(hyps)
        texts = [text for hyps in parsed for text, _ in hyps]
        _check_texts(texts, settings, "hypotheses")
        unique = list(dict.fromkeys(texts))
        view = _Prescored(dict(zip(unique, await scored(unique), strict=True)))
        try:
            rows = [rerank_hypotheses(view, hyps, float(body.lm_weight), float(body.length_weight)) for hyps in parsed]
        except RerankError as exc:
            raise ApiError(422, "invalid_request", str(exc)) from None
        return {"lm_weight": float(body.lm_weight), "length_weight": float(body.length_weight),
                "results": [{"hypotheses": r} for r in rows]}

    app.state.settings, app.state.metrics = settings, metrics
    app.add_middleware(_Guard, settings=settings, metrics=metrics)
    return app


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
                            timeout_graceful_shutdown=int(settings.timeout_s) + 5, access_log=False)
    server = DrainingServer(config)
    try:
        server.run()
    except SystemExit:  # uvicorn exits 3 itself when it cannot bind; report it as our one-line error instead
        server.started = False
    if not server.started:
        raise OSError(f"the server could not start on {host}:{port} (port in use, or not an address here?)")
