"""Which exported variant a device runs: measured when the export is made, where it is made, and recorded in the
manifest (``"preferred": {"cpu": ..., "cuda": ...}``); a fixed order where nothing was measured.

int8 is never chosen on CUDA: dynamic int8 has no fast CUDA kernels (56,000 tokens/s against fp16's 4.78M on an
H200, ../shared/DEVICE.md).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

# int8 first on CPU: an export holds it only when it passed the parity gate (>= 99% of tokens flagged alike),
# and it ran fastest here (benchmarks/results/cli_speed); then exact fp32, whose plain graph under onnxruntime's
# online optimisations beat the offline-fused one (benchmarks/results/inference).
CPU_PREFERENCE = ("int8", "fp32", "optimized", "fp16")
GPU_PREFERENCE = ("fp16", "optimized", "fp32")  # fp16 is what tensor cores are for; never int8
MARGIN = 0.8  # a measured variant replaces the fixed order's choice when it takes under 80% of its time


def pick_variant(manifest: dict[str, Any], exported: Sequence[str], cuda: bool) -> str:
    """The variant to run: the one measured fastest for this device when the export recorded it, else the first
    of the fixed order that was exported (on CUDA, int8 only when nothing else was)."""
    device = "cuda" if cuda else "cpu"
    measured = (manifest.get("preferred") or {}).get(device)
    if measured in exported and not (cuda and measured == "int8"):
        return measured
    order = GPU_PREFERENCE if cuda else CPU_PREFERENCE
    return next((v for v in order if v in exported), exported[0])


def fastest(paths: dict[str, Path], batches: Sequence[tuple[np.ndarray, np.ndarray]], cuda: bool,
            repeats: int = 3) -> dict[str, Any]:
    """Each variant's best time over ``repeats`` passes of ``batches`` (after one warm-up pass) in a session on
    the CPU or CUDA, and the fastest: {"variant", "seconds": {variant: s}}."""
    from electra_detect.onnx.engine import OnnxEngine

    seconds = {}
    for variant, path in paths.items():
        if cuda and variant == "int8":
            continue
        engine = OnnxEngine.from_file(path, cuda=cuda)  # the feeds and outputs every engine call has
        if cuda and engine.provider != "CUDAExecutionProvider":
            return {}  # CUDA listed but not usable here: nothing measured
        run = engine.logits
        for ids, mask in batches:
            run(ids, mask)
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            for ids, mask in batches:
                run(ids, mask)
            best = min(best, time.perf_counter() - started)
        seconds[variant] = round(best, 5)
    return {"variant": min(seconds, key=seconds.__getitem__), "seconds": seconds} if seconds else {}


def measure_preference(paths: dict[str, Path], batches: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """The manifest's ``preferred`` entry: the fastest variant on this machine's CPU, and on its GPU when
    onnxruntime has CUDA, with the times and the machine they were measured on."""
    import platform

    import onnxruntime as ort

    found: dict[str, Any] = {"measured_on": {"machine": platform.machine(), "processor": platform.processor(),
                                             "onnxruntime": ort.__version__}, "seconds": {}}
    devices = [False] + ([True] if "CUDAExecutionProvider" in ort.get_available_providers() else [])
    for cuda in devices:
        result = fastest(paths, batches, cuda)
        if result:
            device, times = "cuda" if cuda else "cpu", result["seconds"]
            usual = pick_variant({}, list(times), cuda)
            # the fixed order stands unless another variant is clearly faster (timings of a few batches are noisy)
            found[device] = result["variant"] if times[result["variant"]] < MARGIN * times[usual] else usual
            found["seconds"][device] = times
    return found
