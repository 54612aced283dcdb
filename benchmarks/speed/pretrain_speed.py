"""Tokens/s and peak memory of our ELECTRA training step against a naive reference step, and of the
default recipe's step against the paper's.

* ``ours`` vs ``naive``: the paper's model (post-LN ELECTRA, ``--paper-recipe``) under the trainer's
  step and under a textbook step (below).
* ``default`` vs ``ours``: the default recipe (ModernBERT pair, half-depth same-width generator,
  GDES, per-module clipping; ``training/pretraining/config.py``) against the paper's model, both under the
  trainer's step: what the recipe that learns costs per update (the goal: at most 10% slower,
  or the README says why the trade pays).

``ours`` and ``naive`` train the same ``ElectraPretrainingModel`` (same preset, same seed, so the same
initial parameters, shared embeddings included) on the same synthetic batch with the same
masks, and both finish with ``clip_grad_norm_`` -> AdamW step -> LR-scheduler step -> ``zero_grad``.

* **ours** is the trainer's step (``grad_accum=1`` on CPU), built from
  the project's own functions: ``mask_tokens`` -> ``objectives.compute_loss("electra")`` (MLM logits
  only at the masked positions, Gumbel-max sampling in fp32 only there) -> ``electra_loss``.
* **naive** is the textbook step: ``ElectraForMaskedLM(labels=...)`` with ``-100`` at unmasked
  positions, ``torch.softmax`` over ``[B*T, V]`` + ``torch.multinomial``, samples kept only at
  the masked positions, ``ElectraForPreTraining(labels=..., attention_mask=...)`` with its
  built-in loss, ``mlm_loss + 50 * disc_loss``.

Why the naive step is slower: with ``mask_prob = 0.15`` only ~15 % of the positions are
predicted, yet the naive generator projects *every* position onto the vocabulary (a
``[B*T, E] x [E, V]`` matmul forward, and two more of that size backward, where ``V`` = 16000
dwarfs the tiny generator's width), materialises ``[B*T, V]`` logits, their gradient and a
``[B*T, V]`` softmax, and then samples over all ``B*T`` rows only to throw ~85 % of the samples
away. Ours applies the prediction head and the vocabulary projection to the masked rows only
and samples only those rows, so that work and memory shrink by ~1 / mask_prob.

Each variant runs in its own subprocess (this script re-invokes itself with ``--worker``) with a
fixed thread count; the parent alternates the variants for ``--rounds`` rounds (ABBA order) so
machine noise hits both, and reports medians.

    python -m benchmarks.speed.pretrain_speed --preset tiny
    python -m benchmarks.speed.pretrain_speed --preset small --rounds 2 \
        --out-dir benchmarks/results/pretrain_speed_small

Writes ``result.json`` and ``table.md`` to ``--out-dir`` (default ``benchmarks/results/pretrain_speed/``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.training.optim import build_optimizer, clip_gradients, warmup_linear_decay
from electra_detect.training.pretraining.config import PAPER_MODEL, PRESETS, ModelConfig, TrainConfig
from electra_detect.training.pretraining.masking import MaskedBatch, mask_tokens
from electra_detect.training.pretraining.model import ElectraPretrainingModel
from electra_detect.training.pretraining.objectives import compute_loss

VARIANTS = ("ours", "naive", "default")
GOAL_SPEEDUP = 1.5
SPECIAL_IDS = [0, 1, 2, 3, 4]  # [PAD], [UNK], [CLS], [SEP], [MASK], as training/pretraining/data.py's tokenizer
CLS_ID, SEP_ID, MASK_ID = 2, 3, 4
DEFAULT_OUT_DIR = Path(__file__).resolve().parents[1] / "results" / "pretrain_speed"

StepFn = Callable[[ElectraPretrainingModel, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler,
                   torch.Tensor, torch.Tensor, torch.Generator, torch.Generator, TrainConfig], dict[str, float]]


# -- the two steps -----------------------------------------------------------------------------------
def _mask(input_ids: torch.Tensor, attention: torch.Tensor, rng: torch.Generator, tcfg: TrainConfig) -> MaskedBatch:
    return mask_tokens(input_ids, attention, mask_id=MASK_ID, special_ids=SPECIAL_IDS, mask_prob=tcfg.mask_prob,
                       generator=rng, keep_original_prob=tcfg.keep_original_prob,
                       max_predictions=tcfg.max_predictions)


def _finish(model: ElectraPretrainingModel, optimizer: torch.optim.Optimizer,
            scheduler: torch.optim.lr_scheduler.LRScheduler, tcfg: TrainConfig) -> None:
    clip_gradients(model, tcfg.clip_norm, tcfg.clip_scope)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)


def ours_step(model: ElectraPretrainingModel, optimizer: torch.optim.Optimizer,
              scheduler: torch.optim.lr_scheduler.LRScheduler, input_ids: torch.Tensor, attention: torch.Tensor,
              mask_rng: torch.Generator, sample_rng: torch.Generator, tcfg: TrainConfig) -> dict[str, float]:
    """The trainer's step: logits and Gumbel-max sampling at the masked positions only."""
    masked = _mask(input_ids, attention, mask_rng, tcfg)
    out = compute_loss(model, "electra", masked, attention, sample_rng, tcfg.disc_weight, tcfg.temperature)
    out.loss.backward()
    _finish(model, optimizer, scheduler, tcfg)
    return {"loss": out.loss.item(), "mlm_loss": out.mlm_loss.item(), "disc_loss": out.disc_loss.item()}


