"""Masked-LM scoring (pseudo-log-likelihood, surprisal): the baseline the discriminator is measured against.

Any masked-LM directory (our run's ``generator/``, a pre-trained BERT) on any torch device. One masked copy
per subword (PLL, Salazar et al. 2020): ``log p(observed | rest)``, per token with its character offsets
(surprisal = minus that).
It costs one generator pass per token where the Detector needs one pass per text; that cost gap
is what the GED and reranking benchmarks report. Comparison only: products use ``Detector``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from electra_detect.batching import pad_ids
from electra_detect.errors import DetectorError


@dataclass
class TokenLogProbs:
    text: str
    offsets: list[tuple[int, int]]
    log_probs: np.ndarray  # log p(observed subword | all others), one per subword

    @property
    def pll(self) -> float:
        return float(self.log_probs.sum())

    @property
    def surprisal(self) -> np.ndarray:
        """-log p per subword (nats)."""
        return -self.log_probs


class GeneratorScorer:
    """PLL / surprisal of a masked LM: ``score(texts)`` gives each text's per-token log-probabilities."""

    def __init__(self, model, tokenizer, max_length: int, device: str = "cpu") -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.device = device

    @classmethod
    def load(cls, path: str | Path, device: str | None = None) -> GeneratorScorer:
        """A run dir (its ``generator/``) or any masked-LM directory; ``device`` defaults to CUDA when there."""
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        path = Path(path)
        if (path / "generator").is_dir():
            path = path / "generator"
        if not (path / "config.json").exists():
            raise DetectorError(f"{path} is not a generator directory (no config.json)")
        import torch

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        model = AutoModelForMaskedLM.from_pretrained(str(path), use_safetensors=True).eval().to(device)
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        tokenizer.model_max_length = 1 << 30
        return cls(model, tokenizer, int(model.config.max_position_embeddings), str(device))

    def score(self, texts: Sequence[str], batch_size: int = 64) -> list[TokenLogProbs]:
        import torch

        encodings = self.tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True)
        copies: list[tuple[int, int, list[int]]] = []  # (text index, masked position, ids with [MASK])
        body = self.max_length - 2
        for index, ids in enumerate(encodings["input_ids"]):
            ids = ids[:body]  # the baseline scores the first window only
            for position in range(len(ids)):
                masked = [self.tokenizer.cls_token_id, *ids, self.tokenizer.sep_token_id]
                masked[position + 1] = self.tokenizer.mask_token_id
                copies.append((index, position, masked))
        results = [np.zeros(min(len(ids), body)) for ids in encodings["input_ids"]]
        for first in range(0, len(copies), batch_size):
            batch = copies[first:first + batch_size]
            input_ids, attention = (torch.from_numpy(a).to(self.device)
                                    for a in pad_ids([ids for _, _, ids in batch], self.tokenizer.pad_token_id))
            with torch.inference_mode():
                log_probs = self.model(input_ids=input_ids, attention_mask=attention).logits.float().log_softmax(-1)
            for row, (index, position, _ids) in enumerate(batch):
                observed = encodings["input_ids"][index][position]
                results[index][position] = float(log_probs[row, position + 1, observed])
        return [TokenLogProbs(text, [tuple(o) for o in encodings[i].offsets[:len(results[i])]], results[i])
                for i, text in enumerate(texts)]
