"""Pseudo-log-likelihood from our generator: one masked copy per subword, checked against a manual pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from electra_detect.tasks.pll import GeneratorScorer


def test_pll_matches_a_manual_masked_pass(micro_run: Path) -> None:
    scorer = GeneratorScorer.load(micro_run)
    texts = ["The farmer saw a red house.", "A doctor opened the window again."]
    results = scorer.score(texts, batch_size=5)  # batches cut across texts
    tok = scorer.tokenizer
    for text, result in zip(texts, results, strict=True):
        ids = tok(text)["input_ids"]
        assert len(result.log_probs) == len(ids) - 2
        position = 2
        masked = list(ids)
        masked[position] = tok.mask_token_id
        with torch.inference_mode():
            logits = scorer.model(input_ids=torch.tensor([masked])).logits
        expected = logits.log_softmax(-1)[0, position, ids[position]].item()
        assert result.log_probs[position - 1] == pytest.approx(expected, abs=1e-4)
        assert result.pll == pytest.approx(float(result.log_probs.sum()))
        assert (result.log_probs < 0).all()
        assert text[result.offsets[0][0]:result.offsets[0][1]].lower() == tok.convert_ids_to_tokens(ids[1])
