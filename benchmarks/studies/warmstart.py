"""Warm start: what ELECTRA continued pre-training adds to a published encoder, on real learner errors.

    python -m benchmarks.studies.warmstart --fce /work/data/fce --jfleg ../shared/data/jfleg/dev \\
        --arm a=minilm --arm b=runs/warm-electra --arm c=runs/warm-mlm --seeds 0 1 2

Each ``--arm NAME=SOURCE`` starts a GED fine-tune on synthetic errors (``--synthetic`` corpus sentences,
one fine-tune per seed; the seed draws the sentences, their errors and the training order). SOURCE is a
published encoder (a short name such as ``minilm`` or a folder: no ELECTRA pre-training, fresh head) or a run
directory (its pre-training compute is read from summary.json and run_config.json and counted in training
FLOPs from the model shapes, benchmarks/studies/ablation.py, summed over the runs it continued from). Each fine-tuned
detector is scored on FCE dev (BEA-2019 JSON, spaCy sentences, a token is an error when an edit touches it) and
JFLEG dev (ERRANT, majority of 4 references); each set is split by a fixed seed into a tuning half (the F0.5
threshold) and a report half. A run dir whose objective trains the replaced-token head also gets its zero-shot AP
(no fine-tune). harper-py is scored on the same report halves. Every pair of arms gets the difference of its
seed-mean F0.5 with a 95% paired-bootstrap interval over report sentences (seed spread reported beside it).

Fine-tunes are kept in ``--work-dir`` and reused (``ged.json`` present) on a re-run, so an interrupted sweep
continues where it stopped. FCE is never redistributed: only metrics are written to ``--out-dir``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.ged_halves import BOOTSTRAP, f05_per_resample, load_sets, metrics, token_scores
from benchmarks.common.run import command_line
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.tasks.ged.alignment import flags_to_token_labels
from electra_detect.tasks.ged.metrics import flatten, token_metrics


# -- pre-training compute of an arm ------------------------------------------------------------------------
def pretraining(source: str) -> dict[str, Any]:
    """Updates, tokens, minutes and training FLOPs a run dir spent, summed over its chain of continued pre-training
    (``train.init_from`` followed while it names a run dir, down to a published encoder); ``chain`` lists the runs
    from the first. Zeros for an encoder with no pre-training."""
    run = Path(source)
    if not (run / "run_config.json").exists():
        return {"kind": "encoder", "objective": None, "steps": 0, "pretrain_tokens": 0, "minutes": 0.0, "flops": 0.0,
                "chain": [], "start": str(source)}
    chain: list[dict[str, Any]] = []
    while run is not None:
        if any(link["run"] == str(run.resolve()) for link in chain):
            raise SystemExit(f"error: {run} continues from itself (train.init_from loops)")
        link, run = chain_link(run)
        chain.insert(0, link)
    return {"kind": "run", "objective": chain[-1]["objective"], "steps": sum(link["steps"] for link in chain),
            "pretrain_tokens": sum(link["tokens"] for link in chain),
            "minutes": sum(link["minutes"] for link in chain), "flops": sum(link["flops"] for link in chain),
            "chain": chain, "start": chain[0]["init_from"] or "random initialisation"}


def chain_link(run: Path) -> tuple[dict[str, Any], Path | None]:
    """One run's own compute (from summary.json and the model shapes, benchmarks/studies/ablation.py) and the run dir it
    continued from (None: it started from a published encoder or from scratch)."""
    from benchmarks.studies.ablation import train_flops_per_step
    from electra_detect.training.pretraining.encoders import is_run_dir
    from electra_detect.training.pretraining.rundir import load_run_config

    config = load_run_config(run)
    summary = json.loads((run / "summary.json").read_text())
    vocab = json.loads((run / "discriminator" / "config.json").read_text())["vocab_size"]
    tokens_per_step = summary["tokens_seen"] / max(summary["steps"], 1)
    per_step = train_flops_per_step(config.model, config.train.objective, "", vocab, tokens_per_step,
                                    config.data.seq_len, config.train.mask_prob)
    train = config.train
    link = {"run": str(run.resolve()), "objective": train.objective, "steps": summary["steps"],
            "tokens": summary["tokens_seen"], "minutes": summary["minutes"], "flops": per_step * summary["steps"],
            "init_from": train.init_from, "lr": train.lr, "batch_size": train.batch_size,
            "seq_len": config.data.seq_len, "warmup_steps": train.warmup_steps, "seed": train.seed,
            "mask_prob": train.mask_prob, "gen_layers": config.model.gen_layers,
            "corpus": [corpus_name(c) for c in config.data.corpus]}
    parent = Path(train.init_from) if train.init_from else None
    if parent is None or is_run_dir(parent):
        return link, parent
    # `--init-from RUN` reads RUN/discriminator's tokenizer: that names a run dir that is gone, not an encoder
    if Path(config.data.tokenizer) == parent / "discriminator":
        raise SystemExit(f"error: {run} continued from the run dir {parent}, which is not here: the compute of "
                         "its chain cannot be counted")
    return link, None


def corpus_name(spec: str) -> str:
    """A corpus spec as the same words on every machine: ``runs/...`` from a runs folder, else the spec."""
    parts = Path(spec).parts
    return str(Path(*parts[parts.index("runs"):])) if "runs" in parts else spec


def trains_rtd_head(objective: str | None) -> bool:
    """Whether a run of this objective trained the replaced-token head (so its zero-shot scores mean something)."""
    from electra_detect.training.pretraining import objectives

    return objective is not None and objectives.get(objective).rtd_head


def zero_shot(source: Path | str, split: dict[str, list]) -> tuple[dict[str, Any], dict[str, list[np.ndarray]]]:
    """A pre-trained discriminator as it is: AP on all of a set and its token error rate, F0.5 on the report half at
    the tuning half's threshold; and its token scores of each part ("all", "tune", "report")."""
    all_scores, rate = token_scores(source, split["all"])
    by_sentence = {id(s): values for s, values in zip(split["all"], all_scores, strict=True)}
    parts = {part: [by_sentence[id(s)] for s in split[part]] for part in ("all", "tune", "report")}
    labels, values = flatten(split["all"], all_scores)
    row = {"ap_all": token_metrics(labels, values, 0.5)["average_precision"],
           "error_rate_all": float(labels.mean()), "sentences_per_s": rate,
           **metrics(split, parts["tune"], parts["report"])}
    return row, parts


