"""The built pre-training corpus in numbers: words, sentences and duplicate rate per source,
build wall time, and what tokenizing it costs.

Reads ``manifest.json`` of a folder written by ``electra-detect corpus build`` and writes
``benchmarks/results/corpus_build/{result.json,table.md}``. With ``--tokenize`` it also trains the WordPiece
tokenizer on the corpus (as ``pretrain`` does, mixing weights applied) and tokenizes it with the fast
tokenizer's batch API (``training.data._tokenize_to_file``), timing both; nothing is left in the
pre-training cache.

    electra-detect corpus build --out runs/corpus          # (time it: the wall time goes in --build-wall)
    python -m benchmarks.speed.corpus_build --corpus runs/corpus --tokenize --build-wall 402
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from electra_detect.fileio import atomic_write_json, atomic_write_text

ROOT = Path(__file__).resolve().parents[2]

OUT = ROOT / "benchmarks" / "results" / "corpus_build"


def per_source_rows(manifest: dict) -> list[dict]:
    """One row per built source, in build order."""
    from electra_detect.training.corpus.sources import SOURCES

    rows = []
    built = manifest["sources"]
    order = [n for n in manifest.get("order") or list(SOURCES) if n in built]
    for name in [*order, *sorted(set(built) - set(order))]:  # build order (the JSON file sorts its keys)
        s = built[name]
        seen = s["sentences"] + s["exact_duplicates"] + s["near_duplicates"]
        rows.append({"source": name, "package": s["package"], "version": s["version"], "licence": s["licence"],
                     "group": s["group"], "weight": s["weight"], "raw_words": s["raw_words"], "words": s["words"],
                     "sentences": s["sentences"], "kept_share": round(s["words"] / s["raw_words"], 3)
                     if s["raw_words"] else 0.0, "exact_duplicates": s["exact_duplicates"],
                     "near_duplicates": s["near_duplicates"], "duplicate_rate": s["duplicate_rate"],
                     "sentences_seen": seen, "seconds": s["seconds"]})
    return rows


def measure_tokenize(corpus: Path, vocab_size: int) -> dict:
    """Train the tokenizer and tokenize the weighted corpus in a scratch cache; seconds and counts."""
    import numpy as np
    from transformers import AutoTokenizer

    from electra_detect.training.pretraining.data import (
        _tokenize_to_file,
        iter_documents,
        resolve_corpus,
        train_tokenizer,
    )

    source = resolve_corpus([str(corpus)])
    scratch = Path(tempfile.mkdtemp(prefix="corpus-bench-"))
    try:
        started = time.perf_counter()
        words = sum(len(doc.split()) for doc in iter_documents(source, "blank"))
        read_s = time.perf_counter() - started
        started = time.perf_counter()
        train_tokenizer(source, scratch / "tok", vocab_size, True, "blank", 128)
        train_s = time.perf_counter() - started
        tokenizer = AutoTokenizer.from_pretrained(str(scratch / "tok"))
        tokenizer.model_max_length = 1 << 30
        started = time.perf_counter()
        tokens = _tokenize_to_file(source, tokenizer, "blank", scratch / "tokens.bin", np.dtype(np.uint16))
        tokenize_s = time.perf_counter() - started
        size = (scratch / "tokens.bin").stat().st_size
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"weighted_words": words, "tokens": tokens, "tokens_per_word": round(tokens / words, 3),
            "read_seconds": round(read_s, 1), "tokenizer_train_seconds": round(train_s, 1),
            "tokenize_seconds": round(tokenize_s, 1), "tokens_bin_mb": round(size / 2**20, 1),
            "vocab_size": vocab_size,
            "rayon_threads": os.environ.get("RAYON_NUM_THREADS", f"{os.cpu_count()} (all cores)"),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def _fmt(n: float) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e5 else f"{n:,.0f}"


def table(result: dict) -> str:
    """Markdown: per-source rows, totals, timings."""
    t = result["totals"]
    lines = [
        "# Built corpus (issue 13)", "",
        f"Command: `{result['command']}`  ",
        f"Built {result['built']} on {result['machine']}; measured {result['date']}.", "",
        "| source | package | version | licence | group (weight) | raw words | kept words | sentences | "
        "exact dups | near dups | dup rate | s |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["sources"]:
        lines.append(f"| {r['source']} | {r['package']} | {r['version']} | {r['licence']} | {r['group']} "
                     f"({r['weight']}) | {_fmt(r['raw_words'])} | {_fmt(r['words'])} | {r['sentences']:,} | "
                     f"{r['exact_duplicates']:,} | {r['near_duplicates']:,} | {r['duplicate_rate']:.1%} | "
                     f"{r['seconds']:.0f} |")
    lines += ["", f"**Total: {t['words']:,} words** ({t['sentences']:,} sentences, {t['documents']:,} documents) "
              f"kept of {t['raw_words']:,} raw words from {t['sources']} sources; duplicate rate "
              f"{t['duplicate_rate']:.1%} of prose sentences; {t['weighted_words']:,} words as the loader "
              f"reads it with the mixing weights.", ""]
    groups: dict[str, list[int]] = {}
    for r in result["sources"]:
        g = groups.setdefault(r["group"], [0, 0, r["weight"]])
        g[0] += r["words"]
        g[1] += r["words"] * r["weight"]
    lines += ["| group | weight | words | share | weighted share |", "|---|---:|---:|---:|---:|"]
    for name, (words, weighted, weight) in groups.items():
        lines.append(f"| {name} | {weight} | {_fmt(words)} | {words / t['words']:.1%} | "
                     f"{weighted / t['weighted_words']:.1%} |")
    lines.append("")
    if result.get("build_wall_seconds"):
        lines.append(f"Full build wall time: {result['build_wall_seconds'] / 60:.1f} min "
                     f"(sum of per-source times {t['build_seconds'] / 60:.1f} min).")
    tok = result.get("tokenize")
    if tok:
        lines += ["", f"Tokenizing (fast tokenizer batch API, threads: {tok['rayon_threads']}): "
                  f"{tok['weighted_words']:,} weighted words -> {tok['tokens']:,} tokens "
                  f"({tok['tokens_per_word']} per word) in **{tok['tokenize_seconds']:.0f} s**; WordPiece "
                  f"training ({tok['vocab_size']} vocab) {tok['tokenizer_train_seconds']:.0f} s; "
                  f"token file {tok['tokens_bin_mb']} MB; peak RSS {tok['peak_rss_mb']} MB."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="folder written by `electra-detect corpus build`")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--tokenize", action="store_true", help="also time tokenizer training and tokenizing")
    parser.add_argument("--vocab-size", type=int, default=16000)
    parser.add_argument("--build-wall", type=float, help="measured wall seconds of the full build, to record")
    parser.add_argument("--command", default="electra-detect corpus build --out runs/corpus")
    args = parser.parse_args(argv)
    corpus = Path(args.corpus)
    manifest = json.loads((corpus / "manifest.json").read_text())
    built = dt.datetime.fromtimestamp((corpus / "manifest.json").stat().st_mtime, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    result = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "built": built,
              "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared), Python {platform.python_version()}",
              "command": args.command, "sources": per_source_rows(manifest), "totals": manifest["totals"],
              "skipped": manifest.get("skipped", {}), "group_weights": manifest.get("group_weights", {}),
              "build_wall_seconds": args.build_wall}
    if args.tokenize:
        result["tokenize"] = measure_tokenize(corpus, args.vocab_size)
    out = Path(args.out)
    atomic_write_json(out / "result.json", result)
    atomic_write_text(out / "table.md", table(result))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
