"""An onnxruntime session over one ONNX file, with the options this project runs every session with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from electra_detect.errors import DetectorError


def open_session(ort: Any, path: Path, cuda: bool, device_id: int, threads: int | None) -> Any:
    """A session on ``path``: CUDA first (GPU ``device_id``) with the CPU behind it when ``cuda``, else the CPU;
    ``threads`` caps the intra-op pool (default: one thread a core)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # our own warning reports a CUDA fallback; ORT's would repeat it per session
    if threads:
        options.intra_op_num_threads = threads
    # no spin-waiting between ops: on a shared 2-core CPU spinning threads starved each other (2 threads ran
    # at half the speed of 1 in benchmarks/cli_speed); idle pool threads now sleep
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    providers: list[Any] = ["CPUExecutionProvider"]
    if cuda:
        providers.insert(0, ("CUDAExecutionProvider", {"device_id": device_id}))
    try:
        return ort.InferenceSession(str(path), sess_options=options, providers=providers)
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
        raise DetectorError(f"onnxruntime cannot load {path}: {exc}") from exc
