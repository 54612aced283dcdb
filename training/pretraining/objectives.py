"""Pre-training objectives: a registry of functions from (model outputs, batch) to losses.

Why a registry: the ablation benchmark (Table 5, §3.2 and App. F of the ELECTRA paper) must train every
objective with the same trainer, data, masking and optimiser, so the only thing that differs between runs
is the loss computed here, and adding an objective is one decorated function::

    @register("electra", rtd_head=True)
    def electra(out: ModelOutputs, batch: MaskedBatch, disc_weight: float) -> ElectraOutput: ...

``out`` (``training/pretraining/model.py``'s ``ModelOutputs``) computes the generator's logits at the masked positions
(and ``out.generator_top_k(k)``), its samples, the discriminator's input, labels, hidden states and
replaced-token logits, and the MLM head's logits, lazily, when the objective reads them. The flags given to
``register`` are the one source of truth the trainer, the evaluation and the model read: ``rtd_head`` (the
objective trains a replaced-token head whose logits the metrics score), ``mlm_head`` (the model needs an MLM
head on the discriminator's encoder, exported as ``mlm/``), ``partial`` (some parameters get no gradient:
DDP must look for unused ones), ``selectable`` (a user may choose it as ``train.objective``; the others
are stages of a schedule) and ``on_enter`` (run once on the model at the step a schedule enters it).

| objective | trained encoder sees | loss |
|---|---|---|
| ``electra`` | generator samples at 15% | ``L_MLM(gen) + λ·L_Disc`` over every real token |
| ``electra15`` | generator samples at 15% | ``L_MLM(gen) + λ·L_Disc`` over the masked 15% only |
| ``bert_mlm`` | ``[MASK]`` at 15% | MLM cross-entropy at the masked positions (no generator) |
| ``replace_mlm`` | generator samples at 15% | ``L_MLM(gen)`` + MLM at the masked positions |
| ``all_tokens_mlm`` | generator samples at 15% | ``L_MLM(gen)`` + MLM at *every* token with the copy mechanism |
| ``adversarial`` | generator samples at 15% | REINFORCE generator (reward = discriminator loss) + ``λ·L_Disc`` |

Two-stage training (``train.mlm_first_steps``) is a schedule of two objectives (``schedule``):
``generator_mlm`` (the generator alone) until ``mlm_first_steps``, then ``electra_frozen_generator``.

The MLM objectives train an MLM head on the discriminator's own encoder (``model.mlm``), so the
encoder that CoLA fine-tunes is the same module for every objective. ``all_tokens_mlm``'s copy
probability ``D`` is ``1 - sigmoid(r)`` with ``r`` the discriminator head's logit: the copy gate is
the replaced-token head, so that run also exports a usable RTD head (``rtd_head=True``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from electra_detect.training.pretraining.masking import MaskedBatch, SampleRng
from electra_detect.training.pretraining.model import ElectraPretrainingModel, ModelOutputs

if TYPE_CHECKING:  # annotations only: config imports this module lazily to check objective names
    from electra_detect.training.pretraining.config import TrainConfig


@dataclass
class ElectraOutput:
    """What an objective returns: the loss to optimise and what the trainer and evaluation log."""

    loss: torch.Tensor
    mlm_loss: torch.Tensor  # the MLM loss of the model being trained (the generator's for RTD objectives)
    disc_loss: torch.Tensor
    mlm_logits: torch.Tensor  # [num_masked, vocab], masked positions only
    disc_logits: torch.Tensor  # [B, T] (zeros for objectives without a replaced-token head)
    disc_labels: torch.Tensor  # [B, T] 1 = replaced
    sampled: torch.Tensor  # [num_masked]
    extra: dict[str, float] = field(default_factory=dict)  # objective-specific numbers to log


ObjectiveFn = Callable[[ModelOutputs, MaskedBatch, float], ElectraOutput]


@dataclass(frozen=True)
class Objective:
    name: str
    fn: ObjectiveFn
    rtd_head: bool  # trains a replaced-token head: the disc metrics (train disc_acc, val AUC...) are reported
    mlm_head: bool = False  # needs an MLM head on the discriminator's encoder (exported as mlm/)
    partial: bool = False  # leaves part of the model without gradient (DDP looks for unused parameters)
    selectable: bool = True  # a user may choose it as train.objective (False: a stage of a schedule only)
    on_enter: Callable[[ElectraPretrainingModel], str] | None = None  # run once when a schedule enters it


REGISTRY: dict[str, Objective] = {}


def register(name: str, *, rtd_head: bool, mlm_head: bool = False, partial: bool = False, selectable: bool = True,
             on_enter: Callable[[ElectraPretrainingModel], str] | None = None) -> Callable[[ObjectiveFn], ObjectiveFn]:
    """Add the decorated function to the registry under ``name``."""
    def add(fn: ObjectiveFn) -> ObjectiveFn:
        if name in REGISTRY:
            raise ValueError(f"objective {name!r} is registered twice")
        REGISTRY[name] = Objective(name, fn, rtd_head, mlm_head, partial, selectable, on_enter)
        return fn

    return add


def get(name: str) -> Objective:
    if name not in REGISTRY:
        raise ValueError(f"unknown objective {name!r}; available: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def compute_loss(model: ElectraPretrainingModel, objective: str, batch: MaskedBatch, attention: torch.Tensor,
                 rng: torch.Generator | SampleRng, disc_weight: float, temperature: float = 1.0) -> ElectraOutput:
    """The loss of ``objective`` on one masked batch."""
    return get(objective).fn(ModelOutputs(model, batch, attention, rng, temperature), batch, disc_weight)


class PretrainingLoss(nn.Module):
    """``compute_loss`` as a module around the model, so DDP (which hooks into ``forward``) can wrap it."""

    def __init__(self, model: ElectraPretrainingModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, objective: str, batch: MaskedBatch, attention: torch.Tensor, rng: torch.Generator | SampleRng,
                disc_weight: float, temperature: float = 1.0) -> ElectraOutput:
        return compute_loss(self.model, objective, batch, attention, rng, disc_weight, temperature)


# -- schedules ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Phase:
    objective: str
    until_step: int  # trains steps [previous phase's until_step, until_step)


def schedule(train: TrainConfig) -> list[Phase]:
    """The objectives a run trains, in order: ``train.objective`` throughout, or the two stages of two-stage
    training (``mlm_first_steps``)."""
    if train.mlm_first_steps:
        return [Phase("generator_mlm", train.mlm_first_steps), Phase("electra_frozen_generator", train.max_steps)]
    return [Phase(train.objective, train.max_steps)]


def phase_at(phases: list[Phase], step: int) -> tuple[Phase, int]:
    """The phase that trains ``step`` (0-based) and the step it starts at (the last phase past its end)."""
    start = 0
    for phase in phases:
        if step < phase.until_step:
            return phase, start
        start = phase.until_step
    return phases[-1], (phases[-2].until_step if len(phases) > 1 else 0)


# -- losses ------------------------------------------------------------------------------------------
def electra_loss(mlm_logits: torch.Tensor, mlm_targets: torch.Tensor, disc_logits: torch.Tensor,
                 disc_labels: torch.Tensor, attention_mask: torch.Tensor,
                 disc_weight: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``L_MLM + disc_weight * L_Disc``: mean CE over masked positions, mean BCE over the positions
    ``attention_mask`` selects (every real token for ELECTRA, the masked ones for ELECTRA 15%)."""
    mlm_loss = F.cross_entropy(mlm_logits.float(), mlm_targets)
    real = attention_mask.bool()
    disc_loss = F.binary_cross_entropy_with_logits(disc_logits.float()[real], disc_labels.float()[real])
    return mlm_loss + disc_weight * disc_loss, mlm_loss, disc_loss


