"""``corpus build``: fetch, extract, clean, de-duplicate and shard each source; keep a manifest.

Layout of ``--out``::

    manifest.json                 per source: package, version, licence, weight, counts, shard SHA-256
    <source>/<source>-00000.txt   documents (paragraph blocks) separated by blank lines

Each source is written to a hidden staging folder and renamed into place, then the manifest is
replaced atomically, so an interrupted build resumes at the first unfinished source. Sentences of
sources already built are re-read into the de-duplicator, so a resumed build drops the same repeats.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tqdm.auto import tqdm

from electra_detect.fileio import atomic_write_json
from electra_detect.training.corpus.clean import CleanStats, Deduper, clean_paragraphs, split_sentences
from electra_detect.training.corpus.extract import EXTRACTORS
from electra_detect.training.corpus.fetch import FetchError, archive_version, debian_licence, fetch, unpack
from electra_detect.training.corpus.sources import GROUP_WEIGHTS, Source

MANIFEST = "manifest.json"
FORMAT = 1
SHARD_BYTES = 16 << 20


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_manifest(out: Path) -> dict:
    """The manifest of a build folder, or a fresh one."""
    import json

    path = out / MANIFEST
    if path.exists():
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if manifest.get("format") == FORMAT:
            return manifest
    return {"format": FORMAT, "sources": {}, "skipped": {}, "group_weights": dict(GROUP_WEIGHTS)}


def _totals(manifest: dict) -> dict:
    built = manifest["sources"].values()
    words = sum(s["words"] for s in built)
    seen = sum(s["sentences"] + s["exact_duplicates"] + s["near_duplicates"] for s in built)
    dups = sum(s["exact_duplicates"] + s["near_duplicates"] for s in built)
    return {"sources": len(manifest["sources"]), "words": words, "sentences": sum(s["sentences"] for s in built),
            "documents": sum(s["documents"] for s in built), "raw_words": sum(s["raw_words"] for s in built),
            "weighted_words": sum(s["words"] * s["weight"] for s in built),
            "duplicate_rate": round(dups / seen, 4) if seen else 0.0,
            "build_seconds": round(sum(s["seconds"] for s in built), 1)}


def write_manifest(out: Path, manifest: dict) -> None:
    """Recompute the totals and replace ``manifest.json`` atomically."""
    manifest["totals"] = _totals(manifest)
    atomic_write_json(out / MANIFEST, manifest)


class ShardWriter:
    """Documents to ``<stem>-NNNNN.txt`` files of about ``shard_bytes`` each, blank-line separated."""

    def __init__(self, folder: Path, stem: str, shard_bytes: int = SHARD_BYTES) -> None:
        self.folder, self.stem, self.shard_bytes = folder, stem, shard_bytes
        self.paths: list[Path] = []
        self._handle = None
        self._size = 0

    def write(self, document: str) -> None:
        if self._handle is None or self._size >= self.shard_bytes:
            self._open()
        data = document + "\n\n"
        self._handle.write(data)
        self._size += len(data.encode("utf-8"))

    def _open(self) -> None:
        self.close()
        path = self.folder / f"{self.stem}-{len(self.paths):05d}.txt"
        self.paths.append(path)
        self._handle = open(path, "w", encoding="utf-8")
        self._size = 0

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _capped(documents: Iterator[str], stats: CleanStats, max_words: int | None) -> Iterator[str]:
    for document in documents:
        yield document
        if max_words and stats.words >= max_words:
            return


def reload_dedupe(out: Path, entry: dict, deduper: Deduper) -> None:
    """Feed a built source's sentences back to the de-duplicator (resume keeps cross-source dedupe)."""
    for shard in entry["shards"]:
        with open(out / shard["path"], encoding="utf-8") as handle:
            for line in handle:
                for sentence in split_sentences(line.strip()):
                    deduper.check(sentence)


def build_source(source: Source, out: Path, cache: Path, deduper: Deduper, max_words: int | None = None,
                 progress: bool | None = None, fetcher: Callable[[Source, Path], Path] | None = None) -> dict:
    """Fetch, extract, clean and shard one source; returns its manifest entry (FetchError if unfetchable)."""
    started = time.monotonic()
    archive = (fetcher or fetch)(source, cache)
    root = unpack(archive, cache)
    try:
        return _build_unpacked(source, archive, root, out, deduper, max_words, progress, started)
    finally:  # keep the archive, not the unpacked tree (the scale path would need ~40 GB of them)
        shutil.rmtree(root, ignore_errors=True)


