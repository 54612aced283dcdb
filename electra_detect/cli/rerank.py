"""``electra-detect rerank``: rescore ASR n-best lists with the discriminator's sentence score.

Top-level imports stay light (argparse only): the CLI imports every verb module at start-up.
"""

from __future__ import annotations

import argparse

from electra_detect.cli import DEFAULT_MODEL, verb
from electra_detect.cli.engine import add_engine_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    from electra_detect.errors import DetectorError, RerankError
    from electra_detect.tasks.rerank import FORMATS

    p = verb(
        sub, "rerank", run_rerank, errors=(RerankError, DetectorError),
        help="rerank ASR n-best lists: total = asr + lm_weight * ELECTRA score + length_weight * words",
        description="Rescore every hypothesis of an n-best list with the Detector's sentence score, fuse it with the "
                    "recogniser's score, and write one JSONL row per utterance (every hypothesis's component scores "
                    "and the chosen one). Ends with one JSON summary line: WER before (1-best), after and oracle "
                    "when references exist, and seconds. Formats: mlm-scoring JSON, our JSONL "
                    '({"id", "hyps": [{"text", "score"}], "ref"}) and Kaldi n-best text (UTT-N words).')
    p.add_argument("nbest", help="n-best file to rerank, or an ESPnet decode folder (1best_recog/, 2best_recog/, …)")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help="run dir (or discriminator dir; --scorer pll needs a run dir)")
    p.add_argument("--out", required=True, help="output JSONL (written atomically: no partial file on error)")
    p.add_argument("--format", choices=FORMATS, default="auto", dest="fmt")
    p.add_argument("--scores", help="Kaldi format: file of 'UTT-N SCORE' lines (log-likelihood, higher = better)")
    p.add_argument("--refs", help="Kaldi and ESPnet formats: reference 'text' file (UTT words) for WER")
    weights = p.add_mutually_exclusive_group()
    weights.add_argument("--tune-on", metavar="DEV", help="tune lm/length weights on this n-best file by WER")
    weights.add_argument("--lm-weight", type=float, help="lambda: weight of the sentence score (default 1.0)")
    p.add_argument("--length-weight", type=float, help="beta: weight per word (default 0; tuned with --tune-on)")
    p.add_argument("--dev-format", choices=FORMATS, default="auto")
    p.add_argument("--dev-scores", help="Kaldi-format dev: scores file")
    p.add_argument("--dev-refs", help="Kaldi or ESPnet dev: reference text file (needed to tune)")
    p.add_argument("--score", choices=["sum", "mean"], default="sum",
                   help="sentence score: sum (default) or mean of log(1 - p) over tokens")
    p.add_argument("--scorer", choices=["electra", "pll"], default="electra",
                   help="pll: pseudo-log-likelihood of the run's own generator (baseline, one pass per token)")
    p.add_argument("--raw", action="store_true", help="ignore the model's calibration.json")
    p.add_argument("--confidence", action="store_true",
                   help="add each word of the chosen hypothesis with its probability of being wrong (row 'confidence')")
    p.add_argument("--device", help="cpu or cuda[:N] (default: cuda if available)")
    add_engine_args(p, workers=False)
    p.add_argument("--batch-size", type=int, default=64, help="texts per model pass")
    p.add_argument("--chunk", type=int, default=256, help="utterances read and scored at a time (streaming)")
    p.add_argument("--no-progress", action="store_true")


