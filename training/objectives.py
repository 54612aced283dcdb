"""Pre-training objectives of the ELECTRA paper's efficiency analysis (Table 5, §3.2, App. F).

Why one module: the ablation benchmark must train every objective with the same trainer, data,
masking and optimiser, so the only thing that differs between runs is the loss computed here.

| objective | trained encoder sees | loss |
|---|---|---|
| ``electra`` | generator samples at 15% | ``L_MLM(gen) + λ·L_Disc`` over every real token |
| ``electra15`` | generator samples at 15% | ``L_MLM(gen) + λ·L_Disc`` over the masked 15% only |
| ``bert_mlm`` | ``[MASK]`` at 15% | MLM cross-entropy at the masked positions (no generator) |
| ``replace_mlm`` | generator samples at 15% | ``L_MLM(gen)`` + MLM at the masked positions |
| ``all_tokens_mlm`` | generator samples at 15% | ``L_MLM(gen)`` + MLM at *every* token with the copy mechanism |
| ``adversarial`` | generator samples at 15% | REINFORCE generator (reward = discriminator loss) + ``λ·L_Disc`` |

The MLM objectives train an MLM head on the discriminator's own encoder (``model.mlm``), so the
encoder that CoLA fine-tunes is the same module for every objective. ``all_tokens_mlm``'s copy
probability ``D`` is ``1 - sigmoid(r)`` with ``r`` the discriminator head's logit: the copy gate is
the replaced-token head, so that run also exports a usable RTD head.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from electra_detect.training.masking import MaskedBatch, gumbel_sample, replace_with_samples

if TYPE_CHECKING:
    from electra_detect.training.model import ElectraPretrainingModel

OBJECTIVES = ("electra", "electra15", "bert_mlm", "replace_mlm", "all_tokens_mlm", "adversarial")
# Objectives whose product is an MLM head on the discriminator-sized encoder (exported as ``mlm/``).
MLM_OBJECTIVES = frozenset({"bert_mlm", "replace_mlm", "all_tokens_mlm"})
# Objectives that train the replaced-token head with the discriminator loss.
RTD_OBJECTIVES = frozenset({"electra", "electra15", "adversarial"})


@dataclass
class ElectraOutput:
    loss: torch.Tensor
    mlm_loss: torch.Tensor  # the MLM loss of the model being trained (the generator's for RTD objectives)
    disc_loss: torch.Tensor
    mlm_logits: torch.Tensor  # [num_masked, vocab], masked positions only
    disc_logits: torch.Tensor  # [B, T] (zeros for objectives without a replaced-token head)
    disc_labels: torch.Tensor  # [B, T] 1 = replaced
    sampled: torch.Tensor  # [num_masked]
    extra: dict[str, float] = field(default_factory=dict)  # objective-specific numbers to log


def electra_loss(mlm_logits: torch.Tensor, mlm_targets: torch.Tensor, disc_logits: torch.Tensor,
                 disc_labels: torch.Tensor, attention_mask: torch.Tensor,
                 disc_weight: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``L_MLM + disc_weight * L_Disc``: mean CE over masked positions, mean BCE over the positions
    ``attention_mask`` selects (every real token for ELECTRA, the masked ones for ELECTRA 15%)."""
    mlm_loss = F.cross_entropy(mlm_logits.float(), mlm_targets)
    real = attention_mask.bool()
    disc_loss = F.binary_cross_entropy_with_logits(disc_logits.float()[real], disc_labels.float()[real])
    return mlm_loss + disc_weight * disc_loss, mlm_loss, disc_loss


def has_mlm_head(objective: str) -> bool:
    return objective in MLM_OBJECTIVES


