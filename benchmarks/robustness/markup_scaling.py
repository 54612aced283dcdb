"""Hostile documents through the markup layer: the time and peak memory of 10 KB, 100 KB and 1 MB of a
repeated pattern, read by ``prose_blocks`` alone and checked by ``electra-detect ged --markup``, each case in a process
of its own (its peak resident memory is the process's own).

Patterns: the issue's probe (``[a](``, ``<a ``, ``$``), the other marks that went superlinear (emphasis runs,
backticks, bare URLs, ``\\(``, nesting, ``\\begin``, ``{``, ``%``, unclosed arguments, paragraph breaks) and plain
English prose for comparison.

    python -m benchmarks.robustness.markup_scaling                        # layer and CLI, every size (about an hour)
    python -m benchmarks.robustness.markup_scaling --layer-only           # prose_blocks alone (minutes)
    python -m benchmarks.robustness.markup_scaling --baseline 6760684     # and the layer of a revision, for "before"

Goals: the layer's time and memory within 2x of linear from the 10 KB figure (1 MB at most 200x the 10 KB time,
and its memory above the process's base at most 200x that of 10 KB, each 10 KB figure floored at 10 ms and 1 MB),
and 1 MB of any pattern through the CLI under 1 GB and 60 s. A baseline's cases run under a 4 GB address-space cap
and the same time limit (a quadratic reading of 1 MB would take hours or all the memory there is).

Writes result.json, table.md and plot.png to ``--out-dir`` (default benchmarks/results/markup_scaling/).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common.run import command_line, engine_line, write_result

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "benchmarks" / "results" / "markup_scaling"
SIZES = (10_000, 100_000, 1_000_000)
ENGLISH = "He goes to the store every morning, and she buys three apples. "
# (name, markup, the unit repeated to the size)
PATTERNS = (
    ("[a](", "markdown", "[a]("), ("<a ", "markdown", "<a "), ("$", "markdown", "$"), ("*a", "markdown", "*a"),
    ("_a", "markdown", "_a"), ("`a", "markdown", "`a"), ("[", "markdown", "["), ("&a", "markdown", "&a"),
    ("a:// (bare URL)", "markdown", "a:// "), ("\\(", "markdown", "\\("), ("> (nested quotes)", "markdown", "> "),
    ("- (- - -: a rule)", "markdown", "- "), ("\\begin{equation} lines", "markdown", "\\begin{equation}\n"),
    ("$$a and a heading", "markdown", "$$a\n# h\n"), ("English", "markdown", ENGLISH),
    ("{", "latex", "{"), ("\\begin{a}", "latex", "\\begin{a}"), ("%", "latex", "%"), ("$", "latex", "$"),
    ("\\href{ (unclosed)", "latex", "\\href{"), ("\\end{a}", "latex", "\\end{a}"), ("~", "latex", "~"),
    ("paragraph breaks", "latex", "\n\n"), ("a@b.co (e-mail)", "latex", "a@b.co "), ("English", "latex", ENGLISH),
)
MEMORY_CAP = 4 << 30  # a baseline's address space

LAYER = r"""
import json, resource, sys, time
path, markup, tree = sys.argv[1:4]
if tree:  # a revision's electra_detect (on PYTHONPATH): found before the editable install's finder
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
from electra_detect import markup as layer
layer.prose_blocks("He goes home.", markup)  # the parsers loaded and built
document = open(path, encoding="utf-8").read()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
started = time.perf_counter()
try:
    blocks = layer.prose_blocks(document, markup)
    outcome = f"{len(blocks)} blocks, {sum(len(b.text) for b in blocks):,} characters"
except MemoryError:
    outcome = "MemoryError"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "base_rss_mb": base, "outcome": outcome[:160]}))
