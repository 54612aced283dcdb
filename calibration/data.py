"""Labelled (logit, label) pairs for fitting and checking calibration, from two sources.

- ``rtd``: held-out text corrupted by the run's own generator, exactly the pre-training task
  (mask 15%, sample with Gumbel-max, label = sample differs from the original), every real token.
- ``ged``: GED data (any reader of ``electra_detect.tasks.ged``); one pair per whitespace token, its logit
  being the max over its subwords (the word score's logit, since the sigmoid is monotone).

The corruption keeps each subword's character offsets into the *original* text, so the POS-bias
analysis can tag the original words with spaCy and ask which of them the generator replaced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from electra_detect.batching import pad_ids
from electra_detect.calibration import CalibrationError
from electra_detect.detector import Detector
from electra_detect.tasks.ged.alignment import to_token_scores
from electra_detect.tasks.ged.readers import GedSentence


@dataclass
class CorruptedText:
    """One text after the pre-training corruption, scored by the discriminator (raw logits).

    Arrays run over the sequence's real tokens, ``[CLS]`` and ``[SEP]`` included (offsets (0, 0)).
    """

    text: str
    ids: np.ndarray  # [n] the original token ids
    offsets: np.ndarray  # [n, 2] character span of each subword in ``text`` (the original)
    special: np.ndarray  # [n] bool: [CLS] / [SEP] (no characters; [UNK] has some and is kept)
    masked: np.ndarray  # [n] bool: the generator predicted this position
    replaced: np.ndarray  # [n] int: 1 = the sample differs from the original (the RTD label)
    logits: np.ndarray  # [n] raw discriminator logits on the corrupted sequence


def corrupt_texts(detector: Detector, generator_dir: Path, texts: Sequence[str], seed: int = 0,
                  mask_prob: float = 0.15, batch_size: int = 16, progress: bool = False) -> list[CorruptedText]:
    """Mask ``mask_prob`` of each text's subwords, fill them with the run's generator (Gumbel-max
    samples, as in pre-training), and score the result through ``Detector.raw_logits``.

    Texts longer than the model window are truncated (the tail is not scored).
    """
    from tqdm import tqdm
    from transformers import AutoModelForMaskedLM

    from electra_detect.training.pretraining.masking import gumbel_sample, mask_tokens, replace_with_samples

    generator = AutoModelForMaskedLM.from_pretrained(str(generator_dir), use_safetensors=True).eval()
    tok = detector.tokenizer
    rng = torch.Generator().manual_seed(seed)
    encoded = tok(list(texts), truncation=True, max_length=detector.max_length, return_offsets_mapping=True)
    out: list[CorruptedText] = []
    starts = range(0, len(texts), batch_size)
    for first in tqdm(starts, desc="corrupt + score", unit="batch", disable=not progress):
        chunk = encoded["input_ids"][first:first + batch_size]
        ids, attention = (torch.from_numpy(a) for a in pad_ids(chunk, tok.pad_token_id))
        masked = mask_tokens(ids, attention, mask_id=tok.mask_token_id, special_ids=tok.all_special_ids,
                             mask_prob=mask_prob, generator=rng)
        with torch.inference_mode():
            gen_logits = generator(input_ids=masked.input_ids, attention_mask=attention).logits[masked.masked]
        disc_input, labels = replace_with_samples(masked, gumbel_sample(gen_logits, rng))
        logits = detector.raw_logits(disc_input.numpy(), attention.numpy())
        for row, seq in enumerate(chunk):
            n = len(seq)
            offsets = np.asarray(encoded["offset_mapping"][first + row], dtype=np.int64).reshape(-1, 2)
            out.append(CorruptedText(
                text=texts[first + row], ids=np.asarray(seq, dtype=np.int64), offsets=offsets,
                special=np.isin(seq, [tok.cls_token_id, tok.sep_token_id]), masked=masked.masked[row, :n].numpy(),
                replaced=labels[row, :n].numpy().astype(np.int64), logits=logits[row, :n].astype(np.float64)))
    return out


def rtd_pairs(detector: Detector, generator_dir: Path, texts: Sequence[str], seed: int = 0,
              mask_prob: float = 0.15, batch_size: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """(raw logit, replaced label) for every real token of the corrupted texts."""
    corrupted = corrupt_texts(detector, generator_dir, texts, seed, mask_prob, batch_size)
    return (np.concatenate([c.logits for c in corrupted]),
            np.concatenate([c.replaced for c in corrupted]).astype(float))


def ged_pairs(detector: Detector, sentences: Sequence[GedSentence]) -> tuple[np.ndarray, np.ndarray]:
    if detector.calibrator is not None:
        raise CalibrationError("fit calibration on raw scores: load the Detector with calibrated=False")
    logits, labels = [], []
    for sentence, result in zip(sentences, detector.score([s.text for s in sentences]), strict=True):
        p = np.clip(np.array([t.p_replaced for t in result.tokens]), 1e-12, 1 - 1e-12)
        pieces = zip((t.start for t in result.tokens), np.log(p / (1 - p)), strict=True)
        values = to_token_scores(sentence.tokens, pieces)
        logits.append(values)
        labels.append(np.asarray(sentence.labels, dtype=float))
    return np.concatenate(logits), np.concatenate(labels)