def _build_unpacked(source: Source, archive: Path, root: Path, out: Path, deduper: Deduper, max_words: int | None,
                    progress: bool | None, started: float) -> dict:
    licence = source.licence
    declared = debian_licence(root, source.package) if source.registry == "deb" else None
    if licence.startswith("see ") and declared:
        licence = declared
    staging = out / f".{source.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    stats = CleanStats()
    writer = ShardWriter(staging, source.name)
    paragraphs = EXTRACTORS[source.extractor](root, source.options)
    try:
        with tqdm(desc=f"{source.name:>18}", unit=" words", unit_scale=True, file=sys.stderr,
                  disable=True if progress is False else None) as bar:
            last = 0
            for document in _capped(clean_paragraphs(paragraphs, deduper, stats), stats, max_words):
                writer.write(document)
                bar.update(stats.words - last)
                last = stats.words
    finally:
        writer.close()
    final = out / source.name
    shutil.rmtree(final, ignore_errors=True)
    os.replace(staging, final)
    shards = [{"path": f"{source.name}/{p.name}", "sha256": sha256_file(final / p.name),
               "bytes": (final / p.name).stat().st_size} for p in writer.paths]
    seen = stats.sentences + stats.exact_dups + stats.near_dups
    return {
        "package": source.package, "registry": source.registry, "version": archive_version(source, archive),
        "archive": archive.name, "archive_sha256": sha256_file(archive), "licence": licence, "free": source.free,
        "group": source.group, "weight": source.weight, "extractor": source.extractor,
        "words": stats.words, "sentences": stats.sentences, "documents": stats.documents,
        "raw_words": stats.raw_words, "paragraphs": stats.paragraphs, "rejected_sentences": stats.rejected,
        "exact_duplicates": stats.exact_dups, "near_duplicates": stats.near_dups,
        "duplicate_rate": round((stats.exact_dups + stats.near_dups) / seen, 4) if seen else 0.0,
        "max_words": max_words, "seconds": round(time.monotonic() - started, 1), "shards": shards,
        **({"licence_debian_copyright": declared} if declared else {}),
    }


def build_corpus(sources: list[Source], out: Path, cache: Path | None = None, max_words: int | None = None,
                 progress: bool | None = None, fetcher: Callable[[Source, Path], Path] | None = None,
                 log: Callable[[str], None] | None = None) -> dict:
    """Build (or resume) a corpus folder; unfetchable sources are reported and skipped. Returns the manifest."""
    log = log or (lambda message: print(message, file=sys.stderr))
    out.mkdir(parents=True, exist_ok=True)
    if cache is None:
        from electra_detect.training.pretraining.data import default_cache_dir

        cache = default_cache_dir() / "corpus-packages"
    cache = cache.resolve()  # the fetcher runs dpkg-deb from another directory: a relative cache was not found
    manifest = load_manifest(out)
    deduper = Deduper()
    for source in sources:
        entry = manifest["sources"].get(source.name)
        if entry and all((out / s["path"]).exists() for s in entry["shards"]):
            log(f"{source.name}: already built ({entry['words']:,} words), skipped")
            reload_dedupe(out, entry, deduper)
            continue
        if not source.free:
            log(f"warning: {source.name} is not free text ({source.licence}); do not redistribute the built corpus")
        try:
            entry = build_source(source, out, cache, deduper, max_words, progress, fetcher)
        except Exception as exc:  # FetchError, or one odd package: never the end of a long build
            shutil.rmtree(out / f".{source.name}.partial", ignore_errors=True)
            reason = str(exc) if isinstance(exc, FetchError) else f"{type(exc).__name__}: {exc}"
            log(f"{source.name}: {'cannot fetch' if isinstance(exc, FetchError) else 'failed'}, skipped: {reason}")
            manifest["skipped"][source.name] = reason
            write_manifest(out, manifest)
            continue
        manifest["skipped"].pop(source.name, None)
        manifest["sources"][source.name] = entry  # (the JSON file sorts keys: "order" keeps the build order)
        manifest["order"] = [*(n for n in manifest.get("order", []) if n != source.name), source.name]
        manifest["group_weights"] = dict(GROUP_WEIGHTS)
        write_manifest(out, manifest)
        log(f"{source.name}: {entry['words']:,} words, {entry['sentences']:,} sentences, "
            f"{entry['duplicate_rate']:.1%} duplicates, {entry['seconds']:.0f}s")
    write_manifest(out, manifest)
    return manifest

