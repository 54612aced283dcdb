"""What every route shares: the detector, its batcher, the settings and metrics, and scoring within a deadline.

Routes receive the one ``Service`` of their app as a FastAPI dependency (``ServiceDep``); it is made by
``create_app`` and holds no per-request state.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import Response

from electra_detect.app.api_errors import ApiError
from electra_detect.app.batcher import ANONYMOUS, MicroBatcher
from electra_detect.app.clients import Refused, Shares
from electra_detect.app.guard import CLIENT_SCOPE_KEY
from electra_detect.app.metrics import Metrics
from electra_detect.app.settings import SUGGESTION_FACTOR, SUGGESTION_FLOOR, ServerSettings
from electra_detect.detector import Detector, ScoringJob, TextScores
from electra_detect.tasks.ged.suggestions import Suggester, SuggestionPlan


class Service:
    """One server's detector and what it needs to answer requests with it."""

    def __init__(self, detector: Detector, settings: ServerSettings) -> None:
        from electra_detect.tasks.rerank.listwise import Reranker

        self.detector, self.settings, self.metrics = detector, settings, Metrics()
        engine = detector.engine
        # What anyone may see (/healthz, /metrics): no file system path.
        self.info = {"engine": engine.name, "provider": str(getattr(engine, "provider", "?")),
                     "variant": str(getattr(engine, "variant", "torch")), "calibration": detector.calibration,
                     "model": model_name(Path(detector.model_dir)), "batching": str(settings.batching)}
        self.model_path = str(detector.model_dir)  # /healthz shows it to a client with a valid key only
        self.metrics.info.info(self.info)
        self.ged_threshold = detector.threshold() if settings.ged_threshold is None else settings.ged_threshold
        self.reranker = Reranker.load(detector.model_dir)  # a `rerank train` model: /v1/rerank's learned score
        self.suggester = Suggester()
        self.batcher: MicroBatcher | None = None  # from the app's startup to the end of its shutdown
        self.shares = Shares(settings, lambda: self.batcher.rate if self.batcher is not None else 0.0)

    async def start(self) -> None:
        self.batcher = MicroBatcher(self.detector, self.settings, self.metrics)
        await self.batcher.start()
        if self.settings.suggest:  # the word lists load now, not in the first /v2/check
            await asyncio.to_thread(self.suggester.candidates, "warm")

    async def stop(self) -> None:
        if self.batcher is not None:
            await self.batcher.stop()

    def deadline(self) -> float:
        """A request's deadline in event-loop time, from now."""
        return asyncio.get_running_loop().time() + self.settings.timeout_s

    async def scored(self, request: Request, texts: list[str], deadline: float | None = None) -> list[TextScores]:
        """Scores of ``texts`` within the request's deadline (``deadline``, event-loop time, when it began
        earlier), within its client's share of model tokens; a client that goes away or times out stops the
        model's work on its request at the next step."""
        deadline = self.deadline() if deadline is None else deadline
        job = await self.prepare(texts, deadline)
        with self.share(request, job.cost):
            self.check_load(request, job.cost, deadline)
            return await self.run(request, job, deadline)

    async def prepare(self, texts: list[str], deadline: float) -> ScoringJob:
        """``texts`` tokenised into a scoring job (off the event loop: a large request takes a while), refused 413
        over ``max_tokens``; nothing is queued yet."""
        settings, detector = self.settings, self.detector
        loop = asyncio.get_running_loop()
        try:
            job = await asyncio.wait_for(asyncio.to_thread(detector.job, texts, settings.model_batch),
                                         max(0.0, deadline - loop.time()))
        except TimeoutError:
            raise self._timeout() from None
        if job.cost > settings.max_tokens:
            raise ApiError(413, "too_many_tokens",
                           f"the request needs {job.cost} model tokens ({job.tokens} text tokens in windows of "
                           f"{detector.max_length}); the limit is {settings.max_tokens}: send fewer or shorter texts")
        return job

    @contextmanager
    def share(self, request: Request, tokens: int) -> Iterator[None]:
        """Holds ``tokens`` of the request's client's share of model tokens while the block runs; 429 with
        Retry-After when they would take the client past it."""
        client = client_of(request)
        try:
            self.shares.take(client, tokens)
        except Refused as refused:
            self.metrics.refused.labels(refused.reason).inc()
            raise ApiError(429, "too_many_requests", refused.message,
                           headers={"retry-after": str(refused.retry_after)}) from None
        try:
            yield
        finally:
            self.shares.give(client, tokens)

    def check_load(self, request: Request, cost: int, deadline: float) -> None:
        """503 at once for a long request that could not finish before its deadline at the present load."""
        assert self.batcher is not None, "the app has not started"
        remaining = deadline - asyncio.get_running_loop().time()
        wait = self.batcher.wait_estimate(cost, client_of(request))
        if cost > self.settings.step_tokens and wait > 0.8 * remaining:
            # Long requests queue behind each other (their client's, and as much of each other client's): one that
            # cannot finish before its deadline at the present rate would only take model time from the others and
            # then get a 504. (Short requests go ahead of the queue, so they are always taken.) When the client's
            # own queue alone would make it late, it is past its share: a 429, as for a share of tokens.
            client = client_of(request)
            own = self.batcher.wait_estimate(cost, client, others=False)
            if self.batcher.long_by_client.get(client, 0) > 0 and own > 0.8 * remaining:
                self.metrics.refused.labels("client_time").inc()
                raise ApiError(429, "too_many_requests", f"this client has about {own:.0f} s of work queued with "
                                                         f"this request (timeout {self.settings.timeout_s:g} s); "
                                                         f"retry after the Retry-After seconds",
                               headers={"retry-after": str(max(1, min(60, round(own - 0.8 * remaining))))})
            self.metrics.abandoned.labels("overloaded").inc()
            raise ApiError(503, "overloaded", f"the server has about {wait:.0f} s of work for this request and the "
                                              f"ones queued before it (timeout {self.settings.timeout_s:g} s); retry "
                                              f"later or send less text")

    def _timeout(self) -> ApiError:
        return ApiError(504, "timeout", f"not scored within {self.settings.timeout_s:g} s")

    async def run(self, request: Request, job: ScoringJob, deadline: float) -> list[TextScores]:
        """The scores of ``job`` through the batcher, within ``deadline``."""
        metrics, loop = self.metrics, asyncio.get_running_loop()
        assert self.batcher is not None, "the app has not started"
        future = self.batcher.submit(job, client_of(request))
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
            raise self._timeout()
        batch_job, start = future.result()
        return await asyncio.to_thread(batch_job.results, start, start + len(job.texts))

    async def suggested(self, request: Request, text: str, flagged: list[dict[str, Any]],
                        deadline: float, budget: int) -> list[dict[str, Any]]:
        """The flagged words with their ``suggestions``: the candidates' sentences scored through the batcher as
        one more job of the request, within its deadline and the caller's share; targets that would take the job
        over ``budget`` model tokens (at most ``max_tokens``) get none."""
        budget = min(budget, self.settings.max_tokens)

        def plan() -> SuggestionPlan:
            spans = [(word["start"], word["end"]) for word in flagged]
            return self.suggester.plan(text, spans).within(budget, lambda texts: self.detector.job(texts).cost)

        planned = await asyncio.to_thread(plan)
        texts = planned.texts
        scores = await self.run(request, await self.prepare(texts, deadline), deadline) if texts else []
        ranked = self.suggester.rank(planned, scores)
        return [{**word, "suggestions": [s.to_dict() for s in found]}
                for word, found in zip(flagged, ranked, strict=True)]


