"""GED trained on real learner errors: which start, which data, how much of it, and which levers, beside harper-py.

    python -m benchmarks.quality.ged_learner --fce runs/data/fce --wi runs/data/wi \\
        --start synthetic=models/electra-minilm/ged-synthetic --start pretrained=models/electra-minilm/discriminator \\
        --arm synthetic:learner:1000 --arm pretrained:learner:1000 --arm synthetic:fce:all --seeds 0

An arm is ``START:DATA:N[:LEVER=VALUE...]``: a GED fine-tune (``ged train --types``, 2 epochs unless a lever says
otherwise) of the start model named by ``--start`` on ``N`` sentences (``all``: every one) drawn by the seed from
``DATA``: ``fce`` (FCE train), ``wi`` (W&I+LOCNESS train A, B and C) or ``learner`` (both). Levers: ``epochs``,
``lr``, ``type_weight``, ``synthetic`` (that many realistic synthetic sentences mixed in), ``ensemble`` (the mean
score of that many fine-tunes, seeds SEED, SEED+1, ...; its speed is theirs together). ``START:none:0`` is the
start as it is. Every model is scored on the tuning and report halves of FCE dev and JFLEG dev (fixed split seed):
F0.5 at the threshold tuned on the same set's tuning half and at the *travelling* threshold (the one that maximises
the mean F0.5 of both tuning halves: what ships), AP, and on FCE dev the operation and main-type accuracy of
detected errors. harper-py (benchmarks/common/peers.py) is scored on the same report halves; each arm's difference
from it and each ``--compare A B`` carry a 95% paired-bootstrap interval over sentences. Fine-tunes are kept in
``--work-dir`` and reused; the learner data never leave it (only metrics are written to ``--out-dir``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import peers
from benchmarks.common.ged_halves import BOOTSTRAP, f05_of_counts, load_sets, sentence_counts
from benchmarks.common.run import command_line
from electra_detect.detector import Detector
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.tasks.ged.alignment import flags_to_token_labels, score_tokens, score_typed_tokens
from electra_detect.tasks.ged.metrics import flatten, shared_threshold, token_metrics, tune_threshold, type_metrics
from electra_detect.tasks.ged.readers import GedSentence

DATA_FILES = {"fce": ["fce-train.json"], "wi": ["A.train.json", "B.train.json", "C.train.json"]}
LEVERS = {"epochs": int, "lr": float, "type_weight": float, "synthetic": int, "ensemble": int}
SETS = ("FCE dev", "JFLEG dev")


def parse_arm(spec: str) -> dict[str, Any]:
    """``synthetic:learner:4000:epochs=3`` -> {"start": "synthetic", "data": "learner", "count": 4000, "levers":
    {"epochs": 3}}; ``count`` None means every sentence."""
    start, data, count, *levers = spec.split(":")
    if data not in ("fce", "wi", "learner", "none") or not count:
        raise SystemExit(f"error: bad arm {spec!r}: want START:fce|wi|learner|none:N|all[:LEVER=VALUE...]")
    parsed: dict[str, Any] = {}
    for lever in levers:
        name, _, value = lever.partition("=")
        if name not in LEVERS:
            raise SystemExit(f"error: unknown lever {name!r} in {spec!r}: one of {', '.join(LEVERS)}")
        parsed[name] = LEVERS[name](value)
    return {"spec": spec, "start": start, "data": data, "count": None if count == "all" else int(count),
            "levers": parsed}


def interval(a: dict[str, list[int]], b: dict[str, list[int]], resamples: np.ndarray) -> dict[str, float]:
    """Paired bootstrap of F0.5(a) - F0.5(b) over the same sentences: mean and 95% interval."""
    diff = f05_of_counts(a, resamples) - f05_of_counts(b, resamples)
    low, high = np.percentile(diff, [2.5, 97.5])
    return {"diff": float(diff.mean()), "low": float(low), "high": float(high)}


def learner_pool(args: argparse.Namespace, data: str) -> list[GedSentence]:
    from electra_detect.training.finetune.ged_finetune import ged_training_data

    folders = {"fce": Path(args.fce), "wi": Path(args.wi)}
    names = ["fce", "wi"] if data == "learner" else [data]
    return ged_training_data([folders[name] / file for name in names for file in DATA_FILES[name]], "bea")[0]


def train_arm(arm: dict[str, Any], seed: int, source: str, pools: dict, args: argparse.Namespace) -> Path:
    """The arm's fine-tune (reused when its ged.json is there): ``ged train --types`` on the arm's sentences."""
    from electra_detect.training.finetune.ged_finetune import (
        FinetuneConfig,
        finetune,
        model_dir_of,
        start_model,
        synthetic_examples,
    )
    from electra_detect.training.synthetic.synthetic_errors import ErrorConfig

    out = Path(args.work_dir) / arm["spec"].replace(":", "_").replace("=", "-") / f"seed{seed}"
    if (out / "ged.json").exists():
        return out
    if arm["data"] not in pools:
        pools[arm["data"]] = learner_pool(args, arm["data"])
    pool = pools[arm["data"]]
    train = list(pool) if arm["count"] is None else random.Random(seed).sample(pool, arm["count"])
    levers = arm["levers"]
    config = FinetuneConfig(epochs=levers.get("epochs", 2), lr=levers.get("lr", FinetuneConfig.lr), seed=seed,
                            types=True, type_weight=levers.get("type_weight", FinetuneConfig.type_weight))
    with start_model(source) as start:
        if levers.get("synthetic"):
            train += synthetic_examples([], levers["synthetic"], seed, ErrorConfig(mix="realistic"),
                                        neighbours_from=model_dir_of(start))
        finetune(start, out, train, None, config, show_progress=sys.stderr.isatty())
    return out


def score_model(model: Path | str, sets: dict[str, dict[str, list]], typed: bool) -> dict[str, Any]:
    """Per set and half: per-token scores (and, for a typed model, its operations and types)."""
    detector = Detector.load(model, engine="torch")
    out: dict[str, Any] = {}
    started, count = time.perf_counter(), 0
    for name, split in sets.items():
        for half in ("tune", "report"):
            sentences = split[half]
            count += len(sentences)
            out[name, half] = (score_typed_tokens(detector, sentences) if typed else
                               score_tokens(detector, sentences))
    out["sentences_per_s"] = count / (time.perf_counter() - started)
    return out


def mean_scores(scored: list[dict[str, Any]]) -> dict[str, Any]:
    """An ensemble's scores: per token the mean of its members' p(error); operations and types the first member's."""
    from dataclasses import replace

    out: dict[str, Any] = {"sentences_per_s": 1 / sum(1 / member["sentences_per_s"] for member in scored)}
    for key in scored[0]:
        if key == "sentences_per_s":
            continue
        members = [member[key] for member in scored]
        out[key] = [replace(first, scores=np.mean([getattr(m[i], "scores", m[i]) for m in members], axis=0))
                    if hasattr(first, "scores") else np.mean([m[i] for m in members], axis=0)
                    for i, first in enumerate(members[0])]
    return out


