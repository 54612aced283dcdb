"""Generator + discriminator with shared embeddings, and the ELECTRA loss.

Both halves are plain ``transformers`` models, so the discriminator saves as an
``ElectraForPreTraining`` directory and the generator as an ``ElectraForMaskedLM`` one.
The whole embeddings block (token, position, type tables and their LayerNorm) is one module
used by both, as in Google's implementation (``embedding_scope="electra"``).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from transformers import ElectraForMaskedLM, ElectraForPreTraining

from training import objectives
from training.config import ModelConfig
from training.masking import MaskedBatch
from training.objectives import ElectraOutput, electra_loss

__all__ = ["ElectraOutput", "ElectraPretrainingModel", "electra_loss"]


class ElectraPretrainingModel(nn.Module):
    """The pair trained together; only the discriminator is kept for detection."""

    def __init__(self, generator: ElectraForMaskedLM, discriminator: ElectraForPreTraining,
                 tie_all: bool = False, objective: str = "electra") -> None:
        super().__init__()
        self.generator = generator
        self.discriminator = discriminator
        self.tie_all = tie_all
        self.objective = objective
        self.stage = ""  # two-stage training: "mlm", then "disc" (training/objectives.py)
        # MLM objectives: an MLM head on the discriminator's encoder, so every objective trains the same encoder.
        self.mlm = ElectraForMaskedLM(discriminator.config) if objectives.has_mlm_head(objective) else None
        self._tie()

    @classmethod
    def from_config(cls, model_config: ModelConfig, vocab_size: int,
                    objective: str = "electra") -> ElectraPretrainingModel:
        generator = ElectraForMaskedLM(model_config.generator_config(vocab_size))
        discriminator = ElectraForPreTraining(model_config.discriminator_config(vocab_size))
        return cls(generator, discriminator, tie_all=model_config.tie_all, objective=objective)

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
        if self.mlm is not None:
            self.mlm.electra = self.discriminator.electra
            self.mlm.generator_lm_head.weight = self.discriminator.electra.embeddings.word_embeddings.weight

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

    def mlm_head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits of the MLM objectives' head for already-selected hidden states."""
        if self.mlm is None:
            raise ValueError(f"objective {self.objective!r} has no MLM head on the discriminator")
        return self.mlm.generator_lm_head(self.mlm.generator_predictions(hidden))

    def mlm_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   positions: torch.Tensor) -> torch.Tensor:
        """The MLM objectives' logits at ``positions`` only (discriminator encoder + MLM head)."""
        hidden = self.discriminator.electra(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.mlm_head(hidden[positions])

    def start_second_stage(self) -> bool:
        """Two-stage training: initialise the discriminator's encoder from the MLM-trained generator.

        Returns whether the weights were copied: they can be only when both have one shape
        (``gen_fraction = 1`` and a preset whose FFN is 4x its width, as the paper's two-stage run);
        otherwise only the shared
        embeddings carry over from stage one.
        """
        self.stage = "disc"
        source, target = self.generator.electra, self.discriminator.electra
        pairs = [(module, getattr(source, name)) for name, module in target.named_children()
                 if name != "embeddings"]  # the embeddings are already one shared module
        same_shape = all({k: v.shape for k, v in t.state_dict().items()} == {k: v.shape for k, v in
                                                                              s.state_dict().items()}
                         for t, s in pairs)
        if not same_shape:
            return False
        with torch.no_grad():
            for module, origin in pairs:
                module.load_state_dict(origin.state_dict())
        return True

    def forward(self, batch: MaskedBatch, attention_mask: torch.Tensor, rng: torch.Generator,
                disc_weight: float, temperature: float = 1.0) -> ElectraOutput:
        return objectives.compute(self, self.objective, self.stage, batch, attention_mask, rng, disc_weight,
                                  temperature)
