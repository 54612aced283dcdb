"""What every route shares: the detector, its batcher, the settings and metrics, and scoring within a deadline.

Routes receive the one ``Service`` of their app as a FastAPI dependency (``ServiceDep``); it is made by
``create_app`` and holds no per-request state.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import Response

from electra_detect.app.api_errors import ApiError
from electra_detect.app.batcher import MicroBatcher
from electra_detect.app.metrics import Metrics
from electra_detect.app.settings import ServerSettings
from electra_detect.detector import Detector, TextScores
from electra_detect.tasks.ged.suggestions import Suggester, SuggestionPlan


class Service:
    """One server's detector and what it needs to answer requests with it."""

    def __init__(self, detector: Detector, settings: ServerSettings) -> None:
        from electra_detect.tasks.rerank.listwise import Reranker

        self.detector, self.settings, self.metrics = detector, settings, Metrics()
        engine = detector.engine
        self.info = {"engine": engine.name, "provider": str(getattr(engine, "provider", "?")),
                     "variant": str(getattr(engine, "variant", "torch")), "calibration": detector.calibration,
                     "model": str(detector.model_dir), "batching": str(settings.batching)}
        self.metrics.info.info(self.info)
        self.ged_threshold = detector.threshold() if settings.ged_threshold is None else settings.ged_threshold
        self.reranker = Reranker.load(detector.model_dir)  # a `rerank train` model: /v1/rerank's learned score
        self.suggester = Suggester()
        self.batcher: MicroBatcher | None = None  # from the app's startup to the end of its shutdown

    async def start(self) -> None:
        self.batcher = MicroBatcher(self.detector, self.settings, self.metrics)
        await self.batcher.start()
        if self.settings.suggest:  # the word lists load now, not in the first /v2/check
            await asyncio.to_thread(self.suggester.candidates, "warm")

    async def stop(self) -> None:
        if self.batcher is not None:
            await self.batcher.stop()

    async def scored(self, request: Request, texts: list[str], deadline: float | None = None) -> list[TextScores]:
        """Scores of ``texts`` within the request's deadline (``deadline``, event-loop time, when it began
        earlier); a client that goes away or times out stops the model's work on its request at the next step."""
        settings, metrics, detector = self.settings, self.metrics, self.detector
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.timeout_s if deadline is None else deadline
        timeout = ApiError(504, "timeout", f"not scored within {settings.timeout_s:g} s")
        try:  # tokenizing a large request takes a while: off the event loop
            job = await asyncio.wait_for(asyncio.to_thread(detector.job, texts, settings.model_batch),
                                         max(0.0, deadline - loop.time()))
        except TimeoutError:
            raise timeout from None
        if job.cost > settings.max_tokens:
            raise ApiError(413, "too_many_tokens",
                           f"the request needs {job.cost} model tokens ({job.tokens} text tokens in windows of "
                           f"{detector.max_length}); the limit is {settings.max_tokens}: send fewer or shorter texts")
        assert self.batcher is not None, "the app has not started"
        wait = self.batcher.wait_estimate(job.cost)
        if job.cost > settings.step_tokens and wait > 0.8 * (deadline - loop.time()):
            # Long requests queue behind each other: one that cannot finish before its deadline at the
            # present rate would only take model time from the others and then get a 504. (Short requests go
            # ahead of the queue, so they are always taken.)
            metrics.abandoned.labels("overloaded").inc()
            raise ApiError(503, "overloaded", f"the server has about {wait:.0f} s of work for this request and the "
                                              f"ones queued before it (timeout {settings.timeout_s:g} s); retry later "
                                              f"or send less text")
        future = self.batcher.submit(job)
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

    async def suggested(self, request: Request, text: str, flagged: list[dict[str, Any]],
                        deadline: float) -> list[dict[str, Any]]:
        """The flagged words with their ``suggestions``: the candidates' sentences scored through the batcher as
        one more job of the request, within its deadline; targets over ``max_tokens`` get none."""
        def plan() -> SuggestionPlan:
            spans = [(word["start"], word["end"]) for word in flagged]
            return self.suggester.plan(text, spans).within(self.settings.max_tokens,
                                                           lambda texts: self.detector.job(texts).cost)

        planned = await asyncio.to_thread(plan)
        texts = planned.texts
        ranked = self.suggester.rank(planned, await self.scored(request, texts, deadline) if texts else [])
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


def service(request: Request) -> Service:
    """The route dependency: the app's one Service."""
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(service)]
