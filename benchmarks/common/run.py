"""How a benchmark was run, for its result files."""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def command_line() -> str:
    """The command that ran this benchmark, as a user types it: ``python -m benchmarks.<kind>.<name> ARGS``."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    head = f"python -m {spec.name}" if spec is not None else f"python {sys.argv[0]}"
    return " ".join([head, *(shlex.quote(a) for a in sys.argv[1:])])


@contextlib.contextmanager
def revision_checkout(ref: str) -> Iterator[Path]:
    """A git worktree of revision ``ref`` of this repository, removed afterwards: a baseline's code, run from there
    (its folder as the working directory, and first on PYTHONPATH, so its ``electra_detect`` is the one imported)."""
    tree = Path(tempfile.mkdtemp(prefix="baseline-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), ref], check=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