# -- the sweep -----------------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", action="append", required=True, metavar="NAME=SOURCE",
                        help="an encoder (short name or folder) or a pre-training run dir; repeat per arm")
    parser.add_argument("--fce", required=True, help="folder with fce-dev.json (BEA-2019 JSON release)")
    parser.add_argument("--jfleg", default="../shared/data/jfleg/dev")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--synthetic", type=int, default=4000, help="synthetic training sentences per fine-tune")
    parser.add_argument("--corpus", nargs="*", default=[], help="text for the synthetic errors (default: embedded)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--option", action="append", default=[], metavar="NAME.KEY=VALUE",
                        help="one arm's own fine-tune setting: mix (basic or learner), synthetic, epochs, "
                             "seeds (comma-separated: a one-change probe may run fewer seeds)")
    parser.add_argument("--split-seed", type=int, default=13)
    parser.add_argument("--work-dir", default="runs/bench-warmstart")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parents[1] / "results" / "warmstart"))
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument("--no-zero-shot", action="store_true", help="skip the zero-shot rows (fine-tunes only)")
    args = parser.parse_args()
    arms = dict(arm.split("=", 1) for arm in args.arm)
    recipes = {name: {"mix": "basic", "synthetic": args.synthetic, "epochs": args.epochs} for name in arms}
    for option in args.option:
        key, value = option.split("=", 1)
        name, setting = key.split(".", 1)
        if setting == "seeds":
            recipes[name]["seeds"] = [int(seed) for seed in value.split(",")]
        else:
            recipes[name][setting] = value if setting == "mix" else int(value)

    from electra_detect.training.finetune.ged_finetune import FinetuneConfig, finetune, start_model, synthetic_examples
    from electra_detect.training.synthetic.synthetic_errors import ErrorConfig

    sets = load_sets(Path(args.fce), Path(args.jfleg), args.split_seed)
    work, out = Path(args.work_dir), Path(args.out_dir)
    rows: list[dict[str, Any]] = []
    kept: dict[tuple[str, str], list[tuple[list[np.ndarray], float]]] = {}  # (arm, set) -> per seed
    scored_sources: set[str] = set()
    for arm, source in arms.items():
        compute = pretraining(source)
        scored = trains_rtd_head(compute["objective"]) and source not in scored_sources
        if scored and not args.no_zero_shot:  # the replaced-token head was trained: zero-shot, once per source
            scored_sources.add(source)
            for name, split in sets.items():
                rows.append({"arm": arm, "set": name, "stage": "zero-shot", **compute, **zero_shot(source, split)[0]})
        for seed in recipes[arm].get("seeds", args.seeds):
            model_dir = work / arm / f"seed{seed}"
            if not (model_dir / "ged.json").exists():
                recipe = recipes[arm]
                synthetic = synthetic_examples(args.corpus, recipe["synthetic"], seed, ErrorConfig(mix=recipe["mix"]))
                with start_model(source) as start:
                    finetune(start, model_dir, synthetic, None, FinetuneConfig(epochs=recipe["epochs"], seed=seed),
                             show_progress=sys.stderr.isatty())
            for name, split in sets.items():
                tune_scores, _ = token_scores(model_dir, split["tune"])
                report_scores, rate = token_scores(model_dir, split["report"])
                row = {"arm": arm, "set": name, "stage": "fine-tuned", "seed": seed, **recipes[arm], **compute,
                       "finetune": json.loads((model_dir / "ged.json").read_text()).get("minutes"),
                       "sentences_per_s": rate, **metrics(split, tune_scores, report_scores)}
                rows.append(row)
                kept.setdefault((arm, name), []).append((report_scores, row["threshold"]))
                print(json.dumps({k: row[k] for k in ("arm", "set", "seed", "f05", "average_precision")}),
                      file=sys.stderr)

    if not args.skip_peers:
        from benchmarks.common import peers

        loaded, status = peers.load_peers(["harper-py"])
        for name, split in sets.items():
            if "harper-py" not in loaded:
                rows.append({"arm": "harper-py", "set": name, "note": f"not run: {status.get('harper-py')}"})
                continue
            flagged = loaded["harper-py"].flag([s.text for s in split["report"]])
            scores = [flags_to_token_labels(s.tokens, spans) for s, spans in zip(split["report"], flagged,
                                                                                      strict=True)]
            rows.append({"arm": "harper-py", "set": name, "stage": "rule-based", "threshold": 0.5,
                         **token_metrics(*flatten(split["report"], scores), 0.5)})
            kept[("harper-py", name)] = [(scores, 0.5)]

    # -- paired bootstrap of seed-mean F0.5 differences ------------------------------------------------------
    rng = np.random.default_rng(0)
    pairs = []
    names = [a for a in [*arms, "harper-py"] if any(key[0] == a for key in kept)]
    for set_name, split in sets.items():
        report = split["report"]
        resamples = rng.integers(0, len(report), size=(BOOTSTRAP, len(report)))
        curves = {arm: np.mean([f05_per_resample(report, s, t, resamples) for s, t in kept[(arm, set_name)]], axis=0)
                  for arm in names if (arm, set_name) in kept}
        point = {arm: float(np.mean([token_metrics(*flatten(report, s), t)["f05"]
                                     for s, t in kept[(arm, set_name)]])) for arm in curves}
        for i, first in enumerate(curves):
            for second in list(curves)[i + 1:]:
                diff = curves[first] - curves[second]
                low, high = np.percentile(diff, [2.5, 97.5])
                pairs.append({"set": set_name, "first": first, "second": second,
                              "diff_f05": point[first] - point[second], "ci95": [float(low), float(high)],
                              "resolved": bool(low > 0 or high < 0)})

    summary = {"benchmark": "warmstart", "arms": arms, "recipes": recipes, "seeds": args.seeds, "rows": rows,
               "pairs": pairs, "bootstrap": BOOTSTRAP, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
               "command": command_line()}
    atomic_write_json(out / "result.json", summary)
    atomic_write_text(out / "table.md", table(summary))
    plot(summary, out / "f05_vs_compute.png")
    print(json.dumps({"benchmark": "warmstart", "pairs": len(pairs), "rows": len(rows)}))
    return 0