def naive_step(model: ElectraPretrainingModel, optimizer: torch.optim.Optimizer,
               scheduler: torch.optim.lr_scheduler.LRScheduler, input_ids: torch.Tensor, attention: torch.Tensor,
               mask_rng: torch.Generator, sample_rng: torch.Generator, tcfg: TrainConfig) -> dict[str, float]:
    """The textbook step: HF heads with built-in losses, vocabulary logits and sampling at every position."""
    masked = _mask(input_ids, attention, mask_rng, tcfg)
    mlm_labels = masked.original.masked_fill(~masked.masked, -100)
    gen = model.generator(input_ids=masked.input_ids, attention_mask=attention, labels=mlm_labels)
    with torch.no_grad():
        vocab = gen.logits.shape[-1]
        probs = torch.softmax(gen.logits.detach().float().view(-1, vocab) / tcfg.temperature, dim=-1)
        samples = torch.multinomial(probs, 1, generator=sample_rng).view_as(input_ids)
    disc_input = torch.where(masked.masked, samples, masked.original)
    disc_labels = (disc_input != masked.original).long()
    disc = model.discriminator(input_ids=disc_input, attention_mask=attention, labels=disc_labels)
    loss = gen.loss + tcfg.disc_weight * disc.loss
    loss.backward()
    _finish(model, optimizer, scheduler, tcfg)
    return {"loss": loss.item(), "mlm_loss": gen.loss.item(), "disc_loss": disc.loss.item()}


STEPS: dict[str, StepFn] = {"ours": ours_step, "naive": naive_step, "default": ours_step}


# -- worker ------------------------------------------------------------------------------------------
def synthetic_batch(batch_size: int, seq_len: int, vocab_size: int, seed: int) -> torch.Tensor:
    """Random non-special ids, [CLS] first and [SEP] last (a packed block, as training/pretraining/data.py makes)."""
    rng = torch.Generator().manual_seed(seed)
    ids = torch.randint(len(SPECIAL_IDS), vocab_size, (batch_size, seq_len), generator=rng)
    ids[:, 0] = CLS_ID
    ids[:, -1] = SEP_ID
    return ids


