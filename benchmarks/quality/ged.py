"""GED on real learner English (JFLEG dev), all systems side by side on one report split.

    python -m benchmarks.quality.ged --model runs/quickstart --jfleg ../shared/data/jfleg/dev

Labels: ERRANT aligns each JFLEG source sentence with its corrections; a source token is an error
when a majority of the four references edit it (``--combine``). The 754 sentences are split by a
fixed seed into a tuning half (thresholds, and training data for one fine-tuned variant) and a
report half, on which every system is scored and timed:

- zero-shot: our discriminator's word score >= a threshold tuned for F0.5 on the tuning half;
- surprisal baseline: 1 - p(observed subword | rest) from our own generator (one masked copy per subword);
- fine-tuned on synthetic errors only, then also on (80% of) the tuning half;
- harper-py (rule-based) and quire-grammar (GECToR-style DistilBERT, ONNX int8): their flagged
  character spans mapped onto the same whitespace tokens (benchmarks/common/peers.py).

Writes ``result.json`` and ``table.md`` to ``--out-dir`` (default ``benchmarks/results/ged/``) and prints one JSON line.
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

from benchmarks.common.run import command_line
from electra_detect.detector import Detector
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.tasks.ged.alignment import flags_to_token_labels, score_tokens, to_token_scores
from electra_detect.tasks.ged.metrics import flatten, token_metrics, tune_threshold
from electra_detect.tasks.ged.readers import GedSentence, read_parallel, split_sentences
from electra_detect.tasks.pll import GeneratorScorer


def evaluate(name: str, report: list[GedSentence], scores: list[np.ndarray], threshold: float,
             seconds: float, note: str = "") -> dict[str, Any]:
    labels, values = flatten(report, scores)
    row = token_metrics(labels, values, threshold)
    row.update(system=name, seconds=round(seconds, 3), sentences_per_s=round(len(report) / max(seconds, 1e-9), 1),
               note=note)
    return row


def timed(fn, *args):
    started = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - started


def detector_system(name: str, model_dir: Path, tune: list, report: list, note: str) -> dict[str, Any]:
    detector = Detector.load(model_dir)
    threshold = tune_threshold(*flatten(tune, score_tokens(detector, tune)))
    scores, seconds = timed(score_tokens, detector, report)
    return evaluate(name, report, scores, threshold, seconds, note)


def surprisal_scores(scorer: GeneratorScorer, sentences: list[GedSentence]) -> list[np.ndarray]:
    results = scorer.score([s.text for s in sentences])
    return [to_token_scores(s.tokens, ((o[0], 1.0 - float(np.exp(lp))) for o, lp in zip(r.offsets, r.log_probs,
                                                                                          strict=True)))
            for s, r in zip(sentences, results, strict=True)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/quickstart", help="run dir (discriminator/ and generator/)")
    parser.add_argument("--jfleg", default="../shared/data/jfleg/dev")
    parser.add_argument("--combine", choices=["first", "any", "majority"], default="majority")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--synthetic", type=int, default=4000, help="synthetic training sentences")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--work-dir", default="runs/bench-ged", help="where fine-tuned models go")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parents[1] / "results" / "ged"))
    parser.add_argument("--skip-peers", action="store_true")
    args = parser.parse_args()

    from electra_detect.training.finetune.ged_finetune import FinetuneConfig, finetune, synthetic_examples

    jfleg = Path(args.jfleg)
    refs = sorted(jfleg.glob("dev.ref[0-9]"))
    sentences = read_parallel(jfleg / "dev.src", refs, args.combine)
    tune, report = split_sentences(sentences, 0.5, args.seed)
    print(f"JFLEG dev: {len(sentences)} sentences; tune {len(tune)}, report {len(report)}", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    work = Path(args.work_dir)

    rows.append(detector_system("ELECTRA zero-shot", Path(args.model), tune, report,
                                "threshold tuned on the tuning half"))
    scorer = GeneratorScorer.load(args.model)
    tune_surprisal = surprisal_scores(scorer, tune)
    threshold = tune_threshold(*flatten(tune, tune_surprisal))
    scores, seconds = timed(surprisal_scores, scorer, report)
    rows.append(evaluate("generator surprisal", report, scores, threshold, seconds,
                         "1 - p(observed subword given the rest), one masked copy per subword"))

    config = FinetuneConfig(epochs=args.epochs, seed=args.seed)
    synthetic = synthetic_examples([], args.synthetic, args.seed)  # embedded SOTU corpus, held out from nothing
    finetune(args.model, work / "synthetic", synthetic, None, config, show_progress=True)
    rows.append(detector_system("ELECTRA fine-tuned (synthetic)", work / "synthetic", tune, report,
                                f"{len(synthetic)} synthetic sentences; threshold tuned on the tuning half"))
    train_part, dev_part = split_sentences(tune, 0.8, args.seed)
    finetune(args.model, work / "synthetic+jfleg", synthetic + train_part, None, config, show_progress=True)
    rows.append(detector_system("ELECTRA fine-tuned (synthetic + JFLEG tune)", work / "synthetic+jfleg", dev_part,
                                report, f"+{len(train_part)} JFLEG sentences; threshold on the other "
                                        f"{len(dev_part)}"))

    if not args.skip_peers:
        from benchmarks.common import peers

        loaded, status = peers.load_peers(["harper-py", "quire-grammar"])
        for name in ("harper-py", "quire-grammar"):
            if name not in loaded:
                rows.append({"system": name, "note": f"not run: {status.get(name)}"})
                continue
            peer = loaded[name]
            flagged, seconds = timed(peer.flag, [s.text for s in report])
            scores = [flags_to_token_labels(s.tokens, spans) for s, spans in zip(report, flagged, strict=True)]
            row = evaluate(name, report, scores, 0.5, seconds, "flagged spans -> tokens")
            row["average_precision"] = float("nan")  # yes/no flags have no ranking to average over
            rows.append(row)

    summary = {"benchmark": "ged", "data": "JFLEG dev", "combine": args.combine, "report_sentences": len(report),
               "report_error_rate": float(flatten(report, [np.zeros(len(s.tokens)) for s in report])[0].mean()),
               "model": args.model, "rows": rows, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
               "command": command_line()}
    out = Path(args.out_dir)
    atomic_write_json(out / "result.json", summary)
    lines = ["# GED on JFLEG dev (report half)", "",
             f"{len(report)} sentences, token error rate {summary['report_error_rate']:.3f} "
             f"(labels: ERRANT, {args.combine} of {len(refs)} references). Command: `{summary['command']}`", "",
             "| system | F0.5 | precision | recall | AP | sentences/s | note |", "|---|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        if "f05" not in row:
            lines.append(f"| {row['system']} | – | – | – | – | – | {row['note']} |")
            continue
        ap = row["average_precision"]
        lines.append(f"| {row['system']} | {row['f05']:.3f} | {row['precision']:.3f} | {row['recall']:.3f} | "
                     f"{'–' if ap != ap else f'{ap:.3f}'} | {row['sentences_per_s']:.1f} | {row['note']} |")
    atomic_write_text(out / "table.md", "\n".join(lines) + "\n")
    print(json.dumps({"benchmark": "ged", **{r["system"]: round(r.get("f05", float("nan")), 4) for r in rows}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
