"""The server against its own OpenAPI schema: ``schemathesis run --checks all`` on a served model, with the
answers the server counted (its ``/metrics``), so "0 5xx" is read from the server as well as from the checks.

Exports ``--model`` to ONNX (fp32) in a temporary folder, serves it with ``electra-detect serve --engine onnx``,
runs schemathesis (the repository's ``schemathesis.toml`` applies: 413 is a declared answer to data over a limit)
for ``--max-time`` seconds with a fixed seed, and writes result.json and table.md to ``--out-dir``.

    python -m benchmarks.robustness.server_contract [--model models/electra-tiny/ged] [--max-time 400] [--seed 1]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.common.run import command_line
from benchmarks.common.servers import free_port, start_server
from electra_detect.fileio import atomic_write_json, atomic_write_text

ROOT = Path(__file__).resolve().parents[2]


BIN = Path(sys.executable).parent
STATUS = re.compile(r'^electra_requests_total\{path="(?P<path>[^"]*)",status="(?P<status>\d+)"\} (?P<n>[\d.e+]+)$',
                    re.M)


def served_statuses(port: int) -> dict[str, Counter]:
    """The server's own count of answers per path and status (Prometheus text from /metrics)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, Counter] = {}
    for match in STATUS.finditer(text):
        out.setdefault(match["path"], Counter())[match["status"]] += int(float(match["n"]))
    return out


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    export = work / "onnx"
    subprocess.run([str(BIN / "electra-detect"), "export", "--model", args.model, "--out", str(export),
                    "--variants", "fp32"], check=True, capture_output=True)
    server = start_server(str(export), args.port, ["--engine", "onnx", "--timeout", "120"], work / "server.log")
    try:
        junit = work / "junit.xml"
        started = time.perf_counter()
        done = subprocess.run([str(BIN / "schemathesis"), "run", f"http://127.0.0.1:{args.port}/openapi.json",
                               "--checks", "all", "--max-time", str(args.max_time), "--seed", str(args.seed),
                               "--report", "junit", "--report-junit-path", str(junit)],
                              cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        statuses = served_statuses(args.port)
    finally:
        server.terminate()
        server.wait(timeout=60)
    log = done.stdout + done.stderr
    # "N generated, N passed" when every case passed, "N generated, N found M unique failures" when not
    cases = re.search(r"(\d+) generated(?:, (\d+) passed)?(?:, (\d+) failed)?", log)
    suites = ET.parse(junit).getroot()
    operations = [{"operation": case.get("name"), "seconds": round(float(case.get("time", 0)), 1),
                   "failures": [f.get("message", "")[:300] for f in case.findall("failure")]}
                  for case in suites.iter("testcase")]
    all_statuses = sum(statuses.values(), Counter())
    return {"schemathesis_exit": done.returncode, "seconds": round(seconds, 1),
            "generated": int(cases[1]) if cases else None, "passed": int(cases[2]) if cases and cases[2] else None,
            "failed": int(cases[3] or 0) if cases else None,
            "failures": sum(len(o["failures"]) for o in operations), "operations": operations,
            "served_statuses": {path: dict(sorted(c.items())) for path, c in sorted(statuses.items())},
            "served_5xx": sum(n for status, n in all_statuses.items() if status.startswith("5")),
            "summary_line": next((line.strip("= ") for line in log.splitlines()[::-1] if "in " in line
                                  and ("issues" in line or "passed" in line or "failed" in line)), "")}


def table(result: dict[str, Any]) -> str:
    lines = ["# The server against its own OpenAPI schema (schemathesis)", "",
             f"Command: `{result['command']}` ({result['date']}); schemathesis {result['schemathesis']}, "
             f"`--checks all`, `--max-time {result['max_time']}`, seed {result['seed']}, model `{result['model']}` "
             "(ONNX fp32, `serve --engine onnx`), `schemathesis.toml` of the repository.", "",
             f"**{result['generated'] or 0:,} generated cases, {result['failures']} failures, "
             f"{result['served_5xx']} answers 5xx** (counted by the server's `/metrics`); schemathesis exit "
             f"status {result['schemathesis_exit']}.", "",
             "| operation | seconds | failures |", "|---|---:|---:|"]
    for row in result["operations"]:
        lines.append(f"| {row['operation']} | {row['seconds']:.0f} | {len(row['failures'])} |")
    lines += ["", "Answers the server gave, by path and status:", "", "| path | statuses |", "|---|---|"]
    for path, counts in result["served_statuses"].items():
        lines.append(f"| `{path}` | " + ", ".join(f"{s}: {n:,}" for s, n in counts.items()) + " |")
    for row in result["operations"]:
        for failure in row["failures"]:
            lines += ["", f"- {row['operation']}: {failure}"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models" / "electra-tiny" / "ged"))
    parser.add_argument("--max-time", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    parser.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results" / "server_contract"))
    args = parser.parse_args()
    args.port = args.port or free_port()
    if not (BIN / "schemathesis").exists() and not shutil.which("schemathesis"):
        raise SystemExit("error: schemathesis not installed: pip install -c constraints.txt schemathesis==4.32.5")
    import schemathesis

    with tempfile.TemporaryDirectory(prefix="server-contract-") as work:
        result = run(args, Path(work))
    model = Path(args.model).resolve()
    shown = model.relative_to(ROOT) if model.is_relative_to(ROOT) else model
    result.update({"benchmark": "server_contract", "model": str(shown), "max_time": args.max_time,
                   "seed": args.seed, "schemathesis": getattr(schemathesis, "__version__", "?"),
                   "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                   "command": command_line()})
    out = Path(args.out_dir)
    atomic_write_json(out / "result.json", result)
    atomic_write_text(out / "table.md", table(result))
    print(json.dumps({k: result[k] for k in ("generated", "failures", "served_5xx", "schemathesis_exit")}))
    return 0 if result["failures"] == 0 and result["served_5xx"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
