"""Whether a change of code changed what `electra-detect ged` tells a user: this checkout's output beside a baseline
revision's, line by line, on the tuning sets (MultiGED-2023's FCE dev TSV, detokenised as the peers read it, and
JFLEG dev's sources), for the default check and with ``--suggest``, at both levels.

Each text's JSON line (its flagged words: offsets, tag, type, rule, category, message, suggestions) must be the same;
a line that differs is counted and the first few are kept for reading. A refactoring passes with 0 differing lines.

    python -m benchmarks.quality.ged_same_output --baseline REV --tsv runs/data/en_fce_dev.tsv \\
        --jfleg ../shared/data/jfleg/dev/dev.src

Writes result.json and table.md to ``--out-dir`` (default benchmarks/results/ged_same_output/).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common.run import BASELINE_CLI, command_line, json_output, revision_checkout, write_result

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "benchmarks" / "results" / "ged_same_output"
MODEL = ROOT / "models" / "electra-minilm"
CHECKS = {"default": [], "suggest": ["--suggest"], "picky": ["--level", "picky"]}
SHOWN = 5  # differing lines kept per set and check


def fce_sentences(tsv: Path) -> list[str]:
    from benchmarks.common.peers import detokenize
    from electra_detect.tasks.ged.readers import read_token_tsv

    return [detokenize(" ".join(s.tokens))[0] for s in read_token_tsv(tsv)]


def ged_lines(path: Path, extra: list[str], code: Path | None = None) -> list[str]:
    """``ged --file path`` of the shipped model, JSON lines (one a text), by this checkout or ``code``'s."""
    runner = ["-c", BASELINE_CLI] if code else ["-m", "electra_detect.cli"]
    command = [sys.executable, *runner, "ged", *json_output(code or ROOT), "--model", str(MODEL), "--file", str(path),
               "--no-settings", *extra]
    env = None
    if code:
        import os

        env = {**os.environ, "PYTHONPATH": str(code)}  # the baseline's electra_detect before the editable install's
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=code, check=False)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"ged exited {done.returncode}: {done.stderr[-800:]}")
    return done.stdout.splitlines()


def compare(ours: list[str], theirs: list[str]) -> dict[str, Any]:
    """Lines that differ (as JSON: key order aside), with the first few of them."""
    differing = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if json.loads(a) != json.loads(b)]
    flagged = sum(len(json.loads(line).get("flagged", [])) for line in ours)
    return {"texts": len(ours), "flagged_words": flagged, "differing_lines": len(differing),
            "first_differences": [{"line": i + 1, "this": ours[i], "baseline": theirs[i]} for i in differing[:SHOWN]]}


def table(result: dict[str, Any]) -> str:
    lines = ["# `ged` output: this checkout against a baseline revision", "",
             f"Baseline `{result['baseline']}`; command: `{result['command']}`", "",
             "| set | check | texts | flagged words | lines that differ |", "|---|---|---:|---:|---:|"]
    for name, checks in result["sets"].items():
        for check, row in checks.items():
            lines.append(f"| {name} | {check} | {row['texts']} | {row['flagged_words']} | {row['differing_lines']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="the git revision to compare with")
    parser.add_argument("--tsv", type=Path, required=True, help="MultiGED-2023's en_fce_dev.tsv")
    parser.add_argument("--jfleg", type=Path, required=True, help="JFLEG's dev/dev.src")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    sets = {"FCE dev": fce_sentences(args.tsv), "JFLEG dev": args.jfleg.read_text(encoding="utf-8").splitlines()}
    result: dict[str, Any] = {"baseline": args.baseline, "command": command_line(),
                              "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "sets": {}}
    with tempfile.TemporaryDirectory() as scratch, revision_checkout(args.baseline) as tree:
        for name, texts in sets.items():
            path = Path(scratch) / f"{name.replace(' ', '_')}.txt"
            path.write_text("\n".join(texts) + "\n", encoding="utf-8")
            result["sets"][name] = {}
            for check, extra in CHECKS.items():
                row = compare(ged_lines(path, extra), ged_lines(path, extra, tree))
                result["sets"][name][check] = row
                print(f"{name} {check}: {row['differing_lines']} of {row['texts']} lines differ", flush=True)
    write_result(args.out_dir, result, table(result))


if __name__ == "__main__":
    main()
