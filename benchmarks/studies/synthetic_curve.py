"""GED from synthetic errors only: a learning curve over the amount of synthetic data, the text it is made from and
the error generator, on real learner errors, beside harper-py on the same sentences.

    python -m benchmarks.studies.synthetic_curve --fce runs/data/fce --point prose-4k=4000:prose:realistic \\
        --point prose-16k=16000:prose:realistic --types --threads 1     # trains and scores these points
    python -m benchmarks.studies.synthetic_curve --fce runs/data/fce --point ... --report   # table + plot of all points

``--point NAME=SENTENCES:TEXT:MIX`` is one fine-tune of ``--model`` for one epoch on SENTENCES corpus sentences
with synthetic errors of MIX (``realistic``, ``learner``, ``basic``: training/synthetic/synthetic_errors.py and
realistic_errors.py; ``realistic@T`` keeps a word choice only where the start discriminator's p(wrong) >= T),
made from TEXT (a preset of ``TEXTS`` under ``--runs``: ``sotu``, ``brown``, ``prose``).
Fine-tunes checkpoint every 500 steps and a re-run resumes them (a 200k-sentence point outlives a session);
generated data, models and scores are kept in ``--work-dir``. Each model is scored on FCE dev (BEA-2019 JSON) and
JFLEG dev (ERRANT, majority of 4 references), split by a fixed seed into a tuning half (the F0.5 threshold) and a
report half (F0.5, AP, per-type recall; operation accuracy of a typed model). ``--report`` adds harper-py on the
same report halves (benchmarks/common/peers.py), a 95% paired-bootstrap interval of each point's F0.5 minus harper-py's,
and writes ``result.json``, ``table.md`` and ``curve.png`` to ``--out-dir``. FCE is never redistributed: only
metrics leave ``--work-dir``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.ged_halves import f05_per_resample, load_sets
from benchmarks.common.run import command_line
from electra_detect.detector import Detector
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.tasks.ged import alignment, metrics, readers

# Clean text presets, relative to --runs (`electra-detect corpus build --out runs/corpus`,
# `python scripts/write_corpus_text.py --out runs/text`). "prose": everyday and narrative prose with free licences.
TEXTS = {"sotu": ["corpus/sotu"], "brown": ["text/brown.txt"],
         "prose": ["text/brown.txt", "corpus/spam-assassin", "corpus/cfi-en", "corpus/gutenberg",
                   "corpus/janeaustenr", "corpus/fortunes"],
         "prose+sotu": ["text/brown.txt", "corpus/spam-assassin", "corpus/cfi-en", "corpus/gutenberg",
                        "corpus/janeaustenr", "corpus/fortunes", "corpus/sotu"]}
BOOTSTRAP = 1000


def parse_point(spec: str) -> tuple[str, dict[str, Any]]:
    name, _, rest = spec.partition("=")
    parts = rest.split(":")
    if len(parts) != 3 or not parts[0].isdigit() or parts[1] not in TEXTS:
        raise SystemExit(f"error: bad --point {spec!r}: want NAME=SENTENCES:TEXT:MIX, TEXT one of {', '.join(TEXTS)}")
    return name, {"sentences": int(parts[0]), "text": parts[1], "mix": parts[2]}


def train_point(name: str, point: dict[str, Any], args: argparse.Namespace) -> Path:
    """The point's fine-tuned model dir (made, or resumed, when it has no ged.json yet)."""
    from electra_detect.training.finetune.ged_finetune import FinetuneConfig, finetune

    model_dir = Path(args.work_dir) / name
    if (model_dir / "ged.json").exists():
        return model_dir
    examples = synthetic_data(Path(args.work_dir) / f"{name}.examples.json", point, args.seed, args.runs, args.model)
    config = FinetuneConfig(epochs=1, seed=args.seed, types=args.types, checkpoint_every=500)
    finetune(args.model, model_dir, examples, None, config, show_progress=sys.stderr.isatty())
    return model_dir


