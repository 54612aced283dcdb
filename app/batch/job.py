"""A batch job on Ray Data: the inputs planned into shards, the shards not yet written sent through an actor pool,
progress and one summary line. The same code on a laptop (a local Ray started for the job and stopped after it)
and on a cluster (``--address auto`` or ``ray://...``).

    plan inputs -> manifest (resume or refuse) -> ray.data.from_items(pending shards)
        -> map_batches(ShardWorker, compute=ActorPoolStrategy(size=actors)) -> one summary row a shard
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, replace
from dataclasses import field as default
from pathlib import Path
from typing import Any

from electra_detect.app.batch import inputs as batch_inputs
from electra_detect.app.batch import manifest as batch_manifest
from electra_detect.errors import UserError

log = logging.getLogger(__name__)
VERBS = ("ged", "score")
OUTPUT_FORMATS = ("jsonl", "parquet")


class BatchError(UserError, RuntimeError):
    """A batch job that cannot run as asked (Ray missing, no cluster at the address, an actor that cannot load)."""


@dataclass
class BatchJob:
    """Everything a batch job is made from (plain data: the actors get it as their settings)."""

    verb: str
    inputs: list[str]
    output: str
    model: str
    output_format: str = "jsonl"
    address: str | None = None
    actors: int | None = None  # default: as many as the cluster's CPUs hold
    cpus_per_actor: float = 1.0
    gpus_per_actor: float = 0.0
    shard_size: int = 1000
    field: str = "text"
    id_field: str | None = "id"
    max_chars: int = 100_000
    engine: str = "auto"
    variant: str | None = None
    ged_options: dict[str, Any] = default(default_factory=dict)  # build_ged_options' keywords
    overwrite: bool = False
    progress: bool | None = None  # None: a bar when stderr is a terminal

    def settings(self) -> dict[str, Any]:
        return {**asdict(self), "output": str(Path(self.output).resolve()), "model": str(Path(self.model).resolve())}

    def row_options(self) -> dict[str, Any]:
        """What changes a row besides the inputs and the model: recorded in the manifest."""
        options = {"field": self.field, "id_field": self.id_field, "max_chars": self.max_chars,
                   "engine": self.engine, "variant": self.variant, "markup": "text"}
        if self.verb == "ged":
            options.update({k: sorted(v) if isinstance(v, list | tuple | set | frozenset) else v
                            for k, v in self.ged_options.items()})
        return options


def check(job: BatchJob) -> None:
    """The job's own values, before anything is read."""
    if job.verb not in VERBS:
        raise BatchError(f"unknown batch verb {job.verb!r}; expected one of {', '.join(VERBS)}")
    if job.output_format not in OUTPUT_FORMATS:
        raise BatchError(f"--output-format must be one of {', '.join(OUTPUT_FORMATS)}")
    if job.actors is not None and job.actors < 1:
        raise BatchError(f"--actors must be >= 1, got {job.actors}")
    if job.cpus_per_actor <= 0 or job.gpus_per_actor < 0:
        raise BatchError("--cpus-per-actor must be > 0 and --gpus-per-actor >= 0")
    if job.max_chars < 1:
        raise BatchError(f"--max-chars must be >= 1, got {job.max_chars}")


def model_fingerprint(model: str, verb: str) -> dict[str, Any]:
    """The model the rows come from: its directory and a hash of its files (weights, thresholds, calibration, tags
    and tokenizer: anything that changes a row), each file's hash memoised by its stamp."""
    from electra_detect.model_dir import resolve_model_dir, task_model_path
    from electra_detect.onnx.cache import file_sha256

    directory = resolve_model_dir(task_model_path(model, verb))
    files = sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))
    import hashlib

    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.name}\0{file_sha256(path)}\n".encode())
    return {"path": str(directory), "weights_sha256": digest.hexdigest(), "files": [p.name for p in files]}


def assembled_model(model: str, verb: str) -> str | Path:
    """``model``, or when the verb runs a trained part its assembled directory (assembled here, once, before any
    actor starts: the actors then load an ordinary model directory)."""
    from electra_detect.model_dir import task_model_path
    from electra_detect.trained_part import is_trained_part, runnable_dir

    part = task_model_path(model, verb)
    return runnable_dir(part) if is_trained_part(part) else model


def plan(job: BatchJob) -> tuple[dict[str, Any], list[batch_inputs.Shard]]:
    """The manifest this job writes (or must find) and its shards: every input read, checked and hashed."""
    check(job)
    found, shards = batch_inputs.plan(job.inputs, job.shard_size, job.field, job.id_field)
    manifest = {"version": 1, "verb": job.verb, "output_format": job.output_format,
                "inputs": [asdict(f) for f in found], "model": model_fingerprint(job.model, job.verb),
                "options": job.row_options(), "shard_size": job.shard_size,
                "shards": [{"name": s.name, "path": s.path, "first": s.first} for s in shards]}
    return manifest, shards