async def reply(build: Callable[[], dict[str, Any]]) -> Response:
    """A large answer is built and serialised off the event loop (other requests keep flowing)."""
    body = await asyncio.to_thread(
        lambda: json.dumps(build(), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode())
    return Response(body, media_type="application/json")


async def _disconnect(request: Request) -> None:
    """Returns when the client has gone (the body was read already: the channel only reports that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def check_cost(tokens: int, suggest: bool) -> int:
    """The model tokens a /v2/check of ``tokens`` model tokens may cause: its own, and with suggestions at most
    ``SUGGESTION_FACTOR`` times as many (at least ``SUGGESTION_FLOOR``) for the candidates' sentences
    (``Service.suggested`` keeps to it)."""
    return tokens + max(tokens * SUGGESTION_FACTOR, SUGGESTION_FLOOR) if suggest else tokens


def model_name(model_dir: Path) -> str:
    """The model's name without its place on disk: the run or model directory's name (an export sits in
    ``<model>/onnx`` or ``<model>/discriminator/onnx``, a GED head in ``<model>/ged``)."""
    while model_dir.name in ("onnx", "discriminator", "ged") and model_dir.parent != model_dir:
        model_dir = model_dir.parent
    return model_dir.name or "model"


def client_of(request: Request) -> str:
    """The request's client, as the Guard named it (an API key's name, else an address)."""
    return request.scope.get(CLIENT_SCOPE_KEY, ANONYMOUS)


def service(request: Request) -> Service:
    """The route dependency: the app's one Service."""
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(service)]
