"""Engines: interchangeable runners that map padded input ids to discriminator logits.

``TorchEngine`` (``torch_engine``) runs the safetensors weights; ``OnnxEngine`` (``onnx_engine``) runs an
export under onnxruntime (CUDA first, loud CPU fallback). Which one runs is decided in ``Detector.load``
(``engine="auto"``: the export when the model dir holds a usable one, else torch).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

ENGINES = ("auto", "torch", "onnx")


class Engine(Protocol):
    """Maps padded input ids to discriminator logits [batch, seq]."""

    name: str
    provider: str  # where it actually runs: "cpu", "cuda:0", "CUDAExecutionProvider", ...
    max_positions: int

    def logits(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray: ...
