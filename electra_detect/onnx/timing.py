"""Timing an export's variants where it is made: which is fastest on this machine's CPU, and on its GPU when
onnxruntime has CUDA (the manifest's ``preferred`` entry, read by ``preference.pick_variant``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.onnx.engine import OnnxEngine
from electra_detect.onnx.preference import MARGIN, pick_variant


def fastest(paths: dict[str, Path], batches: Sequence[tuple[np.ndarray, np.ndarray]], cuda: bool,
            repeats: int = 3) -> dict[str, Any]:
    """Each variant's best time over ``repeats`` passes of ``batches`` (after one warm-up pass) in a session on
    the CPU or CUDA, and the fastest: {"variant", "seconds": {variant: s}}."""
    seconds = {}
    for variant, path in paths.items():
        if cuda and variant == "int8":
            continue
        engine = OnnxEngine.from_file(path, cuda=cuda)  # the feeds every engine call has
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