def _no_disc(attention: torch.Tensor, labels: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Placeholder discriminator outputs for objectives without an RTD head: logits 0 (p = 0.5)."""
    logits = torch.zeros(attention.shape, dtype=torch.float32, device=attention.device)
    return logits, (labels if labels is not None else torch.zeros_like(attention, dtype=torch.long))


def _sample(model: ElectraPretrainingModel, batch: MaskedBatch, attention: torch.Tensor, rng: torch.Generator,
            temperature: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    logits = model.generator_logits(batch.input_ids, attention, batch.masked)
    targets = batch.original[batch.masked]
    return logits, targets, gumbel_sample(logits, rng, temperature)


def electra(model: ElectraPretrainingModel, batch: MaskedBatch, attention: torch.Tensor, rng: torch.Generator,
            disc_weight: float, temperature: float, masked_only: bool = False,
            train_generator: bool = True) -> ElectraOutput:
    """ELECTRA (and ELECTRA 15%, and the second stage of two-stage training with the generator encoder
    frozen; the embeddings stay shared)."""
    with torch.set_grad_enabled(train_generator and torch.is_grad_enabled()):
        logits, targets, sampled = _sample(model, batch, attention, rng, temperature)
    disc_input, labels = replace_with_samples(batch, sampled)
    disc_logits = model.discriminator_logits(disc_input, attention)
    region = attention.bool() & batch.masked if masked_only else attention
    loss, mlm_loss, disc_loss = electra_loss(logits, targets, disc_logits, labels, region, disc_weight)
    if not train_generator:
        loss = disc_weight * disc_loss
    return ElectraOutput(loss, mlm_loss, disc_loss, logits, disc_logits, labels, sampled)


def plain_mlm(model: ElectraPretrainingModel, batch: MaskedBatch, attention: torch.Tensor,
              encoder: str) -> ElectraOutput:
    """MLM on [MASK] inputs with no replaced-token loss. ``encoder="generator"``: the first stage of
    two-stage training (the generator alone); ``encoder="discriminator"``: BERT, the discriminator-sized
    encoder with an MLM head predicting the [MASK]ed 15%."""
    logits_of = model.generator_logits if encoder == "generator" else model.mlm_logits
    logits = logits_of(batch.input_ids, attention, batch.masked)
    mlm_loss = F.cross_entropy(logits.float(), batch.original[batch.masked])
    disc_logits, labels = _no_disc(attention)
    return ElectraOutput(mlm_loss, mlm_loss, torch.zeros((), device=attention.device), logits, disc_logits, labels,
                         logits.detach().argmax(-1))


def replace_mlm(model: ElectraPretrainingModel, batch: MaskedBatch, attention: torch.Tensor, rng: torch.Generator,
                temperature: float) -> ElectraOutput:
    """Replace MLM: masked positions hold generator samples instead of [MASK]; MLM loss there."""
    gen_logits, targets, sampled = _sample(model, batch, attention, rng, temperature)
    gen_loss = F.cross_entropy(gen_logits.float(), targets)
    corrupted, labels = replace_with_samples(batch, sampled)
    logits = model.mlm_logits(corrupted, attention, batch.masked)
    mlm_loss = F.cross_entropy(logits.float(), targets)
    disc_logits, labels = _no_disc(attention, labels)
    return ElectraOutput(gen_loss + mlm_loss, mlm_loss, torch.zeros((), device=attention.device), logits,
                         disc_logits, labels, sampled, {"gen_mlm_loss": gen_loss.item()})


def all_tokens_mlm(model: ElectraPretrainingModel, batch: MaskedBatch, attention: torch.Tensor,
                   rng: torch.Generator, temperature: float) -> ElectraOutput:
    """All-Tokens MLM with the paper's copy mechanism: ``p(x_t) = D·[x_t = input_t] + (1-D)·p_MLM(x_t)``
    at every real token, ``D = sigmoid(-r)`` with ``r`` the replaced-token head's logit."""
    gen_logits, targets, sampled = _sample(model, batch, attention, rng, temperature)
    gen_loss = F.cross_entropy(gen_logits.float(), targets)
    corrupted, labels = replace_with_samples(batch, sampled)
    hidden = model.discriminator_hidden(corrupted, attention)
    replaced_logit = model.discriminator_head(hidden)  # [B, T]
    real = attention.bool()
    vocab_logits = model.mlm_head(hidden[real])
    original = batch.original[real]
    log_q = vocab_logits.float().log_softmax(-1).gather(1, original.unsqueeze(1)).squeeze(1)
    r = replaced_logit.float()[real]
    log_generate = F.logsigmoid(r) + log_q  # log((1 - D) · p_MLM(original))
    log_copy = F.logsigmoid(-r)  # log D: only the observed token gets the copied mass
    same = corrupted[real] == original
    log_p = torch.where(same, torch.logaddexp(log_copy, log_generate), log_generate)
    mlm_loss = -log_p.mean()
    disc_loss = F.binary_cross_entropy_with_logits(r.detach(), labels.float()[real])  # logged, not optimised
    mlm_logits = vocab_logits[batch.masked[real]]
    return ElectraOutput(gen_loss + mlm_loss, mlm_loss, disc_loss, mlm_logits, replaced_logit, labels, sampled,
                         {"gen_mlm_loss": gen_loss.item()})


def adversarial(model: ElectraPretrainingModel, batch: MaskedBatch, attention: torch.Tensor, rng: torch.Generator,
                disc_weight: float, temperature: float) -> ElectraOutput:
    """Adversarial ELECTRA (paper App. F): the generator maximises the discriminator's loss by REINFORCE.

    Reward of a sample = the discriminator's BCE at its position (high when it fooled it); the baseline
    is the batch mean reward (the paper learns one; the mean is the simplest unbiased-enough choice).
    The generator's MLM loss is reported but not optimised.
    """
    logits, targets, sampled = _sample(model, batch, attention, rng, temperature)
    disc_input, labels = replace_with_samples(batch, sampled)
    disc_logits = model.discriminator_logits(disc_input, attention)
    real = attention.bool()
    disc_loss = F.binary_cross_entropy_with_logits(disc_logits.float()[real], labels.float()[real])
    with torch.no_grad():
        reward = F.binary_cross_entropy_with_logits(disc_logits.float()[batch.masked], labels.float()[batch.masked],
                                                    reduction="none")
        advantage = reward - reward.mean()
    log_prob = (logits.float() / temperature).log_softmax(-1).gather(1, sampled.unsqueeze(1)).squeeze(1)
    reinforce = -(advantage * log_prob).mean()
    mlm_loss = F.cross_entropy(logits.detach().float(), targets)
    return ElectraOutput(reinforce + disc_weight * disc_loss, mlm_loss, disc_loss, logits, disc_logits, labels,
                         sampled, {"reinforce_loss": reinforce.item(), "mean_reward": reward.mean().item()})


def compute(model: ElectraPretrainingModel, objective: str, stage: str, batch: MaskedBatch,
            attention: torch.Tensor, rng: torch.Generator, disc_weight: float, temperature: float) -> ElectraOutput:
    """The loss of ``objective`` (or of a two-stage ``stage``) on one masked batch."""
    if stage == "mlm":
        return plain_mlm(model, batch, attention, encoder="generator")
    if stage == "disc":
        return electra(model, batch, attention, rng, disc_weight, temperature, train_generator=False)
    handlers: dict[str, Any] = {
        "electra": lambda: electra(model, batch, attention, rng, disc_weight, temperature),
        "electra15": lambda: electra(model, batch, attention, rng, disc_weight, temperature, masked_only=True),
        "bert_mlm": lambda: plain_mlm(model, batch, attention, encoder="discriminator"),
        "replace_mlm": lambda: replace_mlm(model, batch, attention, rng, temperature),
        "all_tokens_mlm": lambda: all_tokens_mlm(model, batch, attention, rng, temperature),
        "adversarial": lambda: adversarial(model, batch, attention, rng, disc_weight, temperature),
    }
    if objective not in handlers:
        raise ValueError(f"unknown objective {objective!r}; available: {', '.join(OBJECTIVES)}")
    return handlers[objective]()