"""


def run_process(command: list[str], timeout: float, memory_cap: int | None = None,
                env: dict[str, str] | None = None) -> dict[str, Any]:
    """``command`` in a process of its own (``env``: its environment), killed at ``timeout`` seconds: its wall time,
    peak resident memory (also of a killed one), exit status, stdout and the tail of stderr."""
    def cap() -> None:
        if memory_cap:
            resource.setrlimit(resource.RLIMIT_AS, (memory_cap, memory_cap))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, cwd=ROOT, preexec_fn=cap,
                                   start_new_session=True, env=env)
        timed_out = False
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - started > timeout:
                os.killpg(process.pid, signal.SIGKILL)  # its own session: the CLI's worker threads and children
                _, status, usage = os.wait4(process.pid, 0)
                timed_out = True
                break
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {"seconds": seconds, "peak_rss_mb": usage.ru_maxrss / 1024, "status": process.returncode,
                "timed_out": timed_out, "stdout": out.read().decode("utf-8", "replace"),
                "stderr": err.read().decode("utf-8", "replace")[-2000:]}


def layer_case(path: Path, markup: str, timeout: float, tree: Path | None) -> dict[str, Any]:
    """``prose_blocks`` of the file (this checkout's, or that of ``tree``, a revision's ``electra_detect``)."""
    run = run_process([sys.executable, "-c", LAYER, str(path), markup, str(tree or "")], timeout,
                      MEMORY_CAP if tree else None, {**os.environ, "PYTHONPATH": str(tree)} if tree else None)
    if run["timed_out"]:
        return {"seconds": None, "peak_rss_mb": run["peak_rss_mb"], "outcome": f"over {timeout:.0f} s"}
    try:
        return json.loads(run["stdout"].strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        killed = "MemoryError" in run["stderr"] or run["status"] < 0
        last = ([line for line in run["stderr"].splitlines() if line.strip()] or [f"exit {run['status']}"])[-1]
        return {"seconds": None, "peak_rss_mb": run["peak_rss_mb"],
                "outcome": f"out of memory (cap {MEMORY_CAP >> 30} GB)" if killed else last[:160]}


def cli_case(path: Path, markup: str, timeout: float, model: str | None) -> dict[str, Any]:
    """``electra-detect ged --markup markup --file path`` from its start, its output discarded."""
    command = [sys.executable, "-m", "electra_detect.cli", "ged", "--markup", markup, "--file", str(path)]
    run = run_process(command + (["--model", model] if model else []), timeout)
    lines = [line for line in run["stderr"].splitlines() if line.strip()]
    return {"seconds": None if run["timed_out"] else run["seconds"], "peak_rss_mb": run["peak_rss_mb"],
            "status": run["status"], "engine_line": engine_line(run["stderr"]),
            "outcome": f"over {timeout:.0f} s" if run["timed_out"] else
            (lines[-1][:160] if run["status"] and lines else "ok")}


def linearity(cases: dict[str, dict[str, Any]], field: str, floor: float, base: str | None = None) -> float | None:
    """The largest size's figure over the smallest's times their ratio (1 is linear; the goal is at most 2), a base
    subtracted."""
    sizes = sorted(int(size) for size in cases)
    small, large = cases[str(sizes[0])], cases[str(sizes[-1])]
    if not small or not large or small.get(field) is None or large.get(field) is None:
        return None
    low = small[field] - (small.get(base, 0) if base else 0)
    high = large[field] - (large.get(base, 0) if base else 0)
    return round(high / (sizes[-1] / sizes[0] * max(low, floor)), 2)


def cell(case: dict[str, Any] | None) -> str:
    if not case:
        return ""
    seconds = "—" if case.get("seconds") is None else f"{case['seconds']:.2f} s"
    note = case.get("outcome", "")
    shown = f"{seconds}, {case['peak_rss_mb']:.0f} MB"
    if note.startswith(("MarkupError", "error:")):
        note = "its one-line error"
    return shown if not note or note == "ok" or "blocks" in note else f"{shown} ({note[:40]})"


def code(name: str) -> str:
    return f"`` {name} ``" if "`" in name else f"`{name}`"


def table(result: dict[str, Any]) -> str:
    rows, sizes = result["patterns"], result["sizes"]
    names = " | ".join(f"{s / 1e6:g} MB" if s >= 1e6 else f"{s / 1000:g} KB" for s in sizes)
    head = (f"# The markup layer on hostile documents ({result['host']}; {result['date']})\n\n"
            f"Each case a process of its own: time of `prose_blocks` alone (after its parsers are built) or of "
            f"`electra-detect ged --markup` from process start (the shipped model; "
            f"{result['engine_line'].split(' from ')[0] or 'its default engine'}), and "
            f"the process's peak resident memory. ×linear: the 1 MB figure over 100× the 10 KB one (time floored at "
            f"10 ms, memory above the process's base floored at 1 MB); goal ≤ 2. CLI goal: 1 MB under 60 s and "
            f"1 GB.\n\n")
    out = [head, f"| pattern | markup | layer {names} | ×linear time | ×linear memory | CLI {names} |",
           "|---|---|" + "---|" * len(sizes) + "---:|---:|" + "---|" * len(sizes)]
    for row in rows:
        layer, cli = row["layer"], row.get("cli", {})
        out.append(f"| {code(row['name'])} | {row['markup']} | " + " | ".join(cell(layer.get(str(s))) for s in sizes)
                   + f" | {row['layer_time_x'] if row['layer_time_x'] is not None else ''} | "
                   + f"{row['layer_memory_x'] if row['layer_memory_x'] is not None else ''} | "
                   + " | ".join(cell(cli.get(str(s))) for s in sizes) + " |")
    if any(row.get("baseline") for row in rows):
        out += ["", f"Before: the layer at `{result['baseline']}` (its cases capped at "
                    f"{result['layer_timeout_s']:.0f} s and {MEMORY_CAP >> 30} GB of address space).", "",
                f"| pattern | markup | {names} |", "|---|---|" + "---|" * len(sizes)]
        for row in rows:
            out.append(f"| {code(row['name'])} | {row['markup']} | "
                       + " | ".join(cell(row["baseline"].get(str(s))) for s in sizes) + " |")
    goals = result["goals"]
    out += ["", f"Layer within 2× of linear (time and memory): **{goals['layer_linear']}**"
                f"{'' if goals['layer_linear'] else ' — ' + ', '.join(goals['layer_misses'])}.",
            f"CLI, 1 MB under 60 s and 1 GB: **{goals['cli_1mb']}**"
            f"{'' if goals['cli_1mb'] in (True, None) else ' — ' + ', '.join(goals['cli_misses'])}.",
            "", f"Command: `{result['command']}`", ""]
    return "\n".join(out)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from electra_detect.fileio import atomic_save_figure

    fig, axes = plt.subplots(1, 3, figsize=(16, 5))
    sizes = result["sizes"]
    for row in result["patterns"]:
        label = f"{row['markup'][:2]} {row['name']}".replace("$", r"\$")  # not matplotlib's math
        for ax, part, field in ((axes[0], "layer", "seconds"), (axes[1], "layer", "peak_rss_mb"),
                                (axes[2], "cli", "seconds")):
            points = [(s, row.get(part, {}).get(str(s), {}).get(field)) for s in sizes]
            points = [(s / 1000, v) for s, v in points if v is not None]
            if points:
                ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=label)
    for ax, title in zip(axes, ("prose_blocks: seconds", "prose_blocks: peak RSS (MB)", "ged --markup: seconds"),
                         strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("document (KB)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    xs = [s / 1000 for s in sizes]
    axes[0].plot(xs, [0.01 * x / xs[0] for x in xs], "k--", label="linear")
    axes[2].axhline(60, color="red", linestyle=":", label="goal: 60 s")
    axes[1].legend(fontsize=6, ncol=2)
    axes[0].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    atomic_save_figure(fig, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    parser.add_argument("--layer-only", action="store_true", help="prose_blocks alone, not the CLI")
    parser.add_argument("--baseline", help="a revision whose markup layer is measured too (git show, read only)")
    parser.add_argument("--model", help="the CLI's --model (default: the shipped model)")
    parser.add_argument("--pattern", action="append", default=[], help="only the patterns of these names")
    parser.add_argument("--layer-timeout", type=float, default=120.0, help="seconds a layer case may take")
    parser.add_argument("--cli-timeout", type=float, default=240.0, help="seconds a CLI case may take")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="document sizes, characters")
    args = parser.parse_args()
    sizes = tuple(int(size) for size in args.sizes.split(","))

    patterns = [p for p in PATTERNS if not args.pattern or p[0] in args.pattern]
    baseline_module = None
    scratch = Path(tempfile.mkdtemp(prefix="markup-scaling-"))
    if args.baseline:
        baseline_module = scratch / "revision"  # the revision's electra_detect/, read only (git archive)
        baseline_module.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline, "electra_detect"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(baseline_module)], input=archive, check=True)
    rows, engine = [], ""
    for name, markup, unit in patterns:
        row: dict[str, Any] = {"name": name, "markup": markup, "unit": unit, "layer": {}}
        for size in sizes:
            path = scratch / f"case.{'md' if markup == 'markdown' else 'tex'}"
            path.write_text((unit * (size // len(unit) + 1))[:size], encoding="utf-8")
            row["layer"][str(size)] = layer_case(path, markup, args.layer_timeout, None)
            if baseline_module is not None:
                row.setdefault("baseline", {})[str(size)] = layer_case(path, markup, args.layer_timeout,
                                                                       baseline_module)
            if not args.layer_only:
                row.setdefault("cli", {})[str(size)] = cli_case(path, markup, args.cli_timeout, args.model)
                engine = engine or row["cli"][str(size)]["engine_line"]
            print(json.dumps({"pattern": name, "markup": markup, "size": size,
                              **{part: row[part][str(size)] for part in ("layer", "baseline", "cli") if part in row}}),
                  flush=True)
        row["layer_time_x"] = linearity(row["layer"], "seconds", 0.01)
        row["layer_memory_x"] = linearity(row["layer"], "peak_rss_mb", 1.0, base="base_rss_mb")
        rows.append(row)
    layer_misses = [f"{r['markup']} {code(r['name'])}" for r in rows
                    if (r["layer_time_x"] or 0) > 2 or (r["layer_memory_x"] or 0) > 2
                    or r["layer"][str(sizes[-1])].get("seconds") is None]
    cli_misses = [f"{r['markup']} {code(r['name'])}" for r in rows if "cli" in r
                  and ((c := r["cli"][str(sizes[-1])])["seconds"] is None or c["seconds"] > 60
                       or c["peak_rss_mb"] > 1024)]
    result = {"benchmark": "markup_scaling", "command": command_line(),
              "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
              "host": f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at end",
              "python": platform.python_version(), "sizes": list(sizes), "baseline": args.baseline,
              "layer_timeout_s": args.layer_timeout, "cli_timeout_s": args.cli_timeout, "engine_line": engine,
              "goals": {"layer_linear": not layer_misses, "layer_misses": layer_misses,
                        "cli_1mb": None if args.layer_only else not cli_misses, "cli_misses": cli_misses},
              "patterns": rows}
    write_result(args.out_dir, result, table(result), lambda path: plot(result, path))
    print(json.dumps({"benchmark": "markup_scaling", **result["goals"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
