"""The pre-training loop, readable top to bottom (after nanoGPT's train.py).

Single process or ``torchrun --nproc_per_node N`` (DDP; gloo on CPU, nccl on CUDA). Rank 0
owns every write: metrics.jsonl, checkpoints and the exported HF directories.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from electra_detect.fileio import atomic_write_dir, atomic_write_json, atomic_write_text
from electra_detect.training.checkpoint import (
    CheckpointError,
    latest_checkpoint,
    load_checkpoint,
    remove_orphans,
    save_checkpoint,
)
from electra_detect.training.config import ConfigError, RunConfig
from electra_detect.training.data import (
    BlockSampler,
    PackedBlocks,
    default_cache_dir,
    prepare_corpus,
    resolve_corpus,
    split_blocks,
)
from electra_detect.training.evaluation import evaluate
from electra_detect.training.masking import mask_tokens
from electra_detect.training.model import ElectraPretrainingModel
from electra_detect.training.objectives import RTD_OBJECTIVES

RUN_CONFIG_FILE = "run_config.json"
# What the trainer writes into the run dir through a temp copy (fileio's atomic writers).
ORPHAN_OUTPUTS = ("discriminator", "generator", "mlm", "summary.json", RUN_CONFIG_FILE, "metrics.jsonl")


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed() -> DistInfo:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def build_optimizer(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW without decay on biases and LayerNorm weights (as BERT/ELECTRA)."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if param.ndim < 2 or "LayerNorm" in name else decay).append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-6)


def clip_gradients(model: ElectraPretrainingModel, clip_norm: float, scope: str) -> tuple[float, dict[str, float]]:
    """Clip in place; returns the total pre-clip norm and, per module, each half's (``scope="per_module"``)."""
    if scope != "per_module":
        return float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)), {}
    norms = {f"grad_norm_{name}": float(torch.nn.utils.clip_grad_norm_(params, clip_norm))
             for name, params in model.clip_groups().items()}
    return math.sqrt(sum(n * n for n in norms.values())), norms


