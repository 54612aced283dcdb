"""Timing an export's variants where it is made: which is fastest on this machine's CPU (the manifest's
``preferred`` entry, read by ``preference.pick_variant``; CUDA keeps a fixed order, measured end to end there)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.onnx.engine import OnnxEngine
from electra_detect.onnx.preference import MARGIN, pick_variant


def fastest(paths: dict[str, Path], batches: Sequence[tuple[np.ndarray, np.ndarray]],
            repeats: int = 3) -> dict[str, Any]:
    """Each variant's best time over ``repeats`` passes of ``batches`` (after one warm-up pass) in a CPU session,
    and the fastest: {"variant", "seconds": {variant: s}}."""
    seconds = {}
    for variant, path in paths.items():
        run = OnnxEngine.from_file(path).logits  # the feeds every engine call has
        for ids, mask in batches:
            run(ids, mask)
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            for ids, mask in batches:
                run(ids, mask)
            best = min(best, time.perf_counter() - started)
        seconds[variant] = round(best, 5)
    return {"variant": min(seconds, key=seconds.__getitem__), "seconds": seconds}


def measure_preference(paths: dict[str, Path], batches: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """The manifest's ``preferred`` entry: the fastest variant on this machine's CPU, with the times and the
    machine they were measured on."""
    import platform

    import onnxruntime as ort

    times = fastest(paths, batches)["seconds"]
    best, usual = min(times, key=times.__getitem__), pick_variant({}, list(times), cuda=False)
    # the fixed order stands unless another variant is clearly faster (timings of a few batches are noisy)
    return {"measured_on": {"machine": platform.machine(), "processor": platform.processor(),
                            "onnxruntime": ort.__version__},
            "cpu": best if times[best] < MARGIN * times[usual] else usual, "seconds": {"cpu": times}}
