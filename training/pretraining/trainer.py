"""The pre-training loop, readable top to bottom (after nanoGPT's train.py).

``Trainer.run`` goes through its phases in order: setup, data, model, optimizer (and resume), the loop
(train step, log, eval, checkpoint), then the last eval, checkpoint and export. What a step trains is the
objective schedule's (training/pretraining/objectives.py); what a checkpoint holds is the ``TrainState``
(training/pretraining/state.py); multi-process runs (``torchrun``, DDP) and stop signals are
training/pretraining/distributed.py's; the run directory's files are training/pretraining/rundir.py's, written by
rank 0 only.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from electra_detect.training.optim import clip_gradients, optimizer_and_schedule
from electra_detect.training.pretraining import distributed, encoders, objectives
from electra_detect.training.pretraining.checkpoint import latest_checkpoint
from electra_detect.training.pretraining.config import RunConfig
from electra_detect.training.pretraining.data import BlockSampler
from electra_detect.training.pretraining.distributed import StopOnSignal, any_rank, barrier, init_distributed
from electra_detect.training.pretraining.errors import CheckpointError, RankLost
from electra_detect.training.pretraining.evaluation import StepStats, evaluate
from electra_detect.training.pretraining.masking import SampleRng, mask_tokens
from electra_detect.training.pretraining.model import ElectraPretrainingModel
from electra_detect.training.pretraining.objectives import PretrainingLoss
from electra_detect.training.pretraining.rundir import (
    check_out_dir,
    clear_interrupted_saves,
    export,
    log_metrics,
    trim_metrics,
    write_run_config,
)
from electra_detect.training.pretraining.state import RunData, TrainState

__all__ = ["TrainResult", "Trainer"]


@dataclass
class TrainResult:
    out_dir: Path
    steps: int
    tokens_seen: int
    minutes: float
    stop_reason: str
    last_metrics: dict[str, Any] = field(default_factory=dict)
    val_metrics: dict[str, Any] = field(default_factory=dict)


class Trainer:
    """Owns one run directory. ``run()`` trains until max_steps, the time budget or a signal."""

    def __init__(self, config: RunConfig, out_dir: str | Path, resume: bool = False,
                 show_progress: bool = True, overwrite: bool = False) -> None:
        self.config = config.validate().resolve()
        self.out_dir = Path(out_dir)
        self.resume = resume
        self.overwrite = overwrite
        self.show_progress = show_progress
        self.callbacks: list[Callable[[Trainer, dict[str, Any]], None]] = []  # called after every step
        self._stop_reason: str | None = None

    def request_stop(self, reason: str = "interrupted") -> None:
        """Finish the current step, save a checkpoint and return (signal handlers call this)."""
        self._stop_reason = reason

    def run(self) -> TrainResult:
        cfg, tcfg, out = self.config, self.config.train, self.out_dir
        # -- setup -------------------------------------------------------------------------------------
        info = init_distributed()
        check_out_dir(out, self.resume, self.overwrite)
        if info.main:
            clear_interrupted_saves(out)  # before anything reads or saves
        if tcfg.threads:
            torch.set_num_threads(tcfg.threads)
        device = info.device()

        # -- data: tokenizer, packed blocks, train/val split -------------------------------------------
        data = RunData.prepare(cfg, info)

        # -- model: the objectives of the schedule decide which heads it needs --------------------------
        torch.manual_seed(tcfg.seed + info.rank)
        phases = objectives.schedule(tcfg)
        used = [objectives.get(phase.objective) for phase in phases]
        model = ElectraPretrainingModel.from_config(cfg.model, len(data.tokenizer),
                                                    mlm_head=any(o.mlm_head for o in used))
        if tcfg.init_from and not self.resume:  # continued pre-training: weights only; fresh optimizer and warm-up
            try:
                if encoders.is_run_dir(Path(tcfg.init_from)):
                    model.load_exported_weights(tcfg.init_from)
                else:  # a published encoder (training/pretraining/encoders.py)
                    model.load_encoder_weights(encoders.encoder_weights(Path(tcfg.init_from)))
            except (OSError, RuntimeError, ValueError) as exc:
                raise CheckpointError(f"cannot start from {tcfg.init_from}: {str(exc).splitlines()[0]}") from exc
        model = model.to(device)

        # -- optimizer and the train state (restored from the latest checkpoint on --resume) -----------
        optimizer, scheduler = optimizer_and_schedule(model, tcfg.lr, tcfg.weight_decay, tcfg.warmup_steps,
                                                      tcfg.max_steps)
        state = TrainState(model, optimizer, scheduler, BlockSampler(data.train_ids, seed=tcfg.seed))
        global_batch = tcfg.batch_size * info.world_size
        # The vocabulary's hash guards against resuming on a corpus that trained another tokenizer.
        fingerprint = {**cfg.model_fingerprint(), "vocab_sha256": hashlib.sha256(data.vocab_bytes()).hexdigest()}
        ckpt_root = out / "checkpoints"
        if self.resume:
            state.restore(latest_checkpoint(ckpt_root), info, fingerprint)
        if info.main:
            write_run_config(out, cfg)
            trim_metrics(out, state.step)

        # -- the loop ------------------------------------------------------------------------------------
        loss_fn = distributed.wrap(PretrainingLoss(model), info, find_unused=any(o.partial for o in used))
        model.train()
        autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda" and tcfg.bf16)
        tokens_per_step = tcfg.batch_size * tcfg.grad_accum * info.world_size * cfg.data.seq_len
        val_batches = data.val_batches(tcfg.batch_size, tcfg.eval_batches)
        # A terminal gets a live bar; a log file gets one plain line per log interval instead of a flood.
        report = info.main and self.show_progress
        bar = tqdm(total=tcfg.max_steps, initial=state.step, desc="pretrain", unit="step",
                   disable=not (report and sys.stderr.isatty()))
        started = time.monotonic()
        window_start, window_tokens = started, 0
        last_metrics: dict[str, Any] = {}
        val_metrics: dict[str, Any] = {}
        stop_reason = "max_steps"
        evaluated_at = saved_at = -1
        objective = objectives.phase_at(phases, max(state.step - 1, 0))[0].objective  # the one last trained

        def validate() -> dict[str, Any]:  # -- eval: rank 0 scores the fixed validation batches
            metrics: dict[str, Any] = {}
            if info.main:
                metrics = {"step": state.step, "split": "val", **evaluate(
                    model, objective, val_batches, mask_id=data.mask_id, special_ids=data.special_ids,
                    mask_prob=tcfg.mask_prob, disc_weight=tcfg.disc_weight, temperature=tcfg.temperature,
                    seed=tcfg.seed + 7919, device=device)}
                log_metrics(out, metrics)
            barrier(info)
            return metrics

        with StopOnSignal(self.request_stop):
            try:
                while state.step < tcfg.max_steps:
                    phase, start = objectives.phase_at(phases, state.step)
                    objective = phase.objective
                    on_enter = objectives.get(objective).on_enter
                    if on_enter and state.step == start:  # on every rank, so the weights stay the same everywhere
                        message = on_enter(model)
                        if info.main:
                            tqdm.write(f"{objective}: step {state.step}, {message}")
                    # train step: grad_accum micro-batches, then one clipped optimizer step
                    stats = StepStats(tcfg.grad_accum)
                    for micro in range(tcfg.grad_accum):
                        ids = state.sampler.next(global_batch)  # each rank draws the global batch, takes its share
                        input_ids = data.blocks.batch(ids[info.rank * tcfg.batch_size:
                                                          (info.rank + 1) * tcfg.batch_size]).to(device)
                        attention = torch.ones_like(input_ids)
                        first = (state.step * tcfg.grad_accum + micro) * global_batch + info.rank * tcfg.batch_size
                        rng = SampleRng(tcfg.seed, first, len(input_ids), device)  # the samples' own streams
                        masked = mask_tokens(input_ids, attention, mask_id=data.mask_id, special_ids=data.special_ids,
                                             mask_prob=tcfg.mask_prob, generator=rng,
                                             keep_original_prob=tcfg.keep_original_prob,
                                             max_predictions=tcfg.max_predictions)
                        sync = micro == tcfg.grad_accum - 1 or not info.enabled
                        with nullcontext() if sync else loss_fn.no_sync():
                            with autocast:
                                result = loss_fn(objective, masked, attention, rng, tcfg.disc_weight,
                                                 tcfg.temperature)
                            (result.loss / tcfg.grad_accum).backward()  # outside autocast, as PyTorch recommends
                        stats.add(result, masked)
                    grad_norm, norms = clip_gradients(model, tcfg.clip_norm, tcfg.clip_scope)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
                    row = distributed.mean_over_ranks(stats.row(objectives.get(objective).rtd_head, grad_norm, norms),
                                                      info)
                    state.step += 1
                    state.tokens_seen += tokens_per_step
                    window_tokens += tokens_per_step
                    bar.update(1)
                    # log
                    now = time.monotonic()
                    if state.step % tcfg.log_every == 0 or state.step == tcfg.max_steps:
                        rate = window_tokens / max(now - window_start, 1e-9)
                        window_start, window_tokens = now, 0
                        last_metrics = {"step": state.step, "split": "train", **row, "lr": scheduler.get_last_lr()[0],
                                        "tokens_seen": state.tokens_seen, "tokens_per_s": rate,
                                        "elapsed_s": now - started}
                        bar.set_postfix(loss=f"{row['loss']:.3f}", gen_acc=f"{row['gen_acc']:.2f}",
                                        disc_acc=f"{row['disc_acc']:.3f}", repl=f"{row['replaced_frac']:.3f}",
                                        tok_s=f"{rate:,.0f}")
                        if info.main:
                            log_metrics(out, last_metrics)
                        if report and bar.disable:
                            print(f"pretrain step {state.step}/{tcfg.max_steps} loss {row['loss']:.3f} "
                                  f"gen_acc {row['gen_acc']:.3f} disc_acc {row['disc_acc']:.3f} "
                                  f"{rate:,.0f} tok/s {(now - started) / 60:.1f} min", file=sys.stderr, flush=True)
                    for callback in self.callbacks:
                        callback(self, {"step": state.step, **row})
                    # stop: a signal, a callback or the time budget, on one rank stops every rank at this step
                    if tcfg.max_minutes and now - started >= tcfg.max_minutes * 60:
                        self._stop_reason = self._stop_reason or "time_budget"
                    if any_rank(self._stop_reason is not None, info):
                        stop_reason = self._stop_reason or "stopped by another rank"
                        break
                    # eval and checkpoint
                    if state.step % tcfg.eval_every == 0:
                        val_metrics, evaluated_at = validate(), state.step
                    if state.step % tcfg.save_every == 0:
                        state.save(ckpt_root, info, fingerprint, tcfg.keep_last)
                        saved_at = state.step
            except RuntimeError as exc:
                if not (info.enabled and distributed.lost_peer(exc)):
                    raise
                last = latest_checkpoint(ckpt_root)
                raise RankLost(f"rank {info.rank} of {info.world_size}: another rank was lost at step {state.step + 1} "
                               f"({str(exc).splitlines()[0][:160]}); run the same command with --resume to continue "
                               f"from {last.name if last else 'the start (no checkpoint yet)'}") from None
            finally:
                bar.close()

        # -- last eval, checkpoint and export (every rank takes the same branches: collectives inside) -----
        if evaluated_at != state.step:
            val_metrics = validate()
        if saved_at != state.step:
            state.save(ckpt_root, info, fingerprint, tcfg.keep_last)
        minutes = (time.monotonic() - started) / 60
        result = TrainResult(out, state.step, state.tokens_seen, minutes, stop_reason, last_metrics, val_metrics)
        if info.main:
            export(out, model, data.tokenizer, {
                "objective": tcfg.objective, "steps": result.steps, "tokens_seen": result.tokens_seen,
                "minutes": round(result.minutes, 3), "stop_reason": result.stop_reason, "train": result.last_metrics,
                "val": result.val_metrics, "corpus_tokens": data.corpus.num_tokens,
                "train_blocks": len(data.train_ids), "val_blocks": len(data.val_ids)})
        barrier(info)
        del loss_fn  # DDP's reducer goes before the process group
        distributed.shutdown(info)
        return result
