"""CoLA fine-tuning of a shipped or trained model, against the same encoder without pre-training.

    python -m benchmarks.quality.cola --model models/electra-tiny --seeds 0 1 2

The discriminator's encoder gets a fresh 2-way head and the recipe of ``training/finetune/cola.py`` (AdamW,
warm-up and decay, 3 epochs on the GLUE CoLA train file); the score is Matthews correlation on the
in-domain dev file. The baseline is the same architecture initialised at random (``from_config``),
fine-tuned with the same recipe and seeds: what pre-training adds, measured in one run.

Writes ``result.json`` and ``table.md`` to ``--out-dir`` (default ``benchmarks/results/cola/``) and prints one
JSON line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.common.run import command_line
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.model_dir import resolve_model_dir
from electra_detect.training.finetune.cola import ColaConfig, finetune_cola, read_cola

ROOT = Path(__file__).resolve().parents[2]



def random_init_copy(model_dir: Path, out: Path) -> Path:
    """The discriminator's architecture and tokenizer with freshly initialised weights."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    config = AutoConfig.from_pretrained(str(model_dir))
    AutoModel.from_config(config).save_pretrained(str(out), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(model_dir)).save_pretrained(str(out))
    return out


def summarise(runs: list[dict[str, float]]) -> dict[str, float]:
    mccs = [r["mcc"] for r in runs]
    return {"mcc_mean": statistics.mean(mccs), "mcc_std": statistics.stdev(mccs) if len(mccs) > 1 else 0.0,
            "accuracy_mean": statistics.mean(r["accuracy"] for r in runs),
            "seconds_mean": statistics.mean(r["seconds"] for r in runs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="run or model dir (its discriminator/) or a discriminator dir")
    ap.add_argument("--cola-dir", default=str(ROOT.parent / "shared" / "data" / "cola"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = default)")
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results" / "cola"))
    args = ap.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    cola = Path(args.cola_dir)
    train, dev = read_cola(cola / "in_domain_train.tsv"), read_cola(cola / "in_domain_dev.tsv")
    model_dir = resolve_model_dir(args.model)
    rows: dict[str, list[dict[str, float]]] = {"pre-trained": [], "random init": []}
    with tempfile.TemporaryDirectory() as tmp:
        baseline = random_init_copy(model_dir, Path(tmp) / "random")
        for seed in args.seeds:
            config = ColaConfig(epochs=args.epochs, seed=seed)
            for name, directory in (("pre-trained", model_dir), ("random init", baseline)):
                result = finetune_cola(directory, train, dev, config)
                rows[name].append({"seed": seed, **result})
                print(f"{name} seed {seed}: MCC {result['mcc']:.3f} ({result['seconds']:.0f} s)", file=sys.stderr)
    summary = {"benchmark": "cola", "model": args.model, "train": len(train[0]), "dev": len(dev[0]),
               "epochs": args.epochs, "seeds": args.seeds, "runs": rows,
               "summary": {name: summarise(runs) for name, runs in rows.items()},
               "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "command": command_line()}
    out = Path(args.out_dir)
    atomic_write_json(out / "result.json", summary)
    lines = ["# CoLA in-domain dev, after fine-tuning", "",
             f"{len(train[0])} training sentences, {len(dev[0])} dev; {args.epochs} epochs, seeds {args.seeds}. "
             f"Command: `{summary['command']}`", "",
             "| encoder | MCC (mean ± std) | accuracy | s per run |", "|---|---:|---:|---:|"]
    for name, stats in summary["summary"].items():
        lines.append(f"| {name} | {stats['mcc_mean']:.3f} ± {stats['mcc_std']:.3f} | {stats['accuracy_mean']:.3f} | "
                     f"{stats['seconds_mean']:.0f} |")
    atomic_write_text(out / "table.md", "\n".join(lines) + "\n")
    print(json.dumps({"benchmark": "cola", **{k: round(v["mcc_mean"], 4) for k, v in summary["summary"].items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
