"""Engines: interchangeable runners that map padded input ids to discriminator logits.

``TorchEngine`` (``torch_engine``) runs the safetensors weights; ``OnnxEngine`` (``electra_detect.onnx.engine``) runs an
export under onnxruntime (CUDA first, loud CPU fallback). Which one runs is decided in ``Detector.load``
(``engine="auto"``: the export when the model dir holds a usable one, else torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from electra_detect.edit_tags import TAG_PREFIX

ENGINES = ("auto", "torch", "onnx")


class Engine(Protocol):
    """Maps padded input ids to discriminator logits [batch, seq]; a typed GED model's engine also gives its type
    channels' logits [batch, seq, len(channels)] from the same pass (``outputs``)."""

    name: str
    provider: str  # where it actually runs: "cpu", "cuda:0", "CUDAExecutionProvider", ...
    max_positions: int
    channels: list[str]  # a typed model's channels after "error" ("op:M", ..., "type:DET", ...); [] otherwise

    def logits(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray: ...

    def outputs(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]: ...


def typed_channels(config: dict[str, Any]) -> list[str]:
    """A typed GED model's channel names after ``error`` (``op:M``, ..., ``type:DET``, ...) from its config, else []."""
    labels = config.get("id2label") or {}
    names = [labels[k] for k in sorted(labels, key=int)]
    return names[1:] if len(names) > 1 and names[0] == "error" else []


def is_tag_model(channels: Sequence[str]) -> bool:
    """Whether a typed model's channels are edit tags (``tag:$KEEP``, ...) rather than operations and types."""
    return bool(channels) and channels[0].startswith(TAG_PREFIX)


# Families whose position ids start after the padding id (RoBERTa's scheme, which MPNet shares): position
# ``pad_token_id + 1`` is the first real one, so ``max_position_embeddings`` over-counts by ``pad_token_id + 1``.
PADDING_OFFSET_POSITIONS = ("mpnet", "roberta", "xlm-roberta", "camembert", "data2vec-text")


def usable_positions(config: dict[str, Any]) -> int:
    """The most tokens (specials included) one window may hold for a model with this ``config.json``: its
    ``max_position_embeddings`` (MPNet: 514) less the padding offset of RoBERTa-style families (MPNet: 2 -> 512)."""
    positions = int(config["max_position_embeddings"])
    if config.get("model_type") in PADDING_OFFSET_POSITIONS:
        positions -= int(config.get("pad_token_id", 1)) + 1
    return positions
