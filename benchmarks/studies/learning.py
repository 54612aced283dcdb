"""Which levers make ELECTRA pre-training leave the masked-LM plateau on a 2-core CPU.

    python -m benchmarks.studies.learning --steps 300 --seeds 0 --jfleg ../shared/data/jfleg/dev/dev.ref0
    python -m benchmarks.studies.learning --steps 300 --seeds 1 2 --arms default paper seq_32 --jfleg ...  # adds seeds

Every arm trains the ``tiny`` preset on the embedded corpus for the same number of updates
(batch 32 x 128 unless the arm changes it), one process per (arm, seed), ``--jobs`` at a time with
one thread each. Arms change one lever of the default recipe (``training/pretraining/config.py``), or restore
the paper's model (``paper``), or the paper's model with the other levers (``electra_levers``).

Reported per arm (mean ± std over seeds):
- ``val_auc``: final validation discriminator AUC (generator samples, as in training);
- ``val_gen_acc``: final validation generator MLM accuracy;
- ``steps_to_auc_0.8``: first evaluation after which validation AUC stays >= 0.8 (the early,
  easy phase against a near-uniform generator does not count unless it lasts);
- ``corruption_auc``: word-level AUC on held-out fluent sentences (``--jfleg``, JFLEG ``dev.ref0``)
  with 15% of words swapped for frequency-sampled words: only context tells those apart
  (``training/evaluation.corruption_auc``);
- ``tokens_per_s``: training throughput of the run (the arms share the CPU in pairs; compare within
  one run of this script).

Writes ``result.json``, ``table.md`` and ``plot.png`` (validation AUC and generator accuracy
curves) to ``--out-dir`` (default ``benchmarks/results/learning/``) after every finished run, and
prints one JSON line at the end. ``--score MODEL`` only prints MODEL's corruption AUC as one JSON line
(``benchmarks/model_report.sh`` keeps it as ``benchmarks/results/corruption/result.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.common.run import command_line
from electra_detect.fileio import atomic_save_figure, atomic_write_json, atomic_write_text
from electra_detect.training.pretraining.config import PAPER_MODEL

ROOT = Path(__file__).resolve().parents[2]


# arm -> {"model": {...}, "train": {...}} overrides of the default recipe (training/pretraining/config.py).
ARMS: dict[str, dict[str, dict[str, Any]]] = {
    "default": {},
    "paper": {"model": PAPER_MODEL, "train": {"clip_scope": "global"}},  # `pretrain --paper-recipe`: the old default
    "electra_levers": {"model": {"architecture": "electra", "embedding_sharing": "gdes", "gen_layers": 2}},
    "no_local_layers": {"model": {"local_window": 0}},
    "dropout_0.1": {"model": {"dropout": 0.1}},
    "sharing_gdes": {"model": {"embedding_sharing": "gdes"}},
    "sharing_none": {"model": {"embedding_sharing": "none"}},
    "clip_global": {"train": {"clip_scope": "global"}},
    "gen_full_depth": {"model": {"gen_layers": 4}},
    "lr_2e-3": {"train": {"lr": 2e-3}},
    "warmup_0": {"train": {"warmup_steps": 1}},
    "mask_0.25": {"train": {"mask_prob": 0.25}},
    "batch_16": {"train": {"batch_size": 16}},
    "seq_32": {"data": {"seq_len": 32}, "train": {"batch_size": 128}},
}


def run_one(arm: str, seed: int, steps: int, out_root: Path, jfleg: Path | None, eval_every: int) -> dict[str, Any]:
    """Train one arm in this process (called through ``--one``) and return its row."""
    import torch

    from electra_detect.detector import Detector
    from electra_detect.training.pretraining.config import RunConfig
    from electra_detect.training.pretraining.evaluation import corruption_auc
    from electra_detect.training.pretraining.trainer import Trainer

    torch.set_num_threads(1)
    config = RunConfig()
    config.train.max_steps, config.train.seed, config.train.eval_every = steps, seed, eval_every
    config.train.save_every, config.train.threads = steps, 1
    for section, values in ARMS[arm].items():
        config.override(section, **values)
    out = out_root / f"{arm}_s{seed}"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    started = time.monotonic()
    result = Trainer(config, out, show_progress=False).run()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    val = [r for r in rows if r["split"] == "val"]
    train = [r for r in rows if r["split"] == "train"]
    row: dict[str, Any] = {
        "arm": arm, "seed": seed, "steps": result.steps, "minutes": round((time.monotonic() - started) / 60, 2),
        "val_auc": result.val_metrics.get("val_disc_auc"), "val_gen_acc": result.val_metrics.get("val_gen_acc"),
        "steps_to_auc_0.8": steps_to(val, 0.8),
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in train[1:] or train),
        "curve": [{"step": r["step"], "auc": r["val_disc_auc"], "gen_acc": r["val_gen_acc"]} for r in val],
        "config": {"model": config.to_dict()["model"], "train": config.to_dict()["train"]},
    }
    if jfleg is not None:
        sentences = [line.strip() for line in jfleg.read_text(encoding="utf-8").splitlines() if line.strip()]
        detector = Detector.load(out, calibrated=False)
        row.update(corruption_auc(detector, sentences, rate=0.15, seed=0))
    return row


def score_model(model: Path | str, fluent: Path) -> dict[str, Any]:
    """``--score``: the corruption AUC of a run or discriminator dir's replaced-token head on fluent sentences."""
    from electra_detect.detector import Detector
    from electra_detect.training.pretraining.evaluation import corruption_auc

    sentences = [line.strip() for line in Path(fluent).read_text(encoding="utf-8").splitlines() if line.strip()]
    return {"model": str(model), **corruption_auc(Detector.load(model, calibrated=False), sentences, rate=0.15,
                                                  seed=0)}


