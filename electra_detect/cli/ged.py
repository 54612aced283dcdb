"""``electra-detect ged``: flag grammatical errors (JSON lines); ``ged eval``: score labelled data.

(``ged train`` is the training layer's verb: ``electra_detect.training.cli``.)
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Iterator

from electra_detect.cli import verb
from electra_detect.cli.engine import add_engine_args, add_model_arg, load_detector
from electra_detect.cli.options import add_ged_option_args, add_labelled_data_args, ged_options, personal_dictionary


def add_parser(sub: argparse._SubParsersAction) -> None:
    from electra_detect.markup import MARKUPS  # light: the parsers load when a document is read

    p = verb(sub, "ged", run_ged,
             help="flag grammatical errors in text (JSON lines out); `ged eval` scores a data set",
             description="Grammatical error detection: words whose replaced probability is >= --threshold are "
                         "flagged, each with its error type, rule, category and message (docs/ged_rules.md). "
                         "`electra-detect ged eval --help` for evaluation.")
    p.add_argument("text", nargs="*", help="text(s) to check")
    add_model_arg(p)
    p.add_argument("--file", help="check each non-empty line of this file ('-' = stdin, also read when no text or "
                                   "--file is given); with --markup other than text, the file as one document")
    p.add_argument("--markup", choices=(*MARKUPS, "auto"), default="text",
                   help="text (default): each line is a text; markdown, latex: --file (or standard input, or each text "
                        "argument) is one document whose prose is checked block by block (not its code, URLs, math or "
                        "commands), one JSON line a block with offsets into the document (docs/markup.md); auto: "
                        "by --file's extension (.md, .markdown, .mdx: markdown; .tex, .latex: latex; else text)")
    p.add_argument("--threshold", type=float, help="flag words with score >= this (default: the model's "
                                                  "tuned ged.json threshold at --level, else 0.5)")
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
    add_ged_option_args(p)
    add_engine_args(p, device=True, processes=True)

    e = verb(sub, "ged-eval", run_eval,
             help="evaluate GED on labelled data (also spelled `ged eval`)",
             description="Token-level precision, recall, F0.5 and average precision on M2 or token-TSV "
                         "data. The threshold is given, tuned on --tune-on, or tuned on a fixed-seed half "
                         "of --data with --split (then reported on the other half).")
    add_model_arg(e, "run or model dir (its fine-tuned ged/ when it has one) or a discriminator dir")
    e.add_argument("--zero-shot", action="store_true",
                   help="evaluate the pre-trained discriminator even when the model dir holds a fine-tuned ged/")
    e.add_argument("--data", required=True, help="labelled data file")
    add_labelled_data_args(e, format_required=True)
    e.add_argument("--threshold", type=float, help="fixed threshold (default: tuned, else the model's ged.json, "
                                                  "else 0.5)")
    e.add_argument("--tune-on", help="tune the threshold for max F0.5 on this file (m2/tsv/bea; same format)")
    e.add_argument("--split", action="store_true", help="tune on half of --data, report on the other half")
    e.add_argument("--seed", type=int, default=13, help="seed of the --split")
    e.add_argument("--per-pos-thresholds", action="store_true",
                   help="also tune one threshold per universal POS tag (spaCy) on the tuning data; used when it "
                        "beats the single threshold in 2-fold cross-validation on the tuning data")
    add_engine_args(e, workers=False, device=True)  # the engine `ged` runs, so that eval measures what users run


def run_ged(args: argparse.Namespace) -> int:
    """One JSON line per text, in input order: the words flagged at --threshold (default: the model's tuned one at
    --level), each with its type, rule, category and message (``FlaggedWord.to_dict``); with --suggest each with
    its ``suggestions`` ({"value", "start", "end"}: value replaces text[start:end]). With --markup other than
    text, one JSON line a prose block (:func:`document_batches`). Either way the batches take one path through the
    model (:func:`check_stream`)."""
    from electra_detect.cli.texts import input_batches
    from electra_detect.errors import CliError

    # bad options: before any input
    options = ged_options(args, suggest=args.suggest, with_rules=args.with_rules, ranked=args.ranked)
    dictionary = personal_dictionary(args.dictionary)
    if args.processes < 1:
        raise CliError("--processes must be >= 1")
    if args.processes > 1 and args.workers:
        raise CliError("--workers sets one process's scoring threads; with --processes each process scores one "
                       "batch at a time")
    markup = chosen_markup(args.markup, args.file)
    if markup == "text":
        batches, write = input_batches(args.text, args.file, args.verb), write_lines
    else:
        batches, write = document_batches(read_documents(args.text, args.file), markup)
    if batches is not None:  # no input, or no prose: nothing to check, and no model loaded
        # a file (or a document) is long enough to use the seconds the engine's first batches take
        check_stream(args, batches, write, dictionary, options, preload=markup != "text" or bool(args.file))
    return 0


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


def write_lines(threshold: float, served: dict, texts: list[str], flagged: list[list[dict]]) -> None:
    """Plain text's output: each text, the threshold, its flagged words and what served them, one JSON line a
    text, written as it goes (a long file shows results at once)."""
    import sys

    sys.stdout.write("".join(json.dumps({"text": text, "threshold": threshold, "flagged": words, **served}) + "\n"
                             for text, words in zip(texts, flagged, strict=True)))
    sys.stdout.flush()


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


def chosen_markup(markup: str, file: str | None) -> str:
    """``--markup`` as it applies: ``auto`` is the markup of --file's extension, and plain text for standard input
    and text arguments."""
    from electra_detect.markup import markup_for_path

    if markup != "auto":
        return markup
    return markup_for_path(file) if file and file != "-" else "text"


def read_documents(texts: list[str], file: str | None) -> list[str]:
    """The documents --markup checks: each text argument, then --file (or standard input when neither is given)
    read whole, its line breaks as they are (offsets count the file's own characters, \\r\\n as two)."""
    import sys

    from electra_detect.errors import CliError

    documents = list(texts)
    if not file and texts:
        return documents
    if not file or file == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise CliError("no document to check: give --file, text arguments, or pipe a document on standard input")
        name, data = "standard input", sys.stdin.buffer.read()
    else:
        name = file
        try:
            with open(file, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            raise CliError(f"input file not found: {file}") from None
        except OSError as exc:
            raise CliError(f"cannot read {file}: {exc.strerror}") from None
    try:
        documents.append(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise CliError(f"input file is not UTF-8 text: {name}") from None
    return documents


def document_batches(documents: list[str], markup: str) -> tuple[Iterator[list[str]] | None, Callable[..., None]]:
    """``ged --markup``: the documents' prose blocks in batches of texts, and the writer of their output, one JSON
    line a block in document order: ``block`` (its start and end in the document), ``text`` (the prose the model
    read), the threshold, the flagged words with offsets into the document (flags on code, math or a URL's
    stand-in dropped), what served them, and ``document`` (its index) when there are several. No batches (None)
    when no document holds prose; a document markup cannot read is an error here, before the model loads."""
    import sys
    from collections import deque

    from electra_detect.cli.texts import STREAM_BIG, STREAM_CHARS
    from electra_detect.markup import prose_blocks

    blocks = [(number, block) for number, document in enumerate(documents) for block in prose_blocks(document, markup)]
    several = len(documents) > 1
    waiting: deque[list] = deque()  # the blocks of each batch sent to the engine, in order

    def batches() -> Iterator[list[str]]:
        batch, chars, limit = [], 0, 8  # a small first batch: the first lines show soon
        for item in blocks:
            batch.append(item)
            chars += len(item[1].text)
            if len(batch) >= limit or chars >= STREAM_CHARS:
                waiting.append(batch)
                yield [block.text for _number, block in batch]
                batch, chars, limit = [], 0, STREAM_BIG
        if batch:
            waiting.append(batch)
            yield [block.text for _number, block in batch]

    def write(threshold: float, served: dict, _texts: list[str], flagged: list[list[dict]]) -> None:
        for (number, block), words in zip(waiting.popleft(), flagged, strict=True):
            row = {"block": {"start": block.start, "end": block.end}, "text": block.text, "threshold": threshold,
                   "flagged": [w for w in (in_document(word, block) for word in words) if w is not None], **served}
            if several:
                row["document"] = number
            sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.flush()

    return (batches() if blocks else None), write


def in_document(word: dict, block: object) -> dict | None:
    """A flagged word's JSON object with its offsets (and its suggestions') moved from the block's text into the
    document; None when it lies on a stand-in (code, math, a URL: not the writer's prose)."""
    if not block.is_prose(word["start"], word["end"]):
        return None
    word["start"], word["end"] = block.span(word["start"], word["end"])
    for suggestion in word.get("suggestions") or ():
        suggestion["start"], suggestion["end"] = block.span(suggestion["start"], suggestion["end"])
    return word


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
