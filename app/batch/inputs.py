"""What a batch job reads: text, JSONL or Parquet inputs, checked and cut into deterministic shards.

The driver reads every input once, before any work: it checks it (a missing field or column is one error),
hashes it for the manifest and notes where each shard starts. A shard is a run of at most ``shard_size`` texts
of one file, so the same inputs always give the same shards, and an actor reads only its own shard's bytes
(``read_shard``). Inputs must be reachable at the same path from every node (a shared filesystem), as with
Ray Data's own readers.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from electra_detect.errors import UserError

TEXT, JSONL, PARQUET = "text", "jsonl", "parquet"
KINDS = {".txt": TEXT, ".text": TEXT, ".jsonl": JSONL, ".ndjson": JSONL, ".json": JSONL, ".parquet": PARQUET}


class BatchInputError(UserError, ValueError):
    """An input the job cannot read: one ``error:`` line and exit 2, before any work."""


@dataclass(frozen=True)
class InputFile:
    """One input file as the manifest records it."""

    path: str  # as found from the user's argument: also the ids' file part
    kind: str
    bytes: int
    sha256: str
    texts: int


@dataclass(frozen=True)
class Shard:
    """At most ``shard_size`` texts of one file: bytes ``[start, stop)`` (text, JSONL) or rows (Parquet), the first
    of them on line (or row) ``first`` (1-based)."""

    index: int
    path: str
    kind: str
    start: int
    stop: int
    first: int

    @property
    def name(self) -> str:
        return f"part-{self.index:05d}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Row:
    """One input text with its id; ``error`` instead of ``text`` when the row cannot be checked."""

    id: str
    text: str | None
    error: str | None = None


def expand(paths: list[str]) -> list[Path]:
    """Each argument as a file, a directory (its files of a known kind, sorted, recursively) or a glob (sorted);
    duplicates dropped, order kept."""
    found: list[Path] = []
    for given in paths:
        if any(c in given for c in "*?["):
            matches = sorted(Path(p) for p in glob.glob(given, recursive=True) if os.path.isfile(p))
            if not matches:
                raise BatchInputError(f"--input {given}: no file matches")
        elif os.path.isdir(given):
            matches = sorted(p for p in Path(given).rglob("*") if p.is_file() and p.suffix.lower() in KINDS)
            if not matches:
                raise BatchInputError(f"--input {given}: no .txt, .jsonl or .parquet file in it")
        elif os.path.isfile(given):
            matches = [Path(given)]
        else:
            raise BatchInputError(f"--input {given}: no such file or directory")
        found += [m for m in matches if m not in found]
    return found


def kind_of(path: Path) -> str:
    return KINDS.get(path.suffix.lower(), TEXT)  # any other name is one text a line


def plan(paths: list[str], shard_size: int, field: str, id_field: str | None) -> tuple[list[InputFile], list[Shard]]:
    """The inputs (checked and hashed) and their shards, in input order."""
    if shard_size < 1:
        raise BatchInputError(f"--shard-size must be >= 1, got {shard_size}")
    inputs, shards = [], []
    for path in expand(paths):
        try:
            if kind_of(path) == PARQUET:
                found, cuts = _scan_parquet(path, field, shard_size)
            else:
                found, cuts = _scan_lines(path, kind_of(path), field, shard_size)
        except OSError as exc:
            raise BatchInputError(f"cannot read {path}: {exc.strerror or exc}") from None
        inputs.append(found)
        shards += [Shard(len(shards) + i, str(path), found.kind, *cut) for i, cut in enumerate(cuts)]
    return inputs, shards


def _scan_lines(path: Path, kind: str, field: str, shard_size: int) -> tuple[InputFile, list[tuple[int, int, int]]]:
    """Hash the file and cut it every ``shard_size`` non-empty lines; a JSONL file's first row must be an object
    holding ``field`` (a later row without it is an error row, not a failed job)."""
    digest, cuts = hashlib.sha256(), []
    offset, line_no, texts, start, first = 0, 0, 0, None, 0
    with open(path, "rb") as handle:
        for line in handle:
            digest.update(line)
            line_no += 1
            if line.strip():
                if kind == JSONL and texts == 0:
                    _check_first_row(path, line, field)
                if start is None:
                    start, first = offset, line_no
                texts += 1
                if texts % shard_size == 0:
                    cuts.append((start, offset + len(line), first))
                    start = None
            offset += len(line)
    if start is not None:
        cuts.append((start, offset, first))
    return InputFile(str(path), kind, offset, digest.hexdigest(), texts), cuts


def _check_first_row(path: Path, line: bytes, field: str) -> None:
    try:
        row = json.loads(line)
    except ValueError:
        raise BatchInputError(f"{path}: line 1 is not JSON (JSONL needs one object a line)") from None
    if not isinstance(row, dict) or field not in row:
        raise BatchInputError(f"{path}: its first row has no field {field!r} (name the text's field with --field)")


def _scan_parquet(path: Path, field: str, shard_size: int) -> tuple[InputFile, list[tuple[int, int, int]]]:
    import pyarrow.parquet as pq

    try:
        info = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a file that is not Parquet
        raise BatchInputError(f"{path}: not a Parquet file ({exc})") from None
    if field not in info.schema_arrow.names:
        raise BatchInputError(f"{path}: no column {field!r} (columns: {', '.join(info.schema_arrow.names)}; "
                              f"name the text's column with --field)")
    rows = info.metadata.num_rows
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    cuts = [(start, min(start + shard_size, rows), start + 1) for start in range(0, rows, shard_size)]
    return InputFile(str(path), PARQUET, path.stat().st_size, digest.hexdigest(), rows), cuts


def read_shard(shard: Shard, field: str, id_field: str | None, max_chars: int) -> Iterator[Row]:
    """The shard's rows in order; a row that is not text, not UTF-8, or longer than ``max_chars`` is an error row."""
    if shard.kind == PARQUET:
        yield from _parquet_rows(shard, field, id_field, max_chars)
        return
    with open(shard.path, "rb") as handle:
        handle.seek(shard.start)
        data = handle.read(shard.stop - shard.start)
    for number, raw in enumerate(data.splitlines(), start=shard.first):
        if not raw.strip():
            continue
        where = f"{shard.path}:{number}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield Row(where, None, f"line {number} is not UTF-8 (byte {exc.start})")
            continue
        if shard.kind == TEXT:
            yield _checked(where, line.rstrip("\r"), max_chars)
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            yield Row(where, None, f"line {number} is not JSON")
            continue
        if not isinstance(obj, dict):
            yield Row(where, None, f"line {number} is not a JSON object")
            continue
        yield _checked(_row_id(obj.get(id_field) if id_field else None, where), obj.get(field, _MISSING), max_chars,
                       field)


