"""The output directory of a batch job: its manifest, its finished shards, and nothing else.

Exactly once is built here, since Ray Data by itself is neither exactly-once nor resumable:
- every shard's file is written under a hidden temporary name and renamed into place, so a shard's file is there
  whole or not at all, and a file that is there is a finished shard (never redone, never touched again);
- ``_manifest.json`` records what the rows are made from (the inputs' names, sizes and hashes, the model's
  weights hash, every option that changes a row); a second run with the same ``--output`` resumes only when it
  matches, and anything else in the directory is refused unless ``--overwrite``;
- ``_SUCCESS`` (as Hadoop and Spark write it) is written last, when every shard is there.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from electra_detect.errors import UserError
from electra_detect.fileio import atomic_write_json

MANIFEST, SUCCESS = "_manifest.json", "_SUCCESS"
SUFFIXES = {"jsonl": ".jsonl", "parquet": ".parquet"}


class OutputDirError(UserError, ValueError):
    """An ``--output`` directory this job may not write into: one ``error:`` line, exit 2, before any work."""


def shard_file(output: Path, shard_name: str, output_format: str) -> Path:
    return output / f"{shard_name}{SUFFIXES[output_format]}"


def prepare(output: Path, manifest: dict[str, Any], overwrite: bool) -> set[str]:
    """Make ``output`` ready for a job described by ``manifest``; the names of the shards already finished there.

    An empty or new directory gets the manifest. One holding the same manifest resumes: its leftover temporary
    files (a stopped run's) are removed and its finished shards kept. Anything else is refused, unless
    ``overwrite``: then the directory's contents are removed first."""
    if output.exists() and not output.is_dir():
        raise OutputDirError(f"--output {output}: not a directory")
    present = sorted(output.iterdir()) if output.is_dir() else []
    if present and overwrite:
        for path in present:
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        present = []
    if present:
        saved = _read(output / MANIFEST)
        if saved is None:
            raise OutputDirError(f"--output {output} holds files that are not a batch job's output "
                                 f"({present[0].name}, ...); give an empty directory, or --overwrite")
        changed = differences(saved, manifest)
        if changed:
            raise OutputDirError(f"--output {output} holds a job made from other {changed[0]}"
                                 f"{' (and ' + ', '.join(changed[1:]) + ')' if changed[1:] else ''}; give another "
                                 f"directory, or --overwrite to replace it")
        expected = {shard_file(output, s["name"], manifest["output_format"]).name for s in manifest["shards"]}
        known = expected | {MANIFEST, SUCCESS}
        for path in present:
            if path.name.startswith(".") and path.name.endswith(".tmp"):
                path.unlink()  # a stopped run's half-written shard: never visible, now gone
            elif path.name not in known:
                raise OutputDirError(f"--output {output}: {path.name} is not part of this job's output; move it, "
                                     f"or --overwrite")
        return {Path(name).stem for name in expected if (output / name).is_file()}
    output.mkdir(parents=True, exist_ok=True)
    atomic_write_json(output / MANIFEST, manifest)
    return set()


def differences(saved: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """What a saved manifest was made from that this job is not, in words ("inputs", "model", "options: level")."""
    changed = []
    if saved.get("verb") != wanted["verb"]:
        changed.append(f"verb ({saved.get('verb')}, not {wanted['verb']})")
    if saved.get("inputs") != wanted["inputs"]:
        changed.append("inputs")
    if saved.get("model", {}).get("weights_sha256") != wanted["model"]["weights_sha256"]:
        changed.append("model")
    old, new = saved.get("options", {}), wanted["options"]
    changed += [f"options: {key}" for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
    if saved.get("output_format") != wanted["output_format"]:
        changed.append(f"output format ({saved.get('output_format')})")
    if saved.get("shards") != wanted["shards"] and "inputs" not in changed:
        changed.append("shards (--shard-size)")
    return changed


def finish(output: Path, summary: dict[str, Any]) -> None:
    atomic_write_json(output / SUCCESS, summary)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
