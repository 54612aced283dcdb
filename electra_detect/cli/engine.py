"""The engine flags the inference verbs share, and the one stderr line that says which engine runs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

VARIANTS = ("fp32", "optimized", "fp16", "int8")


def add_engine_args(p: argparse.ArgumentParser, workers: bool = True) -> None:
    p.add_argument("--engine", choices=("auto", "onnx", "torch"), default="auto",
                   help="auto (default): onnxruntime whenever it can serve the model (its shipped export, else one "
                        "exported once and cached under $XDG_CACHE_HOME/electra-detect/onnx), else torch")
    p.add_argument("--variant", choices=VARIANTS,
                   help="ONNX variant (default: int8 on CPU when it passed the export's parity gate, else fp32)")
    if workers:
        p.add_argument("--workers", type=int, default=0,
                       help="scoring threads for --file (default: one per core; each model call runs on one thread)")


def load_detector(args: argparse.Namespace, task: str, threads: int | None = 1, **options: Any) -> Any:
    """``Detector.load`` as the flags say, then the engine line on stderr. ``threads=1``: one onnxruntime thread
    per call, for verbs whose stream workers give the parallelism (electra_detect.pipeline)."""
    from electra_detect.detector import Detector
    from electra_detect.errors import CliError

    if getattr(args, "workers", 0) < 0:
        raise CliError("--workers must be >= 0 (0 = one per core)")
    detector = Detector.load(args.model, task=task, engine=args.engine, variant=args.variant, threads=threads,
                             **options)
    print(detector.describe(), file=sys.stderr, flush=True)
    return detector
