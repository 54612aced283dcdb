"""Continued pre-training on a lent GPU in one device call, sized to the device tool's limits.

The device tool sends the checkout's files (64 MiB at most, this `.devcarry/` folder included) and brings back at
most 8 files of 16 MiB under ``$OUT``; its machine has torch with CUDA but no package index. Three verbs:

    python scripts/device_run.py carry                 # here: build .devcarry/ (MiniLM fp16, corpus, transformers)
    python scripts/device_run.py run --minutes 6       # there: pre-train, pack into $OUT, then the GPU check
    python scripts/device_run.py unpack FILES RUN_DIR  # here: the returned files -> a run dir (fp16 weights)

``carry`` packs all-MiniLM-L6-v2 in fp16 (the pooler dropped: a warm start never reads it), the built corpus
(``runs/corpus``) and this project's pins of transformers, tokenizers and huggingface-hub (the device's are 5.x,
whose tokenizers save no vocab.txt), with every transformers model but the five we import reduced to its
``__init__.py`` (the auto tokenizer lookup imports each model's package in turn), all xz-compressed.
``run`` starts ``scripts/gpu_pretrain.py`` from that MiniLM, returns the discriminator in fp16 cut into parts,
the generator's own tensors (its embeddings are the discriminator's: tied) and the run's small files, then runs
``benchmarks/speed/gpu_check.py`` on the new model in the time left.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from pack_run import half  # noqa: E402  (the fp16 cast of shipping)

CARRY = ROOT / ".devcarry"
WHEELS = ("transformers", "tokenizers", "huggingface_hub")
KEPT_MODELS = ("auto", "bert", "electra", "modernbert", "encoder_decoder")  # what electra_detect imports
TREE_LIMIT = 64 << 20  # the device tool's limit on what travels
PART_BYTES = 15 << 20  # under its 16 MiB limit per returned file
SMALL_FILES = ("run_config.json", "summary.json", "metrics.jsonl")


# -- carry (here) ---------------------------------------------------------------------------------------------
def carry_minilm(dest: Path) -> None:
    from electra_detect.training.pretraining.encoders import resolve_encoder

    source = resolve_encoder("minilm")
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copy2(source / name, dest / name)
    tensors = half({k: v for k, v in load_file(str(source / "model.safetensors")).items()
                    if not k.startswith("pooler.") and not k.endswith("position_ids")})
    save_file(tensors, str(dest / "model.safetensors"), metadata={"format": "pt"})
    subprocess.run(["xz", "-T0", "-9", "-f", str(dest / "model.safetensors")], check=True)


def carried(member: str) -> bool:
    """Whether a wheel's file travels: all of it but the transformers models we never import (their __init__.py
    stays)."""
    parts = member.split("/")
    return not (parts[:2] == ["transformers", "models"] and len(parts) > 3 and parts[2] not in KEPT_MODELS
                and parts[3] != "__init__.py")


def carry_site(dest: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        wheels, site = Path(tmp) / "wheels", Path(tmp) / "site"
        pins = [f"{name}=={importlib.metadata.version(name)}" for name in WHEELS]
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
                        "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64",
                        "-d", str(wheels), *pins], check=True)
        for wheel in sorted(wheels.glob("*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                for member in filter(carried, archive.namelist()):
                    archive.extract(member, site)
        with tarfile.open(dest, "w:xz", preset=9) as tar:
            for path in sorted(site.iterdir()):
                tar.add(path, arcname=path.name)


def carry(args: argparse.Namespace) -> None:
    CARRY.mkdir(exist_ok=True)
    carry_minilm(CARRY / "minilm")
    with tarfile.open(CARRY / "corpus.tar.xz", "w:xz", preset=9) as tar:
        tar.add(args.corpus, arcname="corpus")
    carry_site(CARRY / "site.tar.xz")
    size = sum(p.stat().st_size for p in CARRY.rglob("*") if p.is_file())
    print(f"{CARRY}: {size / 2**20:.1f} MiB (the tool sends at most {TREE_LIMIT >> 20} MiB with the checkout)")


# -- run (on the device) --------------------------------------------------------------------------------------
def pack(run: Path, out: Path, extra: list[Path]) -> None:
    """fp16 discriminator in parts, the generator's own tensors, and the small files as one tar."""
    out.mkdir(parents=True, exist_ok=True)
    disc = half(load_file(str(run / "discriminator/model.safetensors")))
    gen = half(load_file(str(run / "generator/model.safetensors")))
    own = {k: v for k, v in gen.items() if k not in disc or not disc[k].equal(v)}
    with tempfile.TemporaryDirectory() as tmp:
        blob, shared = Path(tmp) / "discriminator.safetensors", Path(tmp) / "generator_shared_keys.json"
        save_file(disc, str(blob), metadata={"format": "pt"})
        data = blob.read_bytes()
        for index in range(0, len(data), PART_BYTES):
            (out / f"discriminator.part{index // PART_BYTES}").write_bytes(data[index:index + PART_BYTES])
        save_file(own, str(out / "generator_own.safetensors"), metadata={"format": "pt"})
        shared.write_text(json.dumps(sorted(set(gen) - set(own))))
        with tarfile.open(out / "run_files.tar.gz", "w:gz") as tar:
            tar.add(shared, arcname=f"generator/{shared.name}")
            for name in SMALL_FILES:
                if (run / name).exists():
                    tar.add(run / name, arcname=name)
            for part in ("discriminator", "generator"):
                for path in sorted((run / part).iterdir()):
                    if path.name != "model.safetensors":
                        tar.add(path, arcname=f"{part}/{path.name}")
            for path in extra:
                if path.exists():
                    tar.add(path, arcname=f"device/{path.parent.name}-{path.name}")


