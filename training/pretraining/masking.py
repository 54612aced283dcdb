"""Masking, sampling and labels: pure functions of (batch, generator output, RNG).

Follows ``pretrain_helpers.mask`` / ``sample_from_softmax`` in Google's electra repository:
an exact number of positions per sequence (``round(mask_prob * candidates)``, at least one),
never a special or padding token; replacements drawn with Gumbel-max in fp32.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch


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
                special_ids: Iterable[int], mask_prob: float, generator: torch.Generator,
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
    scores = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    scores = scores.masked_fill(~candidates, 2.0)
    ranks = scores.argsort(dim=1).argsort(dim=1)
    masked = ranks < num_to_mask.unsqueeze(1)

    corrupted = input_ids.clone()
    replace = masked
    if keep_original_prob > 0:
        keep = torch.rand(input_ids.shape, generator=generator, device=input_ids.device) < keep_original_prob
        replace = masked & ~keep
    corrupted[replace] = mask_id
    return MaskedBatch(input_ids=corrupted, masked=masked, original=input_ids)


@torch.no_grad()
def gumbel_sample(logits: torch.Tensor, generator: torch.Generator, temperature: float = 1.0) -> torch.Tensor:
    """Sample token ids from ``softmax(logits / temperature)`` with the Gumbel-max trick in fp32.

    Runs under ``no_grad``: no gradient flows from the discriminator into the generator.
    """
    uniform = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=torch.float32)
    gumbel = -torch.log(-torch.log(uniform.clamp(min=1e-9, max=1.0 - 1e-7)))
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
