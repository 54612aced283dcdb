"""The HTTP server's JSON error answers: ``{"error": {"type", "message"}}`` with its HTTP status."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from electra_detect.errors import GedOptionsError, MarkupError

# The error answers every JSON route declares in its OpenAPI responses.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"description": "malformed_json or bad_request: the body is not JSON (or not UTF-8)"},
    413: {"description": "too_many_texts, text_too_long, too_many_tokens or body_too_large"},
    415: {"description": "unsupported_media_type: send Content-Type: application/json"},
    422: {"description": "invalid_request: a field is missing, of the wrong type or out of range; invalid_markup: a "
                         "document the markup reader cannot read (nested too deeply, unbalanced)"},
    429: {"description": "too_many_requests: past the client's (or the server's) share of requests or model "
                         "tokens in flight; Retry-After says when to retry"},
    503: {"description": "overloaded: a long request that could not finish before its deadline"},
    504: {"description": "timeout: not scored within the server's timeout"}}


# The core's errors of input, wherever a route meets them (the markup reader under /v1/ged, the GED options): a 422
# with its kind, never the 500 of a bug. An engine failure (a DetectorError) stays a 500: it is not the client's.
INPUT_ERRORS: dict[type[Exception], str] = {MarkupError: "invalid_markup", GedOptionsError: "invalid_request"}


def input_error(exc: Exception) -> tuple[int, str, str]:
    """(status, type, message) of one of the core's :data:`INPUT_ERRORS`: what the client sent cannot be used."""
    kind = next(kind for cls, kind in INPUT_ERRORS.items() if isinstance(exc, cls))
    return 422, kind, str(exc) or type(exc).__name__


def error_response(status: int, kind: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message, **extra}}, status_code=status)


def internal_error(error_id: str) -> JSONResponse:
    """A 500 that says nothing of the failure but its id: the server log has the rest under the same id."""
    return error_response(500, "internal_error", f"internal error {error_id}: the server log has the details",
                          id=error_id)


def json_error(exc: BaseException | None) -> tuple[str, str]:
    """(type, message) for a body the JSON parser rejected, from the parser's own exception."""
    if isinstance(exc, UnicodeDecodeError):
        return "bad_request", "the body is not valid UTF-8"
    if isinstance(exc, RecursionError):
        return "json_too_deep", "the JSON body is nested too deeply (arrays or objects inside each other)"
    if isinstance(exc, ValueError) and "digits" in str(exc):
        return "number_too_long", f"a number in the JSON body has too many digits ({exc})"
    return "bad_request", "the body is not valid UTF-8 JSON"
