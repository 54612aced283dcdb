"""Short warm-start runs, one setting changed at a time, judged by zero-shot AP on FCE dev.

    python -m benchmarks.studies.warmstart_probe --fce /work/data/fce --steps 40 \\
        --vary lr=1e-4,3e-4,1e-3 --vary gen_layers=1,3 --vary mask_prob=0.25

Each probe is `electra-detect pretrain --init-from minilm` for ``--steps`` updates (``--warmup`` of them
warm-up) with the base settings (``--base``) and one setting from ``--vary`` changed; the exported
discriminator's replaced probabilities are then scored against FCE dev's token labels (average precision,
no threshold), the cheapest reading of what the run taught the replaced-token head about real errors. Probes
already finished in ``--work-dir`` are read back, not re-run. Writes result.json and table.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.common.run import command_line
from electra_detect.detector import Detector
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.tasks.ged.alignment import score_tokens
from electra_detect.tasks.ged.metrics import flatten, token_metrics
from electra_detect.tasks.ged.readers import read_bea_json

BASE = {"lr": "3e-4", "gen_layers": "2", "mask_prob": "0.15", "seq_len": "64", "batch_size": "32"}


def probe(name: str, settings: dict[str, str], args: argparse.Namespace) -> dict:
    out = Path(args.work_dir) / name
    if not (out / "summary.json").exists():
        flags = [f"--{key.replace('_', '-')}={value}" for key, value in settings.items()]
        subprocess.run([sys.executable, "-m", "electra_detect.cli", "pretrain", "--init-from", args.encoder,
                        "--corpus", *args.corpus, "--out", str(out), "--overwrite", "--max-steps", str(args.steps),
                        "--warmup-steps", str(args.warmup), "--eval-every", str(args.steps), "--eval-batches", "8",
                        "--save-every", str(args.steps), "--no-progress", *flags], check=True)
    summary = json.loads((out / "summary.json").read_text())
    labels, scores = flatten(args.sentences, score_tokens(Detector.load(out), args.sentences))
    return {"probe": name, **settings, "steps": summary["steps"], "minutes": summary["minutes"],
            "val_disc_auc": summary["val"].get("val_disc_auc"), "val_gen_acc": summary["val"].get("val_gen_acc"),
            "fce_dev_ap": token_metrics(labels, scores, 0.5)["average_precision"],
            "fce_dev_error_rate": float(labels.mean())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fce", required=True, help="folder with fce-dev.json")
    parser.add_argument("--encoder", default="minilm")
    parser.add_argument("--corpus", nargs="+", default=["runs/corpus"], help="pre-training text (corpus build)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--base", action="append", default=[], metavar="KEY=VALUE", help="change a base setting")
    parser.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2", help="values tried one by one")
    parser.add_argument("--work-dir", default="runs/warmstart-probe")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parents[1] / "results" / "warmstart_probe"))
    args = parser.parse_args()
    base = BASE | dict(b.split("=", 1) for b in args.base)
    args.sentences = read_bea_json(Path(args.fce) / "fce-dev.json")
    plan = {"base": base}
    for spec in args.vary:
        key, values = spec.split("=", 1)
        for value in values.split(","):
            if value != base.get(key):
                plan[f"{key}={value}"] = base | {key: value}
    rows = [probe(name, settings, args) for name, settings in plan.items()]
    for row in rows:
        print(json.dumps(row), file=sys.stderr)
    result = {"benchmark": "warmstart_probe", "encoder": args.encoder, "steps": args.steps, "rows": rows,
              "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "command": command_line()}
    out = Path(args.out_dir)
    atomic_write_json(out / "result.json", result)
    keys = list(BASE)
    lines = ["# Warm-start probes: one setting at a time", "",
             f"`{result['command']}` ({result['date']}). {args.steps} updates from `{args.encoder}` each; "
             f"FCE dev zero-shot AP of the replaced-token head (token error rate "
             f"{rows[0]['fce_dev_error_rate']:.3f}).", "",
             "| probe | " + " | ".join(keys) + " | minutes | val disc AUC | val gen acc | FCE dev AP |",
             "|---|" + "---:|" * (len(keys) + 4)]
    for row in rows:
        lines.append(f"| {row['probe']} | " + " | ".join(str(row[k]) for k in keys) +
                     f" | {row['minutes']:.1f} | {row['val_disc_auc']:.3f} | {row['val_gen_acc']:.3f} | "
                     f"{row['fce_dev_ap']:.3f} |")
    atomic_write_text(out / "table.md", "\n".join(lines) + "\n")
    print(json.dumps({"benchmark": "warmstart_probe", **{r["probe"]: round(r["fce_dev_ap"], 4) for r in rows}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
