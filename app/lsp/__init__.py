"""The ``lsp`` verb: ``electra-detect lsp``, a language server over stdio for any editor with an LSP client
(docs/writers.md: Neovim, VS Code, Helix). Registered through the ``electra_detect.verbs`` entry points.

Only argparse at the top: pygls, lsprotocol and the model load inside the verb (the server is in ``lsp.server``, its
handlers in ``lsp.handlers``).
"""

from __future__ import annotations

import argparse
import os
import sys

from electra_detect.cli import verb
from electra_detect.cli.engine import add_engine_args, add_model_arg, check_engine_args
from electra_detect.cli.options import add_dictionary_arg
from electra_detect.errors import UserError

DEFAULT_DEBOUNCE_S = 0.3
# A document is checked whole up to this size (UTF-8): a book's chapter is a few hundred KB; past it the markup layer
# and the check cost seconds a keystroke and memory the editor's machine needs.
DEFAULT_MAX_DOCUMENT_KB = 1024


class LspError(UserError, ValueError):
    """A flag the language server cannot start with."""


def add_lsp(sub: argparse._SubParsersAction) -> None:
    p = verb(sub, "lsp", run_lsp,
             help="language server for editors (stdio): diagnostics, quick fixes, dictionary, rules",
             description="Serve the GED check to an editor over the Language Server Protocol on stdin/stdout: "
                         "diagnostics per document (Markdown and LaTeX read as prose with markup around it), each "
                         "suggestion as a quick fix, add-to-dictionary and disable-rule actions, settings from the "
                         "editor (section electra-detect). Configuration for Neovim, VS Code and Helix: "
                         "docs/writers.md.")
    add_model_arg(p, help="run or model dir (default: the shipped model); the editor's electra-detect.model "
                          "setting overrides it")
    add_engine_args(p, workers=False, device=True, threads=True)  # --engine, --variant, --device, --threads: shared
    p.add_argument("--debounce", type=float, default=DEFAULT_DEBOUNCE_S, metavar="SECONDS",
                   help=f"wait this long after the last change before checking (default {DEFAULT_DEBOUNCE_S})")
    p.add_argument("--max-document-kb", type=int, default=DEFAULT_MAX_DOCUMENT_KB, metavar="KB",
                   help=f"check documents up to this size in UTF-8 (default {DEFAULT_MAX_DOCUMENT_KB} KB); a larger "
                        "one gets one diagnostic saying it is not checked")
    add_dictionary_arg(p, help="personal dictionary (default: $ELECTRA_DETECT_DICTIONARY, else "
                               "$XDG_CONFIG_HOME/electra-detect/dictionary.txt; made by the first add-to-dictionary); "
                               "the editor's electra-detect.dictionary setting overrides it")
    p.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (the only transport; editors that "
                                                         "pass it are served the same)")
    p.add_argument("--log-level", default="warning", choices=("error", "warning", "info", "debug"),
                   help="what goes to stderr, which editors keep in their LSP log (default warning)")


def run_lsp(args: argparse.Namespace) -> int:
    import logging

    if args.debounce < 0:
        raise LspError(f"--debounce must be >= 0 seconds, got {args.debounce:g}")
    if args.max_document_kb < 1:
        raise LspError(f"--max-document-kb must be at least 1, got {args.max_document_kb}")
    check_engine_args(args)
    if args.dictionary is not None and os.path.isdir(args.dictionary):
        raise LspError(f"--dictionary {args.dictionary} is a directory")
    try:
        import electra_detect.app.service  # noqa: F401 - the check's one path (its web-free core needs the app extra)
        from electra_detect.app.lsp.handlers import build_server
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("pygls", "lsprotocol", "fastapi", "starlette", "prometheus_client"):
            raise LspError(f"the language server needs {exc.name}: pip install 'electra-detect[app,lsp]'") from None
        raise
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="electra-detect lsp: %(message)s")
    engine = {"engine": args.engine, "variant": args.variant if args.engine != "torch" else None,
              "device": args.device, "threads": args.threads}
    server = build_server(args.model, engine, args.debounce, args.dictionary, args.max_document_kb)
    # The protocol owns the real stdout; anything else that writes to fd 1 (a library's print, onnxruntime's C++
    # log) goes to stderr instead of corrupting the stream of messages.
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    server.start_io(sys.stdin.buffer, protocol_out)
    return 0
