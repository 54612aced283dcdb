"""How often one `electra-detect ged` run opens each file of its model directory and of the ONNX export it runs on,
this checkout beside a baseline revision: the files are counted by Python's audit hook (every ``open`` event), so
nothing in the code is changed to be measured.

    python -m benchmarks.studies.model_dir_reads --baseline REV

Each engine (``auto``: the int8 ONNX export, here; ``torch``) runs ``ged --file`` over 200 sentences (seven engine
batches). Files onnxruntime and torch open from C++ (the ``.onnx`` graph, the safetensors) are not Python opens and
are not counted; their bytes are hashed through ``onnx/cache.py``'s remembered hashes (the ``hashes/`` files).

Writes result.json and table.md to ``--out-dir`` (default benchmarks/results/model_dir_reads/).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common.run import BASELINE_CLI, command_line, revision_checkout, write_result

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "benchmarks" / "results" / "model_dir_reads"
MODEL = ROOT / "models" / "electra-minilm"
ENGINES = ("auto", "torch")
SENTENCES = ["He go to the store yesterday and buyed three apple.", "The committee have decided to postpone it."] * 100

# Counts every file opened under the watched folders; written as JSON to the file named by the environment at exit.
HOOK = r"""
import atexit, collections, json, os, sys
watched = [os.path.realpath(p) for p in os.environ["READS_WATCHED"].split(os.pathsep)]
opened = collections.Counter()
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.realpath(os.fsdecode(args[0]))
        if any(path.startswith(w + os.sep) for w in watched):
            opened[path] += 1
sys.addaudithook(hook)
atexit.register(lambda: open(os.environ["READS_OUT"], "w").write(json.dumps(opened)))
"""


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "electra-detect"


def reads(engine: str, code: Path | None, scratch: Path) -> dict[str, int]:
    """Files opened by one ``ged`` run (of this checkout, or ``code``'s), by path relative to the model or cache."""
    inputs = scratch / "input.txt"
    inputs.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = scratch / "reads.json"
    runner = BASELINE_CLI if code else "import runpy, sys; sys.argv[0] = 'electra-detect'; " \
                                       "runpy.run_module('electra_detect.cli', run_name='__main__', alter_sys=True)"
    command = [sys.executable, "-c", HOOK + runner, "ged", "--model", str(MODEL), "--engine", engine,
               "--file", str(inputs), "--no-settings"]
    env = {**os.environ, "READS_WATCHED": os.pathsep.join([str(MODEL), str(cache_dir())]), "READS_OUT": str(out)}
    if code:
        env["PYTHONPATH"] = str(code)
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=code or ROOT, check=False)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"ged exited {done.returncode}: {done.stderr[-800:]}")
    counts = json.loads(out.read_text())
    short = {}
    for path, count in counts.items():
        for base, name in ((MODEL.resolve(), "model"), (cache_dir().resolve(), "cache")):
            if path.startswith(str(base)):
                short[f"{name}/{Path(path).relative_to(base)}"] = count
    return dict(sorted(short.items()))


def table(result: dict[str, Any]) -> str:
    lines = ["# Files of the model directory and its export opened by one `ged --file` run (200 sentences)", "",
             f"Command: `{result['command']}` (baseline `{result['baseline']}`)", ""]
    for engine, row in result["engines"].items():
        lines += [f"## engine {engine}", "", "| file | this checkout | baseline |", "|---|---:|---:|"]
        ours, theirs = row["this"], row["baseline"]
        for path in sorted(set(ours) | set(theirs)):
            name = path if "/hashes/" not in path else "cache/onnx/hashes/… (a remembered hash)"
            lines.append(f"| {name} | {ours.get(path, 0)} | {theirs.get(path, 0)} |")
        lines += [f"| **files opened more than once** | {row['more_than_once']['this']} | "
                  f"{row['more_than_once']['baseline']} |", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="the git revision to compare with")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    result: dict[str, Any] = {"benchmark": "model_dir_reads", "command": command_line(), "baseline": args.baseline,
                              "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "engines": {}}
    with tempfile.TemporaryDirectory() as scratch, revision_checkout(args.baseline) as tree:
        for engine in ENGINES:
            reads(engine, None, Path(scratch))  # a first run makes or finds the cached export: not counted
            ours, theirs = reads(engine, None, Path(scratch)), reads(engine, tree, Path(scratch))
            result["engines"][engine] = {"this": ours, "baseline": theirs, "more_than_once": {
                "this": sum(c > 1 for c in ours.values()), "baseline": sum(c > 1 for c in theirs.values())}}
    write_result(args.out_dir, result, table(result))
    print(json.dumps({engine: row["more_than_once"] for engine, row in result["engines"].items()}))


if __name__ == "__main__":
    main()