def run(job: BatchJob) -> dict[str, Any]:
    """Run the job to the end (or to a signal: then the finished shards stay, and the same command resumes);
    the summary it printed."""
    started = time.perf_counter()
    job = replace(job, model=str(assembled_model(job.model, job.verb)))
    manifest, shards = plan(job)
    output = Path(job.output)
    done = batch_manifest.prepare(output, manifest, job.overwrite)
    pending = [s for s in shards if s.name not in done]
    texts = sum(_shard_texts(s, manifest) for s in pending)
    summary: dict[str, Any] = {"verb": job.verb, "shards": len(shards), "shards_done_before": len(done),
                               "texts": 0, "flagged": 0, "errors": 0}
    if pending:
        summary.update(_run_on_ray(job, pending, texts))
    wall = time.perf_counter() - started
    summary["wall_s"] = round(wall, 3)
    summary["texts_per_s"] = round(summary["texts"] / wall, 2) if wall > 0 else 0.0
    missing = [s.name for s in shards if not batch_manifest.shard_file(output, s.name, job.output_format).is_file()]
    if missing:  # never claim a finished job that is not
        raise BatchError(f"{len(missing)} shard(s) were not written ({missing[0]}, ...); run the same command again")
    _remove_leftovers(output)
    batch_manifest.finish(output, summary)
    print(f"batch {job.verb}: {summary['texts']:,} texts, {summary['flagged']:,} flagged, {summary['errors']:,} "
          f"error rows, {summary['texts_per_s']:,} texts/s, {wall:.1f} s wall ({len(done)} of {len(shards)} shards "
          f"done before) -> {output}", file=sys.stderr, flush=True)
    return summary


def _shard_texts(shard: batch_inputs.Shard, manifest: dict[str, Any]) -> int:
    """How many texts the shard holds (for the progress bar): the shard size, or what is left of its file."""
    size = manifest["shard_size"]
    if shard.kind == batch_inputs.PARQUET:
        return shard.stop - shard.start
    texts = next(f["texts"] for f in manifest["inputs"] if f["path"] == shard.path)
    earlier = sum(1 for s in manifest["shards"] if s["path"] == shard.path and s["first"] < shard.first)
    return min(size, texts - earlier * size)


def _remove_leftovers(output: Path) -> None:
    """Temporary files of lost actors (their shards were written again elsewhere): never visible, now gone."""
    for path in output.glob(".part-*.tmp"):
        path.unlink(missing_ok=True)


def _run_on_ray(job: BatchJob, pending: list[batch_inputs.Shard], texts: int) -> dict[str, Any]:
    try:
        import ray
        from ray.data import ActorPoolStrategy, DataContext
    except ImportError:
        raise BatchError("`batch` runs on Ray: pip install 'electra-detect[cluster]'") from None
    from tqdm import tqdm

    begun = time.perf_counter()
    own = _start_ray(ray, job.address)
    restore = _stop_on_sigterm()
    try:
        ray_start = time.perf_counter() - begun
        logging.getLogger("ray.data").setLevel(logging.ERROR)  # our summary line says what Ray Data's INFO lines do
        context = DataContext.get_current()
        context.enable_progress_bars = False  # ours counts texts; Ray's count blocks
        context.print_on_execution_start = False
        actors = job.actors or max(1, int(ray.cluster_resources().get("CPU", 1) // job.cpus_per_actor))
        shards = ray.data.from_items([s.to_dict() for s in pending], override_num_blocks=len(pending))
        results = shards.map_batches(worker_class(job.settings()), batch_size=1, compute=ActorPoolStrategy(size=actors),
                                     num_cpus=job.cpus_per_actor, num_gpus=job.gpus_per_actor or None)
        shown = job.progress if job.progress is not None else sys.stderr.isatty()
        totals = {"texts": 0, "flagged": 0, "errors": 0}
        finished: list[tuple[float, int]] = []  # (seconds since the job began, texts) a shard: the rate's timeline
        with tqdm(total=texts, unit="text", desc=f"batch {job.verb}", file=sys.stderr, disable=not shown,
                  leave=False) as bar:
            for row in results.iter_rows():
                finished.append((round(time.perf_counter() - begun, 3), int(row["texts"])))
                for key in totals:
                    totals[key] += int(row[key])
                bar.update(int(row["texts"]))
        return {**totals, "actors": actors, "ray_start_s": round(ray_start, 3),
                "first_shard_s": finished[0][0] if finished else 0.0, "ray_s": round(time.perf_counter() - begun, 3),
                "shards_finished": finished}
    finally:
        restore()
        if own:
            ray.shutdown()


def worker_class(settings: dict[str, Any]) -> type:
    """The class Ray builds the actors from, imported late: the driver's CLI start-up stays light."""
    from electra_detect.app.batch.worker import worker_for

    return worker_for(settings)


def _start_ray(ray: Any, address: str | None) -> bool:
    """Join the cluster at ``address`` (``auto``, ``ray://...``, ``host:port``), or start a local Ray for this job;
    whether this job started it (and so stops it)."""
    if ray.is_initialized():
        return False
    quiet = {"logging_level": logging.ERROR, "log_to_driver": True}  # actors' errors still reach the driver
    if address:
        try:
            ray.init(address=address, **quiet)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise BatchError(f"no Ray cluster at --address {address}: {str(exc).splitlines()[0]}") from None
        return True  # disconnects this driver only; the cluster stays up
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, **quiet)
    return True


def _stop_on_sigterm() -> Any:
    """SIGTERM to the driver stops the job as Ctrl-C does (finished shards stay; the same command resumes)."""
    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave signals to whoever owns them
        return lambda: None
    return lambda: signal.signal(signal.SIGTERM, previous)
