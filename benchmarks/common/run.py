"""How a benchmark was run, for its result files."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def engine_line(stderr: str) -> str:
    """The ``engine: ...`` line a verb writes on stderr (not onnxruntime's warnings before it)."""
    return next((line for line in stderr.splitlines() if line.startswith("engine:")), "")


def time_ged_file(model: Path, path: Path, lines: int, extra: list[str] = (), code: Path | None = None
                  ) -> dict[str, Any]:
    """``electra-detect ged --model model --file path *extra`` in a process of its own, from its start: seconds to
    the first and to the last of its ``lines`` lines, sentences/s overall, and its engine line; ``code``: a
    checkout whose ``electra_detect`` runs instead of this one's (a baseline revision). RuntimeError when it fails."""
    command = [sys.executable, "-m", "electra_detect.cli", "ged", "--model", str(model), "--file", str(path),
               *extra]
    env = {**os.environ, "PYTHONPATH": str(code)} if code else None  # before the editable install's finder
    started = time.perf_counter()
    first, count = None, 0
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          cwd=code) as process:
        for _ in process.stdout:
            count += 1
            first = first or time.perf_counter() - started
        error = process.stderr.read()
    seconds = time.perf_counter() - started
    if process.returncode or count != lines:
        raise RuntimeError(f"ged --file: exit {process.returncode}, {count} of {lines} lines: {error[-800:]}")
    return {"command": " ".join(command[2:]), "engine_line": engine_line(error),
            "seconds": seconds, "first_line_s": first, "sentences_per_s": lines / seconds}
