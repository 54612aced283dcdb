"""Masking statistics, special tokens, Gumbel sampling and replaced-token labels."""

from __future__ import annotations

import pytest
import torch

from electra_detect.training.pretraining.masking import (
    candidate_positions,
    gumbel_sample,
    mask_tokens,
    replace_with_samples,
)

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIALS = [PAD, UNK, CLS, SEP, MASK]


def make_batch(lengths: list[int], width: int, vocab: int = 100, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows ``[CLS] words... [SEP] words... [SEP] [PAD]...`` with a mid-sequence [SEP]."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), width), PAD)
    attention = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, :length] = torch.randint(5, vocab, (length,), generator=g)
        ids[row, 0] = CLS
        ids[row, length - 1] = SEP
        ids[row, length // 2] = SEP
        attention[row, :length] = 1
    return ids, attention


def test_exact_count_per_sequence_and_specials_never_masked() -> None:
    lengths = [64, 40, 9, 5, 3, 64]
    ids, attention = make_batch(lengths, 64)
    batch = mask_tokens(ids, attention, mask_id=MASK, special_ids=SPECIALS, mask_prob=0.15,
                        generator=torch.Generator().manual_seed(1))
    candidates = candidate_positions(ids, attention, SPECIALS)
    for row in range(len(lengths)):
        n = int(candidates[row].sum())
        expected = min(n, max(1, round(0.15 * n)))
        assert int(batch.masked[row].sum()) == expected, (row, n)
    assert not batch.masked[~candidates].any(), "a special or padding position was masked"
    assert (batch.input_ids[batch.masked] == MASK).all()
    assert torch.equal(batch.input_ids[~batch.masked], ids[~batch.masked])
    assert torch.equal(batch.original, ids)


def test_row_without_candidates_masks_nothing() -> None:
    ids = torch.tensor([[CLS, SEP, PAD, PAD]])
    attention = torch.tensor([[1, 1, 0, 0]])
    batch = mask_tokens(ids, attention, mask_id=MASK, special_ids=SPECIALS, mask_prob=0.15,
                        generator=torch.Generator().manual_seed(0))
    assert not batch.masked.any()


def test_every_candidate_position_is_masked_about_fifteen_percent_of_the_time() -> None:
    ids, attention = make_batch([66] * 4000, 66)
    batch = mask_tokens(ids, attention, mask_id=MASK, special_ids=SPECIALS, mask_prob=0.15,
                        generator=torch.Generator().manual_seed(2))
    candidates = candidate_positions(ids, attention, SPECIALS)
    rate = batch.masked.float().sum(0) / candidates.float().sum(0).clamp(min=1)
    per_position = rate[candidates[0]]
    # 63 candidates -> 9 masked per row = 14.3%; each position should be hit at that rate.
    assert per_position.mean().item() == pytest.approx(9 / 63, abs=1e-6)
    assert (per_position - 9 / 63).abs().max().item() < 0.03


def test_keep_original_split_and_prediction_cap() -> None:
    ids, attention = make_batch([128] * 800, 128)
    batch = mask_tokens(ids, attention, mask_id=MASK, special_ids=SPECIALS, mask_prob=0.15,
                        generator=torch.Generator().manual_seed(3), keep_original_prob=0.15)
    kept = (batch.input_ids[batch.masked] != MASK).float().mean().item()
    assert kept == pytest.approx(0.15, abs=0.02)
    capped = mask_tokens(ids, attention, mask_id=MASK, special_ids=SPECIALS, mask_prob=0.15,
                         generator=torch.Generator().manual_seed(3), max_predictions=5)
    assert (capped.masked.sum(1) == 5).all()


def test_gumbel_sampling_follows_softmax_and_temperature() -> None:
    logits = torch.log(torch.tensor([0.7, 0.2, 0.1])).repeat(20000, 1)
    g = torch.Generator().manual_seed(0)
    freq = torch.bincount(gumbel_sample(logits, g), minlength=3).float() / 20000
    assert torch.allclose(freq, torch.tensor([0.7, 0.2, 0.1]), atol=0.015)
    sharp = torch.bincount(gumbel_sample(logits, g, temperature=0.1), minlength=3).float() / 20000
    assert sharp[0] > 0.99


def test_no_gradient_flows_through_sampling() -> None:
    logits = torch.randn(8, 50, requires_grad=True)
    sampled = gumbel_sample(logits * 2, torch.Generator().manual_seed(0))
    assert not sampled.requires_grad
    assert sampled.dtype == torch.long


def test_sample_equal_to_original_is_labelled_original() -> None:
    ids = torch.tensor([[CLS, 10, 11, 12, 13, SEP]])
    attention = torch.ones_like(ids)
    batch = mask_tokens(ids, attention, mask_id=MASK, special_ids=SPECIALS, mask_prob=0.5,
                        generator=torch.Generator().manual_seed(0))
    originals = ids[batch.masked]
    assert len(originals) == 2
    # First masked position gets its own token back, the second a different one.
    sampled = torch.stack([originals[0], originals[1] + 50])
    disc_input, labels = replace_with_samples(batch, sampled)
    positions = batch.masked.nonzero()[:, 1].tolist()
    assert labels[0, positions[0]] == 0 and labels[0, positions[1]] == 1
    assert labels.sum() == 1
    assert disc_input[0, positions[0]] == originals[0]
    assert disc_input[0, positions[1]] == originals[1] + 50
