"""The edit-tag teacher's device figures: the teachers and students a device call scored, as a table and a plot.

    python -m benchmarks.quality.teacher_device --teachers FILES_AT/teachers.json --students FILES_AT/students.json

``scripts/device/distill_device.py`` scores every model it trains on the tuning and report halves of MultiGED FCE
dev, FCE dev in BEA form and JFLEG dev (``benchmarks.quality.ged_tags.detection``, from the sets
``ged_tags --write-sets`` carried), and the shipped ``ged/`` beside them on the same GPU: this reads those JSON files
(what the device call brought back) and writes ``result.json``, ``table.md`` and ``plot.png``. It runs nothing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.common.run import command_line, write_result

OUT = Path("benchmarks/results/teacher_device")
SETS = ("MultiGED FCE dev", "JFLEG dev", "BEA FCE dev")


def rows(teachers: dict[str, Any], students: dict[str, Any], skip: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """{model: figures}: each arm's select (tuning halves) and report-half F0.5 at the shared and its own threshold;
    the arms named in ``skip`` left out."""
    out = {}
    for kind, report in (("teacher", teachers), ("student", students)):
        for name, arm in (report or {}).get("arms", {}).items():
            if name in skip:
                continue
            label = "shipped ged/ (the students' start)" if kind == "student" and name == "start" else f"{kind}: {name}"
            out[label] = {
                "select": arm["select"], "threshold": arm["threshold"],
                **{s: {"at_shared": arm[s]["at_shared"]["f05"], "at_own": arm[s]["at_own"]["f05"]}
                   for s in SETS if s in arm},
                **{k: arm.get(k) for k in ("steps", "minutes", "last_loss", "train_sentences") if arm.get(k)}}
    return out


def table(found: dict[str, dict[str, Any]]) -> str:
    head = " | ".join(f"{s} (shared / own)" for s in SETS)
    lines = [f"| model | tuning halves' F0.5 (select) | {head} |", "|---|---:|" + "---:|" * len(SETS)]
    for name, row in found.items():
        cells = [f"{row[s]['at_shared']:.3f} / {row[s]['at_own']:.3f}" if s in row else "–" for s in SETS]
        lines.append(f"| {name} | {row['select']:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(found: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(found)
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [found[name].get(s, {}).get("at_own", 0.0) for s in SETS]
        ax.bar(np.arange(len(SETS)) + i * width, values, width, label=name)
    ax.set_xticks(np.arange(len(SETS)) + width * (len(names) - 1) / 2, SETS)
    ax.set_ylabel("F0.5, report half (own threshold)")
    ax.set_ylim(0.4, 0.75)
    ax.set_title("Teachers (MPNet, 110M) and the shipped ged/ (MiniLM, 22M), scored on the H200")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teachers", type=Path, required=True, help="call 1's teachers.json")
    parser.add_argument("--students", type=Path, help="call 2's students.json")
    parser.add_argument("--skip", nargs="*", default=[], help="arms to leave out (e.g. an alias of another arm)")
    parser.add_argument("--note", default="", help="a line on how the calls ran, kept in result.json")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    teachers = json.loads(args.teachers.read_text())
    students = json.loads(args.students.read_text()) if args.students else {}
    found = rows(teachers, students, tuple(args.skip))
    write_result(args.out, {"command": command_line(), "note": args.note, "teacher_recipe": teachers.get("recipe"),
                            "models": found}, table(found), lambda path: plot(found, path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
