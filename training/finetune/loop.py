"""The fine-tune loop every fine-tune calls (``ged train``, ``distill train``, ``rerank train``, CoLA): one place for
steps, resume, progress, checkpoints, a time budget and the machine-readable log. Pre-training keeps its own trainer.

    result = train_loop(model, optimizer, scheduler, epoch_batches, loss_of, total_steps,
                        checkpoint=Path(out + ".partial") / "checkpoint.pt", checkpoint_every=500)

``epoch_batches()`` gives one epoch's batches; it is called again for every epoch, and on a resume the batches
already trained on are replayed and skipped, so the caller's seeded order (a ``random.Random`` it closes over) is the
same as in an unbroken run. ``loss_of(batch)`` runs the forward pass and gives the loss to minimise.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from electra_detect.training.optim import fine_tune_step, save_resumable


@dataclass
class LoopResult:
    step: int  # optimizer steps taken, resumed ones included
    losses: list[float] = field(default_factory=list)  # every step's loss
    minutes: float = 0.0  # this run's wall time (a resumed run counts from its restart)
    stopped: str = "steps"  # "steps" (all taken) or "time" (max_minutes ran out first)


def train_loop(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
               scheduler: torch.optim.lr_scheduler.LRScheduler, epoch_batches: Callable[[], Iterable[Any]],
               loss_of: Callable[[Any], torch.Tensor], total_steps: int, *, checkpoint: Path | None = None,
               checkpoint_every: int = 0, max_minutes: float = 0.0, clip: float = 1.0, desc: str = "train",
               show_progress: bool = True, log: Path | None = None, log_every: int = 50) -> LoopResult:
    """Train ``model`` for ``total_steps`` optimizer steps (or until ``max_minutes``), resuming from ``checkpoint``
    when it exists, saving it every ``checkpoint_every`` steps (0: never) and appending a JSON line of the mean
    loss every ``log_every`` steps to ``log``."""
    step, losses = 0, []
    if checkpoint is not None and checkpoint_every and checkpoint.exists():
        state = torch.load(checkpoint, map_location=next(model.parameters()).device, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        step, losses = state["step"], state["losses"]
    skip = step  # batches already trained on: replayed from the caller's seed and skipped
    started = time.monotonic()
    terminal = sys.stderr.isatty()  # a log file gets a line every 30 s, not a bar redrawn ten times a second
    bar = tqdm(total=total_steps, initial=step, desc=desc, unit="step", disable=not show_progress,
               mininterval=0.1 if terminal else 30)
    stopped = "steps"
    model.train()
    while step < total_steps and stopped == "steps":
        batches = 0
        for batch in epoch_batches():
            batches += 1
            if skip:
                skip -= 1
                continue
            losses.append(fine_tune_step(loss_of(batch), model, optimizer, scheduler, clip))
            step += 1
            bar.update(1)
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}", refresh=False)
            if log is not None and step % log_every == 0:
                with open(log, "a", encoding="utf-8") as out:
                    out.write(json.dumps({"step": step, "loss": float(np.mean(losses[-log_every:])),
                                          "lr": scheduler.get_last_lr()[0],
                                          "minutes": round((time.monotonic() - started) / 60, 3)}) + "\n")
            if checkpoint is not None and checkpoint_every and step % checkpoint_every == 0 and step < total_steps:
                save_resumable(checkpoint, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                            "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state(),
                                            "step": step, "losses": losses})
            if step >= total_steps:
                break
            if max_minutes and time.monotonic() - started > max_minutes * 60:
                stopped = "time"
                break
        if not batches:  # an empty epoch would never reach total_steps: stop rather than spin
            break
    bar.close()
    return LoopResult(step, losses, round((time.monotonic() - started) / 60, 3), stopped)


def drop_checkpoint(checkpoint: Path | None) -> None:
    """A finished run's resumable state is no longer needed: remove it and its folder (if that is then empty)."""
    if checkpoint is not None and checkpoint.exists():
        checkpoint.unlink()
        try:
            checkpoint.parent.rmdir()
        except OSError:  # the folder holds something else too
            pass