def run_rerank(args: argparse.Namespace) -> int:
    import itertools
    import json
    import math
    import time
    from pathlib import Path

    from tqdm import tqdm

    from electra_detect.fileio import atomic_open
    from electra_detect.tasks import rerank

    for name in ("lm_weight", "length_weight"):
        value = getattr(args, name)
        if value is not None and not math.isfinite(value):
            raise rerank.RerankError(f"--{name.replace('_', '-')} must be a finite number")
    if args.batch_size < 1 or args.chunk < 1:
        raise rerank.RerankError("--batch-size and --chunk must be positive")
    if args.tune_on and args.length_weight is not None:
        raise rerank.RerankError("--length-weight is tuned by --tune-on; give one or the other")
    out = Path(args.out)
    if out.is_dir():
        raise rerank.RerankError(f"--out {out} is a directory")
    # The readers stream: a malformed line fails when it is reached, and atomic_open leaves no partial OUT.
    utterances = rerank.read_nbest(args.nbest, args.fmt, args.scores, args.refs)
    dev = rerank.read_nbest(args.tune_on, args.dev_format, args.dev_scores, args.dev_refs) if args.tune_on else None
    chunks = _chunks(utterances, args.chunk)
    # The first chunk is read before the model loads and before any progress bar: a malformed or empty file is
    # one error line, with no bar printed ahead of it.
    first = next(chunks, None)
    if first is None:
        raise rerank.RerankError(f"{args.nbest} holds no utterances")

    started = time.perf_counter()
    if args.confidence and args.scorer != "electra":
        raise rerank.RerankError("--confidence reads the discriminator's word scores: use --scorer electra")
    scorer, lm_name, detector = _scorer(args)
    load_seconds = time.perf_counter() - started
    scoring_seconds = 0.0
    tuned: dict | None = None
    lm_weight = 1.0 if args.lm_weight is None else args.lm_weight
    length_weight = args.length_weight or 0.0
    if dev is not None:
        dev_items = [item for chunk in _chunks(dev, args.chunk) for item in rerank.score_utterances(chunk, scorer)]
        tuned = rerank.tune_weights(dev_items)
        lm_weight, length_weight = tuned["lm_weight"], tuned["length_weight"]

    tally = rerank.WerTally()
    hypotheses = 0
    # Rows stream into a temp file beside OUT, which replaces OUT only when every utterance was scored.
    with atomic_open(out) as handle, tqdm(desc="rerank", unit="utt", disable=args.no_progress) as bar:
        for chunk in itertools.chain([first], chunks):
            t0 = time.perf_counter()
            items = rerank.score_utterances(chunk, scorer)
            scoring_seconds += time.perf_counter() - t0
            chosen = [rerank.choose(item, lm_weight, length_weight) for item in items]
            confidence = _confidence(detector, [item.utt.hyps[c].text for item, c in zip(items, chosen, strict=True)],
                                     args) if args.confidence else None
            for index, item in enumerate(items):
                tally.add(item, chosen[index])
                hypotheses += len(item.utt.hyps)
                row = rerank.utterance_row(item, lm_weight, length_weight, lm_name)
                if confidence is not None:
                    row["confidence"] = confidence[index]
                handle.write(json.dumps(row) + "\n")
            bar.update(len(items))
        if tally.utterances == 0:
            raise rerank.RerankError(f"{args.nbest} holds no utterances")
    seconds = time.perf_counter() - started - load_seconds
    summary = {"utterances": tally.utterances, "hypotheses": hypotheses, "scorer": args.scorer, "score": args.score,
               "lm_weight": lm_weight, "length_weight": length_weight, **tally.summary(),
               "seconds": round(seconds, 3), "scoring_seconds": round(scoring_seconds, 3),
               "seconds_per_utterance": round(scoring_seconds / tally.utterances, 5),
               "model_load_seconds": round(load_seconds, 3), "out": str(out)}
    if tuned is not None:
        summary["tuned_on"] = {"file": args.tune_on, **tuned}
    print(json.dumps(summary))
    return 0


def _scorer(args: argparse.Namespace):
    from electra_detect.tasks import rerank

    if args.scorer == "pll":
        from electra_detect.tasks.pll import GeneratorScorer

        return rerank.pll_scorer(GeneratorScorer.load(args.model), args.batch_size), "pll_score", None
    from electra_detect.cli.engine import load_detector

    detector = load_detector(args, "score", threads=None, device=args.device, calibrated=not args.raw)
    return rerank.detector_scorer(detector, args.score, args.batch_size), "electra_score", detector


def _confidence(detector, texts: list[str], args: argparse.Namespace) -> list[list[dict]]:
    """Word confidence of each chosen hypothesis: one more Detector pass, over the chosen texts only."""
    from electra_detect.tasks import rerank

    results = detector.score(texts, batch_size=args.batch_size, calibrated=not args.raw)
    return [rerank.word_confidence(result) for result in results]


def _chunks(items, size: int):
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
