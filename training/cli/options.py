"""Options the training layer's verbs share: argparse types, the stand-in of a parent verb, repeated flags."""

from __future__ import annotations

import argparse


def no_subverb(args: argparse.Namespace) -> int:  # argparse requires a sub-verb (corpus, distill); never reached
    return 2


def positive_int(text: str) -> int:
    """An argparse type: an integer above 0."""
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def add_checkpoint_every_arg(parser: argparse.ArgumentParser) -> None:
    """``--checkpoint-every``: resumable state every N steps (``ged train``, ``rerank train``)."""
    parser.add_argument("--checkpoint-every", type=int, default=0,
                        help="save resumable state every N steps to OUT.partial/; re-running the command resumes")


def add_no_progress_arg(parser: argparse.ArgumentParser, help_text: str | None = None) -> None:
    """``--no-progress``: no progress bars (every training verb)."""
    parser.add_argument("--no-progress", action="store_true", help=help_text)
