"""The one request path behind every front: the detector, its batcher, the settings and metrics, and a check's
admission, options and work within a deadline.

Every front that checks text calls :meth:`Service.check` (``/v1/ged``, ``/v2/check``, the demo, the language
server), and every front that only scores calls :meth:`Service.scored` (``/v1/score``, ``/v1/rerank``): a front
parses its request and shapes its answer, the service decides what the work may cost and runs it (as TEI's router
takes a permit, then predicts). Nothing here needs a web framework's objects: a client is a name, a cancel signal
an event; what is refused is an :class:`~electra_detect.app.api_errors.ApiError` carrying its HTTP status, kind and
one-line message. ``app/http/routing.py`` holds the FastAPI glue; :class:`ServiceThread` runs a Service for a front
without an event loop of its own (the demo).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from electra_detect.app.api_errors import ApiError
from electra_detect.app.batcher import ANONYMOUS, MicroBatcher
from electra_detect.app.clients import Refused, Shares, small
from electra_detect.app.metrics import Metrics
from electra_detect.app.settings import ServerSettings
from electra_detect.detector import Detector
from electra_detect.scores import TextScores
from electra_detect.scoring_job import ScoringJob
from electra_detect.tasks.ged.check import GedChecker
from electra_detect.tasks.ged.dictionary import PersonalDictionary
from electra_detect.tasks.ged.errant_typing import EditTyper
from electra_detect.tasks.ged.flags import FlaggedWord
from electra_detect.tasks.ged.options import GedOptions
from electra_detect.tasks.ged.suggestions import Suggester

CANCEL_POLL_S = 0.05  # how often a threading.Event cancel signal is looked at (an asyncio.Event is awaited)


class Cancel(Protocol):
    """A cancel signal: ``threading.Event`` or ``asyncio.Event`` (awaited when it has an async ``wait``)."""

    def is_set(self) -> bool: ...


@dataclass
class Checked:
    """What :meth:`Service.check` found: each text's scores and flagged words, the options it applied (the
    request's with the server's defaults) and the threshold it flagged at. With markup, the texts checked are the
    documents' prose blocks: ``blocks`` holds (document index, ``ProseBlock``) for each, in the same order."""

    scores: list[TextScores]
    flagged: list[list[FlaggedWord]]
    options: GedOptions
    threshold: float
    blocks: list[tuple[int, Any]] | None = None


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
        self.checker = GedChecker(detector, self.suggester, shared_typer(), dictionary,  # every front's checks
                                  fixed_threshold=settings.ged_threshold)
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

    # ------------------------------------------------------------------------------------------- the fronts' calls

    async def check(self, texts: list[str], options: GedOptions, client: str = ANONYMOUS,
                    cancel: Cancel | None = None, markup: str = "text") -> Checked:
        """``texts`` checked by the GED task with ``options`` (from ``build_ged_options``; the server's
        ``--ged-threshold``, the checker's fixed threshold, stands where the request gives none) for ``client`` (the
        fairness unit: an API key's name, an address, or a front's own name such as ``"lsp"``), stopped when
        ``cancel`` (a ``threading.Event`` or ``asyncio.Event``) is set: the one request path of every front that
        checks. With ``markup`` (markdown, latex) each text is a document, read by the markup layer after admission
        (off the event loop, within the deadline) and its prose blocks checked (``Checked.blocks``); a document it
        cannot read is a ``MarkupError``.

        Admission, before any work (the markup reader's included): one of the client's ``client_requests`` (a small
        check, a sentence or a paragraph, one of a share of its own: ``clients.small``) and the server's
        ``max_requests``; the texts' words (a document's, markup and all), then their model tokens, within
        ``check_budget``; their tokens within the client's ``client_tokens`` share (a short check, one scheduling step
        or less, is never refused for tokens: the share bounds long work); a long check refused 503 when it could not
        finish before its deadline at the model's measured rate. Then scored, and the candidates of the flagged words
        that need them (suggestions, or a type named by its edit) scored as they really cost: cut, earliest first, to
        what the rest of the budget and of the deadline allow (a word left out keeps the type head's type and gets no
        suggestions). Texts are checked as given (a front checks its own limits: ``schemas.check_texts``). Raises
        ``ApiError`` (413 over_budget or too_many_tokens, 429 too_many_requests with a Retry-After header, 503
        overloaded, 504 timeout, 499 when cancelled); must run on the event loop the service started on
        (``ServiceThread`` from another thread)."""
        deadline = self.deadline()
        # Every word is at least one model token, so its words (+ [CLS]/[SEP]) bound its cost from below: texts
        # over budget by that count are refused on the event loop, before they queue for the tokenizer's thread.
        least = words_bound(texts)
        with self.admitted(client, least):
            self.admit_budget(least, f"checking this text costs at least {least} model tokens (one a word)")
            blocks = None
            if markup != "text":
                blocks = await self.in_thread(lambda: read_documents(texts, markup), deadline)
                texts = [block.text for _, block in blocks]
                if not texts:  # no prose at all (a code block, front matter): nothing to check
                    return Checked([], [], options, self.checker.threshold(options), blocks)
            job = await self.prepare(texts, deadline, options.calibrated)
            self.admit_budget(job.cost, f"checking this text costs {job.cost} model tokens")
            scored = await self.score_job(job, client, cancel, deadline)
            flagged = await self.flagged(scored, options, client, cancel, deadline,
                                         self.settings.check_budget - job.cost)
        return Checked(scored, flagged, options, self.checker.threshold(options), blocks)

    async def scored(self, texts: list[str], client: str = ANONYMOUS, cancel: Cancel | None = None,
                     calibrated: bool = True) -> list[TextScores]:
        """Scores of ``texts`` for ``client`` within the deadline, admitted as :meth:`check` admits (without the
        check budget: a request is bounded by ``max_tokens``)."""
        deadline = self.deadline()
        with self.admitted(client, words_bound(texts)):
            job = await self.prepare(texts, deadline, calibrated)
            return await self.score_job(job, client, cancel, deadline)

    # ------------------------------------------------------------------------------------------------- admission

    @contextmanager
    def admitted(self, client: str, tokens: int) -> Iterator[None]:
        """Holds one of ``client``'s requests in flight while the block runs; 429 with Retry-After past its
        ``client_requests`` (its small ones, of about ``tokens`` model tokens or fewer: ``clients.small``, past the
        client's small share) or the server's ``max_requests``."""
        little = small(tokens, self.settings)
        try:
            self.shares.enter(client, little)
        except Refused as refused:
            raise self._refused(refused) from None
        try:
            yield
        finally:
            self.shares.leave(client, little)

    def admit_budget(self, cost: int, costs: str) -> None:
        """A 413 ``over_budget`` (counted) for a check whose ``cost`` model tokens pass this server's budget per
        check, before any work: ``costs`` says what it costs."""
        if cost > self.settings.check_budget:
            self.metrics.refused.labels("check_budget").inc()
            raise ApiError(413, "over_budget", f"{costs}; this server's budget per check is "
                                               f"{self.settings.check_budget}: send less text")

    @contextmanager
    def share(self, client: str, tokens: int, refuse: bool = True) -> Iterator[None]:
        """Holds ``tokens`` of ``client``'s share of model tokens while the block runs; 429 with Retry-After when
        they would take the client past it (``refuse=False``: counted, never refused, for work already admitted).
        A short job (one step or less) is never refused: it costs one turn of the model, and its client's long
        work is what the share bounds (so a light client behind a busy address still gets its sentence checked)."""
        short = tokens <= self.settings.step_tokens
        try:
            self.shares.take(client, tokens, refuse=refuse and not short)
        except Refused as refused:
            raise self._refused(refused) from None
        try:
            yield
        finally:
            self.shares.give(client, tokens)

    def _refused(self, refused: Refused) -> ApiError:
        self.metrics.refused.labels(refused.reason).inc()
        return ApiError(429, "too_many_requests", refused.message, headers={"retry-after": str(refused.retry_after)})

    def check_load(self, client: str, cost: int, deadline: float) -> None:
        """503 at once for a long request that could not finish before its deadline at the present load."""
        assert self.batcher is not None, "the service has not started"
        remaining = deadline - asyncio.get_running_loop().time()
        wait = self.batcher.wait_estimate(cost, client)
        if cost > self.settings.step_tokens and wait > 0.8 * remaining:
            # Long requests queue behind each other (their client's, and as much of each other client's): one that
            # cannot finish before its deadline at the present rate would only take model time from the others and
            # then get a 504. (Short requests go ahead of the queue, so they are always taken.) When the client's
            # own queue alone would make it late, it is past its share: a 429, as for a share of tokens.
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

    # ------------------------------------------------------------------------------------------------ the work

    async def score_job(self, job: ScoringJob, client: str, cancel: Cancel | None, deadline: float,
                        refuse: bool = True) -> list[TextScores]:
        """``job`` scored within ``client``'s share (and, when ``refuse``, refused 429/503 at once when it cannot
        be taken or finished in time)."""
        with self.share(client, job.cost, refuse):
            if refuse:
                self.check_load(client, job.cost, deadline)
            return await self.run(job, client, cancel, deadline)

    async def flagged(self, scored: list[TextScores], options: GedOptions, client: str, cancel: Cancel | None,
                      deadline: float, budget: int) -> list[list[FlaggedWord]]:
        """Each text's flagged words (``GedChecker``): the candidates' sentences scored through the batcher as one
        more job of the request. Targets that would take that job over ``budget`` model tokens (at most
        ``max_tokens``), or past what the model can score before the deadline at its measured rate, get none (and
        keep the type head's type)."""
        assert self.batcher is not None, "the service has not started"
        budget = min(budget, self.settings.max_tokens)
        in_time = self.batcher.tokens_within(0.8 * (deadline - asyncio.get_running_loop().time()), client)
        budget = budget if in_time is None else min(budget, in_time)
        plan = await self.in_thread(
            lambda: self.checker.prepare(scored, options).within(budget, lambda texts: self.detector.job(texts).cost),
            deadline)
        texts = plan.texts
        scores = []
        if texts:  # admitted with the check: its real cost counts against the client's share, never refused
            job = await self.prepare(texts, deadline, options.calibrated)
            scores = await self.score_job(job, client, cancel, deadline, refuse=False)
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
        job = await self.in_thread(lambda: detector.job(texts, settings.model_batch, calibrated), deadline)
        if job.cost > settings.max_tokens:
            raise ApiError(413, "too_many_tokens",
                           f"the request needs {job.cost} model tokens ({job.tokens} text tokens in windows of "
                           f"{detector.max_length}); the limit is {settings.max_tokens}: send fewer or shorter texts")
        return job

    def _timeout(self) -> ApiError:
        return ApiError(504, "timeout", f"not scored within {self.settings.timeout_s:g} s")

    async def run(self, job: ScoringJob, client: str, cancel: Cancel | None, deadline: float) -> list[TextScores]:
        """The scores of ``job`` through the batcher, within ``deadline``; 499 when ``cancel`` is set first (the
        model stops working on it at its next step)."""
        metrics, loop = self.metrics, asyncio.get_running_loop()
        assert self.batcher is not None, "the service has not started"
        future = self.batcher.submit(job, client)
        gone = asyncio.ensure_future(cancelled(cancel))
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
                raise ApiError(499, "client_closed_request", "the client cancelled the check (or disconnected)")
            raise self._timeout()
        batch_job, start = future.result()
        return await asyncio.to_thread(batch_job.results, start, start + len(job.texts))


