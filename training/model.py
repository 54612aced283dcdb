"""Generator + discriminator with shared embeddings, and the ELECTRA loss.

Both halves are plain ``transformers`` models, so the discriminator saves as an
``ElectraForPreTraining`` directory and the generator as an ``ElectraForMaskedLM`` one.
The whole embeddings block (token, position, type tables and their LayerNorm) is one module
used by both, as in Google's implementation (``embedding_scope="electra"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import ElectraForMaskedLM, ElectraForPreTraining

from training.config import ModelConfig
from training.masking import MaskedBatch, gumbel_sample, replace_with_samples


@dataclass
class ElectraOutput:
    loss: torch.Tensor
    mlm_loss: torch.Tensor
    disc_loss: torch.Tensor
    mlm_logits: torch.Tensor  # [num_masked, vocab], masked positions only
    disc_logits: torch.Tensor  # [B, T]
    disc_labels: torch.Tensor  # [B, T] 1 = replaced
    sampled: torch.Tensor  # [num_masked]


def electra_loss(mlm_logits: torch.Tensor, mlm_targets: torch.Tensor, disc_logits: torch.Tensor,
                 disc_labels: torch.Tensor, attention_mask: torch.Tensor,
                 disc_weight: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``L_MLM + disc_weight * L_Disc``: mean CE over masked positions, mean BCE over real tokens."""
    mlm_loss = F.cross_entropy(mlm_logits.float(), mlm_targets)
    real = attention_mask.bool()
    disc_loss = F.binary_cross_entropy_with_logits(disc_logits.float()[real], disc_labels.float()[real])
    return mlm_loss + disc_weight * disc_loss, mlm_loss, disc_loss


class ElectraPretrainingModel(nn.Module):
    """The pair trained together; only the discriminator is kept for detection."""

    def __init__(self, generator: ElectraForMaskedLM, discriminator: ElectraForPreTraining,
                 tie_all: bool = False) -> None:
        super().__init__()
        self.generator = generator
        self.discriminator = discriminator
        self.tie_all = tie_all
        self._tie()

    @classmethod
    def from_config(cls, model_config: ModelConfig, vocab_size: int) -> ElectraPretrainingModel:
        generator = ElectraForMaskedLM(model_config.generator_config(vocab_size))
        discriminator = ElectraForPreTraining(model_config.discriminator_config(vocab_size))
        return cls(generator, discriminator, tie_all=model_config.tie_all)

    @classmethod
    def from_pretrained_dirs(cls, generator_dir: str | Path, discriminator_dir: str | Path,
                             tie_all: bool = False) -> ElectraPretrainingModel:
        generator = ElectraForMaskedLM.from_pretrained(str(generator_dir))
        discriminator = ElectraForPreTraining.from_pretrained(str(discriminator_dir))
        return cls(generator, discriminator, tie_all=tie_all)

    def _tie(self) -> None:
        if self.tie_all:
            self.generator.electra = self.discriminator.electra
        else:
            self.generator.electra.embeddings = self.discriminator.electra.embeddings
        # The MLM output layer stays tied to the (now shared) token embedding table.
        self.generator.generator_lm_head.weight = self.discriminator.electra.embeddings.word_embeddings.weight

    def shares_embeddings(self) -> bool:
        gen, disc = self.generator.electra.embeddings, self.discriminator.electra.embeddings
        return (gen.word_embeddings.weight is disc.word_embeddings.weight
                and gen.position_embeddings.weight is disc.position_embeddings.weight
                and self.generator.generator_lm_head.weight is disc.word_embeddings.weight)

    def generator_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                         positions: torch.Tensor) -> torch.Tensor:
        """MLM logits at ``positions`` (bool [B, T]) only: the vocabulary projection, the largest
        matrix product of the generator, is never applied to unmasked positions."""
        hidden = self.generator.electra(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        selected = hidden[positions]
        return self.generator.generator_lm_head(self.generator.generator_predictions(selected))

    def forward(self, batch: MaskedBatch, attention_mask: torch.Tensor, rng: torch.Generator,
                disc_weight: float, temperature: float = 1.0) -> ElectraOutput:
        mlm_logits = self.generator_logits(batch.input_ids, attention_mask, batch.masked)
        targets = batch.original[batch.masked]
        sampled = gumbel_sample(mlm_logits, rng, temperature)
        disc_input, labels = replace_with_samples(batch, sampled)
        disc_logits = self.discriminator(input_ids=disc_input, attention_mask=attention_mask).logits
        loss, mlm_loss, disc_loss = electra_loss(mlm_logits, targets, disc_logits, labels,
                                                 attention_mask, disc_weight)
        return ElectraOutput(loss, mlm_loss, disc_loss, mlm_logits, disc_logits, labels, sampled)
