"""``electra-detect rerank``: rescore ASR n-best lists with the discriminator's sentence score.

Top-level imports stay light (argparse only): the CLI imports every verb module at start-up.
"""

from __future__ import annotations

import argparse

from electra_detect.cli import verb
from electra_detect.cli.engine import add_engine_args, add_model_arg
from electra_detect.cli.options import add_nbest_format_arg


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = verb(
        sub, "rerank", run_rerank,
        help="rerank ASR n-best lists: total = asr + lm_weight * ELECTRA score + length_weight * words",
        description="Rescore every hypothesis of an n-best list with the Detector's sentence score, fuse it with the "
                    "recogniser's score, and write one JSONL row per utterance (every hypothesis's component scores "
                    "and the chosen one) to --out, else to stdout. Ends with one JSON summary line (on stderr when the "
                    "rows go to stdout): WER before (1-best), after and oracle "
                    "when references exist, and seconds. Reads standard input when NBEST is '-' or not given. "
                    "Formats: mlm-scoring JSON, our JSONL "
                    '({"id", "hyps": [{"text", "score"}], "ref"}) and Kaldi n-best text (UTT-N words).')
    p.add_argument("nbest", nargs="?", default="-",
                   help="n-best file to rerank, or an ESPnet decode folder (1best_recog/, 2best_recog/, …); "
                        "'-' or none: standard input")
    add_model_arg(p, "run dir (or discriminator dir; --scorer pll needs a run dir), or a reranker dir made by "
                     "`rerank train` (its learned weights are used unless --tune-on or --lm-weight is given)")
    p.add_argument("--out", help="output JSONL (written atomically: no partial file on error); default: stdout, "
                                 "a row as each chunk is scored")
    add_nbest_format_arg(p)
    p.add_argument("--scores", help="Kaldi format: file of 'UTT-N SCORE' lines (log-likelihood, higher = better)")
    p.add_argument("--refs", help="Kaldi and ESPnet formats: reference 'text' file (UTT words) for WER")
    weights = p.add_mutually_exclusive_group()
    weights.add_argument("--tune-on", metavar="DEV", help="tune lm/length weights on this n-best file by WER")
    weights.add_argument("--lm-weight", type=float, help="lambda: weight of the sentence score (default 1.0)")
    p.add_argument("--length-weight", type=float, help="beta: weight per word (default 0; tuned with --tune-on)")
    add_nbest_format_arg(p, "--dev-format", "dev_format")
    p.add_argument("--dev-scores", help="Kaldi-format dev: scores file")
    p.add_argument("--dev-refs", help="Kaldi or ESPnet dev: reference text file (needed to tune)")
    p.add_argument("--score", choices=["sum", "mean"], default="sum",
                   help="sentence score: sum (default) or mean of log(1 - p) over tokens")
    p.add_argument("--scorer", choices=["electra", "pll"], default="electra",
                   help="pll: pseudo-log-likelihood of the run's own generator (baseline, one pass per token)")
    p.add_argument("--raw", action="store_true", help="ignore the model's calibration.json")
    p.add_argument("--confidence", action="store_true",
                   help="add each word of the chosen hypothesis with its probability of being wrong (row 'confidence')")
    add_engine_args(p, workers=False, device=True)
    p.add_argument("--batch-size", type=int, default=64, help="texts per model pass")
    p.add_argument("--chunk", type=int, default=256, help="utterances read and scored at a time (streaming)")
    p.add_argument("--no-progress", action="store_true")


def run_rerank(args: argparse.Namespace) -> int:
    import itertools
    import json
    import math
    import sys
    import time
    from pathlib import Path

    from electra_detect.errors import RerankError
    from electra_detect.tasks.rerank.nbest import read_nbest
    from electra_detect.tasks.rerank.run import chunked, detector_confidence, rerank_chunks

    for name in ("lm_weight", "length_weight"):
        value = getattr(args, name)
        if value is not None and not math.isfinite(value):
            raise RerankError(f"--{name.replace('_', '-')} must be a finite number")
    if args.batch_size < 1 or args.chunk < 1:
        raise RerankError("--batch-size and --chunk must be positive")
    if args.tune_on and args.length_weight is not None:
        raise RerankError("--length-weight is tuned by --tune-on; give one or the other")
    out = Path(args.out) if args.out else None
    if out is not None and out.is_dir():
        raise RerankError(f"--out {out} is a directory")
    if args.nbest == "-" and sys.stdin.isatty():  # nothing piped in: say so rather than wait for typing
        raise RerankError("no n-best list: give an n-best file, or pipe one on standard input")
    # The readers stream: a malformed line fails when it is reached, and the rows' atomic write leaves no partial OUT.
    chunks = chunked(read_nbest(args.nbest, args.fmt, args.scores, args.refs), args.chunk)
    dev = chunked(read_nbest(args.tune_on, args.dev_format, args.dev_scores, args.dev_refs), args.chunk) \
        if args.tune_on else None
    # The first chunk is read before the model loads and before any progress bar: a malformed or empty file is
    # one error line, with no bar printed ahead of it.
    first = next(chunks, None)
    if first is None:  # an empty file or input: empty output (an empty --out), and a pipeline goes on
        if out is not None:
            from electra_detect.fileio import atomic_write_text

            atomic_write_text(out, "")
        return 0
    if args.confidence and args.scorer != "electra":
        raise RerankError("--confidence reads the discriminator's word scores: use --scorer electra")
    started = time.perf_counter()
    scorer, lm_name, detector = _scorer(args)
    load_seconds = time.perf_counter() - started
    if lm_name == "reranker_score" and not args.tune_on and args.lm_weight is None:
        args.lm_weight, args.length_weight = 1.0, args.length_weight or 0.0  # the score holds the learned weights
    confidence = detector_confidence(detector, args.batch_size, not args.raw) if args.confidence else None
    summary = rerank_chunks(itertools.chain([first], chunks), out, scorer, lm_name, dev, args.lm_weight,
                            args.length_weight, confidence, source=args.nbest, progress=not args.no_progress)
    tuned = summary.pop("tuned", None)
    scorer_name = "reranker" if lm_name == "reranker_score" else args.scorer
    summary.update(scorer=scorer_name, score=args.score, model_load_seconds=round(load_seconds, 3),
                   out=str(out) if out else "-")
    if tuned is not None:
        summary["tuned_on"] = {"file": args.tune_on, **tuned}
    print(json.dumps(summary), file=sys.stdout if out else sys.stderr)  # stdout holds only the rows then
    return 0


def _scorer(args: argparse.Namespace):
    """(scorer, its name in the rows, the Detector or None) as --scorer says; with the electra scorer the model's
    own choice (``HypothesisScore``: a `rerank train` model's learned score, else the sentence score)."""
    from electra_detect.tasks.rerank.fusion import HypothesisScore, pll_scorer

    if args.scorer == "pll":
        from electra_detect.tasks.pll import GeneratorScorer

        return pll_scorer(GeneratorScorer.load(args.model), args.batch_size), "pll_score", None
    from electra_detect.cli.engine import load_detector

    detector = load_detector(args, "score", threads=None, calibrated=not args.raw)
    chosen = HypothesisScore.for_model(detector.model_dir, args.score)
    return chosen.scorer(detector, args.batch_size), chosen.name, detector