def _no_disc(attention: torch.Tensor, labels: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Placeholder discriminator outputs for objectives without an RTD head: logits 0 (p = 0.5)."""
    logits = torch.zeros(attention.shape, dtype=torch.float32, device=attention.device)
    return logits, (labels if labels is not None else torch.zeros_like(attention, dtype=torch.long))


def _electra(out: ModelOutputs, batch: MaskedBatch, disc_weight: float, masked_only: bool = False,
             train_generator: bool = True) -> ElectraOutput:
    if train_generator:
        sampled = out.sampled
    else:
        with torch.no_grad():  # the generator runs without gradient; the shared embeddings still train
            sampled = out.sampled
    region = out.attention.bool() & batch.masked if masked_only else out.attention
    loss, mlm_loss, disc_loss = electra_loss(out.generator_logits, out.targets, out.discriminator_logits,
                                             out.replaced_labels, region, disc_weight)
    if not train_generator:
        loss = disc_weight * disc_loss
    return ElectraOutput(loss, mlm_loss, disc_loss, out.generator_logits, out.discriminator_logits,
                         out.replaced_labels, sampled)


@register("electra", rtd_head=True)
def electra(out: ModelOutputs, batch: MaskedBatch, disc_weight: float) -> ElectraOutput:
    """ELECTRA: the generator's MLM loss plus λ times the discriminator's loss over every real token."""
    return _electra(out, batch, disc_weight)


@register("electra15", rtd_head=True)
def electra15(out: ModelOutputs, batch: MaskedBatch, disc_weight: float) -> ElectraOutput:
    """ELECTRA 15%: the discriminator's loss over the masked positions only."""
    return _electra(out, batch, disc_weight, masked_only=True)


def _plain_mlm(logits: torch.Tensor, out: ModelOutputs) -> ElectraOutput:
    mlm_loss = F.cross_entropy(logits.float(), out.targets)
    disc_logits, labels = _no_disc(out.attention)
    return ElectraOutput(mlm_loss, mlm_loss, torch.zeros((), device=out.attention.device), logits, disc_logits,
                         labels, logits.detach().argmax(-1))


@register("bert_mlm", rtd_head=False, mlm_head=True, partial=True)
def bert_mlm(out: ModelOutputs, batch: MaskedBatch, disc_weight: float) -> ElectraOutput:
    """BERT: the discriminator-sized encoder with an MLM head predicting the [MASK]ed 15% (no generator)."""
    return _plain_mlm(out.masked_mlm_logits, out)


@register("generator_mlm", rtd_head=False, partial=True, selectable=False)
def generator_mlm(out: ModelOutputs, batch: MaskedBatch, disc_weight: float) -> ElectraOutput:
    """The first stage of two-stage training: the generator alone, MLM on [MASK] inputs."""
    return _plain_mlm(out.generator_logits, out)


def _enter_second_stage(model: ElectraPretrainingModel) -> str:
    copied = model.start_second_stage()
    return "discriminator encoder " + ("initialised from the generator" if copied
                                       else "kept (generator of another width)")


@register("electra_frozen_generator", rtd_head=True, partial=True, selectable=False, on_enter=_enter_second_stage)
def electra_frozen_generator(out: ModelOutputs, batch: MaskedBatch, disc_weight: float) -> ElectraOutput:
    """The second stage of two-stage training: ELECTRA with the generator encoder frozen (the embeddings stay
    shared and keep training); entering it initialises the discriminator's encoder from the generator."""
    return _electra(out, batch, disc_weight, train_generator=False)


@register("replace_mlm", rtd_head=False, mlm_head=True, partial=True)
def replace_mlm(out: ModelOutputs, batch: MaskedBatch, disc_weight: float) -> ElectraOutput:
    """Replace MLM: masked positions hold generator samples instead of [MASK]; MLM loss there."""
    gen_loss = F.cross_entropy(out.generator_logits.float(), out.targets)
    logits = out.mlm_head(out.discriminator_hidden[batch.masked])
    mlm_loss = F.cross_entropy(logits.float(), out.targets)
    disc_logits, labels = _no_disc(out.attention, out.replaced_labels)
    return ElectraOutput(gen_loss + mlm_loss, mlm_loss, torch.zeros((), device=out.attention.device), logits,
                         disc_logits, labels, out.sampled, {"gen_mlm_loss": gen_loss.item()})


@register("all_tokens_mlm", rtd_head=True, mlm_head=True)
def all_tokens_mlm(out: ModelOutputs, batch: MaskedBatch, disc_weight: float) -> ElectraOutput:
    """All-Tokens MLM with the paper's copy mechanism: ``p(x_t) = D·[x_t = input_t] + (1-D)·p_MLM(x_t)``
    at every real token, ``D = sigmoid(-r)`` with ``r`` the replaced-token head's logit."""
    gen_loss = F.cross_entropy(out.generator_logits.float(), out.targets)
    corrupted, labels = out.replaced_input, out.replaced_labels
    replaced_logit = out.discriminator_logits  # [B, T]
    real = out.attention.bool()
    vocab_logits = out.mlm_head(out.discriminator_hidden[real])
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
    return ElectraOutput(gen_loss + mlm_loss, mlm_loss, disc_loss, mlm_logits, replaced_logit, labels, out.sampled,
                         {"gen_mlm_loss": gen_loss.item()})


@register("adversarial", rtd_head=True)
def adversarial(out: ModelOutputs, batch: MaskedBatch, disc_weight: float) -> ElectraOutput:
    """Adversarial ELECTRA (paper App. F): the generator maximises the discriminator's loss by REINFORCE.

    Reward of a sample = the discriminator's BCE at its position (high when it fooled it); the baseline
    is the batch mean reward (the paper learns one; the mean is the simplest unbiased-enough choice).
    The generator's MLM loss is reported but not optimised.
    """
    logits, sampled, labels = out.generator_logits, out.sampled, out.replaced_labels
    disc_logits = out.discriminator_logits
    real = out.attention.bool()
    disc_loss = F.binary_cross_entropy_with_logits(disc_logits.float()[real], labels.float()[real])
    with torch.no_grad():
        reward = F.binary_cross_entropy_with_logits(disc_logits.float()[batch.masked], labels.float()[batch.masked],
                                                    reduction="none")
        advantage = reward - reward.mean()
    log_prob = (logits.float() / out.temperature).log_softmax(-1).gather(1, sampled.unsqueeze(1)).squeeze(1)
    reinforce = -(advantage * log_prob).mean()
    mlm_loss = F.cross_entropy(logits.detach().float(), out.targets)
    return ElectraOutput(reinforce + disc_weight * disc_loss, mlm_loss, disc_loss, logits, disc_logits, labels,
                         sampled, {"reinforce_loss": reinforce.item(), "mean_reward": reward.mean().item()})


# Objectives a user may choose (train.objective), in the order they were registered.
OBJECTIVES = tuple(name for name, objective in REGISTRY.items() if objective.selectable)