def words_bound(texts: list[str]) -> int:
    """A lower bound of ``texts``' model tokens, known before tokenising: a word at least one, and [CLS]/[SEP]."""
    return sum(len(text.split()) + 2 for text in texts)


def read_documents(documents: list[str], markup: str) -> list[tuple[int, Any]]:
    """(document index, ``ProseBlock``) of every prose block of ``documents`` read as ``markup`` (the markup layer;
    a document it cannot read raises its ``MarkupError``)."""
    from electra_detect.markup import prose_blocks

    return [(number, block) for number, document in enumerate(documents) for block in prose_blocks(document, markup)]


async def cancelled(cancel: Cancel | None) -> None:
    """Returns once ``cancel`` is set (never when it is None): an ``asyncio.Event`` is awaited, a
    ``threading.Event`` looked at every ``CANCEL_POLL_S``."""
    if cancel is None:
        await asyncio.Event().wait()
    elif isinstance(cancel, asyncio.Event):
        await cancel.wait()
    else:
        while not cancel.is_set():
            await asyncio.sleep(CANCEL_POLL_S)


class ServiceThread:
    """A started :class:`Service` on an event loop of its own thread, for a front whose handlers are plain
    functions in threads (the demo): ``check`` blocks until :meth:`Service.check` answers.

        thread = ServiceThread(Service(detector, settings))   # starts it (loads what checks need)
        checked = thread.check(["He go home."], build_ged_options(suggest=True), client="demo")
        thread.close()
    """

    def __init__(self, service: Service) -> None:
        self.service = service
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="electra-detect-service", daemon=True)
        self.thread.start()
        self._call(service.start())

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def check(self, texts: list[str], options: GedOptions, client: str = ANONYMOUS,
              cancel: threading.Event | None = None) -> Checked:
        return self._call(self.service.check(texts, options, client, cancel))

    def close(self) -> None:
        """Stop the service (its batcher drains) and the loop's thread."""
        if self.loop.is_closed():
            return
        try:
            self._call(self.service.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
            self.loop.close()


@functools.cache
def shared_typer() -> EditTyper:
    """One ERRANT typer (one spaCy pipeline) for every app of the process: loading one takes seconds."""
    return EditTyper()
