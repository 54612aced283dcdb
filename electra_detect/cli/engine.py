"""The options every inference verb shares, defined once (``--model``, ``--engine``, ``--variant``, ``--device``,
``--workers``, ``--processes``, ``--threads``) and their checks, and the one stderr line that says which engine runs.
Other layers' verbs (``serve``, ``demo``, ``lsp``) add them the same way."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from electra_detect.cli import DEFAULT_MODEL

VARIANTS = ("fp32", "optimized", "fp16", "int8")
MODEL_HELP = f"run or model dir (its fine-tuned ged/ when it has one) or a discriminator dir (default {DEFAULT_MODEL})"


def add_model_arg(p: argparse.ArgumentParser, help: str = MODEL_HELP) -> None:
    """``--model`` (default: the shipped model, or $ELECTRA_DETECT_MODEL); ``help`` says what this verb takes."""
    p.add_argument("--model", default=DEFAULT_MODEL, help=help)


def add_engine_args(p: argparse.ArgumentParser, workers: bool = True, device: bool = False,
                    processes: bool = False, threads: bool = False) -> None:
    """``--engine`` and ``--variant``; ``--workers`` (scoring threads for a file), ``--device``, ``--processes``
    (scoring processes for a file) and ``--threads`` (one engine's own threads) where the verb takes them."""
    p.add_argument("--engine", choices=("auto", "onnx", "torch"), default="auto",
                   help="auto (default): onnxruntime whenever it can serve the model (its shipped export, else one "
                        "exported once and cached under $XDG_CACHE_HOME/electra-detect/onnx), else torch")
    p.add_argument("--variant", choices=VARIANTS,
                   help="ONNX variant (default on a CPU: int8 when it passed the parity gate, unless the export "
                        "measured another clearly faster; on CUDA: optimized, docs/inference.md)")
    if device:
        p.add_argument("--device", help="cpu or cuda[:N] (default: cuda if available)")
    if workers:
        p.add_argument("--workers", type=int, default=0,
                       help="scoring threads for --file (default: one per core; each model call runs on one thread)")
    if processes:
        p.add_argument("--processes", type=int, default=1,
                       help="scoring processes for --file, each loading the model (default 1: threads share one "
                            "process's Python; more keep a GPU busy, docs/inference.md)")
    if threads:
        p.add_argument("--threads", type=int, help="onnxruntime intra-op threads (default: all cores)")


def check_engine_args(args: argparse.Namespace) -> None:
    """The engine flags' values a verb cannot run with, before anything loads."""
    from electra_detect.errors import CliError

    if getattr(args, "workers", 0) < 0:
        raise CliError("--workers must be >= 0 (0 = one per core)")
    if getattr(args, "threads", None) is not None and args.threads < 1:
        raise CliError(f"--threads must be >= 1, got {args.threads}")


def load_detector(args: argparse.Namespace, task: str, threads: int | None = 1, announce: bool = True,
                  **options: Any) -> Any:
    """``Detector.load`` as the flags say, then (``announce``) the engine line on stderr. ``threads=1``: one
    onnxruntime thread per call, for verbs whose stream workers give the parallelism (electra_detect.pipeline).
    ``options`` go to ``Detector.load`` (``assemble=False``: a front that must not assemble a trained part)."""
    from electra_detect.detector import Detector

    check_engine_args(args)
    if getattr(args, "device", None) is not None:
        options.setdefault("device", args.device)
    detector = Detector.load(args.model, task=task, engine=args.engine, variant=args.variant, threads=threads,
                             **options)
    if announce:
        print(detector.describe(), file=sys.stderr, flush=True)
    return detector