def peak_rss_mib() -> float:
    """``ru_maxrss`` of this process in MiB (KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def run_worker(variant: str, args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    paper = variant != "default"  # ours and naive: the paper's model, clipped globally as the paper does
    model_cfg = ModelConfig(preset=args.preset, vocab_size=args.vocab_size, **(PAPER_MODEL if paper else {}))
    model_cfg.validate()
    tcfg = TrainConfig(batch_size=args.batch_size, seed=args.seed, clip_scope="global" if paper else "per_module")
    tcfg.validate()

    torch.manual_seed(args.seed)
    model = ElectraPretrainingModel.from_config(model_cfg, args.vocab_size)
    model.train()
    optimizer = build_optimizer(model, tcfg.lr, tcfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_linear_decay(tcfg.warmup_steps, tcfg.max_steps))
    input_ids = synthetic_batch(args.batch_size, args.seq_len, args.vocab_size, args.seed)
    attention = torch.ones_like(input_ids)
    # Masking and sampling draw from separate streams, so both variants see the same masks at every step.
    mask_rng = torch.Generator().manual_seed(args.seed * 1000)
    sample_rng = torch.Generator().manual_seed(args.seed * 1000 + 1)
    num_masked = int(_mask(input_ids, attention, torch.Generator().manual_seed(args.seed * 1000), tcfg).masked.sum())
    with torch.no_grad():
        param_checksum = float(sum(p.double().sum() for p in model.parameters()))
    rss_setup = peak_rss_mib()

    step = STEPS[variant]
    first: dict[str, float] = {}
    for _ in range(args.warmup):
        stats = step(model, optimizer, scheduler, input_ids, attention, mask_rng, sample_rng, tcfg)
        first = first or stats
    times: list[float] = []
    for _ in range(args.steps):
        start = time.perf_counter()
        stats = step(model, optimizer, scheduler, input_ids, attention, mask_rng, sample_rng, tcfg)
        times.append(time.perf_counter() - start)
        first = first or stats
    tokens_per_step = args.batch_size * args.seq_len
    gen_cfg = model_cfg.generator_config(args.vocab_size)
    return {
        "variant": variant,
        "tokens_per_s": tokens_per_step * len(times) / sum(times),  # throughput over all timed steps
        "tokens_per_s_median_step": tokens_per_step / statistics.median(times),  # robust to bursts of contention
        "step_s_median": statistics.median(times),
        "step_s": [round(t, 4) for t in times],
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "rss_after_setup_mib": round(rss_setup, 1),
        "first_step": first,
        "last_step": stats,
        "settings": {
            "preset": args.preset, "batch_size": args.batch_size, "seq_len": args.seq_len,
            "vocab_size": args.vocab_size, "tokens_per_step": tokens_per_step, "masked_per_step": num_masked,
            "mask_prob": tcfg.mask_prob, "disc_weight": tcfg.disc_weight, "clip_norm": tcfg.clip_norm,
            "lr": tcfg.lr, "warmup": args.warmup, "steps": args.steps, "threads": torch.get_num_threads(),
            "seed": args.seed, "discriminator": PRESETS[args.preset],
            "generator_hidden": gen_cfg.hidden_size, "generator_heads": gen_cfg.num_attention_heads,
            "generator_layers": gen_cfg.num_hidden_layers, "architecture": model_cfg.architecture,
            "parameters": sum(p.numel() for p in model.parameters()), "param_checksum": param_checksum,
        },
        "torch": torch.__version__,
    }


# -- parent ------------------------------------------------------------------------------------------
def _worker_command(variant: str, args: argparse.Namespace) -> list[str]:
    return [sys.executable, "-m", "benchmarks.speed.pretrain_speed", "--worker", variant, "--preset", args.preset,
            "--batch-size", str(args.batch_size), "--seq-len", str(args.seq_len), "--vocab-size", str(args.vocab_size),
            "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads),
            "--seed", str(args.seed)]


def _run_one(variant: str, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    proc = subprocess.run(_worker_command(variant, args), stdout=subprocess.PIPE, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{variant} worker failed with exit code {proc.returncode}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"{variant} worker printed no JSON line; stdout was:\n{proc.stdout}")
    return json.loads(lines[-1])


def _command_line() -> str:
    exe = Path(sys.executable)
    try:
        exe = exe.relative_to(Path.cwd())
    except ValueError:
        pass
    return shlex.join([str(exe), *sys.argv])


def _markdown(summary: dict[str, Any]) -> str:
    s = summary["settings"]
    rows = ["| variant | tokens/s (median) | tokens/s per round | tokens/s from median step | peak RSS MiB |",
            "|---|---:|---|---:|---:|"]
    for variant in VARIANTS:
        v = summary[variant]
        per_round = ", ".join(f"{x:,.0f}" for x in v["tokens_per_s_rounds"])
        rows.append(f"| {variant} | {v['tokens_per_s_median']:,.0f} | {per_round} "
                    f"| {v['tokens_per_s_median_step']:,.0f} | {v['peak_rss_mib']:,.0f} |")
    met = "met" if summary["goal_met"] else "NOT met"
    return "\n".join([
        "# ELECTRA pre-training step: ours vs naive (paper's model), default recipe vs paper's model",
        "",
        *rows,
        "",
        f"- **speedup ours/naive: {summary['speedup']:.2f}x** (goal >= {summary['goal_speedup']}x: {met}); "
        f"from median step times: {summary['speedup_median_step']:.2f}x",
        f"- **default recipe / paper's model (both the trainer's step): {summary['default_vs_paper']:.2f}x** the "
        f"tokens/s (issue 12: >= 0.90x, or the README says why the trade pays); default: "
        f"{summary['default_settings']['architecture']}, generator {summary['default_settings']['generator_layers']} "
        f"layers x {summary['default_settings']['generator_hidden']}, "
        f"{summary['default_settings']['parameters']:,} parameters",
        f"- peak RSS ratio naive/ours: {summary['naive']['peak_rss_mib'] / summary['ours']['peak_rss_mib']:.2f}x "
        "(ru_maxrss of the whole worker process, interpreter and libraries included)",
        f"- paper's model: preset `{s['preset']}` (generator hidden {s['generator_hidden']}), vocab {s['vocab_size']}, "
        f"{s['parameters']:,} parameters",
        f"- batch {s['batch_size']} x seq {s['seq_len']} = {s['tokens_per_step']} tokens/step, "
        f"{s['masked_per_step']} masked; {s['warmup']} warm-up + {s['steps']} timed steps per worker, "
        f"{summary['rounds']} rounds alternating (ABBA)",
        f"- command: `{summary['command']}`",
        f"- date: {summary['date']}",
        f"- torch {summary['torch']}, {s['threads']} threads, {summary['machine']}",
        "",
    ])


def run_parent(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    schedule = [v for r in range(args.rounds) for v in (VARIANTS if r % 2 == 0 else VARIANTS[::-1])]
    with tqdm(schedule, desc="pretrain_speed", unit="run", file=sys.stderr) as bar:
        for variant in bar:
            bar.set_postfix_str(f"running {variant}")
            result = _run_one(variant, args)
            results[variant].append(result)
            tqdm.write(f"{variant}: {result['tokens_per_s']:,.0f} tokens/s, peak RSS {result['peak_rss_mib']:,.0f} MiB",
                       file=sys.stderr)

    per_variant: dict[str, dict[str, Any]] = {}
    for variant, runs in results.items():
        per_variant[variant] = {
            "tokens_per_s_median": round(statistics.median(r["tokens_per_s"] for r in runs), 1),
            "tokens_per_s_rounds": [round(r["tokens_per_s"], 1) for r in runs],
            "tokens_per_s_median_step": round(statistics.median(r["tokens_per_s_median_step"] for r in runs), 1),
            "step_s_median": round(statistics.median(r["step_s_median"] for r in runs), 4),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
            "rss_after_setup_mib": max(r["rss_after_setup_mib"] for r in runs),
        }
    speedup = per_variant["ours"]["tokens_per_s_median"] / per_variant["naive"]["tokens_per_s_median"]
    recipe_ratio = per_variant["default"]["tokens_per_s_median"] / per_variant["ours"]["tokens_per_s_median"]
    speedup_step = per_variant["ours"]["tokens_per_s_median_step"] / per_variant["naive"]["tokens_per_s_median_step"]
    first = results["ours"][0]
    summary = {
        "benchmark": "pretrain_speed",
        "ours": per_variant["ours"],
        "naive": per_variant["naive"],
        "speedup": round(speedup, 3),
        "speedup_median_step": round(speedup_step, 3),
        "goal_speedup": GOAL_SPEEDUP,
        "goal_met": speedup >= GOAL_SPEEDUP,
        "default_vs_paper": round(recipe_ratio, 3),
        "default": per_variant["default"],
        "default_settings": results["default"][0]["settings"],
        "rounds": args.rounds,
        "settings": first["settings"],
        "torch": first["torch"],
        "machine": f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPUs",
        "command": _command_line(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    out_dir = Path(args.out_dir)
    atomic_write_json(out_dir / "result.json", {**summary, "runs": results})
    atomic_write_text(out_dir / "table.md", _markdown(summary))
    return summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=16000)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per worker")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per worker")
    parser.add_argument("--rounds", type=int, default=3, help="ours/naive pairs, alternating order")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads in each worker")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", default=str(DEFAULT_OUT_DIR))
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.seq_len > PRESETS[args.preset]["max_position_embeddings"]:
        parser.error(f"--seq-len {args.seq_len} exceeds the {args.preset} preset's "
                     f"{PRESETS[args.preset]['max_position_embeddings']} positions")
    if args.seq_len < 3 or min(args.batch_size, args.steps, args.rounds, args.threads) < 1 or args.warmup < 0:
        parser.error("need --seq-len >= 3, --batch-size/--steps/--rounds/--threads >= 1 and --warmup >= 0")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(run_worker(args.worker, args)), flush=True)
        return
    print(json.dumps(run_parent(args)), flush=True)


if __name__ == "__main__":
    main()
