"""A batch job's rows and how a shard's rows are written: JSON lines, or Parquet with a fixed schema.

A ``ged`` row is exactly the object ``ged --suggest --output-format json`` prints for the text, plus ``id``; a
``score`` row the object ``score --json`` prints, plus ``id``. A row that could not be checked is ``{"id",
"error"}``. Parquet holds the same fields as columns (one schema for every shard, so the shards read as one
table); a field the JSON object leaves out (a typed model's ``type``, say) is null there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from electra_detect.fileio import atomic_open


def _schemas() -> dict[str, Any]:
    import pyarrow as pa

    suggestion = pa.struct([("value", pa.string()), ("start", pa.int64()), ("end", pa.int64())])
    flagged = pa.struct([("word", pa.string()), ("start", pa.int64()), ("end", pa.int64()), ("score", pa.float64()),
                         ("operation", pa.string()), ("type", pa.string()), ("type_score", pa.float64()),
                         ("type_source", pa.string()), ("tag", pa.string()), ("rule", pa.string()),
                         ("category", pa.string()), ("message", pa.string()),
                         ("suggestions", pa.list_(suggestion))])
    token = pa.struct([("token", pa.string()), ("start", pa.int64()), ("end", pa.int64()),
                       ("p_replaced", pa.float64())])
    word = pa.struct([("word", pa.string()), ("start", pa.int64()), ("end", pa.int64()), ("score", pa.float64()),
                      ("tokens", pa.list_(pa.int64())), ("operation", pa.string()), ("error_type", pa.string()),
                      ("type_score", pa.float64()), ("tag", pa.string())])
    head = [("id", pa.string()), ("error", pa.string()), ("text", pa.string())]
    return {
        "ged": pa.schema(head + [("threshold", pa.float64()), ("flagged", pa.list_(flagged)),
                                 ("model", pa.string()), ("variant", pa.string())]),
        "score": pa.schema(head + [("tokens", pa.list_(token)), ("words", pa.list_(word)),
                                   ("sentence_mean", pa.float64()), ("sentence_sum", pa.float64())]),
    }


def write_shard(path: Path, rows: list[dict[str, Any]], output_format: str, verb: str) -> None:
    """All of a shard's rows in one file, written under a temporary name and renamed into place."""
    if output_format == "jsonl":
        with atomic_open(path, "w") as handle:
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows, schema=_schemas()[verb])
    with atomic_open(path, "wb") as handle:
        pq.write_table(table, handle)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """A shard's rows as dicts (for tests, benchmarks and users' scripts): Parquet's nulls dropped, so that a row
    reads as its JSON line does."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    import pyarrow.parquet as pq

    return [without_nulls(row) for row in pq.read_table(path).to_pylist()]


def without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value
