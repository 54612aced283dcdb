"""The PyTorch engine: a discriminator directory loaded with a stock ``transformers`` class."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.errors import DetectorError


class TorchEngine:
    name = "torch"

    def __init__(self, model_dir: Path, device: str | None = None, threads: int | None = None) -> None:
        import torch

        self._torch = torch
        if threads:  # process-wide: on the shared 2-core CPU one thread per call ran 3x faster than two (cli_speed)
            torch.set_num_threads(threads)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model = load_discriminator(model_dir).to(self.device)
        self.model.eval()
        self.max_positions = int(self.model.config.max_position_embeddings)
        self.provider = str(self.device)

    def logits(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode():
            out = self.model(input_ids=torch.from_numpy(input_ids).to(self.device),
                             attention_mask=torch.from_numpy(attention_mask).to(self.device))
        return replaced_logits(out.logits).float().cpu().numpy()


def load_discriminator(model_dir: str | Path) -> Any:
    """The stock ``transformers`` class of a discriminator directory: ``ElectraForPreTraining`` (ours with
    ``--paper-recipe``, and Google's released ELECTRA discriminators), or a one-label token classifier
    (``AutoModelForTokenClassification``: ``ModernBertForTokenClassification`` for our default recipe)."""
    from transformers import AutoConfig, AutoModelForTokenClassification, ElectraForPreTraining

    config = AutoConfig.from_pretrained(str(model_dir))
    if config.model_type == "electra":
        return ElectraForPreTraining.from_pretrained(str(model_dir), use_safetensors=True)
    if config.num_labels != 1:
        raise DetectorError(f"{model_dir}: a {config.model_type} discriminator needs one label (replaced-token "
                            f"logit), this one has {config.num_labels}")
    return AutoModelForTokenClassification.from_pretrained(str(model_dir), use_safetensors=True)


def replaced_logits(logits: Any) -> Any:
    """[batch, seq] logits whether the head gives [batch, seq] (ELECTRA) or [batch, seq, 1] (token classifier)."""
    return logits[..., 0] if logits.ndim == 3 else logits