def run(args: argparse.Namespace) -> None:
    started = time.time()
    out, work, site = Path(os.environ.get("OUT", "device_out")), Path("/tmp/device"), Path("/tmp/device/site")
    site.mkdir(parents=True, exist_ok=True)
    with tarfile.open(CARRY / "site.tar.xz") as tar:
        tar.extractall(site, filter="data")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-compile",
                    "--target", str(site), str(ROOT)], check=True)
    os.environ.update(PYTHONPATH=str(site), ELECTRA_DETECT_CACHE=str(work / "cache"), PYTHONUNBUFFERED="1")
    corpus = ROOT / "runs/corpus"  # the path the CPU runs record, so the recipe reads the same (here: kept as is)
    if not corpus.exists():
        with tarfile.open(CARRY / "corpus.tar.xz") as tar:
            tar.extractall(corpus.parent, filter="data")
    minilm = work / "minilm"
    shutil.copytree(CARRY / "minilm", minilm, dirs_exist_ok=True)
    subprocess.run(["xz", "-d", "-f", str(minilm / "model.safetensors.xz")], check=True)
    print(f"setup {time.time() - started:.0f} s", flush=True)

    run_dir, log = work / args.name, work / f"{args.name}.log"
    command = [sys.executable, str(ROOT / "scripts/gpu_pretrain.py"), "--corpus", "runs/corpus",
               "--out", str(run_dir), "--minutes", str(args.minutes), "--init-from", str(minilm),
               "--max-steps", str(args.max_steps), "--batch-size", str(args.batch_size), "--",
               *args.pretrain_flags.split()]
    with open(log, "w") as handle:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
        for line in process.stdout:
            handle.write(line)
            print(line, end="", flush=True)
    extra = [log, work / f"{args.name}.probe/metrics.jsonl"]
    if process.wait() != 0 or not (run_dir / "summary.json").exists():
        raise SystemExit(f"pre-training failed (exit {process.returncode}); see the log above")
    pack(run_dir, out, extra)
    print(f"packed {time.time() - started:.0f} s: " + json.dumps(json.loads((run_dir / "summary.json").read_text())),
          flush=True)

    check_dir, left = work / "gpu_check", args.deadline - (time.time() - started)
    if left > 30:
        subprocess.run(["timeout", str(int(left)), sys.executable, "-m", "benchmarks.speed.gpu_check", str(run_dir),
                        "--out", str(check_dir), "--export-dir", str(work / "onnx")], check=False, cwd=ROOT)
        pack(run_dir, out, [*extra, *sorted(check_dir.glob("*"))])
    print(f"done {time.time() - started:.0f} s", flush=True)


# -- unpack (here) --------------------------------------------------------------------------------------------
def unpack(args: argparse.Namespace) -> None:
    """Rebuild the run in a staging folder beside RUN_DIR and move it into place whole (never half a run)."""
    files, dest = Path(args.files), Path(args.run_dir)
    if dest.exists():
        raise SystemExit(f"error: {dest} exists; unpack into a new run dir")
    staging = dest.with_name(dest.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(files / "run_files.tar.gz") as tar:
        tar.extractall(staging, filter="data")
    parts = sorted(files.glob("discriminator.part*"), key=lambda p: int(p.name.removeprefix("discriminator.part")))
    (staging / "discriminator/model.safetensors").write_bytes(b"".join(p.read_bytes() for p in parts))
    disc = load_file(str(staging / "discriminator/model.safetensors"))
    own = load_file(str(files / "generator_own.safetensors"))
    shared = json.loads((staging / "generator/generator_shared_keys.json").read_text())  # tied to the discriminator
    gen = {**{k: disc[k] for k in shared}, **own}
    save_file(gen, str(staging / "generator/model.safetensors"), metadata={"format": "pt"})
    os.replace(staging, dest)
    print(f"{dest}: discriminator {len(disc)} tensors, generator {len(gen)} ({len(own)} its own)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("carry", help="build .devcarry/ here")
    p.add_argument("--corpus", type=Path, default=ROOT / "runs/corpus")
    p.set_defaults(func=carry)
    p = verbs.add_parser("run", help="on the device: pre-train, pack into $OUT, GPU check")
    p.add_argument("--minutes", type=float, default=6.0, help="pre-training budget, probe included")
    p.add_argument("--max-steps", type=int, default=6250, help="100x the shipped recipe's tokens at batch 256")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--pretrain-flags", default="--lr 3e-4 --seq-len 64 --seed 0",
                   help="more pretrain flags (the shipped recipe's)")
    p.add_argument("--name", default="run", help="the run dir's name under /tmp/device (another for a second run)")
    p.add_argument("--deadline", type=float, default=540.0, help="seconds after the start by which all ends")
    p.set_defaults(func=run)
    p = verbs.add_parser("unpack", help="the returned files -> a run dir")
    p.add_argument("files")
    p.add_argument("run_dir")
    p.set_defaults(func=unpack)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