def aggregate(rows: list[dict], arm: str, set_name: str, stage: str) -> dict[str, Any] | None:
    chosen = [r for r in rows if r["arm"] == arm and r["set"] == set_name and r.get("stage") == stage]
    if not chosen:
        return None
    out = {key: (float(np.mean([r[key] for r in chosen])), float(np.std([r[key] for r in chosen])))
           for key in ("f05", "precision", "recall", "average_precision")}
    return {**chosen[0], **{k: v[0] for k, v in out.items()}, "f05_std": out["f05"][1], "n": len(chosen)}


def table(summary: dict[str, Any]) -> str:
    lines = ["# Warm start: GED from a published encoder, with and without continued pre-training", "",
             f"Command: `{summary['command']}` ({summary['date']}). Fine-tunes on synthetic errors only (corpus "
             f"sentences × epochs, error mix), seeds {summary['seeds']}; thresholds tuned for F0.5 on the tuning "
             "half of each set, metrics on its report half (mean over seeds, ± their std).", ""]
    for set_name in ("FCE dev", "JFLEG dev"):
        lines += [f"## {set_name}", "",
                  "| arm | stage | pre-training | fine-tune data | F0.5 | precision | recall | AP |",
                  "|---|---|---|---|---:|---:|---:|---:|"]
        for arm in [*summary["arms"], "harper-py"]:
            for stage in ("zero-shot", "fine-tuned", "rule-based"):
                row = aggregate(summary["rows"], arm, set_name, stage)
                if row is None:
                    continue
                pre = (f"{row['objective']}, {row['steps']} updates, {row['pretrain_tokens'] / 1e6:.2f}M tokens, "
                       f"{row['flops'] / 1e15:.1f} PFLOPs, {row['minutes']:.0f} min") if row.get("steps") else "–"
                if arm == "harper-py":
                    pre = "rule-based"
                recipe = summary["recipes"].get(arm)
                fine_tuned = recipe and stage == "fine-tuned"
                data = f"{recipe['synthetic']} × {recipe['epochs']}, {recipe['mix']}" if fine_tuned else "–"
                ap = row["average_precision"]
                spread = f" ± {row['f05_std']:.3f}" if row["n"] > 1 else (" (1 seed)" if fine_tuned else "")
                lines.append(f"| {arm} | {stage} | {pre} | {data} | {row['f05']:.3f}{spread} | "
                             f"{row['precision']:.3f} | {row['recall']:.3f} | {'–' if ap != ap else f'{ap:.3f}'} |")
        zero = [r for r in summary["rows"] if r["set"] == set_name and r.get("stage") == "zero-shot"]
        for row in zero:
            lines.append(f"\nZero-shot AP of `{row['arm']}` on all of {set_name}: {row['ap_all']:.3f} = "
                         f"{row['ap_all'] / row['error_rate_all']:.2f}× the token error rate "
                         f"({row['error_rate_all']:.3f}).")
        lines.append("")
        pairs = [p for p in summary["pairs"] if p["set"] == set_name]
        if pairs:
            lines += ["| pair | ΔF0.5 (seed means) | 95% bootstrap interval | resolved |", "|---|---:|---|---|"]
            lines += [f"| {p['first']} − {p['second']} | {p['diff_f05']:+.3f} | [{p['ci95'][0]:+.3f}, "
                      f"{p['ci95'][1]:+.3f}] | {'yes' if p['resolved'] else 'no'} |" for p in pairs]
            lines.append("")
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for axis, set_name in zip(axes, ("FCE dev", "JFLEG dev"), strict=True):
        for arm in summary["arms"]:
            row = aggregate(summary["rows"], arm, set_name, "fine-tuned")
            if row:
                axis.errorbar(row["flops"] / 1e15, row["f05"], yerr=row["f05_std"], fmt="o", capsize=4,
                              label=f"{arm} ({row['objective'] or 'no pre-training'})")
        peer = aggregate(summary["rows"], "harper-py", set_name, "rule-based")
        if peer:
            axis.axhline(peer["f05"], color="grey", linestyle="--", label="harper-py")
        axis.set(title=set_name, xlabel="continued pre-training compute (PFLOPs)", ylabel="F0.5 (report half)")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
