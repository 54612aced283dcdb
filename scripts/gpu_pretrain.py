"""Pre-train ELECTRA-Small on a GPU machine within a wall-clock budget and pack the result.

A short probe measures tokens/s first, so the real run's ``--max-steps`` (and with it the linear LR decay)
ends inside the budget instead of being cut off mid-schedule by ``--max-minutes``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def pretrain(out: Path, corpus: list[str], steps: int, extra: list[str]) -> None:
    cmd = [sys.executable, "-m", "electra_detect.cli", "pretrain", "--out", str(out), "--corpus", *corpus,
           "--max-steps", str(steps), "--no-progress", *extra]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", nargs="+", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--minutes", type=float, default=7.0)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("extra", nargs="*", help="more pretrain flags after --")
    args = parser.parse_args()
    common = ["--preset", "small", "--batch-size", str(args.batch_size), "--cache-dir", "/tmp/ed-cache", *args.extra]
    start = time.time()
    probe = Path("/tmp/ed-probe")
    pretrain(probe, args.corpus, 60, [*common, "--eval-every", "1000", "--save-every", "1000", "--log-every", "10"])
    rows = [json.loads(line) for line in (probe / "metrics.jsonl").read_text().splitlines()]
    rate = [r["tokens_per_s"] for r in rows if r.get("split") == "train"][-1]
    remaining = args.minutes * 60 - (time.time() - start)
    steps = int(rate * remaining * 0.85 / (args.batch_size * 128))
    print(json.dumps({"probe_tokens_per_s": rate, "planned_steps": steps}), flush=True)
    pretrain(Path(args.out), args.corpus, steps,
             [*common, "--max-minutes", str(remaining / 60), "--warmup-steps", str(min(1000, steps // 10)),
              "--eval-every", str(max(200, steps // 8)), "--eval-batches", "16", "--save-every", str(steps + 1),
              "--log-every", "50"])


if __name__ == "__main__":
    main()
