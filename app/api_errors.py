"""What a check refuses with: :class:`ApiError`, its HTTP status, kind and one-line message, raised by the service
and shown by every front (the HTTP server's JSON error answer, the demo's status line, the editor's message)."""

from __future__ import annotations


class ApiError(Exception):
    def __init__(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.headers = status, kind, message, headers or {}