def warmup_linear_decay(warmup_steps: int, max_steps: int) -> Callable[[int], float]:
    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (max_steps - step) / max(1, max_steps - warmup_steps))

    return factor


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
        self.callbacks: list[Callable[[Trainer, dict[str, Any]], None]] = []
        self._stop_reason: str | None = None

    # -- control ---------------------------------------------------------------------------
    def request_stop(self, reason: str = "interrupted") -> None:
        """Finish the current step, save a checkpoint and return (signal handlers call this)."""
        self._stop_reason = reason

    def _install_signal_handlers(self) -> dict[int, Any]:
        previous = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[signum] = signal.signal(signum, lambda s, _f: self.request_stop(signal.Signals(s).name))
            except ValueError:  # not in the main thread
                pass
        return previous

    # -- set-up ----------------------------------------------------------------------------
    def _check_out_dir(self) -> None:
        ckpt_dir = self.out_dir / "checkpoints"
        has_ckpt = ckpt_dir.exists() and any(ckpt_dir.glob("step_*"))
        if self.resume and not has_ckpt:
            raise CheckpointError(f"nothing to resume: {ckpt_dir} holds no checkpoint")
        if not self.resume and has_ckpt and self.overwrite:
            # only a run directory is ever removed: it holds our checkpoints (and nothing else is touched)
            shutil.rmtree(self.out_dir)
        elif not self.resume and has_ckpt:
            raise CheckpointError(f"{self.out_dir} already holds a run; pass --resume to continue it, "
                                  f"--overwrite to start it again, or choose another --out")

    def _prepare_data(self, info: DistInfo) -> None:
        data, model_cfg = self.config.data, self.config.model
        source = resolve_corpus(data.corpus)
        cache = Path(data.cache_dir) if data.cache_dir else default_cache_dir()
        given = Path(data.tokenizer) if data.tokenizer else None
        prepare = lambda: prepare_corpus(source, cache, model_cfg.vocab_size, data.lowercase,  # noqa: E731
                                         data.doc_split, data.seq_len, given)
        if info.main:
            self.corpus = prepare()
        if info.enabled:
            dist.barrier()
        if not info.main:
            self.corpus = prepare()
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(self.corpus.tokenizer_dir))
        self.blocks = PackedBlocks(self.corpus.tokens(), data.seq_len, self.tokenizer.cls_token_id,
                                   self.tokenizer.sep_token_id)
        self.train_ids, self.val_ids = split_blocks(self.blocks.num_blocks, data.val_fraction, data.min_val_blocks)
        self.special_ids = list(self.tokenizer.all_special_ids)

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> TrainResult:
        info = init_distributed()
        cfg, tcfg = self.config, self.config.train
        self._check_out_dir()
        if info.main:  # a save killed midway left temp copies behind: clear them before anything reads or saves
            removed = remove_orphans(self.out_dir / "checkpoints", ORPHAN_OUTPUTS)
            if removed:
                print(f"removed {len(removed)} unfinished checkpoint/output temp files from an interrupted save: "
                      f"{', '.join(removed[:5])}{' ...' if len(removed) > 5 else ''}", file=sys.stderr)
        if tcfg.threads:
            torch.set_num_threads(tcfg.threads)
        device = torch.device(f"cuda:{info.local_rank}" if torch.cuda.is_available() else "cpu")
        self._prepare_data(info)

        torch.manual_seed(tcfg.seed + info.rank)
        model = ElectraPretrainingModel.from_config(cfg.model, len(self.tokenizer), tcfg.objective)
        if tcfg.init_from and not self.resume:  # continued pre-training: weights only; fresh optimizer and warm-up
            try:
                model.load_exported_weights(tcfg.init_from)
            except (OSError, RuntimeError, ValueError) as exc:
                raise CheckpointError(f"cannot start from {tcfg.init_from}: {str(exc).splitlines()[0]}") from exc
        model = model.to(device)
        optimizer = build_optimizer(model, tcfg.lr, tcfg.weight_decay)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_linear_decay(tcfg.warmup_steps, tcfg.max_steps))
        rng = torch.Generator(device=device).manual_seed(tcfg.seed * 1000 + info.rank)
        sampler = BlockSampler(self.train_ids, seed=tcfg.seed)
        step, tokens_seen = 0, 0
        # The vocabulary's hash guards against resuming on a corpus that trained another tokenizer.
        vocab = (self.corpus.tokenizer_dir / "vocab.txt").read_bytes()
        fingerprint = {**cfg.model_fingerprint(), "vocab_sha256": hashlib.sha256(vocab).hexdigest()}
        ckpt_root = self.out_dir / "checkpoints"

        if self.resume:
            path = latest_checkpoint(ckpt_root)
            trainer_state, rng_states = load_checkpoint(path, model, optimizer, scheduler, fingerprint)
            step, tokens_seen = trainer_state["step"], trainer_state["tokens_seen"]
            sampler = BlockSampler(self.train_ids, seed=tcfg.seed, **trainer_state["sampler"])
            if trainer_state.get("world_size") == info.world_size:
                torch.set_rng_state(rng_states[f"torch.{info.rank}"])
                rng.set_state(rng_states[f"sampling.{info.rank}"].to(rng.get_state().device))
            elif info.main:
                print(f"warning: checkpoint was written with {trainer_state.get('world_size')} processes, "
                      f"this run has {info.world_size}; RNG streams restart from the seed")
        if info.main:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.out_dir / RUN_CONFIG_FILE, cfg.to_dict())
            self._trim_metrics(step)

        # Objectives (or stages) that leave a half of the model without gradient need DDP to look for unused ones.
        some_unused = tcfg.objective in ("bert_mlm", "replace_mlm") or bool(tcfg.mlm_first_steps)
        ddp_model = DistributedDataParallel(model, find_unused_parameters=some_unused) if info.enabled else model
        model.train()
        autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda" and tcfg.bf16)
        tokens_per_step = tcfg.batch_size * tcfg.grad_accum * info.world_size * cfg.data.seq_len
        mask_id = self.tokenizer.mask_token_id
        val_batches = [self.blocks.batch(self.val_ids[i:i + tcfg.batch_size])
                       for i in range(0, len(self.val_ids), tcfg.batch_size)][:tcfg.eval_batches]
        eval_kwargs = dict(mask_id=mask_id, special_ids=self.special_ids, mask_prob=tcfg.mask_prob,
                           disc_weight=tcfg.disc_weight, temperature=tcfg.temperature, seed=tcfg.seed + 7919,
                           device=device)

        previous_handlers = self._install_signal_handlers()
        # A terminal gets a live bar; a log file gets one plain line per log interval instead of a flood.
        report = info.main and self.show_progress
        bar = tqdm(total=tcfg.max_steps, initial=step, desc="pretrain", unit="step",
                   disable=not (report and sys.stderr.isatty()))
        started = time.monotonic()
        window_start, window_tokens = started, 0
        last_metrics: dict[str, Any] = {}
        val_metrics: dict[str, Any] = {}
        stop_reason = "max_steps"
        evaluated_at = saved_at = -1
        try:
            while step < tcfg.max_steps:
                self._set_stage(model, step, info)
                stats = self._train_step(ddp_model, model, optimizer, scheduler, sampler, rng, info,
                                         autocast, mask_id, device)
                step += 1
                tokens_seen += tokens_per_step
                window_tokens += tokens_per_step
                bar.update(1)
                now = time.monotonic()
                if step % tcfg.log_every == 0 or step == tcfg.max_steps:
                    rate = window_tokens / max(now - window_start, 1e-9)
                    window_start, window_tokens = now, 0
                    last_metrics = {"step": step, "split": "train", **stats, "lr": scheduler.get_last_lr()[0],
                                    "tokens_seen": tokens_seen, "tokens_per_s": rate,
                                    "elapsed_s": now - started}
                    bar.set_postfix(loss=f"{stats['loss']:.3f}", gen_acc=f"{stats['gen_acc']:.2f}",
                                    disc_acc=f"{stats['disc_acc']:.3f}", repl=f"{stats['replaced_frac']:.3f}",
                                    tok_s=f"{rate:,.0f}")
                    self._log(info, last_metrics)
                    if report and bar.disable:
                        print(f"pretrain step {step}/{tcfg.max_steps} loss {stats['loss']:.3f} "
                              f"gen_acc {stats['gen_acc']:.3f} disc_acc {stats['disc_acc']:.3f} "
                              f"{rate:,.0f} tok/s {(now - started) / 60:.1f} min", file=sys.stderr, flush=True)
                for callback in self.callbacks:
                    callback(self, {"step": step, **stats})
                if tcfg.max_minutes and now - started >= tcfg.max_minutes * 60:
                    self._stop_reason = self._stop_reason or "time_budget"
                if self._agree_to_stop(info):
                    stop_reason = self._stop_reason or "stopped"
                    break
                if step % tcfg.eval_every == 0:
                    val_metrics = self._validate(info, model, val_batches, eval_kwargs, step)
                    evaluated_at = step
                if step % tcfg.save_every == 0:
                    self._save(info, ckpt_root, step, model, optimizer, scheduler, rng, sampler, tokens_seen,
                               fingerprint)
                    saved_at = step
        finally:
            bar.close()
            for signum, handler in previous_handlers.items():
                signal.signal(signum, handler)

        # Every rank takes the same branches here, or the collectives inside would deadlock.
        if evaluated_at != step:
            val_metrics = self._validate(info, model, val_batches, eval_kwargs, step)
        if saved_at != step:
            self._save(info, ckpt_root, step, model, optimizer, scheduler, rng, sampler, tokens_seen, fingerprint)
        minutes = (time.monotonic() - started) / 60
        result = TrainResult(self.out_dir, step, tokens_seen, minutes, stop_reason, last_metrics, val_metrics)
        if info.main:
            self._export(model, result)
        if info.enabled:
            dist.barrier()
            # Tear gloo down explicitly, DDP's reducer first: left to interpreter exit, gloo's threads
            # can abort the process ("terminate called without an active exception").
            del ddp_model
            gc.collect()
            dist.destroy_process_group()
        return result

    def _set_stage(self, model: ElectraPretrainingModel, step: int, info: DistInfo) -> None:
        """Two-stage training (``mlm_first_steps``): generator MLM alone, then ELECTRA with the
        generator encoder frozen (the embeddings, tied to its output layer, stay shared and keep training).

        The switch happens at the start of step ``mlm_first_steps`` on every rank (also on a resume
        from the checkpoint saved just before it), so the copied weights are the same everywhere.
        """
        first = self.config.train.mlm_first_steps
        if not first:
            return
        if step < first:
            model.stage = "mlm"
        elif model.stage != "disc":
            if step > first:  # resumed past the switch: the checkpoint already holds the stage-two weights
                model.stage = "disc"
                return
            copied = model.start_second_stage()
            if info.main:
                tqdm.write(f"two-stage: step {step}, discriminator encoder "
                           f"{'initialised from the generator' if copied else 'kept (generator of another width)'}")

    def _train_step(self, ddp_model, model, optimizer, scheduler, sampler, rng, info, autocast, mask_id,
                    device) -> dict[str, float]:
        tcfg = self.config.train
        totals = {"loss": 0.0, "mlm_loss": 0.0, "disc_loss": 0.0}
        gen_correct = gen_total = disc_correct = real_total = replaced = 0
        extra: dict[str, float] = {}
        for micro in range(tcfg.grad_accum):
            ids = sampler.next(tcfg.batch_size * info.world_size)
            ids = ids[info.rank * tcfg.batch_size:(info.rank + 1) * tcfg.batch_size]
            input_ids = self.blocks.batch(ids).to(device)
            attention = torch.ones_like(input_ids)
            masked = mask_tokens(input_ids, attention, mask_id=mask_id, special_ids=self.special_ids,
                                 mask_prob=tcfg.mask_prob, generator=rng,
                                 keep_original_prob=tcfg.keep_original_prob, max_predictions=tcfg.max_predictions)
            sync = micro == tcfg.grad_accum - 1 or not info.enabled
            context = ddp_model.no_sync() if not sync else nullcontext()
            with context:
                with autocast:
                    out = ddp_model(masked, attention, rng, tcfg.disc_weight, tcfg.temperature)
                (out.loss / tcfg.grad_accum).backward()  # outside autocast, as PyTorch recommends
            totals["loss"] += out.loss.item() / tcfg.grad_accum
            totals["mlm_loss"] += out.mlm_loss.item() / tcfg.grad_accum
            totals["disc_loss"] += out.disc_loss.item() / tcfg.grad_accum
            for key, value in out.extra.items():
                extra[key] = extra.get(key, 0.0) + value / tcfg.grad_accum
            with torch.no_grad():
                gen_correct += (out.mlm_logits.argmax(-1) == masked.original[masked.masked]).sum().item()
                gen_total += int(masked.masked.sum())
                disc_correct += ((out.disc_logits > 0).long() == out.disc_labels).sum().item()
                real_total += input_ids.numel()
                replaced += int(out.disc_labels.sum())
        grad_norm, norms = clip_gradients(model, tcfg.clip_norm, tcfg.clip_scope)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        trains_rtd = model.stage == "disc" or (model.stage == "" and tcfg.objective in RTD_OBJECTIVES)
        return {**totals, **extra, "gen_acc": gen_correct / max(gen_total, 1),
                "disc_acc": disc_correct / real_total if trains_rtd else float("nan"),
                "replaced_frac": replaced / real_total, "grad_norm": float(grad_norm), **norms}

    def _agree_to_stop(self, info: DistInfo) -> bool:
        """Every rank stops on the same step, whichever rank got the signal or ran out of time."""
        flag = self._stop_reason is not None
        if not info.enabled:
            return flag
        tensor = torch.tensor([int(flag)])
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        if tensor.item() and self._stop_reason is None:
            self._stop_reason = "stopped by another rank"
        return bool(tensor.item())

    def _validate(self, info, model, val_batches, eval_kwargs, step) -> dict[str, Any]:
        metrics: dict[str, Any] = {}
        if info.main:
            metrics = {"step": step, "split": "val", **evaluate(model, val_batches, **eval_kwargs)}
            self._log(info, metrics)
        if info.enabled:
            dist.barrier()
        return metrics

    def _save(self, info, ckpt_root, step, model, optimizer, scheduler, rng, sampler, tokens_seen,
              fingerprint) -> None:
        local = {"torch": torch.get_rng_state(), "sampling": rng.get_state().cpu()}
        gathered = [local]
        if info.enabled:
            gathered = [None] * info.world_size
            dist.all_gather_object(gathered, local)
        if info.main:
            rng_states = {f"{name}.{rank}": state for rank, states in enumerate(gathered)
                          for name, state in states.items()}
            trainer_state = {"step": step, "tokens_seen": tokens_seen, "sampler": sampler.state(),
                             "world_size": info.world_size}
            save_checkpoint(ckpt_root, step, model, optimizer, scheduler, rng_states, trainer_state,
                            fingerprint, self.config.train.keep_last)
        if info.enabled:
            dist.barrier()

    def _export(self, model: ElectraPretrainingModel, result: TrainResult) -> None:
        """Write discriminator/ and generator/ as HF directories (tokenizer included), atomically."""
        # MLM objectives add mlm/: the discriminator encoder with its MLM head.
        for name, module in model.exportable_modules().items():
            def fill(tmp: Path, module=module) -> None:
                module.save_pretrained(str(tmp), safe_serialization=True)
                self.tokenizer.save_pretrained(str(tmp))
            atomic_write_dir(self.out_dir / name, fill)
        summary = {"objective": self.config.train.objective, "steps": result.steps, "tokens_seen": result.tokens_seen,
                   "minutes": round(result.minutes, 3),
                   "stop_reason": result.stop_reason, "train": result.last_metrics, "val": result.val_metrics,
                   "corpus_tokens": self.corpus.num_tokens, "train_blocks": len(self.train_ids),
                   "val_blocks": len(self.val_ids)}
        atomic_write_json(self.out_dir / "summary.json", summary)

    # -- logging ---------------------------------------------------------------------------
    def _log(self, info: DistInfo, row: dict[str, Any]) -> None:
        if not info.main:
            return
        clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        with open(self.out_dir / "metrics.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(clean) + "\n")

    def _trim_metrics(self, step: int) -> None:
        """On resume, drop rows logged after the checkpoint so the curve continues without overlap."""
        path = self.out_dir / "metrics.jsonl"
        if not path.exists():
            return
        rows = [line for line in path.read_text().splitlines() if line.strip()]
        kept = [line for line in rows if json.loads(line)["step"] <= step]
        if len(kept) != len(rows):
            atomic_write_text(path, "".join(line + "\n" for line in kept))


def load_run_config(out_dir: Path) -> RunConfig:
    path = Path(out_dir) / RUN_CONFIG_FILE
    if not path.exists():
        raise ConfigError(f"{out_dir} has no {RUN_CONFIG_FILE}; it is not a run directory")
    return RunConfig.from_dict(json.loads(path.read_text()))



def start_from(config: RunConfig, source: Path) -> RunConfig:
    """Continued pre-training (``--init-from``): the source's model settings and tokenizer, the rest from ``config``."""
    origin = load_run_config(source)
    for part in ("generator", "discriminator"):
        if not (source / part / "config.json").exists():
            raise ConfigError(f"{source} has no exported {part}/; start from a finished run or a shipped model")
    config.model = origin.model
    config.data.lowercase = origin.data.lowercase
    config.data.tokenizer = str((source / "discriminator").resolve())  # absolute: a resumed run finds it again
    config.train.init_from = str(source.resolve())
    return config
