"""The batch job's actor: one ``Detector`` built in the actor, then shard after shard checked and written.

Ray Data builds one ``ShardWorker`` per actor of the pool (``map_batches(ShardWorker, compute=ActorPoolStrategy)``)
and calls it with batches of shard descriptions. The actor loads the model itself (onnxruntime int8 on a CPU, or
CUDA when the actor holds a GPU, with onnxruntime's threads set to the actor's CPUs): nothing heavier than a dict
of options crosses the wire, and an ``InferenceSession`` is never pickled. It calls the checker the one-host
verbs call (``GedChecker``, ``Detector.stream``), reads its shard's rows itself and writes the shard's file
atomically, so the driver only sees one small summary a shard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from electra_detect.app.batch.inputs import Row, Shard, read_shard
from electra_detect.app.batch.manifest import shard_file
from electra_detect.app.batch.rows import write_shard

CHECK_TEXTS = 64  # texts a call of the checker: what `ged --file` streams at once (cli.texts.STREAM_TEXTS)


class ShardWorker:
    """What one actor does with its shards; ``SETTINGS`` is the job's plain-data config (``BatchJob.settings``), set
    on a subclass by :func:`worker_for` (Ray then needs no constructor arguments in its object store)."""

    SETTINGS: dict[str, Any] = {}

    def __init__(self) -> None:
        from electra_detect.detector import Detector

        self.settings = settings = self.SETTINGS
        self.verb = settings["verb"]
        device = "cuda" if settings["gpus_per_actor"] > 0 else "cpu"
        self.detector = Detector.load(settings["model"], task=self.verb, engine=settings["engine"],
                                      variant=settings["variant"], threads=max(1, int(settings["cpus_per_actor"])),
                                      device=device)
        if self.verb == "ged":
            from electra_detect.tasks.ged.check import GedChecker
            from electra_detect.tasks.ged.options import build_ged_options

            # the dictionary's words came from the driver, in the options: no actor reads a file of its own host
            self.options = build_ged_options(**settings["ged_options"])
            self.checker = GedChecker(self.detector)
            self.threshold = self.checker.threshold(self.options)
            self.served = {"model": self.detector.name, "variant": self.detector.variant}

    def __call__(self, batch: dict[str, Any]) -> dict[str, list]:
        """Each shard of the batch checked and written; one summary row a shard."""
        summary: dict[str, list] = {"shard": [], "texts": [], "flagged": [], "errors": []}
        for i in range(len(batch["index"])):  # a shard's description arrives as one row of plain columns
            shard = Shard(int(batch["index"][i]), str(batch["path"][i]), str(batch["kind"][i]),
                          int(batch["start"][i]), int(batch["stop"][i]), int(batch["first"][i]))
            rows = self.rows(shard)
            write_shard(shard_file(Path(self.settings["output"]), shard.name, self.settings["output_format"]),
                        rows, self.settings["output_format"], self.verb)
            summary["shard"].append(shard.index)
            summary["texts"].append(len(rows))
            summary["flagged"].append(sum(1 for r in rows if r.get("flagged")))
            summary["errors"].append(sum(1 for r in rows if "error" in r))
        return summary

    def rows(self, shard: Shard) -> list[dict[str, Any]]:
        """The shard's output rows in input order: checked texts, and error rows for what could not be read."""
        settings = self.settings
        read = list(read_shard(shard, settings["field"], settings["id_field"], settings["max_chars"]))
        good = [row for row in read if row.error is None]
        checked = iter(self.check(good))
        return [{"id": row.id, "error": row.error} if row.error is not None else next(checked) for row in read]

    def check(self, rows: list[Row]) -> list[dict[str, Any]]:
        """Rows for the readable texts, in order; a text the checker refuses becomes an error row, not a failed job."""
        out: list[dict[str, Any]] = []
        for chunk in (rows[i:i + CHECK_TEXTS] for i in range(0, len(rows), CHECK_TEXTS)):
            try:
                out += self.checked(chunk, self.detector.score([row.text for row in chunk]))
            except Exception:  # noqa: BLE001 - find the text at fault: each alone, the others' rows kept
                out += [self.alone(row) for row in chunk]
        return out

    def alone(self, row: Row) -> dict[str, Any]:
        try:
            return self.checked([row], self.detector.score([row.text]))[0]
        except Exception as exc:  # noqa: BLE001 - one bad row never stops the job; its error is its row
            return {"id": row.id, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}

    def checked(self, chunk: list[Row], scored: list[Any]) -> list[dict[str, Any]]:
        if self.verb == "score":
            return [{"id": row.id, **scores.to_dict()} for row, scores in zip(chunk, scored, strict=True)]
        from electra_detect.tasks.ged.flags import flagged_dicts

        flagged = self.checker.check(scored, self.options)
        return [{"id": row.id, "text": scores.text, "threshold": self.threshold, "flagged": flagged_dicts(words, 4),
                 **self.served} for row, scores, words in zip(chunk, scored, flagged, strict=True)]


def worker_for(settings: dict[str, Any]) -> type[ShardWorker]:
    """The actor class of one job: :class:`ShardWorker` with the job's settings."""
    return type("ShardWorker", (ShardWorker,), {"SETTINGS": settings})
