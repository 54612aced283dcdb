"""``electra-detect ged``: flag grammatical errors (JSON lines); ``ged eval``: score labelled data.

(``ged train`` is the training layer's verb: ``electra_detect.training.cli``.)
"""

from __future__ import annotations

import argparse
import json

from electra_detect.cli import DEFAULT_MODEL, verb
from electra_detect.cli.engine import add_engine_args, load_detector


def add_parser(sub: argparse._SubParsersAction) -> None:
    from electra_detect.errors import DetectorError, GedDataError, RulesUnavailable

    p = verb(sub, "ged", run_ged, errors=(DetectorError, GedDataError, RulesUnavailable),
             help="flag grammatical errors in text (JSON lines out); `ged eval` scores a data set",
             description="Zero-shot grammatical error detection: words whose replaced probability "
                         "is >= --threshold are flagged. `electra-detect ged eval --help` for evaluation.")
    p.add_argument("text", nargs="*", help="text(s) to check")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"run or model dir (its fine-tuned ged/ when it has one) or a discriminator dir "
                        f"(default {DEFAULT_MODEL})")
    p.add_argument("--file", help="check each non-empty line of this file ('-' = stdin, "
                                   "also read when no text or --file is given)")
    p.add_argument("--threshold", type=float, help="flag words with score >= this (default: the model's "
                                                  "tuned ged.json threshold, else 0.5)")
    p.add_argument("--suggest", action="store_true",
                   help="give each flagged word its suggestions, replacements ranked by the model (each candidate's "
                        "sentence is scored: about 8 sentences a flagged word; docs/suggestions.md)")
    p.add_argument("--with-rules", action="store_true",
                   help="lift the model's score of words harper-py (rule-based) flags, by the weight and threshold "
                        "tuned for the model (ged.json \"rules\"); needs the rules extra")
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
    add_engine_args(e, workers=False)  # the engine `ged` runs, so that eval measures what users run


def run_ged(args: argparse.Namespace) -> int:
    """One JSON line per text, in input order: the words flagged at --threshold (default: the model's tuned one),
    with --suggest each with its ``suggestions`` ({"value", "start", "end"}: value replaces text[start:end])."""
    import sys

    from electra_detect.cli.texts import check_unit_interval, input_batches

    check_unit_interval(args.threshold, "--threshold")
    batches = input_batches(args.text, args.file, args.verb)
    if batches is None:
        return 0
    detector = load_detector(args, task="ged")
    threshold = detector.threshold() if args.threshold is None else args.threshold
    if args.with_rules:
        from electra_detect.rules import harper_flagger, rule_setting, with_rules

        setting, flag = rule_setting(detector.model_dir), harper_flagger()
        threshold = setting.threshold if args.threshold is None else args.threshold
    suggester = None
    if args.suggest:
        from electra_detect.tasks.ged.suggestions import Suggester

        suggester = Suggester()
    write = sys.stdout.write
    for scored in detector.stream(batches, workers=args.workers or None):
        if args.with_rules:
            scored = with_rules(scored, flag, setting.weight)
        flagged = (suggester.flagged(detector.score, scored, threshold, 4) if suggester else
                   [s.flagged(threshold, 4) for s in scored])
        write("".join(json.dumps({"text": s.text, "threshold": threshold, "flagged": words}) + "\n"
                      for s, words in zip(scored, flagged, strict=True)))
        sys.stdout.flush()  # written as it goes: a long file shows results at once
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from electra_detect.cli.texts import check_unit_interval
    from electra_detect.errors import GedDataError
    from electra_detect.tasks.ged.evaluation import evaluate
    from electra_detect.tasks.ged.readers import read_labelled, split_sentences

    check_unit_interval(args.threshold, "--threshold")
    if args.tune_on and args.fmt == "parallel":  # --refs belong to --data; a second source would need its own
        raise GedDataError("--tune-on is not available with --format parallel; use --split")
    labelled = {"fmt": args.fmt, "refs": args.refs, "combine": args.combine, "annotator": args.annotator}
    sentences = read_labelled(args.data, **labelled)
    if not sentences:
        raise GedDataError(f"{args.data} holds no sentences")
    tuning = read_labelled(args.tune_on, **labelled) if args.tune_on and not args.split else []
    if args.split:
        tuning, sentences = split_sentences(sentences, 0.5, args.seed)
    if args.per_pos_thresholds and (not tuning or args.threshold is not None):
        raise GedDataError("--per-pos-thresholds tunes its thresholds: give --split or --tune-on, and no --threshold")
    detector = load_detector(args, task="score" if args.zero_shot else "ged", threads=None)
    report = evaluate(detector, sentences, tuning, args.threshold, per_pos=args.per_pos_thresholds, seed=args.seed)
    print(json.dumps(report))
    return 0