def evaluate(scored: dict[str, Any], sets: dict[str, dict[str, list]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Metrics of one model on both sets: own-tuned and travelling thresholds, AP, typed accuracies, and the report
    halves' per-sentence counts at the travelling threshold (for the paired intervals)."""
    def values(name: str, half: str) -> list[np.ndarray]:
        return [getattr(p, "scores", p) for p in scored[name, half]]

    tunes = {name: flatten(sets[name]["tune"], values(name, "tune")) for name in SETS}
    travel = shared_threshold(list(tunes.values()))  # one threshold for every learner population
    row: dict[str, Any] = {"travelling_threshold": travel, "sentences_per_s": scored["sentences_per_s"], "sets": {}}
    counts = {}
    for name in SETS:
        own = tune_threshold(*tunes[name])
        report = flatten(sets[name]["report"], values(name, "report"))
        entry = {"own_threshold": own, "own": token_metrics(*report, own), "travelling": token_metrics(*report, travel)}
        predictions = scored[name, "report"]
        if predictions and hasattr(predictions[0], "operations") and name == "FCE dev":
            types = type_metrics(sets[name]["report"], predictions, travel)
            entry["types"] = {k: types[k] for k in ("operation_accuracy", "type_accuracy", "detected")}
        row["sets"][name] = entry
        counts[name] = sentence_counts(sets[name]["report"], values(name, "report"), travel)
    return row, counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fce", required=True, help="folder with fce-train.json and fce-dev.json (BEA-2019 JSON)")
    parser.add_argument("--wi", required=True, help="folder with W&I+LOCNESS A/B/C.train.json (BEA-2019 JSON)")
    parser.add_argument("--jfleg", default="../shared/data/jfleg/dev")
    parser.add_argument("--start", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--arm", action="append", required=True, metavar="START:DATA:N[:LEVER=VALUE]")
    parser.add_argument("--compare", nargs=2, action="append", default=[], metavar=("ARM_A", "ARM_B"),
                        help="a paired interval of F0.5(A) - F0.5(B) at seed 0 (arms by spec)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--split-seed", type=int, default=13)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--work-dir", default="runs/bench-ged-learner")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parents[1] / "results" / "ged_learner"))
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    starts = dict(spec.split("=", 1) for spec in args.start)
    arms = [parse_arm(spec) for spec in args.arm]
    for arm in arms:
        if arm["start"] not in starts:
            raise SystemExit(f"error: arm {arm['spec']!r} names no --start {arm['start']!r}")
    sets = load_sets(Path(args.fce), Path(args.jfleg), args.split_seed)
    resamples = {name: np.random.default_rng(0).integers(0, len(sets[name]["report"]),
                                                          (BOOTSTRAP, len(sets[name]["report"]))) for name in SETS}
    harper, harper_counts, harper_rows = peers.HarperPeer(), {}, {}
    for name in SETS:
        sentences = sets[name]["report"]
        flags = [flags_to_token_labels(s.tokens, spans).astype(float)
                 for s, spans in zip(sentences, harper.flag([s.text for s in sentences]), strict=True)]
        harper_counts[name] = sentence_counts(sentences, flags, 0.5)
        harper_rows[name] = token_metrics(*flatten(sentences, flags), 0.5)
    pools: dict[str, list[GedSentence]] = {}
    rows, kept_counts = [], {}
    for arm in arms:
        for seed in args.seeds if arm["data"] != "none" else [0]:
            members = arm["levers"].get("ensemble", 1)
            member = {**arm, "spec": arm["spec"].replace(f":ensemble={members}", ""),
                      "levers": {k: v for k, v in arm["levers"].items() if k != "ensemble"}}
            models = ([starts[arm["start"]]] if arm["data"] == "none" else
                      [train_arm(member, seed + k, starts[arm["start"]], pools, args) for k in range(members)])
            model = models[0]
            meta = json.loads((Path(model) / "ged.json").read_text()) if (Path(model) / "ged.json").exists() else {}
            typed = arm["data"] != "none" or bool(meta.get("types"))
            row, counts = evaluate(mean_scores([score_model(m, sets, typed) for m in models]), sets)
            row.update({"arm": arm["spec"], "start": arm["start"], "data": arm["data"], "count": arm["count"],
                        "train_sentences": meta.get("train_sentences", 0) if arm["data"] != "none" else 0,
                        "levers": arm["levers"], "seed": seed,
                        "finetune_minutes": sum(json.loads((Path(m) / "ged.json").read_text())["minutes"]
                                                for m in models) if arm["data"] != "none" else None})
            for name in SETS:
                row["sets"][name]["minus_harper"] = interval(counts[name], harper_counts[name], resamples[name])
            kept_counts[arm["spec"], seed] = counts
            rows.append(row)
            write(args, starts, rows, harper, harper_rows, [], sets)  # after every model: a long run shows its rows
            f05s = {name: round(row["sets"][name]["travelling"]["f05"], 3) for name in SETS}
            print(json.dumps({"arm": arm["spec"], "seed": seed, **f05s}), file=sys.stderr)
    comparisons = []
    for a, b in args.compare:
        if (a, 0) in kept_counts and (b, 0) in kept_counts:
            comparisons.append({"a": a, "b": b, **{name: interval(kept_counts[a, 0][name], kept_counts[b, 0][name],
                                                                  resamples[name]) for name in SETS}})
    write(args, starts, rows, harper, harper_rows, comparisons, sets)
    print(json.dumps({"benchmark": "ged_learner", "rows": len(rows)}))
    return 0


def write(args: argparse.Namespace, starts: dict[str, str], rows: list[dict[str, Any]], harper: Any,
          harper_rows: dict[str, Any], comparisons: list[dict[str, Any]], sets: dict[str, Any]) -> None:
    summary = {"benchmark": "ged_learner", "starts": starts, "seeds": args.seeds, "rows": rows,
               "harper": {"version": harper.version, **harper_rows}, "comparisons": comparisons,
               "sets": {name: {half: len(sets[name][half]) for half in ("tune", "report")} for name in SETS},
               "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "command": command_line()}
    out = Path(args.out_dir)
    atomic_write_json(out / "result.json", summary)
    atomic_write_text(out / "table.md", table(summary))
    plot(summary, out / "curve.png")


def mean_row(rows: list[dict[str, Any]], name: str, key: str, field: str = "f05") -> tuple[float, float]:
    values = [r["sets"][name][key][field] for r in rows]
    return float(np.mean(values)), float(np.std(values)) if len(values) > 1 else 0.0


def table(summary: dict[str, Any]) -> str:
    harper = summary["harper"]
    lines = ["# GED trained on learner errors", "",
             f"Command: `{summary['command']}` ({summary['date']}). Starts: "
             + ", ".join(f"`{k}` = `{v}`" for k, v in summary["starts"].items()) + ". Fine-tunes are `ged train "
             "--types` (2 epochs, lr 5e-5, type weight 0.1 unless a lever says otherwise). F0.5 on each set's report "
             "half: at the *travelling* threshold (maximises the mean F0.5 of both tuning halves; what ships) and at "
             "the set's own tuned one. Mean ± std over seeds; intervals are paired 95% bootstraps over report "
             f"sentences, seed 0. harper-py ({harper['version']}) on the same sentences: FCE dev "
             f"{harper['FCE dev']['f05']:.3f}, JFLEG dev {harper['JFLEG dev']['f05']:.3f}.", "",
             "| arm | labelled sentences | seeds | min | threshold | FCE dev F0.5 | (own thr.) | FCE AP "
             "| − harper (95%) | JFLEG dev F0.5 | (own thr.) | JFLEG AP | − harper (95%) | op. acc. | type acc. |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---:|"]
    specs = list(dict.fromkeys(r["arm"] for r in summary["rows"]))
    for spec in specs:
        rows = [r for r in summary["rows"] if r["arm"] == spec]
        first = rows[0]
        cells = [f"`{spec}`", f"{first['train_sentences']:,}", str(len(rows)),
                 f"{np.mean([r['finetune_minutes'] for r in rows]):.0f}" if first["finetune_minutes"] else "–",
                 f"{np.mean([r['travelling_threshold'] for r in rows]):.3f}"]
        for name in SETS:
            f05, spread = mean_row(rows, name, "travelling")
            own, _ = mean_row(rows, name, "own")
            ap, _ = mean_row(rows, name, "travelling", "average_precision")
            ci = first["sets"][name]["minus_harper"]
            cells += [f"{f05:.3f}" + (f" ± {spread:.3f}" if len(rows) > 1 else ""), f"{own:.3f}", f"{ap:.3f}",
                      f"{ci['diff']:+.3f} [{ci['low']:+.3f}, {ci['high']:+.3f}]"]
        types = first["sets"]["FCE dev"].get("types")
        cells += [f"{types['operation_accuracy']:.3f}", f"{types['type_accuracy']:.3f}"] if types else ["–", "–"]
        lines.append("| " + " | ".join(cells) + " |")
    if summary["comparisons"]:
        lines += ["", "| A − B (seed 0, travelling thresholds) | FCE dev F0.5 (95%) | JFLEG dev F0.5 (95%) |",
                  "|---|---|---|"]
        for c in summary["comparisons"]:
            cells = [f"{c[n]['diff']:+.3f} [{c[n]['low']:+.3f}, {c[n]['high']:+.3f}]" for n in SETS]
            lines.append(f"| `{c['a']}` − `{c['b']}` | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path) -> None:
    """F0.5 against labelled sentences, one line per start (lever-free arms on the learner pool), harper-py flat."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    colours = {start: f"C{i}" for i, start in enumerate(summary["starts"])}
    for ax, name in zip(axes, SETS, strict=True):
        for start in summary["starts"]:
            rows = [r for r in summary["rows"] if r["start"] == start and not r["levers"]
                    and r["data"] in ("learner", "none")]
            points: dict[int, list[float]] = {}
            for r in rows:
                points.setdefault(max(r["train_sentences"], 100), []).append(r["sets"][name]["travelling"]["f05"])
            if points:
                xs = sorted(points)
                ax.errorbar(xs, [np.mean(points[x]) for x in xs], yerr=[np.std(points[x]) for x in xs], marker="o",
                            capsize=3, label=f"start: {start}", color=colours[start])
        fce_only = [r for r in summary["rows"] if r["data"] == "fce" and not r["levers"]]
        for r in fce_only:
            ax.scatter([r["train_sentences"]], [r["sets"][name]["travelling"]["f05"]], marker="s",
                       color=colours[r["start"]], label=f"{r['start']}, FCE only" if r["seed"] == 0 else None)
        ax.axhline(summary["harper"][name]["f05"], color="grey", linestyle="--", label="harper-py")
        ax.set_xscale("log")
        ax.set_title(f"{name} report half")
        ax.set_xlabel("labelled learner sentences (100 = none)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("token F0.5 at the travelling threshold")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
