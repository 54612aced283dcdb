"""Supervised GED on real learner errors: recipes (synthetic, real, synthetic then real), the amount of real
data, and ERRANT error types, beside the published FCE systems.

    python -m benchmarks.studies.ged_supervised --fce /work/data/fce --jfleg ../shared/data/jfleg/dev \\
        --model runs/warm-electra --arm real-all=fce:allx1 --arm synth-then-real=synthetic:4000x2,fce:allx1 \\
        --types --seeds 0

Each ``--arm NAME=STAGE[,STAGE...]`` is a chain of GED fine-tunes from ``--model``, each stage starting from the
last: ``synthetic:N[xE]`` (N corpus sentences with synthetic errors, ``--error-mix``), ``fce:N[xE]`` (N sentences
of FCE train, drawn by the seed; ``all`` = every one), E epochs (default 1), ``wW`` the
weight of the type losses (default: ``ged train``'s). With ``--types`` the FCE stages train
the typed head (ERRANT operation + main type, channels from FCE train; ``--binary-arm NAME`` leaves an arm binary, the
control for what the type loss costs) and the report gives the operation accuracy on correctly detected tokens and
per-type recall; synthetic stages always train the binary head (their few error families are not FCE's types).
Thresholds are tuned for F0.5 on the tuning half of FCE dev and of JFLEG dev (fixed split seed), metrics are on the
report halves; JFLEG has no training data. Fine-tunes are kept in ``--work-dir`` and reused on a re-run. FCE is
never redistributed: only metrics are written to ``--out-dir``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.ged_halves import load_sets, metrics, token_scores
from benchmarks.common.run import command_line
from electra_detect.detector import Detector
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.tasks.ged.alignment import score_typed_tokens
from electra_detect.tasks.ged.metrics import type_metrics
from electra_detect.tasks.ged.readers import read_bea_json

# Binary token F0.5 on FCE *test* (we report FCE dev: FCE test is kept for release checks).
PUBLISHED = [("Rei & Yannakoudakis 2016", "BiLSTM, FCE train", 0.41),
             ("Bell et al. 2019", "BERT-base contextual features, FCE train", 0.57)]


def parse_stages(spec: str) -> list[tuple[str, int | None, int, float]]:
    """``synthetic:4000x2,fce:allx1w0.2`` -> [("synthetic", 4000, 2, 0.1), ("fce", None, 1, 0.2)]: kind, sentences
    (None = all), epochs, and the weight of the type losses (``w``; default ``FinetuneConfig.type_weight``)."""
    from electra_detect.training.finetune.ged_finetune import FinetuneConfig

    stages = []
    for part in spec.split(","):
        kind, _, amount = part.partition(":")
        amount, _, weight = amount.partition("w")
        count, _, epochs = amount.partition("x")
        if kind not in ("synthetic", "fce") or not count:
            raise SystemExit(f"error: bad stage {part!r}: want synthetic:N[xE] or fce:N|all[xE][wW]")
        stages.append((kind, None if count == "all" else int(count), int(epochs or 1),
                       float(weight) if weight else FinetuneConfig.type_weight))
    return stages


def typed_report(model: Path, split: dict[str, list], threshold: float) -> dict[str, Any]:
    """Operation accuracy on correctly detected report tokens, and recall / type accuracy per main type."""
    detector = Detector.load(model, engine="torch")
    predictions = score_typed_tokens(detector, split["report"])
    return type_metrics(split["report"], predictions, threshold)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", action="append", required=True, metavar="NAME=STAGES")
    parser.add_argument("--model", required=True, help="start: run dir, discriminator dir or encoder (minilm)")
    parser.add_argument("--fce", required=True, help="folder with fce-train.json and fce-dev.json (BEA-2019 JSON)")
    parser.add_argument("--jfleg", default="../shared/data/jfleg/dev")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--types", action="store_true")
    parser.add_argument("--binary-arm", action="append", default=[], metavar="NAME", help="an arm without types")
    parser.add_argument("--error-mix", default="learner", choices=["basic", "learner"])
    parser.add_argument("--corpus", nargs="*", default=[], help="text for synthetic stages (default: embedded)")
    parser.add_argument("--split-seed", type=int, default=13)
    parser.add_argument("--work-dir", default="runs/bench-ged-supervised")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parents[1] / "results" / "ged_supervised"))
    args = parser.parse_args()
    arms = {name: parse_stages(spec) for name, spec in (arm.split("=", 1) for arm in args.arm)}

    from electra_detect.training.finetune.ged_finetune import (
        FinetuneConfig,
        finetune,
        start_model,
        synthetic_examples,
        type_channels,
    )
    from electra_detect.training.synthetic.synthetic_errors import ErrorConfig

    fce_train = read_bea_json(Path(args.fce) / "fce-train.json")
    channels = tuple(type_channels(fce_train)) if args.types else ()
    sets = load_sets(Path(args.fce), Path(args.jfleg), args.split_seed)
    work, out = Path(args.work_dir), Path(args.out_dir)
    rows: list[dict[str, Any]] = []
    for arm, stages in arms.items():
        for seed in args.seeds:
            source, minutes = args.model, 0.0
            for index, (kind, count, epochs, type_weight) in enumerate(stages):
                stage_dir = work / arm / f"seed{seed}" / f"stage{index}"
                if not (stage_dir / "ged.json").exists():
                    if kind == "synthetic":
                        data = synthetic_examples(args.corpus, count, seed, ErrorConfig(mix=args.error_mix))
                    else:
                        data = random.Random(seed).sample(fce_train, count) if count else list(fce_train)
                    typed = kind == "fce" and arm not in args.binary_arm
                    config = FinetuneConfig(epochs=epochs, seed=seed, types=typed and bool(channels),
                                            channels=channels if typed else (), type_weight=type_weight)
                    with start_model(source) as start:
                        finetune(start, stage_dir, data, None, config, show_progress=sys.stderr.isatty())
                minutes += json.loads((stage_dir / "ged.json").read_text())["minutes"]
                source = str(stage_dir)
            for name, split in sets.items():
                tune_scores, _ = token_scores(source, split["tune"])
                report_scores, rate = token_scores(source, split["report"])
                row = {"arm": arm, "stages": [list(s) for s in stages], "set": name, "seed": seed,
                       "finetune_minutes": round(minutes, 2), "sentences_per_s": rate,
                       **metrics(split, tune_scores, report_scores)}
                if channels and arm not in args.binary_arm:
                    row["types"] = typed_report(Path(source), split, row["threshold"])
                rows.append(row)
                print(json.dumps({k: row[k] for k in ("arm", "set", "seed", "f05", "average_precision")}),
                      file=sys.stderr)

    summary = {"benchmark": "ged_supervised", "model": args.model, "arms": {a: args.arm[i].split("=", 1)[1]
                                                                          for i, a in enumerate(arms)},
               "seeds": args.seeds, "types": list(channels), "fce_train_sentences": len(fce_train), "rows": rows,
               "published": PUBLISHED, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
               "command": command_line()}
    atomic_write_json(out / "result.json", summary)
    atomic_write_text(out / "table.md", table(summary))
    print(json.dumps({"benchmark": "ged_supervised", "rows": len(rows)}))
    return 0


def table(summary: dict[str, Any]) -> str:
    lines = ["# Supervised GED on FCE (binary token F0.5)", "",
             f"Command: `{summary['command']}` ({summary['date']}). Start model `{summary['model']}`; FCE train has "
             f"{summary['fce_train_sentences']:,} sentences. Thresholds tuned on the tuning half of each dev set, "
             "metrics on its report half (mean ± std over seeds).", ""]
    for set_name in ("FCE dev", "JFLEG dev"):
        lines += [f"## {set_name}", "", "| arm | stages | fine-tune min | F0.5 | precision | recall | AP |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for arm, spec in summary["arms"].items():
            chosen = [r for r in summary["rows"] if r["arm"] == arm and r["set"] == set_name]
            if not chosen:
                continue
            mean = {k: float(np.mean([r[k] for r in chosen])) for k in ("f05", "precision", "recall",
                                                                         "average_precision", "finetune_minutes")}
            spread = f" ± {np.std([r['f05'] for r in chosen]):.3f}" if len(chosen) > 1 else ""
            lines.append(f"| {arm} | `{spec}` | {mean['finetune_minutes']:.0f} | {mean['f05']:.3f}{spread} | "
                         f"{mean['precision']:.3f} | {mean['recall']:.3f} | {mean['average_precision']:.3f} |")
        lines.append("")
    lines += ["Published, binary token F0.5 on FCE **test** (not comparable to a dev figure, and their models are "
              "larger): " + "; ".join(f"{who} ({what}) {f05:.2f}" for who, what, f05 in summary["published"]) + ".",
              ""]
    typed = [r for r in summary["rows"] if r.get("types") and r["set"] == "FCE dev"]
    for row in typed:
        types = row["types"]
        lines += [f"## Error types: `{row['arm']}` seed {row['seed']}, FCE dev report half", "",
                  f"Operation (M/R/U) accuracy on correctly detected tokens: **{types['operation_accuracy']:.3f}** "
                  f"({types['detected']:,} tokens); main-type accuracy on them: {types['type_accuracy']:.3f}.", "",
                  "| main type | error tokens | detection recall | type accuracy (detected) |", "|---|---:|---:|---:|"]
        lines += [f"| {name} | {t['tokens']} | {t['recall']:.3f} | {t['type_accuracy']:.3f} |"
                  for name, t in sorted(types["per_type"].items(), key=lambda kv: -kv[1]["tokens"])]
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
