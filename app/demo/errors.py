"""The demo's two errors: one that stops it from starting, one shown in the page for input it refuses."""

from __future__ import annotations

from electra_detect.errors import UserError


class DemoError(UserError, ValueError):
    """The demo cannot start (bad model dir, engine, port); printed as one ``error:`` line."""


class InputProblem(ValueError):
    """User input the demo refuses; shown as a message in the page, never as a traceback."""
