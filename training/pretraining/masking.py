"""Masking, sampling and labels: pure functions of (batch, generator output, RNG).

Follows ``pretrain_helpers.mask`` / ``sample_from_softmax`` in Google's electra repository:
an exact number of positions per sequence (``round(mask_prob * candidates)``, at least one),
never a special or padding token; replacements drawn with Gumbel-max in fp32.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch


class SampleRng:
    """Random numbers drawn sample by sample, each sample (a row of the batch) from its own stream, seeded by the
    run's seed and the sample's place in the run's stream of blocks. A sample's masking and sampling then do not
    depend on the rank, micro-batch or resumed process that holds it: one process and N ranks (on one node or many)
    with the same global batch draw the same numbers, and a resumed run needs no saved sampling state."""

    def __init__(self, seed: int, first_sample: int, count: int, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self.generators = [torch.Generator(device=self.device).manual_seed(sample_seed(seed, first_sample + i))
                           for i in range(count)]

    def rand(self, shape: Sequence[int], counts: torch.Tensor | None = None) -> torch.Tensor:
        """Uniform [0, 1) fp32 of ``shape``: row ``i`` from sample ``i``'s stream; with ``counts`` (how many of the
        leading rows belong to each sample, in sample order), sample ``i`` gives ``counts[i]`` rows."""
        tail = tuple(shape[1:])
        if counts is None:
            if shape[0] != len(self.generators):
                raise ValueError(f"{shape[0]} rows for {len(self.generators)} samples")
            return torch.stack([torch.rand(tail, generator=g, device=self.device) for g in self.generators])
        return torch.cat([torch.rand((int(c), *tail), generator=g, device=self.device)
                          for g, c in zip(self.generators, counts.tolist(), strict=True)])


def sample_seed(seed: int, sample: int) -> int:
    """A 63-bit seed for sample ``sample`` of a run seeded ``seed`` (NumPy's SeedSequence: well mixed, so neighbouring
    samples' streams are unrelated)."""
    return int(np.random.SeedSequence([seed, sample]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def uniform(shape: Sequence[int], generator: torch.Generator | SampleRng, device: torch.device,
            counts: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.rand`` from one generator, or sample by sample from a :class:`SampleRng`."""
    if isinstance(generator, SampleRng):
        return generator.rand(shape, counts)
    return torch.rand(tuple(shape), generator=generator, device=device, dtype=torch.float32)


@dataclass
class MaskedBatch:
    """The generator's input and what it must predict."""

    input_ids: torch.Tensor  # [B, T] with [MASK] (or the kept original) at masked positions
    masked: torch.Tensor  # [B, T] bool: positions the generator predicts
    original: torch.Tensor  # [B, T] the uncorrupted ids


def candidate_positions(input_ids: torch.Tensor, attention_mask: torch.Tensor,
                        special_ids: Iterable[int]) -> torch.Tensor:
    """Positions that may be masked: real (non-pad) tokens that are not special tokens."""
    special = torch.tensor(sorted(set(special_ids)), device=input_ids.device)
    return attention_mask.bool() & ~torch.isin(input_ids, special)


def mask_tokens(input_ids: torch.Tensor, attention_mask: torch.Tensor, *, mask_id: int,
                special_ids: Iterable[int], mask_prob: float, generator: torch.Generator | SampleRng,
                keep_original_prob: float = 0.0, max_predictions: int = 0) -> MaskedBatch:
    """Choose exactly ``max(1, round(mask_prob * n))`` candidate positions per sequence.

    ``keep_original_prob`` of the chosen positions keep their token instead of [MASK] (the
    reference code's 85/15 split uses 0.15); they are still predicted by the generator.
    """
    candidates = candidate_positions(input_ids, attention_mask, special_ids)
    num_candidates = candidates.sum(dim=1)
    num_to_mask = torch.round(num_candidates.float() * mask_prob).long().clamp(min=1)
    if max_predictions:
        num_to_mask = num_to_mask.clamp(max=max_predictions)
    num_to_mask = torch.minimum(num_to_mask, num_candidates)

    # A random rank per position, candidates first: the lowest k ranks of each row are masked.
    scores = uniform(input_ids.shape, generator, input_ids.device)
    scores = scores.masked_fill(~candidates, 2.0)
    ranks = scores.argsort(dim=1).argsort(dim=1)
    masked = ranks < num_to_mask.unsqueeze(1)

    corrupted = input_ids.clone()
    replace = masked
    if keep_original_prob > 0:
        keep = uniform(input_ids.shape, generator, input_ids.device) < keep_original_prob
        replace = masked & ~keep
    corrupted[replace] = mask_id
    return MaskedBatch(input_ids=corrupted, masked=masked, original=input_ids)


@torch.no_grad()
def gumbel_sample(logits: torch.Tensor, generator: torch.Generator | SampleRng, temperature: float = 1.0,
                  counts: torch.Tensor | None = None) -> torch.Tensor:
    """Sample token ids from ``softmax(logits / temperature)`` with the Gumbel-max trick in fp32. ``counts``: the
    masked positions of each sample (``logits`` holds them row-major), for a :class:`SampleRng`.

    Runs under ``no_grad``: no gradient flows from the discriminator into the generator.
    """
    noise = uniform(logits.shape, generator, logits.device, counts)
    gumbel = -torch.log(-torch.log(noise.clamp(min=1e-9, max=1.0 - 1e-7)))
    return (logits.detach().float() / temperature + gumbel).argmax(dim=-1)


def replace_with_samples(batch: MaskedBatch, sampled: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Discriminator input and labels from the generator's samples at the masked positions.

    ``sampled`` holds one id per masked position (row-major order). A sample equal to the
    original token is labelled 0 (original), as in the paper.
    """
    disc_input = batch.original.clone()
    disc_input[batch.masked] = sampled.to(disc_input.dtype)
    labels = (disc_input != batch.original).long()
    return disc_input, labels
