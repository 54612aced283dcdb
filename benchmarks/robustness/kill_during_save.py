"""`kill -9` during checkpoint saves: no temp folder survives the next start, and resume is exact.

A micro pre-training run saves a checkpoint every step; each save is slowed by a short sleep after its
optimizer file (a hook in this script's driver, not in the trainer), so a `kill -9` sent at a random
moment after the save begins lands in the middle of it, or just after. The run is killed ``--kills``
times: once in a fresh run, then in each ``--resume`` (whose start must have removed the temp folders
the previous kill left), and finally resumed to the end. Its per-step losses and final weights are
compared with an uninterrupted run of the same length.

    python -m benchmarks.robustness.kill_during_save --kills 10

Writes benchmarks/results/kill_during_save/{result.json,table.md}; exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common.run import command_line

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "benchmarks" / "results" / "kill_during_save"
DRIVER = r"""
import sys, time
import electra_detect.training.pretraining.checkpoint as ck
original = ck.save_file
def slow(tensors, path, *args, **kwargs):
    original(tensors, path, *args, **kwargs)
    if path.endswith("optimizer.safetensors"):  # inside atomic_write_dir: the temp folder is half full
        print("SAVING", path, file=sys.stderr, flush=True)
        time.sleep(float(sys.argv[1]))
ck.save_file = slow
from electra_detect.cli import main
sys.exit(main(sys.argv[2:]))
"""
MICRO = ["--preset", "micro", "--vocab-size", "200", "--seq-len", "32", "--batch-size", "8", "--threads", "1",
         "--no-progress", "--log-every", "1", "--eval-every", "1000", "--save-every", "1", "--keep-last", "2"]


def temp_entries(run: Path) -> list[str]:
    return sorted(str(p.relative_to(run)) for p in run.rglob(".*") if p.name.endswith((".tmp", ".old")))


def launch(args: list[str], pause: float) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", DRIVER, str(pause), *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_in_save(proc: subprocess.Popen, saves: int, delay: float, run: Path) -> dict[str, Any]:
    """Wait for the ``saves``-th save to begin, note the temp entries then, kill -9 after ``delay`` s."""
    seen = 0
    at_save: list[str] = []
    for line in proc.stderr:
        if line.startswith("SAVING"):
            seen += 1
            if seen == saves:
                at_save = temp_entries(run)
                break
    else:
        proc.wait()
        raise SystemExit(f"the run ended before save {saves} (exit {proc.returncode})")
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return {"temp_entries_during_save": at_save, "left_after_kill": temp_entries(run)}


def losses(run: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in rows if r.get("split") == "train"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--pause", type=float, default=0.4, help="sleep inside each save (the kill's window)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    import torch
    from safetensors.torch import load_file

    from benchmarks.common.text import synthetic_text

    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="kill-during-save-"))
    corpus = work / "corpus.txt"
    corpus.write_text(synthetic_text(600), encoding="utf-8")
    common = [*MICRO, "--corpus", str(corpus), "--cache-dir", str(work / "cache"), "--max-steps", str(args.steps)]
    started = time.perf_counter()
    reference = launch(["pretrain", *common, "--out", str(work / "straight")], 0.0)
    _, err = reference.communicate()
    if reference.returncode != 0:
        raise SystemExit(err[-2000:])

    run = work / "killed"
    kills: list[dict[str, Any]] = []
    for index in range(args.kills):
        resume = index > 0
        cmd = ["pretrain", "--out", str(run), "--resume", "--max-steps", str(args.steps), "--no-progress"] if resume \
            else ["pretrain", *common, "--out", str(run)]
        before = temp_entries(run) if run.exists() else []
        delay = rng.uniform(0.0, args.pause * 1.5)
        row = kill_in_save(launch(cmd, args.pause), 1 if resume else 3, delay, run)
        # What the previous kill left must be gone once this run got as far as its own save: at most the
        # temp folder of the save under way (and its `latest` temp file) may exist then.
        stale = [e for e in row["temp_entries_during_save"] if e in before]
        row.update(kill=index + 1, delay_s=round(delay, 3), left_before_start=before, stale_after_start=stale)
        kills.append(row)
        print(f"kill {index + 1}: {delay:.2f} s into a save; left {row['left_after_kill']}; stale after the next "
              f"start: {stale}", file=sys.stderr)
    final = launch(["pretrain", "--out", str(run), "--resume", "--max-steps", str(args.steps), "--no-progress"], 0.0)
    _, err = final.communicate()
    left_at_end = temp_entries(run)
    straight, resumed = losses(work / "straight"), losses(run)
    a = load_file(str(work / "straight" / "discriminator" / "model.safetensors"))
    b = load_file(str(run / "discriminator" / "model.safetensors"))
    weight_diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    loss_diff = max((abs(straight[s] - resumed.get(s, float("inf"))) for s in straight), default=float("inf"))
    checks = {
        f"{args.kills} kills, each inside or just after a save": len(kills) == args.kills,
        "kills that left a temp folder or file": sum(bool(k["left_after_kill"]) for k in kills),
        "no temp entry survives the next start": all(not k["stale_after_start"] for k in kills),
        "final resume exits 0": final.returncode == 0,
        "no temp entry at the end": not left_at_end,
        "every step logged once": sorted(resumed) == list(range(1, args.steps + 1)),
        "losses equal the uninterrupted run's (max abs diff)": loss_diff,
        "final weights equal (max abs diff)": weight_diff,
        "weights bit-identical": all(torch.equal(a[k], b[k]) for k in a),
    }
    ok = (checks["no temp entry survives the next start"] and checks["final resume exits 0"]
          and checks["no temp entry at the end"] and checks["every step logged once"] and loss_diff == 0.0
          and checks["weights bit-identical"] and len(kills) == args.kills)
    result = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "steps": args.steps,
              "kills": kills, "checks": checks, "passed": ok, "seconds": round(time.perf_counter() - started, 1),
              "command": command_line(),
              "final_stderr_tail": err[-500:]}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# kill -9 during checkpoint saves ({result['date']})", "",
             f"`{result['command']}`: a micro run saving every step, {args.steps} steps, killed {args.kills} times "
             f"at a random moment 0-{args.pause * 1.5:g} s after a save began ({result['seconds']} s in all).", "",
             "| check | result |", "|---|---|"] + [f"| {k} | {v} |" for k, v in checks.items()]
    lines += ["", f"**{'passed' if ok else 'FAILED'}**", ""]
    (args.out_dir / "table.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
