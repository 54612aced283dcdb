"""The PyTorch engine: a discriminator directory loaded with a stock ``transformers`` class."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.engines import typed_channels, usable_positions
from electra_detect.errors import DetectorError


class TorchEngine:
    name = "torch"

    def __init__(self, model_dir: Path, device: str | None = None, threads: int | None = None) -> None:
        import torch

        self._torch = torch
        if threads:  # process-wide: one thread per call beat two on a small CPU (docs/inference.md#speed)
            torch.set_num_threads(threads)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model = load_discriminator(model_dir).to(self.device)
        self.model.eval()
        self.max_positions = usable_positions(self.model.config.to_dict())
        self.provider = str(self.device)
        self.channels = typed_channels(self.model.config.to_dict())

    def logits(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        return self.outputs(input_ids, attention_mask)[0]

    def outputs(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        torch = self._torch
        with torch.inference_mode():
            out = self.model(input_ids=torch.from_numpy(input_ids).to(self.device),
                             attention_mask=torch.from_numpy(attention_mask).to(self.device))
        logits = out.logits.float().cpu().numpy()
        if self.channels:
            return logits[..., 0], logits[..., 1:]
        return replaced_logits(logits), None


def load_discriminator(model_dir: str | Path) -> Any:
    """The stock ``transformers`` class of a discriminator directory: ``ElectraForPreTraining`` (ours with
    ``--paper-recipe``, and Google's released ELECTRA discriminators), or a one-label token classifier
    (``AutoModelForTokenClassification``: ``ModernBertForTokenClassification`` for our default recipe,
    ``MPNetForTokenClassification`` for a GED model trained from the teacher's encoder), or a typed GED model: a token
    classifier whose channel 0 is named ``error`` (training/finetune/ged_finetune.py)."""
    from transformers import AutoConfig, AutoModelForTokenClassification, ElectraForPreTraining

    config = AutoConfig.from_pretrained(str(model_dir))  # read once: the model is built from this copy
    typed = bool(typed_channels(config.to_dict()))
    if config.model_type == "electra" and not typed:
        return ElectraForPreTraining.from_pretrained(str(model_dir), config=config, use_safetensors=True)
    if config.num_labels != 1 and not typed:
        raise DetectorError(f"{model_dir}: a {config.model_type} discriminator needs one label (replaced-token "
                            f"logit), this one has {config.num_labels} (an encoder? `ged train --model` it first)")
    return AutoModelForTokenClassification.from_pretrained(str(model_dir), config=config, use_safetensors=True)


def replaced_logits(logits: Any) -> Any:
    """[batch, seq] logits whether the head gives [batch, seq] (ELECTRA) or [batch, seq, 1] (token classifier)."""
    return logits[..., 0] if logits.ndim == 3 else logits
