"""Pack a run directory for shipping: weights cast to fp16 (half the bytes), optimizer checkpoints left out.

    python scripts/pack_run.py RUN_DIR DEST [--ged GED_DIR] [--no-generator]

``--ged`` adds a fine-tuned GED discriminator (``ged train --out``) as ``DEST/ged``, which ``ged``, the
server and the demo use by default. ``--no-generator`` leaves the generator out (a size budget: only
PLL, surprisal and ``pos-bias --corrupt`` read it). ``from_pretrained`` casts fp16 weights back to the model's fp32 on
load, so users see no difference beyond fp16 rounding of the weights.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from safetensors.torch import load_file, save_file

KEEP = ("run_config.json", "summary.json", "metrics.jsonl")


def half(tensors: dict) -> dict:
    """Floating tensors cast to fp16 (integer buffers as they are), contiguous for safetensors."""
    return {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in tensors.items()}


def pack(run_dir: Path, dest: Path, ged_dir: Path | None = None, generator: bool = True) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in KEEP:
        if (run_dir / name).exists():
            shutil.copy2(run_dir / name, dest / name)
    parts = {"discriminator": run_dir / "discriminator"}
    if generator:
        parts["generator"] = run_dir / "generator"
    if ged_dir is not None:
        parts["ged"] = ged_dir
    for part, source in parts.items():
        shutil.copytree(source, dest / part, dirs_exist_ok=True, ignore=shutil.ignore_patterns("onnx", "*.tmp"))
        weights = dest / part / "model.safetensors"
        save_file(half(load_file(weights)), weights, metadata={"format": "pt"})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--ged", type=Path, help="fine-tuned GED discriminator dir to ship as DEST/ged")
    parser.add_argument("--no-generator", action="store_true", help="ship without the generator")
    args = parser.parse_args()
    pack(args.run_dir, args.dest, args.ged, generator=not args.no_generator)
    print(f"packed {args.run_dir} -> {args.dest}", file=sys.stderr)