def steps_to(val_rows: list[dict[str, Any]], level: float) -> int | None:
    """First evaluated step from which validation AUC never drops below ``level`` again."""
    first = None
    for r in val_rows:
        auc = r.get("val_disc_auc")
        if auc is not None and auc >= level:
            first = first if first is not None else r["step"]
        else:
            first = None
    return first


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    keys = ("val_auc", "val_gen_acc", "corruption_auc", "steps_to_auc_0.8", "tokens_per_s")
    out: dict[str, dict[str, Any]] = {}
    for arm in ARMS:
        runs = [r for r in rows if r["arm"] == arm]
        if not runs:
            continue
        stats: dict[str, Any] = {"seeds": len(runs)}
        for key in keys:
            values = [r[key] for r in runs if r.get(key) is not None]
            stats[key] = statistics.mean(values) if values else None
            stats[key + "_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
            if key == "steps_to_auc_0.8":
                stats["reached_0.8"] = f"{len(values)}/{len(runs)}"
        out[arm] = stats
    return out


def table(summary: dict[str, dict[str, Any]], steps: int) -> str:
    def cell(stats: dict[str, Any], key: str, digits: int = 3) -> str:
        value = stats.get(key)
        if value is None:
            return "–"
        if stats["seeds"] == 1:
            return f"{value:.{digits}f}"
        return f"{value:.{digits}f} ± {stats[key + '_std']:.{digits}f}"

    lines = [f"Tiny preset, embedded corpus, {steps} updates per run; mean ± std over seeds. "
             "`steps→0.8`: first evaluation after which validation AUC stays ≥ 0.8 (seeds that got there). "
             "tokens/s: two runs shared the 2 cores (and sometimes a third job): compare speeds with "
             "benchmarks/speed/pretrain_speed.py, not here.",
             "", "| arm | seeds | val disc AUC | val gen MLM acc | corruption AUC (JFLEG) | steps→0.8 | tokens/s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for arm, s in summary.items():
        reach = s.get("reached_0.8", "0/0")
        steps_cell = "–" if s.get("steps_to_auc_0.8") is None else f"{s['steps_to_auc_0.8']:.0f} ({reach})"
        if s.get("steps_to_auc_0.8") is None:
            steps_cell = f"never ({reach})"
        lines.append(f"| {arm} | {s['seeds']} | {cell(s, 'val_auc')} | {cell(s, 'val_gen_acc')} | "
                     f"{cell(s, 'corruption_auc')} | {steps_cell} | {s['tokens_per_s']:,.0f} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_auc, ax_acc) = plt.subplots(1, 2, figsize=(13, 5))
    colours = {arm: plt.cm.tab20(i % 20) for i, arm in enumerate(ARMS)}
    seen: set[str] = set()
    for r in rows:
        steps = [c["step"] for c in r["curve"]]
        label = r["arm"] if r["arm"] not in seen else None
        seen.add(r["arm"])
        style = dict(color=colours[r["arm"]], lw=2.2 if r["arm"] in ("default", "paper") else 1.0, alpha=0.85)
        ax_auc.plot(steps, [c["auc"] for c in r["curve"]], label=label, **style)
        ax_acc.plot(steps, [c["gen_acc"] for c in r["curve"]], **style)
    ax_auc.axhline(0.85, color="grey", ls="--", lw=0.8)
    ax_acc.axhline(0.25, color="grey", ls="--", lw=0.8)
    ax_auc.set(xlabel="update", ylabel="validation discriminator AUC", ylim=(0.4, 1.0))
    ax_acc.set(xlabel="update", ylabel="validation generator MLM accuracy")
    ax_auc.legend(fontsize=7, ncol=2)
    fig.suptitle("Leaving the plateau: tiny preset, 2-core CPU (dashed: issue 12 goals)")
    fig.tight_layout()
    atomic_save_figure(fig, path)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (one thread each)")
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--jfleg", type=Path, help="fluent held-out sentences (JFLEG dev.ref0) for corruption AUC")
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "learning")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results" / "learning")
    parser.add_argument("--score", type=Path, metavar="MODEL",
                        help="only print the corruption AUC of MODEL (run or discriminator dir) on --jfleg")
    parser.add_argument("--one", nargs=2, metavar=("ARM", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.score:
        if args.jfleg is None:
            parser.error("--score needs --jfleg")
        print(json.dumps(score_model(args.score, args.jfleg)))
        return
    if args.one:
        row = run_one(args.one[0], int(args.one[1]), args.steps, args.runs_dir, args.jfleg, args.eval_every)
        print("ROW " + json.dumps(row))
        return

    args.out_dir.mkdir(parents=True, exist_ok=True)
    result_path = args.out_dir / "result.json"
    rows: list[dict[str, Any]] = []
    if result_path.exists():  # a cut-off study continues: finished (arm, seed, steps) runs are kept
        previous = json.loads(result_path.read_text())
        if previous.get("steps") == args.steps:
            rows = previous["runs"]
    done = {(r["arm"], r["seed"]) for r in rows}
    todo = [(arm, seed) for seed in args.seeds for arm in args.arms if (arm, seed) not in done]

    def launch(job: tuple[str, int]) -> dict[str, Any] | None:
        arm, seed = job
        command = [sys.executable, "-m", "benchmarks.studies.learning", "--one", arm, str(seed),
                   "--steps", str(args.steps), "--eval-every", str(args.eval_every), "--runs-dir", str(args.runs_dir)]
        if args.jfleg:
            command += ["--jfleg", str(args.jfleg)]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        proc = subprocess.run(command, capture_output=True, text=True, env=env)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("ROW ")]
        if proc.returncode or not lines:
            print(f"{arm} seed {seed} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
            return None
        return json.loads(lines[-1][4:])

    def save() -> dict[str, Any]:
        summary = summarize(rows)
        payload = {"benchmark": "learning", "steps": args.steps, "seeds": args.seeds, "arms": summary, "runs": rows,
                   "command": command_line()}
        atomic_write_json(result_path, payload)
        atomic_write_text(args.out_dir / "table.md", table(summary, args.steps))
        plot(rows, args.out_dir / "plot.png")
        return summary

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for row in pool.map(launch, todo):
            if row is not None:
                rows.append(row)
                print(f"{row['arm']} seed {row['seed']}: val AUC {row['val_auc']:.3f}, gen acc "
                      f"{row['val_gen_acc']:.3f}, corruption AUC {row.get('corruption_auc', float('nan')):.3f}",
                      file=sys.stderr)
                save()
    summary = save()
    print(json.dumps({"benchmark": "learning", "steps": args.steps,
                      "arms": {a: {k: s[k] for k in ("val_auc", "val_gen_acc", "corruption_auc")} for a, s in
                               summary.items()}}))


if __name__ == "__main__":
    main()
