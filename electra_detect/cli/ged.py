"""``electra-detect ged``: flag grammatical errors (JSON lines); ``ged eval``: score labelled data.

(``ged train`` is the training layer's verb: ``electra_detect.training.cli``.)
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from electra_detect.cli import DEFAULT_MODEL, verb
from electra_detect.cli.engine import add_engine_args, load_detector


def add_parser(sub: argparse._SubParsersAction) -> None:
    from electra_detect.errors import DetectorError, GedDataError

    p = verb(sub, "ged", run_ged, errors=(DetectorError, GedDataError),
             help="flag grammatical errors in text (JSON lines out); `ged eval` scores a data set",
             description="Zero-shot grammatical error detection: words whose replaced probability "
                         "is >= --threshold are flagged. `electra-detect ged eval --help` for evaluation.")
    p.add_argument("text", nargs="*", help="text(s) to check")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"run or model dir (its fine-tuned ged/ when it has one) or a discriminator dir "
                        f"(default {DEFAULT_MODEL})")
    p.add_argument("--file", help="check each non-empty line of this file ('-' = stdin)")
    p.add_argument("--threshold", type=float, help="flag words with score >= this (default: the model's "
                                                  "tuned ged.json threshold, else 0.5)")
    add_engine_args(p)

    e = verb(sub, "ged-eval", run_eval, errors=(DetectorError, GedDataError),
             help="evaluate GED on labelled data (also spelled `ged eval`)",
             description="Token-level precision, recall, F0.5 and average precision on M2 or token-TSV "
                         "data. The threshold is given, tuned on --tune-on, or tuned on a fixed-seed half "
                         "of --data with --split (then reported on the other half).")
    e.add_argument("--model", default=DEFAULT_MODEL,
                   help="run or model dir (its fine-tuned ged/ when it has one) or a discriminator dir")
    e.add_argument("--zero-shot", action="store_true",
                   help="evaluate the pre-trained discriminator even when the model dir holds a fine-tuned ged/")
    e.add_argument("--data", required=True, help="labelled data file")
    e.add_argument("--format", choices=["m2", "tsv", "parallel", "bea"], required=True, dest="fmt",
                   help="parallel: --data is the source file, --refs its corrections (ERRANT aligns them)")
    e.add_argument("--refs", nargs="+", default=[], help="correction file(s) for --format parallel")
    e.add_argument("--combine", choices=["first", "any", "majority"], default="first",
                   help="how several --refs make one label per token")
    e.add_argument("--threshold", type=float, help="fixed threshold (default: tuned, else the model's ged.json, "
                                                  "else 0.5)")
    e.add_argument("--tune-on", help="tune the threshold for max F0.5 on this file (m2/tsv/bea; same format)")
    e.add_argument("--split", action="store_true", help="tune on half of --data, report on the other half")
    e.add_argument("--seed", type=int, default=13, help="seed of the --split")
    e.add_argument("--annotator", type=int, default=0, help="M2 annotator id whose edits are the labels")
    e.add_argument("--per-pos-thresholds", action="store_true",
                   help="also tune one threshold per universal POS tag (spaCy) on the tuning data; used when it "
                        "beats the single threshold in 2-fold cross-validation on the tuning data")


def run_ged(args: argparse.Namespace) -> int:
    return flag(args, args.text, args.file, args.threshold)


def flag(args: argparse.Namespace, texts: list[str], file: str | None = None, threshold: float | None = None) -> int:
    """One JSON line per text, in input order: the words flagged at ``threshold`` (default: the model's tuned one)."""
    import itertools
    import sys

    from electra_detect.cli.texts import STREAM_BIG, check_unit_interval, open_texts, text_batches

    check_unit_interval(threshold, "--threshold")
    source = argparse.Namespace(text=texts, file=file, verb=args.verb)
    batches = text_batches(source, open_texts(source), per_batch=STREAM_BIG)
    first = next(batches)  # "no text" and an unreadable first line are reported before the model loads
    detector = load_detector(args, task="ged")
    threshold = detector.threshold() if threshold is None else threshold
    write = sys.stdout.write
    for scored in detector.stream(itertools.chain([first], batches), workers=args.workers or None):
        write("".join(json.dumps({"text": s.text, "threshold": threshold, "flagged": s.flagged(threshold, 4)}) + "\n"
                      for s in scored))
        sys.stdout.flush()  # written as it goes: a long file shows results at once
    return 0


def run_eval(args: argparse.Namespace) -> int:
    import time

    from electra_detect.cli.texts import check_unit_interval, read_labelled
    from electra_detect.detector import Detector
    from electra_detect.tasks import ged

    check_unit_interval(args.threshold, "--threshold")
    sentences = read_labelled(args, args.data)
    if not sentences:
        raise ged.GedDataError(f"{args.data} holds no sentences")
    task = "score" if args.zero_shot else "ged"
    detector = Detector.load(args.model, task=task)
    tuning: list[ged.GedSentence] = []
    if args.split:
        tuning, sentences = ged.split_sentences(sentences, 0.5, args.seed)
    elif args.tune_on:
        if args.fmt == "parallel":  # --refs belong to --data; a second source would need its own
            raise ged.GedDataError("--tune-on is not available with --format parallel; use --split")
        tuning = read_labelled(args, args.tune_on)
    if args.per_pos_thresholds and (not tuning or args.threshold is not None):
        raise ged.GedDataError("--per-pos-thresholds tunes its thresholds: give --split or --tune-on, "
                               "and no --threshold")
    threshold = args.threshold
    needs_tuning = tuning and (threshold is None or args.per_pos_thresholds)
    tune_scores = ged.score_tokens(detector, tuning) if needs_tuning else []
    if threshold is None and tuning:
        threshold = ged.tune_threshold(*ged.flatten(tuning, tune_scores))
    threshold = detector.threshold() if threshold is None else threshold
    started = time.perf_counter()
    typed = ged.score_typed_tokens(detector, sentences) if detector.channels else None  # the same pass, with types
    scores = [t.scores for t in typed] if typed else ged.score_tokens(detector, sentences)
    seconds = time.perf_counter() - started
    report = ged.token_metrics(*ged.flatten(sentences, scores), threshold)
    report.update(sentences=len(sentences), seconds=round(seconds, 3),
                  sentences_per_s=round(len(sentences) / max(seconds, 1e-9), 2),
                  threshold_source="given" if args.threshold is not None else ("tuned" if tuning else "model"),
                  per_type=ged.per_type_recall(sentences, scores, threshold), calibration=detector.calibration,
                  model_dir=str(detector.model_dir))
    if typed:  # operation / main-type accuracy on the detected error tokens, per main type
        report["types"] = ged.type_metrics(sentences, typed, threshold)
    if args.per_pos_thresholds:
        report = _with_pos_thresholds(report, detector, tuning, tune_scores, sentences, scores, args.seed)
    print(json.dumps(report))
    return 0


def _with_pos_thresholds(report: dict[str, Any], detector: Any, tuning: list, tune_scores: list, sentences: list,
                         scores: list, seed: int) -> dict[str, Any]:
    """Choose single vs per-POS thresholds on the tuning data; report both on the report data.

    The headline metrics are those of the adopted choice (``threshold_source`` says which)."""
    from electra_detect.tasks import ged

    nlp = ged.load_tagger()
    choice = ged.select_pos_thresholds(tuning, tune_scores, ged.tag_pos(tuning, nlp), seed=seed)
    labels, values = ged.flatten(sentences, scores)
    pos = [tag for tags in ged.tag_pos(sentences, nlp) for tag in tags]
    per_pos = ged.pos_threshold_metrics(labels, values, pos, choice["thresholds"], choice["global_threshold"])
    choice.update(report_single={k: report[k] for k in ("f05", "precision", "recall", "threshold")},
                  report_per_pos={k: per_pos[k] for k in ("f05", "precision", "recall")})
    if choice["adopted"]:
        report.update({k: per_pos[k] for k in ("precision", "recall", "f05", "flagged")},
                      threshold_source="tuned per POS")
        flags = values >= ged.thresholds_for(pos, choice["thresholds"], choice["global_threshold"])
        start = 0
        per_sentence = []
        for sentence in sentences:  # per-type recall under the per-POS flags: flags as 0/1 scores
            per_sentence.append(flags[start:start + len(sentence.tokens)].astype(float))
            start += len(sentence.tokens)
        report["per_type"] = ged.per_type_recall(sentences, per_sentence, 0.5)
    report["per_pos"] = choice
    return report
