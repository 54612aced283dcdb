"""The one fine-tune loop (training/finetune/loop.py): a run killed after a checkpoint and resumed takes the same
steps, losses and weights as an unbroken one; an empty epoch ends it instead of spinning; a time budget stops it."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from electra_detect.training.finetune import loop
from electra_detect.training.finetune.loop import drop_checkpoint, train_loop
from electra_detect.training.optim import optimizer_and_schedule

BATCHES_PER_EPOCH, TOTAL = 5, 12  # three epochs' worth, the last cut short: resumes land mid-epoch


class Killed(Exception):
    """Stands in for a run killed from outside."""


def run(checkpoint: Path | None, every: int = 0, die_at_call: int = 0, **options) -> tuple[loop.LoopResult,
                                                                                         torch.nn.Module]:
    """A tiny regressor with dropout (so torch's RNG matters) on a fixed data set, batches in a seeded order."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 1))
    inputs = torch.randn(BATCHES_PER_EPOCH * 4, 4)
    targets = inputs.sum(-1, keepdim=True)
    optimizer, scheduler = optimizer_and_schedule(model, 1e-2, 0.01, 2, TOTAL)
    rng, calls = random.Random(7), []

    def epoch_batches() -> Iterator[list[int]]:
        order = list(range(len(inputs)))
        rng.shuffle(order)
        for first in range(0, len(order), 4):
            yield order[first:first + 4]

    def loss_of(rows: list[int]) -> torch.Tensor:
        calls.append(1)
        if len(calls) == die_at_call:
            raise Killed
        return torch.nn.functional.mse_loss(model(inputs[rows]), targets[rows])

    result = train_loop(model, optimizer, scheduler, epoch_batches, loss_of, TOTAL, checkpoint=checkpoint,
                        checkpoint_every=every, show_progress=False, **options)
    return result, model


def test_a_resumed_run_equals_an_unbroken_one(tmp_path: Path) -> None:
    whole, whole_model = run(None)
    checkpoint = tmp_path / "out.partial" / "checkpoint.pt"
    with pytest.raises(Killed):  # killed on step 10, after the checkpoint at step 8 (mid second epoch)
        run(checkpoint, every=4, die_at_call=10)
    saved = torch.load(checkpoint, weights_only=True)
    assert saved["step"] == 8 and set(saved) == {"model", "optimizer", "scheduler", "torch_rng", "step", "losses"}
    resumed, resumed_model = run(checkpoint, every=4)
    assert whole.step == resumed.step == TOTAL and whole.stopped == resumed.stopped == "steps"
    assert resumed.losses == whole.losses  # the same batches, dropout masks and updates, bit for bit
    for a, b in zip(whole_model.parameters(), resumed_model.parameters(), strict=True):
        assert torch.equal(a, b)
    drop_checkpoint(checkpoint)
    assert not checkpoint.parent.exists()


def test_the_log_gets_a_line_every_log_every_steps(tmp_path: Path) -> None:
    import json

    log = tmp_path / "train.jsonl"
    result, _ = run(None, log=log, log_every=5)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["step"] for line in lines] == [5, 10]
    assert lines[0]["loss"] == pytest.approx(sum(result.losses[:5]) / 5)


def test_an_empty_epoch_ends_the_loop_and_a_time_budget_stops_it() -> None:
    model = torch.nn.Linear(2, 1)
    optimizer, scheduler = optimizer_and_schedule(model, 1e-2, 0.0, 1, 5)
    epochs = []

    def no_batches() -> list[torch.Tensor]:
        epochs.append(1)
        if len(epochs) > 3:  # a loop that spins: fail instead of hanging
            raise AssertionError("train_loop asked for epoch after empty epoch")
        return []

    result = train_loop(model, optimizer, scheduler, no_batches, lambda x: model(x).sum(), 5, show_progress=False)
    assert result.step == 0 and result.losses == [] and len(epochs) == 1
    timed = train_loop(model, optimizer, scheduler, lambda: [torch.ones(3, 2)] * 10, lambda x: model(x).pow(2).mean(),
                       5, max_minutes=1e-9, show_progress=False)
    assert timed.step == 1 and timed.stopped == "time"
