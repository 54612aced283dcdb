"""Which exported variant a device runs: the one measured fastest when the export was made, where it was made
(``timing.py``), as the manifest records it (``"preferred": {"cpu": ..., "cuda": ...}``); a fixed order where nothing
was measured.

int8 is never chosen on CUDA: dynamic int8 has no fast CUDA kernels (56,000 tokens/s against fp16's 4.78M on an
H200, ../shared/DEVICE.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
