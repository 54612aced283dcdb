"""Labelled (logit, label) pairs for fitting and checking calibration, from two sources.

- ``rtd``: held-out text corrupted by the run's own generator, exactly the pre-training task
  (mask 15%, sample with Gumbel-max, label = sample differs from the original), every real token.
- ``ged``: GED data (any reader of ``electra_detect.ged``); one pair per whitespace token, its logit
  being the max over its subwords (the word score's logit, since the sigmoid is monotone).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from electra_detect.detector import Detector
from electra_detect.ged import GedSentence, to_token_scores


def rtd_pairs(detector: Detector, generator_dir: Path, texts: Sequence[str], seed: int = 0,
              mask_prob: float = 0.15, batch_size: int = 16) -> tuple[np.ndarray, np.ndarray]:
    from transformers import ElectraForMaskedLM

    from training.masking import gumbel_sample, mask_tokens, replace_with_samples

    generator = ElectraForMaskedLM.from_pretrained(str(generator_dir), use_safetensors=True).eval()
    tok = detector.tokenizer
    rng = torch.Generator().manual_seed(seed)
    encoded = tok(list(texts), truncation=True, max_length=detector.max_length)["input_ids"]
    logits_out, labels_out = [], []
    for first in range(0, len(encoded), batch_size):
        chunk = encoded[first:first + batch_size]
        width = max(len(ids) for ids in chunk)
        ids = torch.full((len(chunk), width), tok.pad_token_id)
        for row, seq in enumerate(chunk):
            ids[row, :len(seq)] = torch.tensor(seq)
        attention = (ids != tok.pad_token_id).long()
        masked = mask_tokens(ids, attention, mask_id=tok.mask_token_id, special_ids=tok.all_special_ids,
                             mask_prob=mask_prob, generator=rng)
        with torch.inference_mode():
            gen_logits = generator(input_ids=masked.input_ids, attention_mask=attention).logits[masked.masked]
        disc_input, labels = replace_with_samples(masked, gumbel_sample(gen_logits, rng))
        logits = detector.raw_logits(disc_input.numpy(), attention.numpy())
        real = attention.bool().numpy()
        logits_out.append(logits[real])
        labels_out.append(labels.numpy()[real])
    return np.concatenate(logits_out), np.concatenate(labels_out).astype(float)


def ged_pairs(detector: Detector, sentences: Sequence[GedSentence]) -> tuple[np.ndarray, np.ndarray]:
    if detector.calibrator is not None:
        raise ValueError("fit calibration on raw scores: load the Detector with calibrated=False")
    logits, labels = [], []
    for sentence, result in zip(sentences, detector.score([s.text for s in sentences]), strict=True):
        p = np.clip(np.array([t.p_replaced for t in result.tokens]), 1e-12, 1 - 1e-12)
        pieces = zip((t.start for t in result.tokens), np.log(p / (1 - p)), strict=True)
        values = to_token_scores(sentence.tokens, pieces)
        logits.append(values)
        labels.append(np.asarray(sentence.labels, dtype=float))
    return np.concatenate(logits), np.concatenate(labels)