_MISSING = object()


def _parquet_rows(shard: Shard, field: str, id_field: str | None, max_chars: int) -> Iterator[Row]:
    import pyarrow.parquet as pq

    info = pq.ParquetFile(shard.path)
    columns = [field] + ([id_field] if id_field and id_field in info.schema_arrow.names and id_field != field else [])
    table = pq.read_table(shard.path, columns=columns).slice(shard.start, shard.stop - shard.start)
    texts = table.column(field).to_pylist()
    ids = table.column(id_field).to_pylist() if len(columns) > 1 else [None] * len(texts)
    for offset, (text, given) in enumerate(zip(texts, ids, strict=True)):
        yield _checked(_row_id(given, f"{shard.path}:{shard.first + offset}"), text, max_chars, field)


def _row_id(given: object, where: str) -> str:
    """The input's own id when it has one (a string or an integer), else file and line (or row)."""
    if isinstance(given, str) and given or isinstance(given, int) and not isinstance(given, bool):
        return str(given)
    return where


def _checked(row_id: str, text: object, max_chars: int, field: str = "text") -> Row:
    if text is _MISSING:
        return Row(row_id, None, f"no field {field!r}")
    if not isinstance(text, str):
        return Row(row_id, None, f"{field!r} is not text ({type(text).__name__})")
    if len(text) > max_chars:
        return Row(row_id, None, f"text of {len(text):,} characters, over the limit of {max_chars:,} (--max-chars)")
    if not text.strip():
        return Row(row_id, None, "empty text")
    return Row(row_id, text)