def synthetic_data(cache: Path, point: dict[str, Any], seed: int, runs: str | Path,
                   neighbours_from: str | Path) -> list[readers.GedSentence]:
    """A point's synthetic training sentences (``sentences``, ``text``, ``mix``), drawn by ``seed``, the word-choice
    errors from ``neighbours_from``'s input embeddings; kept in ``cache`` and read back from it."""
    if cache.exists():
        return [readers.GedSentence(*row) for row in json.loads(cache.read_text())]
    from electra_detect.training.finetune.ged_finetune import synthetic_examples
    from electra_detect.training.synthetic.synthetic_errors import ErrorConfig

    started = time.monotonic()
    corpus = [str(Path(runs) / path) for path in TEXTS[point["text"]]]
    mix, _, judged = point["mix"].partition("@")  # realistic@0.2: word choices judged by the discriminator
    examples = synthetic_examples(corpus, point["sentences"], seed,
                                  ErrorConfig(mix=mix, judge_threshold=float(judged or 0)),
                                  neighbours_from=neighbours_from)
    atomic_write_json(cache, [[s.tokens, s.labels, s.types] for s in examples])  # 200k sentences take ~20 min
    print(f"{cache.name}: {len(examples)} examples in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return examples


def score_point(name: str, model_dir: Path, sets: dict) -> dict[str, Any]:
    """Metrics of one model on each set's report half (threshold from the tuning half), kept in the model dir
    (scored again when the sets changed size)."""
    cached = model_dir / "curve_eval.json"
    if cached.exists():
        kept = json.loads(cached.read_text())
        if all(len(kept.get(s, {}).get("report_scores", [])) == len(split["report"]) for s, split in sets.items()):
            return kept
    detector = Detector.load(model_dir, engine="torch")
    out: dict[str, Any] = {"point": name, "finetune": json.loads((model_dir / "ged.json").read_text())}
    for set_name, split in sets.items():
        tune = alignment.score_tokens(detector, split["tune"])
        threshold = metrics.tune_threshold(*metrics.flatten(split["tune"], tune))
        report = alignment.score_tokens(detector, split["report"])
        row = metrics.token_metrics(*metrics.flatten(split["report"], report), threshold)
        row["per_type_recall"] = metrics.per_type_recall(split["report"], report, threshold)
        if detector.channels:
            typed = alignment.score_typed_tokens(detector, split["report"])
            row["types"] = metrics.type_metrics(split["report"], typed, threshold)
        row["report_scores"] = [s.tolist() for s in report]
        out[set_name] = row
    atomic_write_json(cached, out)
    return out


def harper_rows(sets: dict) -> dict[str, Any]:
    from benchmarks.common import peers

    loaded, status = peers.load_peers(["harper-py"])
    if "harper-py" not in loaded:
        return {"note": f"not run: {status.get('harper-py')}"}
    out = {}
    for set_name, split in sets.items():
        flagged = loaded["harper-py"].flag([s.text for s in split["report"]])
        scores = [alignment.flags_to_token_labels(s.tokens, spans).astype(float)
                  for s, spans in zip(split["report"], flagged, strict=True)]
        row = metrics.token_metrics(*metrics.flatten(split["report"], scores), 0.5)
        row["per_type_recall"] = metrics.per_type_recall(split["report"], scores, 0.5)
        row["report_scores"] = [s.tolist() for s in scores]
        out[set_name] = row
    return out


def report(points: dict[str, dict], evals: dict[str, dict], harper: dict, sets: dict,
           args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    for set_name, split in sets.items():
        sentences = split["report"]
        resamples = rng.integers(0, len(sentences), size=(BOOTSTRAP, len(sentences)))
        base = f05_per_resample(sentences, [np.array(s) for s in harper[set_name]["report_scores"]], 0.5, resamples)
        for result in evals.values():
            row = result[set_name]
            mine = f05_per_resample(sentences, [np.array(s) for s in row["report_scores"]], row["threshold"],
                                    resamples)
            low, high = np.percentile(mine - base, [2.5, 97.5])
            row["minus_harper"] = {"diff_f05": row["f05"] - harper[set_name]["f05"], "ci95": [low, high]}
    strip = lambda row: {k: v for k, v in row.items() if k != "report_scores"}  # noqa: E731
    return {"benchmark": "synthetic_curve", "model": args.model, "types": args.types, "seed": args.seed,
            "points": [{"name": n, **points[n], **{s: strip(evals[n][s]) for s in sets},
                        "finetune_minutes": evals[n]["finetune"].get("minutes"),
                        "steps": evals[n]["finetune"].get("steps")} for n in evals],
            "harper-py": {s: strip(harper[s]) for s in sets}, "bootstrap": BOOTSTRAP,
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "command": command_line()}


def table(summary: dict[str, Any]) -> str:
    lines = ["# GED from synthetic errors only: amount, text and generator", "",
             f"Command: `{summary['command']}` ({summary['date']}). Start: `{summary['model']}`; one epoch per point, "
             f"seed {summary['seed']}, {'typed' if summary['types'] else 'binary'} head. Thresholds tuned for F0.5 on "
             "each set's tuning half, metrics on its report half; Δ harper-py with a 95% paired-bootstrap interval "
             "over report sentences.", ""]
    for set_name in ("FCE dev", "JFLEG dev"):
        harper = summary["harper-py"][set_name]
        lines += [f"## {set_name}", "", "| point | sentences | text | errors | F0.5 | P | R | AP | Δ harper-py [95%] "
                  "| op. acc. | minutes |", "|---|---:|---|---|---:|---:|---:|---:|---|---:|---:|"]
        for p in summary["points"]:
            row = p[set_name]
            d = row["minus_harper"]
            op = f"{row['types']['operation_accuracy']:.3f}" if "types" in row else "–"
            lines.append(f"| {p['name']} | {p['sentences']:,} | {p['text']} | {p['mix']} | {row['f05']:.3f} | "
                         f"{row['precision']:.3f} | {row['recall']:.3f} | {row['average_precision']:.3f} | "
                         f"{d['diff_f05']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}] | {op} | "
                         f"{p['finetune_minutes']:.0f} |")
        lines += [f"| harper-py | – | – | rules | {harper['f05']:.3f} | {harper['precision']:.3f} | "
                  f"{harper['recall']:.3f} | – | – | – | – |", ""]
    lines += ["## Per-type recall on FCE dev's report half (ERRANT main types of its edits)", ""]
    types = sorted(summary["harper-py"]["FCE dev"]["per_type_recall"],
                   key=lambda t: -summary["harper-py"]["FCE dev"]["per_type_recall"][t]["tokens"])[:24]
    names = [p["name"] for p in summary["points"]]
    lines += ["| type | tokens | " + " | ".join(names) + " | harper-py |", "|---|---:|" + "---:|" * (len(names) + 1)]
    for t in types:
        cells = [f"{p['FCE dev']['per_type_recall'].get(t, {}).get('recall', float('nan')):.2f}"
                 for p in summary["points"]]
        h = summary["harper-py"]["FCE dev"]["per_type_recall"][t]
        lines.append(f"| {t} | {h['tokens']} | " + " | ".join(cells) + f" | {h['recall']:.2f} |")
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for axis, set_name in zip(axes, ("FCE dev", "JFLEG dev"), strict=True):
        series: dict[tuple[str, str], list] = {}
        for p in summary["points"]:
            series.setdefault((p["text"], p["mix"]), []).append((p["sentences"], p[set_name]))
        for (text, mix), values in series.items():
            values.sort(key=lambda v: v[0])
            x = [v[0] for v in values]
            y = [v[1]["f05"] for v in values]
            h = summary["harper-py"][set_name]["f05"]
            err = np.array([[v[1]["f05"] - (h + v[1]["minus_harper"]["ci95"][0]) for v in values],
                            [(h + v[1]["minus_harper"]["ci95"][1]) - v[1]["f05"] for v in values]]).clip(0)
            axis.errorbar(x, y, yerr=err, marker="o", capsize=3, label=f"{mix} errors, {text} text")
        axis.axhline(summary["harper-py"][set_name]["f05"], color="grey", linestyle="--", label="harper-py (rules)")
        axis.set(xscale="log", title=set_name, xlabel="synthetic training sentences (one epoch)",
                 ylabel="token F0.5 (report half)")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def fce_statistics(fce: Path) -> dict[str, Any]:
    """FCE train's counts that the realistic mix copies: edits per sentence and each error type's share of the
    typed error tokens (training/synthetic/realistic_errors.py EDITS_PER_SENTENCE, FAMILY_SHARES).
    Counts only, no text."""
    from collections import Counter

    sentences = readers.read_bea_json(fce / "fce-train.json")
    edits, types = Counter(), Counter()
    for sentence in sentences:
        count, previous = 0, None
        for label, kinds in zip(sentence.labels, sentence.types, strict=True):
            types.update(kinds if label else [])
            count += bool(label and tuple(kinds) != previous)  # a run of tokens with one type is one edit
            previous = tuple(kinds) if label else None
        edits[min(count, 8)] += 1
    total = sum(types.values())
    return {"sentences": len(sentences), "edits_per_sentence": {k: edits[k] / len(sentences) for k in sorted(edits)},
            "typed_error_tokens": total, "type_shares": {t: n / total for t, n in types.most_common()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--point", action="append", default=[], metavar="NAME=SENTENCES:TEXT:MIX")
    parser.add_argument("--fce", required=True, help="folder with fce-dev.json (BEA-2019 JSON release)")
    parser.add_argument("--jfleg", default="../shared/data/jfleg/dev")
    parser.add_argument("--model", default="models/electra-minilm/discriminator", help="the start discriminator")
    parser.add_argument("--runs", default="runs", help="where the corpus/ and text/ presets live")
    parser.add_argument("--types", action="store_true", help="train the typed head (ERRANT operation + main type)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--split-seed", type=int, default=13)
    parser.add_argument("--work-dir", default="runs/synthetic-curve")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parents[1] / "results" / "synthetic_curve"))
    parser.add_argument("--report", action="store_true", help="score harper-py and write the table of all points")
    parser.add_argument("--fce-stats", action="store_true", help="print FCE train's edit counts and type shares")
    args = parser.parse_args()
    if args.fce_stats:
        print(json.dumps(fce_statistics(Path(args.fce))))
        return 0
    if not args.point:
        parser.error("give at least one --point (or --fce-stats)")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    points = dict(parse_point(spec) for spec in args.point)
    sets = load_sets(Path(args.fce), Path(args.jfleg), args.split_seed)
    evals = {}
    for name, point in points.items():
        model_dir = train_point(name, point, args)
        evals[name] = score_point(name, model_dir, sets)
        print(json.dumps({"point": name, **{s: round(evals[name][s]["f05"], 4) for s in sets}}), file=sys.stderr)
    if args.report:
        summary = report(points, evals, harper_rows(sets), sets, args)
        out = Path(args.out_dir)
        atomic_write_json(out / "result.json", summary)
        atomic_write_text(out / "table.md", table(summary))
        plot(summary, out / "curve.png")
        print(json.dumps({"benchmark": "synthetic_curve", "points": len(evals)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
