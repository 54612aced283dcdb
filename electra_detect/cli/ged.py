"""``electra-detect ged``: flag grammatical errors (``--output-format`` text, json or github); ``ged eval``: score
labelled data.

(``ged train`` is the training layer's verb: ``electra_detect.training.cli``.)
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable

from electra_detect.cli import subverb, verb
from electra_detect.cli.engine import add_engine_args, add_model_arg, load_detector
from electra_detect.cli.options import (
    add_ged_option_args,
    add_labelled_data_args,
    add_output_format_arg,
    add_threshold_arg,
    ged_options,
    personal_dictionary,
    project_settings,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    from electra_detect.markup import MARKUPS  # light: the parsers load when a document is read

    p = verb(sub, "ged", run_ged,
             help="flag grammatical errors in text; `ged eval` scores a data set",
             description="Grammatical error detection: words whose replaced probability is >= --threshold are "
                         "flagged, each with its error type, rule, category and message (docs/ged_rules.md). "
                         "A project's .electra-detect.toml sets the level, rules, categories and dictionary "
                         "(docs/ci.md). `electra-detect ged eval --help` for evaluation.")
    p.add_argument("text", nargs="*", help="text(s) to check")
    add_model_arg(p)
    p.add_argument("--file", nargs="+", metavar="FILE",
                   help="check each non-empty line of these files ('-' = stdin, also read when no text or --file is "
                        "given); with --markup other than text, each file as one document")
    p.add_argument("--markup", choices=(*MARKUPS, "auto"), default="text",
                   help="text (default): each line is a text; markdown, latex: each --file (or standard input, or each "
                        "text argument) is one document whose prose is checked block by block (not its code, URLs, "
                        "math or commands), with lines and offsets of the document (docs/markup.md); "
                        "<!-- electra-detect: off --> ... <!-- electra-detect: on --> (LaTeX: %% electra-detect: off "
                        "... on) leaves a region unchecked; auto: each --file by its extension (.md, .markdown, .mdx: "
                        "markdown; .tex, .latex: latex; else text)")
    add_output_format_arg(p)
    p.add_argument("--exit-code", action="store_true",
                   help="exit 1 when any word is flagged, 0 when none is (without it: 0 either way; bad input: 2)")
    add_threshold_arg(p)
    p.add_argument("--suggest", action="store_true",
                   help="give each flagged word its suggestions: a tag model's from its edit tag (docs/edit_tags.md), "
                        "another model's candidates ranked by the model (each candidate's sentence scored: about 8 "
                        "sentences a flagged word; docs/suggestions.md)")
    p.add_argument("--ranked", action="store_true",
                   help="a tag model's one-word replacements re-ranked by scoring every candidate's sentence, as "
                        "for other models: its first suggestion is right more often, at many times the check's cost "
                        "(docs/edit_tags.md)")
    p.add_argument("--with-rules", action="store_true",
                   help="lift the model's score of words harper-py (rule-based) flags, by the weight and threshold "
                        "tuned for the model (ged.json \"rules\"); needs the rules extra")
    add_ged_option_args(p, project_settings=True)
    add_engine_args(p, device=True, processes=True)

    e = subverb(sub, "ged", "eval", run_eval,
                help="evaluate GED on labelled data (also spelled `ged eval`)",
                description="Token-level precision, recall, F0.5 and average precision on M2 or token-TSV "
                            "data. The threshold is given, tuned on --tune-on, or tuned on a fixed-seed half "
                            "of --data with --split (then reported on the other half).")
    add_model_arg(e, "run or model dir (its fine-tuned ged/ when it has one) or a discriminator dir")
    e.add_argument("--zero-shot", action="store_true",
                   help="evaluate the pre-trained discriminator even when the model dir holds a fine-tuned ged/")
    e.add_argument("--data", required=True, help="labelled data file")
    add_labelled_data_args(e, format_required=True)
    add_threshold_arg(e, "eval")
    e.add_argument("--tune-on", help="tune the threshold for max F0.5 on this file (m2/tsv/bea; same format)")
    e.add_argument("--split", action="store_true", help="tune on half of --data, report on the other half")
    e.add_argument("--seed", type=int, default=13, help="seed of the --split")
    e.add_argument("--per-pos-thresholds", action="store_true",
                   help="also tune one threshold per universal POS tag (spaCy) on the tuning data; used when it "
                        "beats the single threshold in 2-fold cross-validation on the tuning data")
    e.add_argument("--as-shown", action="store_true",
                   help="score what `ged` shows: its checker, filters and quiet rule at --level (and --threshold, "
                        "else the model's), a token counted flagged when a shown word overlaps it")
    e.add_argument("--level", choices=("default", "picky"), default="default", help="with --as-shown: ged's --level")
    add_engine_args(e, workers=False, device=True)  # the engine `ged` runs, so that eval measures what users run


def run_ged(args: argparse.Namespace) -> int:
    """The flagged words of every input, in input order, as ``--output-format`` writes them
    (:mod:`electra_detect.cli.output`): words flagged at --threshold (default: the model's tuned one at --level),
    each with its type, rule, category and message (``FlaggedWord.to_dict``); with --suggest each with its
    ``suggestions`` ({"value", "start", "end"}: value replaces text[start:end]). A line-mode input gives a unit a
    line, a markup document a unit a prose block (:mod:`electra_detect.cli.sources`); all take one path through
    the model (:func:`check_stream`). Exit 1 with --exit-code when a word was flagged."""
    from electra_detect.cli.output import writer_for
    from electra_detect.cli.sources import plan_sources, unit_batches
    from electra_detect.errors import CliError
    from electra_detect.ignores import drop_ignored

    # bad options: before any input
    options = ged_options(args, project_settings(args), suggest=args.suggest,
                          with_rules=args.with_rules, ranked=args.ranked)
    dictionary = personal_dictionary(args.dictionary)
    if args.processes < 1:
        raise CliError("--processes must be >= 1")
    if args.processes > 1 and args.workers:
        raise CliError("--workers sets one process's scoring threads; with --processes each process scores one "
                       "batch at a time")
    sources = plan_sources(args.text, args.file, args.markup)
    batches, waiting = unit_batches(sources, args.verb)
    writer = writer_for(args.output_format)

    def write(threshold: float, served: dict, _texts: list[str], flagged: list[list[dict]]) -> None:
        for unit, words in zip(waiting.popleft(), flagged, strict=True):
            if unit.block is not None:  # offsets into the document, flags on stand-ins and switched-off regions out
                words = drop_ignored([w for w in (unit.block.place(word) for word in words) if w is not None],
                                     unit.source.ignored)
            writer.add(unit, threshold, served, words)
        writer.flush()

    if batches is not None:  # no input, or no prose: nothing to check, and no model loaded
        # a file (or a document) is long enough to use the seconds the engine's first batches take
        preload = bool(args.file) or any(source.markup != "text" for source in sources)
        check_stream(args, batches, write, dictionary, options, preload=preload)
    return 1 if args.exit_code and writer.flagged else 0


def check_stream(args: argparse.Namespace, batches: Iterable[list[str]], write: Callable[..., None],
                 dictionary: object, options: object, preload: bool) -> None:
    """Each batch checked and given to ``write(threshold, served, texts, flagged)`` in input order: by --processes
    worker processes (each loading the model once), else by this process's model with --workers threads."""
    import sys
    from contextlib import closing

    if args.processes > 1:
        from electra_detect.pipeline import process_stream

        announced = False
        with closing(process_stream(start_checking, check_batch, (args, dictionary, options), batches,
                                    args.processes)) as results:
            for engine_line, *checked in results:
                if not announced:  # every process loaded the same model: say which once
                    print(engine_line, file=sys.stderr, flush=True)
                    announced = True
                write(*checked)
        return
    checking = Checking(load_detector(args, task="ged"), dictionary, options)
    if preload:
        checking.checker.preload()
    with closing(checking.detector.stream(batches, workers=args.workers or None)) as results:
        for scored in results:
            write(*checking.checked(scored))


class Checking:
    """What ``ged`` checks texts with: the detector, its checker, the options, and the fields every output line
    carries."""

    def __init__(self, detector: object, dictionary: object, options: object) -> None:
        from electra_detect.tasks.ged.check import GedChecker

        self.detector, self.options = detector, options
        self.checker = GedChecker(detector, dictionary=dictionary)
        self.threshold = self.checker.threshold(options)
        self.served = {"model": detector.name, "variant": detector.variant}  # every answer says what made it

    def flagged(self, scored: list) -> list[list[dict]]:
        """Each scored text's flagged words as JSON objects (offsets into the text)."""
        from electra_detect.tasks.ged.flags import flagged_dicts

        return [flagged_dicts(words, 4) for words in self.checker.check(scored, self.options)]

    def checked(self, scored: list) -> tuple[float, dict, list[str], list[list[dict]]]:
        """What a batch's output is written from: the threshold, what served it, each text and its flagged words."""
        return self.threshold, self.served, [s.text for s in scored], self.flagged(scored)


_PROCESS: dict[str, object] = {}  # a --processes worker's Checking, or the error its start met


def start_checking(args: argparse.Namespace, dictionary: object, options: object) -> None:
    """A --processes worker's start: load the model and the typing stack once, with the options and dictionary
    the parent built (an error is raised by the first batch, so that the user sees it as the one error line)."""
    try:
        checking = Checking(load_detector(args, task="ged", announce=False), dictionary, options)
        checking.checker.preload()
        _PROCESS["checking"] = checking
    except Exception as exc:  # noqa: BLE001 - carried to the parent by check_batch
        _PROCESS["error"] = exc


def check_batch(texts: list[str]) -> tuple[str, float, dict, list[str], list[list[dict]]]:
    """A --processes worker's batch: the engine line, then what :meth:`Checking.checked` gives."""
    if "error" in _PROCESS:
        raise _PROCESS["error"]
    checking = _PROCESS["checking"]
    return checking.detector.describe(), *checking.checked(checking.detector.score(list(texts)))


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
    if args.as_shown and (tuning or args.per_pos_thresholds or args.zero_shot):
        raise GedDataError("--as-shown scores what ged shows at its own threshold: no --tune-on, --split, "
                           "--per-pos-thresholds or --zero-shot")
    if not args.as_shown and args.level != "default":
        raise GedDataError("--level goes with --as-shown (plain eval reads the model's scores at one threshold)")
    detector = load_detector(args, task="score" if args.zero_shot else "ged", threads=None)
    if args.as_shown:
        from electra_detect.tasks.ged.evaluation import evaluate_shown
        from electra_detect.tasks.ged.options import build_ged_options

        options = build_ged_options(threshold=args.threshold, level=args.level, use_dictionary_file=False,
                                    threshold_name="--threshold")
        print(json.dumps(evaluate_shown(detector, sentences, options)))
        return 0
    report = evaluate(detector, sentences, tuning, args.threshold, per_pos=args.per_pos_thresholds, seed=args.seed)
    print(json.dumps(report))
    return 0
