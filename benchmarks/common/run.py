"""How a benchmark was run, for its result files."""

from __future__ import annotations

import shlex
import sys


def command_line() -> str:
    """The command that ran this benchmark, as a user types it: ``python -m benchmarks.<kind>.<name> ARGS``."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    head = f"python -m {spec.name}" if spec is not None else f"python {sys.argv[0]}"
    return " ".join([head, *(shlex.quote(a) for a in sys.argv[1:])])
