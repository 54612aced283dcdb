"""HTTP inference server over one ``Detector`` (the ONNX engine by default): the app and its routes.

Why it is shaped this way:
- One model thread (``batcher.MicroBatcher``): the engine already uses every core inside a call, so
  concurrent requests queue and run a step (about ``step_tokens`` model tokens) at a time, small ones
  merged when batching. A heavy request delays the others by about one step, and stops using the model
  as soon as its deadline passes or its client disconnects.
- Every failure is a JSON body ``{"error": {"type", "message"}}`` (``api_errors``) with a 4xx (bad input,
  limits, auth) or 5xx (timeout, engine failure); nothing a client sends stops the process.
- Limits (texts per request, characters per text, model tokens per request, body bytes, request
  timeout, read timeout) are checked before any text reaches the model (``schemas``, ``guard``); the
  body limit is enforced on the bytes received, not only the header.
- Every request a connection carries ends in an answer: idle connections are closed only long after a
  client's pool would have dropped them, and never with a request's bytes waiting (``guard``).
- Shutdown (SIGTERM/SIGINT, via uvicorn) stops accepting, lets in-flight requests finish, then the
  batcher drains its queue before the process exits.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import FastAPI, Form, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from electra_detect.app.api_errors import ApiError, error_response, json_error
from electra_detect.app.batcher import MicroBatcher
from electra_detect.app.guard import Guard, http_protocol
from electra_detect.app.languagetool import LANGUAGES, CheckError, check_answer, matches, parse_document, parse_language
from electra_detect.app.metrics import Metrics
from electra_detect.app.schemas import (
    LIMITS_DOC,
    NBEST_LINES,
    NOT_BLANK,
    SCORE_LIMIT,
    GedRequest,
    RerankRequest,
    ScoreRequest,
    check_texts,
    declare_limits,
)
from electra_detect.app.settings import ServerSettings
from electra_detect.detector import Detector, TextScores
from electra_detect.tasks.ged.suggestions import Suggester, SuggestionPlan


def _result(scores: TextScores, tokens: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"text": scores.text, "sentence_mean": scores.sentence_mean,
                           "sentence_sum": scores.sentence_sum,
                           "words": [{"word": w.word, "start": w.start, "end": w.end, "score": w.score}
                                     for w in scores.words]}
    if tokens:
        row["tokens"] = [{"token": t.token, "start": t.start, "end": t.end, "p_replaced": t.p_replaced}
                         for t in scores.tokens]
    return row


async def _disconnect(request: Request) -> None:
    """Returns when the client has gone (the body was read already: the channel only reports that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def create_app(detector: Detector, settings: ServerSettings | None = None) -> FastAPI:
    """The FastAPI app over ``detector``; the batcher lives from startup to the end of shutdown."""
    from electra_detect.errors import RerankError
    from electra_detect.tasks.rerank.fusion import rank_hypotheses, sentence_score, word_confidence
    from electra_detect.tasks.rerank.listwise import Reranker
    from electra_detect.tasks.rerank.nbest import parse_hypothesis_lines

    settings = settings or ServerSettings()
    metrics = Metrics()
    engine = detector.engine
    info = {"engine": engine.name, "provider": str(getattr(engine, "provider", "?")),
            "variant": str(getattr(engine, "variant", "torch")), "calibration": detector.calibration,
            "model": str(detector.model_dir), "batching": str(settings.batching)}
    metrics.info.info(info)
    default_threshold = detector.threshold() if settings.ged_threshold is None else settings.ged_threshold
    reranker = Reranker.load(detector.model_dir)  # a `rerank train` model: /v1/rerank's score is its learned one
    suggester = Suggester()
    state: dict[str, MicroBatcher] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        batcher = MicroBatcher(detector, settings, metrics)
        await batcher.start()
        if settings.suggest:  # the word lists load now, not in the first /v2/check
            await asyncio.to_thread(suggester.candidates, "warm")
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

    async def scored(request: Request, texts: list[str], deadline: float | None = None) -> list[TextScores]:
        """Scores of ``texts`` within the request's deadline (``deadline``, event-loop time, when it began
        earlier); a client that goes away or times out stops the model's work on its request at the next step."""
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
            response.headers["retry-after"] = "2"  # well below keep_alive_s: a client that waits keeps its connection
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
            kind, message = json_error(exc.__cause__)
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
        check_texts(body.texts, settings)
        results = await scored(request, body.texts)
        head = {k: info[k] for k in ("engine", "provider", "variant", "calibration")}
        return await reply(lambda: {**head, "results": [_result(r, body.tokens) for r in results]})

    @app.post("/v1/ged", summary="words flagged as grammatical errors", responses=errors)
    async def ged(body: GedRequest, request: Request) -> Response:
        check_texts(body.texts, settings)
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
        check_texts(texts, settings, "hypotheses")
        unique = list(dict.fromkeys(texts))
        results = dict(zip(unique, await scored(request, unique), strict=True))
        if reranker is not None:
            lm = dict(zip(results, reranker.lm_scores(list(results.values())), strict=True))
        else:
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

    @app.post("/v2/check", summary="LanguageTool-compatible check (form fields text or data, language)",
              responses={**errors, 415: {"description": "unsupported_media_type: send a form "
                                                        "(application/x-www-form-urlencoded or multipart/form-data)"}})
    async def languagetool_check(
            request: Request,
            text: Annotated[str | None, Form(description="the text to check (or data)")] = None,
            data: Annotated[str | None, Form(description='LanguageTool annotation JSON: {"annotation": [{"text": '
                                                         '...}, {"markup": ..., "interpretAs": ...}]}')] = None,
            language: Annotated[str | None, Form(description="en, en-US, ... or auto (English only)")] = None,
    ) -> Response:
        """LanguageTool's /v2/check over /v1/ged's scores (its threshold): one match per flagged word, offsets in
        UTF-16 code units of the original text, ``replacements`` from the suggester (unless the server runs with
        ``--no-suggest``); other LanguageTool fields are accepted and ignored."""
        form = await request.form()  # parsed once (cached); FastAPI reads an empty field as missing, LanguageTool not
        text, data, language = (form[name] if isinstance(form.get(name), str) else None
                                for name in ("text", "data", "language"))
        try:
            found_language, document = parse_language(language), parse_document(text, data)
        except CheckError as exc:
            raise ApiError(422, "invalid_request", str(exc)) from None
        found: list[dict[str, Any]] = []
        if re.search(NOT_BLANK, document.checked):  # an empty document has no matches, as in LanguageTool
            check_texts([document.checked], settings, "text")
            deadline = asyncio.get_running_loop().time() + settings.timeout_s
            result = (await scored(request, [document.checked], deadline))[0]
            flagged = result.flagged(default_threshold)
            if settings.suggest and flagged:
                flagged = await suggested(request, document.checked, flagged, deadline)
            found = matches(document, flagged)
        return await reply(lambda: check_answer(found_language, found, app.version))

    async def suggested(request: Request, text: str, flagged: list[dict[str, Any]],
                        deadline: float) -> list[dict[str, Any]]:
        """The flagged words with their ``suggestions``: the candidates' sentences scored through the batcher as
        one more job of the request, within its deadline; targets over ``max_tokens`` get none."""
        def plan() -> SuggestionPlan:
            spans = [(word["start"], word["end"]) for word in flagged]
            return suggester.plan(text, spans).within(settings.max_tokens, lambda texts: detector.job(texts).cost)

        planned = await asyncio.to_thread(plan)
        texts = planned.texts
        ranked = suggester.rank(planned, await scored(request, texts, deadline) if texts else [])
        return [{**word, "suggestions": [s.to_dict() for s in found]}
                for word, found in zip(flagged, ranked, strict=True)]

    @app.get("/v2/languages", summary="LanguageTool-compatible list of the languages checked")
    async def languagetool_languages() -> list[dict[str, str]]:
        return LANGUAGES

    app.state.settings, app.state.metrics = settings, metrics
    app.add_middleware(Guard, settings=settings, metrics=metrics)
    generate = app.openapi
    app.openapi = lambda: app.openapi_schema or declare_limits(generate(), settings)  # cached by FastAPI
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
                            timeout_graceful_shutdown=int(settings.timeout_s) + 5, access_log=False,
                            timeout_keep_alive=settings.keep_alive_s, http=http_protocol(settings.read_timeout_s))
    server = DrainingServer(config)
    try:
        server.run()
    except SystemExit:  # uvicorn exits 3 itself when it cannot bind; report it as our one-line error instead
        server.started = False
    if not server.started:
        raise OSError(f"the server could not start on {host}:{port} (port in use, or not an address here?)")
