"""Pre-train within a wall-clock budget (ELECTRA-Small on a GPU machine by default) and size the schedule to it.

A short probe run measures the step rate first, so the real run's ``--max-steps`` (and with it the linear LR
decay) ends inside the budget instead of being cut off mid-schedule by ``--max-minutes``. The step rate is the
probe's tokens/s divided by its tokens per step (``tokens_seen / steps``: batch size x sequence length x
accumulation x processes), so any ``--seq-len`` or ``--grad-accum`` is accounted for.

    python scripts/gpu_pretrain.py --corpus data/*.txt --out runs/small --minutes 30 -- --seq-len 256

``--init-from`` continues from an encoder instead (no preset: the encoder sets the model), and ``--max-steps``
caps the schedule (a token target such as 100x the shipped recipe's), so a fast device ends early rather than
training past the target.

The probe writes ``<out>.probe/`` beside the run (replaced on every call); the token cache is pretrain's
default (``$ELECTRA_DETECT_CACHE`` or ``~/.cache/electra-detect``) unless ``--cache-dir`` names one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def pretrain(out: Path, corpus: list[str], steps: int, flags: list[str]) -> None:
    cmd = [sys.executable, "-m", "electra_detect.cli", "pretrain", "--out", str(out), "--corpus", *corpus,
           "--max-steps", str(steps), "--no-progress", *flags]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def planned_steps(probe: Path, seconds_left: float, margin: float = 0.85) -> tuple[int, float]:
    """Optimizer steps that fit in ``seconds_left`` at the probe's last measured rate; and that rate (tokens/s)."""
    rows = [json.loads(line) for line in (probe / "metrics.jsonl").read_text().splitlines() if line.strip()]
    train = [r for r in rows if r.get("split") == "train"]
    if not train:
        raise SystemExit(f"the probe run in {probe} logged no train rows; give it more --probe-steps")
    last = train[-1]
    tokens_per_step = last["tokens_seen"] / last["step"]
    return int(last["tokens_per_s"] * seconds_left * margin / tokens_per_step), last["tokens_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", nargs="+", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--minutes", type=float, default=7.0, help="wall-clock budget, probe included")
    parser.add_argument("--preset", default="small", help="model preset of a run from scratch")
    parser.add_argument("--init-from", default="", help="continue pre-training from this encoder or run")
    parser.add_argument("--max-steps", type=int, default=0, help="at most this many steps (0: what fits)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--cache-dir", default="", help="token cache (default: pretrain's)")
    parser.add_argument("--probe-steps", type=int, default=60)
    parser.add_argument("extra", nargs="*", help="more pretrain flags after -- (--seq-len, --grad-accum, ...)")
    args = parser.parse_args()
    start_from = ["--init-from", args.init_from] if args.init_from else ["--preset", args.preset]
    common = [*start_from, "--batch-size", str(args.batch_size), *args.extra]
    if args.cache_dir:
        common += ["--cache-dir", args.cache_dir]
    start = time.time()
    out = Path(args.out)
    probe = out.with_name(out.name + ".probe")
    pretrain(probe, args.corpus, args.probe_steps,
             [*common, "--overwrite", "--eval-every", "1000000", "--save-every", "1000000", "--log-every", "10"])
    remaining = args.minutes * 60 - (time.time() - start)
    steps, rate = planned_steps(probe, remaining)
    if args.max_steps:
        steps = min(steps, args.max_steps)
    if steps < 1:
        raise SystemExit(f"no time left for the run after the probe ({remaining:.0f} s); raise --minutes")
    print(json.dumps({"probe_tokens_per_s": rate, "planned_steps": steps}), flush=True)
    pretrain(out, args.corpus, steps,
             [*common, "--max-minutes", str(remaining / 60), "--warmup-steps", str(min(1000, steps // 10)),
              "--eval-every", str(max(200, steps // 8)), "--eval-batches", "16", "--save-every", str(steps + 1),
              "--log-every", "50"])


if __name__ == "__main__":
    main()
