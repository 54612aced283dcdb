"""Generator + discriminator with shared embeddings, and the logits objectives read.

Both halves are plain ``transformers`` models of one encoder family, so the run directory loads
with stock classes and no ``trust_remote_code``:

| architecture | generator/ | discriminator/ |
|---|---|---|
| ``modernbert`` (default; pre-LN, rotary) | ``ModernBertForMaskedLM`` | ``ModernBertForTokenClassification`` |
| ``electra`` (the paper's post-LN encoder) | ``ElectraForMaskedLM`` | ``ElectraForPreTraining`` |

Embedding sharing (``ModelConfig.embedding_sharing``): ``tied`` uses one embeddings module for
both (Google's ``embedding_scope="electra"``); ``gdes`` is DeBERTa-V3's gradient-disentangled
sharing, where the discriminator reads ``stop_gradient(E_gen) + E_delta`` so its 50x-weighted loss
never pulls on the generator's table (the exported discriminator holds the sum); ``none`` keeps
two tables. The generator's output layer is always tied to the table it reads.

The model computes logits, never a loss: ``ModelOutputs`` is one forward pass on a masked batch
(generator logits at the masked positions, its samples, the discriminator's hidden states and
replaced-token logits, the MLM head's logits), and the objectives in ``training/pretraining/objectives.py``
turn it into losses.
"""

from __future__ import annotations

import copy
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from transformers import (
    AutoModelForMaskedLM,
    AutoModelForTokenClassification,
    ElectraForMaskedLM,
    ElectraForPreTraining,
    ModernBertForMaskedLM,
    ModernBertForTokenClassification,
)

from electra_detect.training.pretraining.masking import MaskedBatch, SampleRng, gumbel_sample, replace_with_samples

if TYPE_CHECKING:  # annotations only: config imports the objectives, and so this module, to check names
    from electra_detect.training.pretraining.config import ModelConfig

__all__ = ["ElectraPretrainingModel", "ModelOutputs"]

# Stock classes of each family: (generator, discriminator).
CLASSES = {"electra": (ElectraForMaskedLM, ElectraForPreTraining),
           "modernbert": (ModernBertForMaskedLM, ModernBertForTokenClassification)}


def encoder_of(model: nn.Module) -> nn.Module:
    """The bare encoder inside a head model (``ElectraModel`` or ``ModernBertModel``)."""
    return model.electra if hasattr(model, "electra") else model.model


def token_table(model: nn.Module) -> nn.Embedding:
    embeddings = encoder_of(model).embeddings
    return embeddings.word_embeddings if hasattr(embeddings, "word_embeddings") else embeddings.tok_embeddings


def output_layer(mlm_model: nn.Module) -> nn.Linear:
    return mlm_model.generator_lm_head if hasattr(mlm_model, "generator_lm_head") else mlm_model.decoder


