"""The optimizer, learning-rate schedule and gradient clipping, written once.

Pre-training (``training/pretraining/trainer.py``), CoLA fine-tuning (``training/finetune/cola.py``) and GED fine-tuning
(``training/finetune/ged_finetune.py``) all train with BERT/ELECTRA's recipe: AdamW without decay on biases and
LayerNorm weights, eps 1e-6, a linear warm-up to the peak rate then a linear decay to zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn


def build_optimizer(model: nn.Module, lr: float, weight_decay: float, head: str = "",
                    head_lr_scale: float = 1.0) -> torch.optim.AdamW:
    """AdamW without decay on biases and LayerNorm weights (as BERT/ELECTRA); parameters whose names start with
    ``head`` (a fresh classifier) learn at ``head_lr_scale`` times the rate, in groups of their own."""
    decay, no_decay, head_decay, head_no_decay = [], [], [], []
    for name, param in model.named_parameters():
        fresh = bool(head) and head_lr_scale != 1.0 and name.startswith(head)
        plain = param.ndim < 2 or "LayerNorm" in name
        ((head_no_decay if plain else head_decay) if fresh else (no_decay if plain else decay)).append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if head_decay or head_no_decay:
        groups += [{"params": head_decay, "weight_decay": weight_decay, "lr": lr * head_lr_scale},
                   {"params": head_no_decay, "weight_decay": 0.0, "lr": lr * head_lr_scale}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-6)


def warmup_linear_decay(warmup_steps: int, max_steps: int) -> Callable[[int], float]:
    """The LR factor at a step: ``(step + 1) / warmup`` during warm-up, then linear down to 0 at ``max_steps``."""
    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (max_steps - step) / max(1, max_steps - warmup_steps))

    return factor


def optimizer_and_schedule(model: nn.Module, lr: float, weight_decay: float, warmup_steps: int,
                           total_steps: int) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """``build_optimizer`` and its warm-up + linear-decay scheduler (stepped once per optimizer step)."""
    optimizer = build_optimizer(model, lr, weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_linear_decay(warmup_steps, total_steps))
    return optimizer, scheduler


def clip_gradients(model: nn.Module, clip_norm: float, scope: str) -> tuple[float, dict[str, float]]:
    """Clip in place; returns the total pre-clip norm and, per module, each half's (``scope="per_module"``:
    ``model.clip_groups()`` names the groups clipped separately)."""
    if scope != "per_module":
        return float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)), {}
    norms = {f"grad_norm_{name}": float(torch.nn.utils.clip_grad_norm_(params, clip_norm))
             for name, params in model.clip_groups().items()}
    return math.sqrt(sum(n * n for n in norms.values())), norms


def fine_tune_step(loss: torch.Tensor, model: nn.Module, optimizer: torch.optim.Optimizer,
                   schedule: torch.optim.lr_scheduler.LRScheduler, clip: float = 1.0) -> float:
    """One update of a fine-tune (GED, reranker): backward, clip the global norm, step the optimizer and its
    schedule, clear the gradients; returns the loss."""
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.item())


def save_resumable(path: Path, state: dict[str, Any]) -> None:
    """A fine-tune's resumable state, written beside and renamed over the last one: a run killed mid-write
    resumes from the previous state."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)
