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


def write_result(out: Path, result: Any, table: str, plot: Any = None) -> None:
    """A benchmark's files in ``out``: ``result.json``, ``table.md`` and, when ``plot`` (a function of a path) is
    given, ``plot.png``; the table is printed too."""
    from electra_detect.fileio import atomic_write_json, atomic_write_text

    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "result.json", result)
    atomic_write_text(out / "table.md", table)
    if plot is not None:
        plot(out / "plot.png")
    print(table)


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


# Runs the CLI of the checkout in the working directory (a baseline revision): the editable install maps the layers
# (electra_detect.app, .calibration, .training) to this checkout and lists this checkout's verbs, so both are undone.
BASELINE_CLI = """
import importlib.metadata as metadata, pathlib, runpy, sys
tree = pathlib.Path.cwd()
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
layers = {"electra_detect.app": "app", "electra_detect.calibration": "calibration",
          "electra_detect.training": "training"}
import electra_detect, importlib.util
for name, folder in layers.items():
    if (tree / folder / "__init__.py").exists():
        spec = importlib.util.spec_from_file_location(name, tree / folder / "__init__.py",
                                                      submodule_search_locations=[str(tree / folder)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
real = metadata.entry_points
def present(point):
    parts = point.value.split(":")[0].split(".")
    base = tree.joinpath(*([layers[".".join(parts[:2])], *parts[2:]] if ".".join(parts[:2]) in layers else parts))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()
def entry_points(**selection):
    found = real(**selection)
    return [p for p in found if present(p)] if selection.get("group") == "electra_detect.verbs" else found
metadata.entry_points = entry_points
sys.argv[0] = "electra-detect"
runpy.run_module("electra_detect.cli", run_name="__main__", alter_sys=True)
"""


def time_ged_file(model: Path, path: Path, lines: int, extra: list[str] = (), code: Path | None = None
                  ) -> dict[str, Any]:
    """``electra-detect ged --model model --file path *extra`` in a process of its own, from its start: seconds to
    the first and to the last of its ``lines`` lines, sentences/s overall, its peak resident memory and its engine
    line; ``code``: a checkout whose ``electra_detect`` runs instead of this one's (a baseline revision).
    RuntimeError when it fails."""
    return time_ged(model, ["--file", str(path)], lines, extra, code)


def json_output(tree: Path) -> list[str]:
    """The flag that makes checkout ``tree``'s ``ged`` write JSON lines, a line a text (its default before
    ``--output-format`` came, which an older revision would refuse)."""
    options = tree / "electra_detect" / "cli" / "options.py"
    return ["--output-format", "json"] if "--output-format" in options.read_text(encoding="utf-8") else []


def time_ged(model: Path, inputs: list[str], lines: int, extra: list[str] = (), code: Path | None = None
             ) -> dict[str, Any]:
    """:func:`time_ged_file` for any ``inputs`` of ``ged`` (``["--file", path]``, or a sentence)."""
    runner = ["-c", BASELINE_CLI] if code else ["-m", "electra_detect.cli"]
    command = [sys.executable, *runner, "ged", *json_output(code or ROOT), "--model", str(model), *inputs, *extra]
    env = {**os.environ, "PYTHONPATH": str(code)} if code else None  # before the editable install's finder
    started = time.perf_counter()
    first, count = None, 0
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          cwd=code) as process:
        for _ in process.stdout:
            count += 1
            first = first or time.perf_counter() - started
        error = process.stderr.read()
        _, status, usage = os.wait4(process.pid, 0)  # this child's own rusage: its peak resident memory
        process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if process.returncode or count != lines:
        raise RuntimeError(f"ged: exit {process.returncode}, {count} of {lines} lines: {error[-800:]}")
    return {"command": " ".join(command[3 if code else 2:]), "engine_line": engine_line(error),
            "seconds": seconds, "first_line_s": first, "sentences_per_s": lines / seconds,
            "peak_rss_mb": usage.ru_maxrss / 1024}
