"""Which exported variant a device runs. On a CPU: the one measured fastest when the export was made, where it
was made (``timing.py``), as the manifest records it (``"preferred": {"cpu": ...}``); a fixed order where nothing
was measured. On CUDA: a fixed order, measured end to end on an H200 (docs/inference.md, "On a GPU: measured").

The engine alone, which is all an export can time, ranks the CUDA variants the other way round: on the Detector's
own batches fp16 ran 1.12x faster than the fused fp32 graph (optimized), yet ``Detector.score`` ran 8,237
sentences/s in fp16 against 10,048 in optimized, and ``Detector.stream`` 857 against 11,915. So an export no longer
times CUDA, and a ``"cuda"`` entry an older export recorded is not read. int8 is never chosen on CUDA: dynamic int8 has
no fast CUDA kernels (56,000 tokens/s against fp16's 4.78M on an H200, ../shared/DEVICE.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# int8 first on CPU: an export holds it only when it passed the parity gate (>= 99% of tokens flagged alike),
# and it ran fastest here (benchmarks/results/cli_speed); then exact fp32, whose plain graph under onnxruntime's
# online optimisations beat the offline-fused one (benchmarks/results/inference).
CPU_PREFERENCE = ("int8", "fp32", "optimized", "fp16")
GPU_PREFERENCE = ("optimized", "fp32", "fp16")  # end to end on an H200 (benchmarks/results/gpu_serving); never int8
MARGIN = 0.8  # a measured variant replaces the fixed order's choice when it takes under 80% of its time


def pick_variant(manifest: dict[str, Any], exported: Sequence[str], cuda: bool) -> str:
    """The variant to run: on a CPU the one the export measured fastest when it recorded it; else the first of
    the device's fixed order that was exported (on CUDA, int8 only when nothing else was)."""
    measured = None if cuda else (manifest.get("preferred") or {}).get("cpu")
    if measured in exported:
        return measured
    order = GPU_PREFERENCE if cuda else CPU_PREFERENCE
    return next((v for v in order if v in exported), exported[0])
