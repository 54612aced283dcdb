"""Fuzz every input path for many generated inputs (the targets of ``benchmarks/robustness/fuzz_targets.py``).

For each target: how many inputs hypothesis generated, how many the reader accepted or rejected with its own
one-line error, and the crashes (a failing example, shrunk by hypothesis) with their error; inputs per second.
``detector-score`` runs the shipped model on the product's default engine (``auto``).

    python -m benchmarks.robustness.fuzz [--examples 10000] [--target NAME ...]

Writes result.json, table.md and plot.png to ``--out-dir`` (default benchmarks/results/fuzz/).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

from benchmarks.common.run import command_line
from benchmarks.robustness.fuzz_targets import check, context_for, targets
from electra_detect.fileio import atomic_save_figure, atomic_write_json, atomic_write_text

ROOT = Path(__file__).resolve().parents[2]




def fuzz(name: str, examples: int, model: str) -> dict[str, Any]:
    """Run one target for ``examples`` generated inputs; a crash ends the run with hypothesis's shrunk example."""
    target = targets()[name]
    context = context_for(target.needs, model)
    counts = {"accepted": 0, "rejected": 0}
    crash: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory() as scratch:

        @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(target.strategy)
        def run(example: Any) -> None:
            counts[check(target, example, Path(scratch), context)] += 1

        started = time.perf_counter()
        try:
            run()
        except Exception as exc:  # a crash: what hypothesis shrank it to, kept for the table
            crash = {"error": f"{type(exc).__name__}: {str(exc)[:300]}",
                     "where": traceback.format_exception(exc)[-2].strip()[:300]}
        seconds = time.perf_counter() - started
    generated = counts["accepted"] + counts["rejected"]
    return {"target": name, "generated": generated, **counts, "crashes": 0 if crash is None else 1,
            "crash": crash, "seconds": round(seconds, 1), "per_second": round(generated / max(seconds, 1e-9), 1)}


def table(summary: dict[str, Any]) -> str:
    lines = ["# Fuzzing every input path", "",
             f"Command: `{summary['command']}` ({summary['date']}); hypothesis {summary['hypothesis']}, "
             f"{summary['examples']:,} examples asked per target, derandomized (the same inputs each run). "
             "An input is *accepted* (the reader returned records) or *rejected* (its own error type, one line); "
             "anything else is a crash.", "",
             "| target | inputs | accepted | rejected | crashes | inputs/s |", "|---|---:|---:|---:|---:|---:|"]
    for row in summary["rows"]:
        lines.append(f"| {row['target']} | {row['generated']:,} | {row['accepted']:,} | {row['rejected']:,} | "
                     f"{row['crashes']} | {row['per_second']:.0f} |")
    crashes = [row for row in summary["rows"] if row["crash"]]
    lines += ["", f"**{sum(r['generated'] for r in summary['rows']):,} inputs, {len(crashes)} crashes.**", ""]
    for row in crashes:
        lines += [f"- {row['target']}: `{row['crash']['error']}` at `{row['crash']['where']}`"]
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["rows"]
    names = [r["target"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(rows) + 1.5))
    ax.barh(names, [r["accepted"] for r in rows], label="accepted")
    ax.barh(names, [r["rejected"] for r in rows], left=[r["accepted"] for r in rows], label="rejected (one line)")
    for i, row in enumerate(rows):
        if row["crashes"]:
            ax.text(row["generated"], i, " crash", va="center", color="red")
    ax.invert_yaxis()
    ax.set_xlabel("generated inputs")
    ax.set_title("Fuzzed inputs per reader: accepted or rejected, never a crash")
    ax.legend(loc="lower right")
    fig.tight_layout()
    atomic_save_figure(fig, path)


def main() -> int:
    import hypothesis

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--target", nargs="*", default=sorted(targets()), help="default: every target")
    parser.add_argument("--model", default=str(ROOT / "models" / "electra-tiny"), help="for detector-score")
    parser.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results" / "fuzz"))
    args = parser.parse_args()
    unknown = sorted(set(args.target) - set(targets()))
    if unknown:
        parser.error(f"unknown target(s) {unknown}; choose from {sorted(targets())}")
    rows = []
    for name in args.target:
        row = fuzz(name, args.examples, args.model)
        rows.append(row)
        print(json.dumps({k: row[k] for k in ("target", "generated", "rejected", "crashes", "seconds")}),
              file=sys.stderr, flush=True)
    summary = {"benchmark": "fuzz", "examples": args.examples, "hypothesis": hypothesis.__version__, "rows": rows,
               "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
               "command": command_line()}
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "result.json", summary)
    atomic_write_text(out / "table.md", table(summary))
    plot(summary, out / "plot.png")
    print(json.dumps({"benchmark": "fuzz", "inputs": sum(r["generated"] for r in rows),
                      "crashes": sum(r["crashes"] for r in rows)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
