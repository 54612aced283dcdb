"""`score --file` (or `ged --file`) on a large text file: peak RSS, time to first output, throughput.

Writes a file of ``--mib`` MiB of real sentences (State of the Union, one per line; reused when it
exists), runs the verb on it as a user would, reads its stdout as it comes, samples the process's RSS
every 0.1 s, and stops it after ``--seconds`` (a 50 MB file takes far longer than a probe should on a
CPU; throughput is measured over the part scored).

    python -m benchmarks.speed.cli_stream --model models/electra-tiny --mib 50 --seconds 90

Writes ``result.json`` to ``--out-dir`` (default ``benchmarks/results/cli_stream/``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "benchmarks" / "results" / "cli_stream"


class PeakRss:
    """Peak resident memory of a running process, sampled every 0.1 s on a thread until ``stop()``."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.peak, self._done, self._process = 0, threading.Event(), psutil.Process(pid)
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        import psutil

        while not self._done.is_set():
            try:
                self.peak = max(self.peak, self._process.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.1)

    def stop(self) -> int:
        self._done.set()
        return self.peak


def make_file(path: Path, mib: float) -> None:
    from benchmarks.common import servers

    if path.exists() and path.stat().st_size >= mib * (1 << 20):
        return
    lines = [s + "\n" for s in servers.sentences(5000)]
    target = int(mib * (1 << 20))
    with open(path, "w", encoding="utf-8") as handle:
        written, index = 0, 0
        while written < target:
            line = lines[index % len(lines)]
            handle.write(line)
            written += len(line.encode("utf-8"))
            index += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--verb", choices=("score", "ged"), default="score")
    parser.add_argument("--mib", type=float, default=50)
    parser.add_argument("--file", type=Path, default=Path("/tmp/electra-detect-stream.txt"))
    parser.add_argument("--seconds", type=float, default=90)
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    make_file(args.file, args.mib)
    cmd = [sys.executable, "-m", "electra_detect.cli", args.verb, "--model", args.model, "--file", str(args.file)]
    cmd += ["--output-format", "json"]  # a line a text, for both verbs
    # The fixed start-up (imports, model load) that any input pays: the same command on a one-line file.
    one = args.file.with_name(args.file.stem + ".one-line.txt")
    with open(args.file, encoding="utf-8") as handle:
        one.write_text(handle.readline(), encoding="utf-8")
    t0 = time.perf_counter()
    one_cmd = [str(one) if part == str(args.file) else part for part in cmd]
    subprocess.run(one_cmd, cwd=ROOT, capture_output=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    one_line = time.perf_counter() - t0
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    memory = PeakRss(proc.pid)
    first, rows, chars = None, 0, 0
    timer = threading.Timer(args.seconds, proc.terminate)
    timer.start()
    for line in proc.stdout:
        if first is None:
            first = time.perf_counter() - started
        rows += 1
        chars += len(json.loads(line)["text"]) if line.startswith("{") else 0
    proc.wait()
    timer.cancel()
    peak = memory.stop()
    elapsed = time.perf_counter() - started
    scoring = elapsed - (first or elapsed)
    result = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
              "host": f"{platform.machine()}, {os.cpu_count()} cores", "verb": args.verb, "model": args.model,
              "file_mib": round(args.file.stat().st_size / (1 << 20), 1), "ran_s": round(elapsed, 1),
              "stopped_after_s": args.seconds, "returncode": proc.returncode, "first_output_s": round(first or -1, 2),
              "one_line_file_total_s": round(one_line, 2),
              "peak_rss_mib": round(peak / (1 << 20), 1), "lines_scored": rows,
              "lines_per_s": round(rows / scoring, 1) if scoring > 0 else None,
              "chars_per_s": round(chars / scoring) if scoring > 0 and chars else None,
              "command": " ".join(["electra-detect", *cmd[3:]])}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