def vocab_logits(mlm_model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """[N, hidden] -> [N, vocab] through the model's MLM head."""
    if hasattr(mlm_model, "generator_lm_head"):
        return mlm_model.generator_lm_head(mlm_model.generator_predictions(hidden))
    return mlm_model.decoder(mlm_model.head(hidden))


def replaced_logit(discriminator: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """[..., hidden] -> [...]: the replaced-token head's logit."""
    if hasattr(discriminator, "discriminator_predictions"):
        return discriminator.discriminator_predictions(hidden)
    return discriminator.classifier(discriminator.drop(discriminator.head(hidden))).squeeze(-1)


class ElectraPretrainingModel(nn.Module):
    """The pair trained together; only the discriminator is kept for detection."""

    def __init__(self, generator: nn.Module, discriminator: nn.Module, tie_all: bool = False,
                 mlm_head: bool = False, sharing: str = "tied") -> None:
        super().__init__()
        self.generator = generator
        self.discriminator = discriminator
        self.architecture = discriminator.config.model_type
        self.tie_all = tie_all
        self.sharing = sharing
        # MLM objectives (``Objective.mlm_head`` in training/pretraining/objectives.py): an MLM head on the
        # discriminator's encoder, so every objective trains the same encoder.
        mlm_class = CLASSES[self.architecture][0]
        self.mlm = mlm_class(discriminator.config) if mlm_head else None
        self._tie()

    @classmethod
    def from_config(cls, model_config: ModelConfig, vocab_size: int,
                    mlm_head: bool = False) -> ElectraPretrainingModel:
        generator_class, discriminator_class = CLASSES[model_config.architecture]
        generator = generator_class(model_config.generator_config(vocab_size))
        discriminator = discriminator_class(model_config.discriminator_config(vocab_size))
        if model_config.embedding_sharing == "gdes":  # the residual starts at zero: E_disc = E_gen at step 0
            nn.init.zeros_(token_table(discriminator).weight)
        return cls(generator, discriminator, tie_all=model_config.tie_all, mlm_head=mlm_head,
                   sharing=model_config.embedding_sharing)

    @classmethod
    def from_pretrained_dirs(cls, generator_dir: str | Path, discriminator_dir: str | Path,
                             tie_all: bool = False, sharing: str = "tied") -> ElectraPretrainingModel:
        generator = AutoModelForMaskedLM.from_pretrained(str(generator_dir))
        discriminator = (ElectraForPreTraining.from_pretrained(str(discriminator_dir))
                         if generator.config.model_type == "electra"
                         else AutoModelForTokenClassification.from_pretrained(str(discriminator_dir)))
        return cls(generator, discriminator, tie_all=tie_all, sharing=sharing)

    def load_exported_weights(self, run_dir: str | Path) -> None:
        """Copy the weights of a run's exported ``generator/`` and ``discriminator/`` (and ``mlm/``) into this
        same-shaped pair: continued pre-training (``--init-from``). Under GDES the exported discriminator
        holds E_gen + E_delta, so the residual is recovered by subtracting the generator's table."""
        run_dir = Path(run_dir)
        source = ElectraPretrainingModel.from_pretrained_dirs(run_dir / "generator", run_dir / "discriminator",
                                                              sharing="none")  # each half as it was exported
        pairs = [(self.generator, source.generator), (self.discriminator, source.discriminator)]
        if self.mlm is not None and (run_dir / "mlm").is_dir():
            pairs.append((self.mlm, AutoModelForMaskedLM.from_pretrained(str(run_dir / "mlm"))))
        with torch.no_grad():
            for target, origin in pairs:  # a shared table is written twice with the same values
                target.load_state_dict(origin.state_dict())
            if self.sharing == "gdes":
                token_table(self.discriminator).weight.sub_(token_table(self.generator).weight)

    def load_encoder_weights(self, tensors: dict[str, torch.Tensor]) -> None:
        """Warm start (training/pretraining/encoders.py): ``tensors`` keyed as inside ``ElectraModel`` become the
        discriminator's encoder (and its replaced-token head, when given); the generator takes the same
        embeddings and the lowest of those layers. The MLM heads (and a BERT's replaced-token head) stay fresh."""
        if self.architecture != "electra":
            raise ValueError("a warm start from a BERT-family encoder needs architecture 'electra'")
        encoder = {k: v for k, v in tensors.items() if not k.startswith("discriminator_predictions.")}
        head = {k.split(".", 1)[1]: v for k, v in tensors.items() if k.startswith("discriminator_predictions.")}
        depth = self.generator.config.num_hidden_layers
        lower = {k: v for k, v in encoder.items()
                 if not k.startswith("encoder.layer.") or int(k.split(".")[2]) < depth}
        with torch.no_grad():
            for model, state in ((self.discriminator, encoder), (self.generator, lower)):
                missing, unexpected = encoder_of(model).load_state_dict(state, strict=False)
                if unexpected or (model is self.discriminator and missing):
                    raise ValueError(f"the encoder does not fit the discriminator (missing {missing[:3]}, "
                                     f"unexpected {unexpected[:3]})")
            if head:
                self.discriminator.discriminator_predictions.load_state_dict(head)
            if self.sharing == "gdes":  # the residual starts at zero: E_disc = E_gen at step 0
                token_table(self.discriminator).weight.zero_()
        self._tie()

    def _tie(self) -> None:
        gen_encoder, disc_encoder = encoder_of(self.generator), encoder_of(self.discriminator)
        if self.tie_all:
            self._set_encoder(self.generator, disc_encoder)
        elif self.sharing == "tied":
            gen_encoder.embeddings = disc_encoder.embeddings
        # The generator's output layer stays tied to the token table it reads.
        output_layer(self.generator).weight = token_table(self.generator).weight
        if self.mlm is not None:
            self._set_encoder(self.mlm, disc_encoder)
            if self.sharing != "gdes":  # under GDES the discriminator's table is a residual, not a vocabulary
                output_layer(self.mlm).weight = token_table(self.discriminator).weight

    @staticmethod
    def _set_encoder(model: nn.Module, encoder: nn.Module) -> None:
        if hasattr(model, "electra"):
            model.electra = encoder
        else:
            model.model = encoder

    def shares_embeddings(self) -> bool:
        gen, disc = token_table(self.generator), token_table(self.discriminator)
        return gen.weight is disc.weight and output_layer(self.generator).weight is disc.weight

    def clip_groups(self) -> dict[str, list[nn.Parameter]]:
        """Parameters clipped together under ``clip_scope="per_module"``: the generator's own, and the rest
        (discriminator, MLM head, and any table both halves share), each parameter once."""
        others = {id(p) for module in (self.discriminator, self.mlm) if module is not None for p in module.parameters()}
        generator_only = {id(p) for p in self.generator.parameters()} - others
        params = list(self.parameters())  # each shared parameter once
        return {"generator": [p for p in params if id(p) in generator_only],
                "discriminator": [p for p in params if id(p) not in generator_only]}

    # -- the two halves ------------------------------------------------------------------------
    def generator_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                         positions: torch.Tensor) -> torch.Tensor:
        """MLM logits at ``positions`` (bool [B, T]) only: the vocabulary projection, the largest
        matrix product of the generator, is never applied to unmasked positions."""
        hidden = encoder_of(self.generator)(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return vocab_logits(self.generator, hidden[positions])

    def discriminator_hidden(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """[B, T] ids -> [B, T, hidden]; under GDES the token vectors are sg(E_gen) + E_delta."""
        encoder = encoder_of(self.discriminator)
        if self.sharing == "gdes":
            table = token_table(self.generator).weight.detach() + token_table(self.discriminator).weight
            embeds = F.embedding(input_ids, table)
            return encoder(inputs_embeds=embeds, attention_mask=attention_mask).last_hidden_state
        return encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def discriminator_head(self, hidden: torch.Tensor) -> torch.Tensor:
        return replaced_logit(self.discriminator, hidden)

    def discriminator_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """[B, T] replaced-token logits."""
        return self.discriminator_head(self.discriminator_hidden(input_ids, attention_mask))

    def mlm_head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits of the MLM objectives' head for already-selected hidden states."""
        if self.mlm is None:
            raise ValueError("this model was built without an MLM head on the discriminator (mlm_head=False)")
        return vocab_logits(self.mlm, hidden)

    def mlm_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   positions: torch.Tensor) -> torch.Tensor:
        """The MLM objectives' logits at ``positions`` only (discriminator encoder + MLM head)."""
        return self.mlm_head(self.discriminator_hidden(input_ids, attention_mask)[positions])

    def exportable_modules(self) -> dict[str, nn.Module]:
        """Run-dir name -> stand-alone stock model. Under GDES the discriminator (and an MLM head on its
        encoder) are copies whose token table holds E_gen + E_delta, the vectors they were trained on."""
        modules = {"discriminator": self.discriminator, "generator": self.generator}
        if self.mlm is not None:
            modules["mlm"] = self.mlm
        if self.sharing != "gdes":
            return modules
        for name in ("discriminator", "mlm"):
            if name in modules:
                folded = copy.deepcopy(modules[name])
                with torch.no_grad():
                    token_table(folded).weight.add_(token_table(self.generator).weight)
                modules[name] = folded
        return modules

    def start_second_stage(self) -> bool:
        """Two-stage training, on entering stage two: initialise the discriminator's encoder from the MLM-trained
        generator.

        Returns whether the weights were copied: they can be only when both have one shape
        (``gen_fraction = 1`` at full depth, as the paper's two-stage run); otherwise only the shared
        embeddings carry over from stage one.
        """
        source, target = encoder_of(self.generator), encoder_of(self.discriminator)
        pairs = [(module, getattr(source, name)) for name, module in target.named_children()
                 if name != "embeddings"]  # the embeddings are already shared (or disentangled)
        same_shape = all({k: v.shape for k, v in t.state_dict().items()} == {k: v.shape for k, v in
                                                                              s.state_dict().items()}
                         for t, s in pairs)
        if not same_shape:
            return False
        with torch.no_grad():
            for module, origin in pairs:
                module.load_state_dict(origin.state_dict())
        return True


class ModelOutputs:
    """One forward pass of the pair on a masked batch, computed lazily and at most once per part.

    An objective reads what it needs (``training/pretraining/objectives.py``): the generator's logits at the masked
    positions (and their top-k), its Gumbel-max samples, the discriminator's input and labels built from them,
    the discriminator's hidden states and replaced-token logits, the MLM head's logits. Parts are computed in
    the order they are read, so the sampling RNG is drawn in the objective's order. Read ``sampled`` under
    ``torch.no_grad()`` to run the generator without gradient (it is memoised so: two-stage training).
    """

    def __init__(self, model: ElectraPretrainingModel, batch: MaskedBatch, attention: torch.Tensor,
                 rng: torch.Generator | SampleRng, temperature: float = 1.0) -> None:
        self.model, self.batch, self.attention, self.rng, self.temperature = model, batch, attention, rng, temperature

    @property
    def targets(self) -> torch.Tensor:
        """[num_masked] the original ids at the masked positions (row-major order)."""
        return self.batch.original[self.batch.masked]

    @cached_property
    def generator_logits(self) -> torch.Tensor:
        """[num_masked, vocab] the generator's logits at the masked positions only."""
        return self.model.generator_logits(self.batch.input_ids, self.attention, self.batch.masked)

    def generator_top_k(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The generator's ``k`` best candidates per masked position: (logits, ids), each [num_masked, k]
        (candidate sets of MC-BERT's multi-choice cloze or TEAMS' multi-word selection)."""
        return self.generator_logits.detach().topk(k, dim=-1)

    @cached_property
    def sampled(self) -> torch.Tensor:
        """[num_masked] Gumbel-max samples from the generator (fp32, no gradient)."""
        return gumbel_sample(self.generator_logits, self.rng, self.temperature, counts=self.batch.masked.sum(dim=1))

    @cached_property
    def _replaced(self) -> tuple[torch.Tensor, torch.Tensor]:
        return replace_with_samples(self.batch, self.sampled)

    @property
    def replaced_input(self) -> torch.Tensor:
        """[B, T] the discriminator's input: the original ids with the samples at the masked positions."""
        return self._replaced[0]

    @property
    def replaced_labels(self) -> torch.Tensor:
        """[B, T] 1 where the sample differs from the original token."""
        return self._replaced[1]

    @cached_property
    def discriminator_hidden(self) -> torch.Tensor:
        """[B, T, hidden] the discriminator encoder on ``replaced_input``."""
        return self.model.discriminator_hidden(self.replaced_input, self.attention)

    @cached_property
    def discriminator_logits(self) -> torch.Tensor:
        """[B, T] the replaced-token head's logits on ``replaced_input``."""
        return self.model.discriminator_head(self.discriminator_hidden)

    def mlm_head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits of the MLM head on the discriminator encoder for already-selected hidden states."""
        return self.model.mlm_head(hidden)

    @cached_property
    def masked_mlm_logits(self) -> torch.Tensor:
        """[num_masked, vocab] the discriminator encoder + MLM head on the ``[MASK]`` input (BERT)."""
        return self.model.mlm_logits(self.batch.input_ids, self.attention, self.batch.masked)
