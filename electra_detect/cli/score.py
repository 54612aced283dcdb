"""``electra-detect score``: per-token replaced probabilities, highlighted words or JSON."""

from __future__ import annotations

import argparse

from electra_detect.cli import DEFAULT_MODEL, verb
from electra_detect.cli.engine import add_engine_args, add_model_arg, load_detector
from electra_detect.cli.options import add_output_format_arg, add_threshold_arg


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = verb(sub, "score", run, help="per-token replaced probabilities for text",
             description="Score text with a discriminator and highlight suspicious words.")
    p.add_argument("text", nargs="*", help="text(s) to score")
    add_model_arg(p, f"run dir or discriminator dir (default {DEFAULT_MODEL})")
    p.add_argument("--file", help="score each non-empty line of this file ('-' = stdin, "
                                   "also read when no text or --file is given)")
    add_output_format_arg(p, ("text", "json"))
    p.add_argument("--json", action="store_const", const="json", dest="output_format",
                   help="one JSON object per text (--output-format json)")
    add_threshold_arg(p, "highlight")
    add_engine_args(p, device=True)


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from electra_detect.cli.output import color_wanted
    from electra_detect.cli.texts import check_unit_interval, input_batches
    from electra_detect.highlight import render_highlight, render_table

    check_unit_interval(args.threshold, "--threshold")
    batches = input_batches(args.text, args.file, args.verb)
    if batches is None:
        return 0
    detector = load_detector(args, task="score")
    threshold = detector.threshold() if args.threshold is None else args.threshold
    color = color_wanted(sys.stdout)
    for scored in detector.stream(batches, workers=args.workers or None):
        lines = []
        for scores in scored:
            if args.output_format == "json":
                lines.append(json.dumps(scores.to_dict()))
            else:
                lines += [render_highlight(scores, threshold, color=color), render_table(scores)]
        print("\n".join(lines), flush=True)  # written as it goes: a long file shows results at once
    return 0
