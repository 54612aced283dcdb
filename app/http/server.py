"""HTTP inference server over one ``Detector`` (the ONNX engine by default): the app, its error answers and its
lifetime. The routes live in ``app/http/routes/`` (one module per family) and share one ``service.Service``.

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

import logging
import uuid
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from electra_detect.app.api_errors import ApiError
from electra_detect.app.http.errors import INPUT_ERRORS, error_response, input_error, internal_error, json_error
from electra_detect.app.http.guard import ERROR_ID_KEY, Guard, http_protocol
from electra_detect.app.http.routes import ged, health, languagetool, rerank, score
from electra_detect.app.http.schemas import LIMITS_DOC, declare_limits
from electra_detect.app.service import Service
from electra_detect.app.settings import ServerSettings
from electra_detect.detector import Detector

log = logging.getLogger("electra_detect.server")
ROUTES = (health, score, ged, rerank, languagetool)  # the route modules, each an APIRouter


def create_app(detector: Detector, settings: ServerSettings | None = None) -> FastAPI:
    """The FastAPI app over ``detector``; the batcher lives from startup to the end of shutdown."""
    settings = settings or ServerSettings()
    service = Service(detector, settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await service.start()
        app.state.batcher = service.batcher
        try:
            yield
        finally:
            await service.stop()

    limits = (f"This server: max_texts {settings.max_texts}, max_chars {settings.max_chars}, max_tokens "
              f"{settings.max_tokens}, max_body_bytes {settings.max_body_bytes}, timeout {settings.timeout_s:g} s, "
              f"read_timeout {settings.read_timeout_s:g} s, client_requests {settings.client_requests}, "
              f"client_tokens {settings.client_tokens}, max_requests {settings.max_requests}, check_budget "
              f"{settings.check_budget}.")
    # The Swagger UI loads its scripts from a public CDN: served only when asked for (`serve --docs`);
    # /openapi.json, the contract, is always there.
    app = FastAPI(title="electra-detect", version="0.1.0", lifespan=lifespan,
                  docs_url="/docs" if settings.docs else None, redoc_url=None,
                  description="Per-token replaced probabilities from an ELECTRA discriminator: scores, "
                              "grammatical error flags and n-best reranking. Errors are JSON: "
                              '{"error": {"type", "message"}}. ' + LIMITS_DOC + " " + limits)
    app.state.service, app.state.settings, app.state.metrics = service, settings, service.metrics
    for routes in ROUTES:
        app.include_router(routes.router)
    add_error_handlers(app)
    paths = frozenset(route.path for routes in ROUTES for route in routes.router.routes)  # each a metrics label
    app.add_middleware(Guard, settings=settings, metrics=service.metrics, paths=paths,
                       form_paths=languagetool.FORM_PATHS, key_field_paths=languagetool.KEY_FIELD_PATHS)
    generate = app.openapi
    app.openapi = lambda: app.openapi_schema or declare_limits(generate(), settings)  # cached by FastAPI
    return app


def add_error_handlers(app: FastAPI) -> None:
    """Every failure as ``{"error": {"type", "message"}}`` with its status; nothing a client sends escapes."""

    @app.exception_handler(ApiError)
    async def _api_error(_, exc: ApiError) -> JSONResponse:
        response = error_response(exc.status, exc.kind, exc.message)
        if exc.status == 503:
            response.headers["retry-after"] = "2"  # well below keep_alive_s: a client that waits keeps its connection
        response.headers.update(exc.headers)
        return response

    async def _input(_, exc: Exception) -> JSONResponse:
        return error_response(*input_error(exc))

    for error in INPUT_ERRORS:  # the core's input errors on every route, however deep they were raised
        app.add_exception_handler(error, _input)

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
    async def _http(request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            kind, message = json_error(exc.__cause__)
            return error_response(400, kind, message)
        kind = "not_found" if exc.status_code == 404 else "http_error"
        response = error_response(exc.status_code, kind, str(exc.detail))
        response.headers.update(exc.headers or {})  # a 405 must say which methods are allowed (Allow)
        if exc.status_code == 405:  # every method of the path (/v2/check has a GET and a POST), not one route's
            methods = {m.upper() for m in app.openapi().get("paths", {}).get(request.url.path, {})}
            if methods:
                response.headers["allow"] = ", ".join(sorted(methods))
        return response

    @app.exception_handler(Exception)
    async def _crash(request, exc: Exception) -> JSONResponse:
        error_id = request.scope[ERROR_ID_KEY] = uuid.uuid4().hex[:12]  # the answer names it, the log the rest
        log.error("internal error %s on %s %s", error_id, request.method, request.url.path, exc_info=exc)
        return internal_error(error_id)


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
                            timeout_keep_alive=settings.keep_alive_s,
                            h11_max_incomplete_event_size=settings.max_head_bytes,
                            http=http_protocol(settings.read_timeout_s, settings.max_head_bytes),
                            loop="asyncio")  # the loop its figures were measured with, not uvloop (Ray installs it)
    server = DrainingServer(config)
    try:
        server.run()
    except SystemExit:  # uvicorn exits 3 itself when it cannot bind; report it as our one-line error instead
        server.started = False
    if not server.started:
        raise OSError(f"the server could not start on {host}:{port} (port in use, or not an address here?)")
