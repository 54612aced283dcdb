"""``electra-detect <verb>``: one app, one module per verb.

The core's verbs (score, ged, rerank, export) live in this package; each layer registers its own (pretrain, corpus
and ``ged train`` in ``electra_detect.training.cli``; calibrate and pos-bias in ``electra_detect.calibration.cli``;
serve and demo in ``electra_detect.app.cli``) through the ``electra_detect.verbs`` entry-point group, so the core
never names a module above it.

A verb is a function ``add_parser(sub)`` that adds its sub-parser with ``verb(...)`` (a sub-verb such as ``ged
train`` with ``subverb(...)``) and the plain function that runs it. Whatever the verb, a failure the user can fix
(``electra_detect.errors.UserError``, or a file that cannot be found or opened) is one ``error:`` line on stderr
(exit 2); anything else is a bug and keeps its traceback. Verb modules import only argparse at the top:
``electra-detect score`` never loads the trainer.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from electra_detect.errors import UserError

# The shipped default model lives in the checkout (it is not in the wheel); without it, `make quickstart`'s run.
SHIPPED_MODEL = Path(__file__).resolve().parents[2] / "models" / "electra-minilm"
DEFAULT_MODEL = os.environ.get("ELECTRA_DETECT_MODEL") or (
    str(SHIPPED_MODEL) if SHIPPED_MODEL.is_dir() else "runs/quickstart")
VERB_GROUP = "electra_detect.verbs"
CORE_VERBS = ("electra_detect.cli.score", "electra_detect.cli.ged", "electra_detect.cli.rerank",
              "electra_detect.cli.export")
# What every verb reports as one line: the user errors of every layer, a file it cannot find or open.
USER_ERRORS: tuple[type[BaseException], ...] = (UserError, FileNotFoundError, PermissionError)


class VerbParser(argparse.ArgumentParser):
    """A verb's parser that may hold sub-verbs beside its own free arguments: ``ged train`` and ``ged eval`` beside
    ``ged "some text"``, ``rerank train`` beside ``rerank LIST``. argparse's sub-parsers would read every text as a
    sub-verb's name, so the verb's first word chooses: a sub-verb's name, else the verb itself."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.subverbs: dict[str, argparse.ArgumentParser] = {}

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        if args and args[0] in self.subverbs:
            return self.subverbs[args[0]].parse_known_args(args[1:], namespace)
        return super().parse_known_args(args, namespace)


def verb(sub: argparse._SubParsersAction, name: str, run: Callable[[argparse.Namespace], int],
         **kwargs) -> argparse.ArgumentParser:
    """Add verb ``name``: ``run(args)`` does the work."""
    parser = sub.add_parser(name, **kwargs)
    parser.set_defaults(func=run)
    return parser


def subverb(sub: argparse._SubParsersAction, parent: str, name: str, run: Callable[[argparse.Namespace], int],
            **kwargs) -> argparse.ArgumentParser:
    """Add ``parent name`` (``ged train``): one parser, spelled ``electra-detect ged train`` and, as a verb of its
    own, ``electra-detect ged-train``; ``parent`` must have been added already (the core's verbs come first)."""
    parser = verb(sub, f"{parent}-{name}", run, prog=f"electra-detect {parent} {name}", **kwargs)
    sub.choices[parent].subverbs[name] = parser
    return parser


def _layer_verbs() -> list[Callable[[argparse._SubParsersAction], None]]:
    """The layers' ``add_parser`` functions, from the installed entry points; a layer whose module is not
    importable (an optional part not installed) is left out."""
    found = []
    for point in sorted(entry_points(group=VERB_GROUP), key=lambda p: p.name):
        try:
            found.append(point.load())
        except ModuleNotFoundError as exc:
            module = point.value.split(":")[0]
            if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
                continue
            raise
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="electra-detect",
                                     description="ELECTRA replaced-token detection as a disfluency signal.")
    sub = parser.add_subparsers(dest="verb", required=True, parser_class=VerbParser)
    for name in CORE_VERBS:
        importlib.import_module(name).add_parser(sub)
    for add_parser in _layer_verbs():
        add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from electra_detect.cli.texts import fail

    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return args.func(args)
    except USER_ERRORS as exc:
        return fail(str(exc))
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as Python's docs advise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when stdout is flushed
        return 1
    except KeyboardInterrupt:  # Ctrl-C: what was written stays written; no traceback for the user to read
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
