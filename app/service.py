"""What every route shares: the detector, its batcher, the settings and metrics, and scoring within a deadline.

Routes receive the one ``Service`` of their app as a FastAPI dependency (``ServiceDep``); it is made by
``create_app`` and holds no per-request state.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
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
from electra_detect.tasks.ged.check import GedChecker
from electra_detect.tasks.ged.dictionary import PersonalDictionary
from electra_detect.tasks.ged.edit_typing import EditTyper
from electra_detect.tasks.ged.flags import FlaggedWord
from electra_detect.tasks.ged.options import GedOptions
from electra_detect.tasks.ged.suggestions import Suggester


class Service:
    """One server's detector and what it needs to answer requests with it."""

    def __init__(self, detector: Detector, settings: ServerSettings) -> None:
        from electra_detect.tasks.rerank.fusion import HypothesisScore

        self.detector, self.settings, self.metrics = detector, settings, Metrics()
        engine = detector.engine
        # What anyone may see (/healthz, /metrics): no file system path.
        self.info = {"engine": engine.name, "provider": str(getattr(engine, "provider", "?")),
                     "variant": str(getattr(engine, "variant", "torch")), "calibration": detector.calibration,
                     "model": detector.name, "batching": str(settings.batching)}
        self.model_path = str(detector.model_dir)  # /healthz shows it to a client with a valid key only
        self.metrics.info.info(self.info)
        # /v1/rerank's score: a `rerank train` model's learned one when the model has it (the task decides)
        self.hypothesis = HypothesisScore.for_model(detector.model_dir)
        self.suggester = Suggester()
        dictionary = PersonalDictionary(Path(settings.dictionary)) if settings.dictionary else PersonalDictionary()
        self.checker = GedChecker(detector, self.suggester, shared_typer(), dictionary)  # /v1/ged and /v2/check
        self.batcher: MicroBatcher | None = None  # from the app's startup to the end of its shutdown
        self.shares = Shares(settings, lambda: self.batcher.rate if self.batcher is not None else 0.0)

    async def start(self) -> None:
        self.batcher = MicroBatcher(self.detector, self.settings, self.metrics)
        await self.batcher.start()
        # The word lists, lemminflect's tables and the ERRANT typer's spaCy pipeline load now, not in the first check
        # (types name edits with or without suggestions shown: both are used either way).
        await asyncio.to_thread(self.suggester.candidates, "warm")
        loading = self.checker.preload()
        if loading is not None:
            await asyncio.to_thread(loading.join)

    async def stop(self) -> None:
        if self.batcher is not None:
            await self.batcher.stop()

    def deadline(self) -> float:
        """A request's deadline in event-loop time, from now."""
        return asyncio.get_running_loop().time() + self.settings.timeout_s

    async def scored(self, request: Request, texts: list[str], deadline: float | None = None,
                     calibrated: bool = True) -> list[TextScores]:
        """Scores of ``texts`` within the request's deadline (``deadline``, event-loop time, when it began
        earlier), within its client's share of model tokens; a client that goes away or times out stops the
        model's work on its request at the next step."""
        deadline = self.deadline() if deadline is None else deadline
        job = await self.prepare(texts, deadline, calibrated)
        with self.share(request, job.cost):
            self.check_load(request, job.cost, deadline)
            return await self.run(request, job, deadline)

    def options(self, options: GedOptions) -> GedOptions:
        """A request's GED options (``build_ged_options``) with this server's defaults: its own ``threshold``, else
        the server's ``--ged-threshold`` (at the picky level the model's picky one when lower), else the model's at
        its level."""
        fixed = self.settings.ged_threshold
        if options.threshold is not None or fixed is None:
            return options
        return replace(options, threshold=fixed if options.level == "default" else min(fixed, self.detector.threshold(
            calibrated=options.calibrated, level=options.level)))

    def candidates(self, options: GedOptions) -> bool:
        """Whether a check may score candidates: for suggestions, or to name a word's type by the edit to its best
        candidate (``TypingRule.ranked``; the default types by the first proposed one, scoring none)."""
        return options.suggest or (self.checker.typer.available and self.checker.typing.ranked)

    def ged_cost(self, job: ScoringJob, options: GedOptions) -> int:
        """The model tokens a /v1/ged of ``job`` may cause: its own, and its candidates' (:func:`check_cost`'s bound,
        cut to ``max_tokens`` as :meth:`flagged` cuts the candidates' job)."""
        return job.cost + min(self.settings.max_tokens, check_cost(job.cost, self.candidates(options)) - job.cost)

    def admit_check(self, cost: int, costs: str, advice: str = "send less text") -> None:
        """A 413 ``over_budget`` (counted) for a check whose ``cost`` model tokens pass this server's budget per
        check, before any work: ``costs`` says what it may cost, ``advice`` what to do instead."""
        if cost > self.settings.check_budget:
            self.metrics.refused.labels("check_budget").inc()
            raise ApiError(413, "over_budget", f"{costs}; this server's budget per check is "
                                               f"{self.settings.check_budget}: {advice}")

    async def checked(self, request: Request, job: ScoringJob, cost: int, options: GedOptions,
                      deadline: float) -> tuple[list[TextScores], list[list[FlaggedWord]]]:
        """``job``'s texts scored and checked by the GED task within ``cost`` model tokens of the client's share
        (the job's own, the rest for candidates: :meth:`check_cost`): (scores, each text's flagged words)."""
        with self.share(request, cost):
            self.check_load(request, cost, deadline)
            scored = await self.run(request, job, deadline)
            return scored, await self.flagged(request, scored, options, deadline, cost - job.cost)

    async def flagged(self, request: Request, scored: list[TextScores], options: GedOptions, deadline: float,
                      budget: int) -> list[list[FlaggedWord]]:
        """Each text's flagged words (``GedChecker``): the candidates' sentences scored through the batcher as one
        more job of the request, within its deadline; targets that would take that job over ``budget`` model
        tokens (at most ``max_tokens``) get none (and keep the type head's type)."""
        budget = min(budget, self.settings.max_tokens)
        plan = await self.in_thread(
            lambda: self.checker.prepare(scored, options).within(budget, lambda texts: self.detector.job(texts).cost),
            deadline)
        texts = plan.texts
        scores = await self.run(request, await self.prepare(texts, deadline), deadline) if texts else []
        return await self.in_thread(lambda: self.checker.finish(plan, scores), deadline)

    async def in_thread(self, work: Callable[[], Any], deadline: float) -> Any:
        """``work()`` off the event loop, answered 504 when it has not returned by ``deadline``."""
        remaining = max(0.0, deadline - asyncio.get_running_loop().time())
        try:
            return await asyncio.wait_for(asyncio.to_thread(work), remaining)
        except TimeoutError:
            raise self._timeout() from None

    async def prepare(self, texts: list[str], deadline: float, calibrated: bool = True) -> ScoringJob:
        """``texts`` tokenised into a scoring job (off the event loop: a large request takes a while), refused 413
        over ``max_tokens``; nothing is queued yet."""
        settings, detector = self.settings, self.detector
        loop = asyncio.get_running_loop()
        try:
            job = await asyncio.wait_for(asyncio.to_thread(detector.job, texts, settings.model_batch, calibrated),
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


async def reply(build: Callable[[], dict[str, Any]]) -> Response:
    """A large answer is built and serialised off the event loop (other requests keep flowing)."""
    body = await asyncio.to_thread(
        lambda: json.dumps(build(), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode())
    return Response(body, media_type="application/json")


async def _disconnect(request: Request) -> None:
    """Returns when the client has gone (the body was read already: the channel only reports that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def check_cost(tokens: int, candidates: bool) -> int:
    """The model tokens a check of ``tokens`` model tokens may cause: its own, and with ``candidates`` (suggestions,
    or types named by their edit) at most ``SUGGESTION_FACTOR`` times as many (at least ``SUGGESTION_FLOOR``) for
    the candidates' sentences (``Service.flagged`` keeps to it)."""
    return tokens + max(tokens * SUGGESTION_FACTOR, SUGGESTION_FLOOR) if candidates else tokens


@functools.cache
def shared_typer() -> EditTyper:
    """One ERRANT typer (one spaCy pipeline) for every app of the process: loading one takes seconds."""
    return EditTyper()


def client_of(request: Request) -> str:
    """The request's client, as the Guard named it (an API key's name, else an address)."""
    return request.scope.get(CLIENT_SCOPE_KEY, ANONYMOUS)


def service(request: Request) -> Service:
    """The route dependency: the app's one Service."""
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(service)]
