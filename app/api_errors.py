"""The server's JSON error answers: ``{"error": {"type", "message"}}`` with its HTTP status."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse


class ApiError(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def error_response(status: int, kind: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message, **extra}}, status_code=status)


def json_error(exc: BaseException | None) -> tuple[str, str]:
    """(type, message) for a body the JSON parser rejected, from the parser's own exception."""
    if isinstance(exc, UnicodeDecodeError):
        return "bad_request", "the body is not valid UTF-8"
    if isinstance(exc, RecursionError):
        return "json_too_deep", "the JSON body is nested too deeply (arrays or objects inside each other)"
    if isinstance(exc, ValueError) and "digits" in str(exc):
        return "number_too_long", f"a number in the JSON body has too many digits ({exc})"
    return "bad_request", "the body is not valid UTF-8 JSON"
