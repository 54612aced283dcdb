"""The ELECTRA paper's efficiency claims at our scale: objectives (Table 5), generator size (Fig. 3
left), two-stage training and score against compute (Fig. 3 right), at equal training FLOPs.

    # once, on a machine with ../shared and ERRANT (the JFLEG labels need spaCy + ERRANT):
    python -m benchmarks.studies.ablation prepare-data --shared ../shared/data --out /tmp/ablation-data
    # the sweep (resumable: --resume skips the runs result.json already holds):
    python -m benchmarks.studies.ablation run --eval-data /tmp/ablation-data --budget-steps 200 --seeds 0 1 2 \\
        --jobs 2 --check-flops --out-dir benchmarks/results/ablation --resume

Equal compute = equal training FLOPs. ``train_flops_per_step`` counts them from the model shapes and
the tokens each objective pushes through each module: every encoder sees every token; the vocabulary
projection runs at the masked 15% (at every token for All-Tokens MLM); trained modules cost 3x their
forward pass (forward + backward), the frozen generator of two-stage's second stage 1x. The budget is
the FLOPs of ``--budget-steps`` ELECTRA updates; every variant trains ``budget / its FLOPs per step``
updates (two-stage: half the budget's steps in each stage), so BERT, which has no generator, gets more
updates than ELECTRA. A counter check (torch's FlopCounterMode over real training steps) is stored
beside the analytic count. Wall time is reported for every run too: its training seconds and its
seconds per update after the first logging window (a discarded warm-up).

Model: the default recipe (ModernBERT pair that leaves the plateau, docs/pretraining.md); ``--paper-recipe``
runs the paper's post-LN ELECTRA pair instead. Same corpus, tokenizer, blocks, optimiser and seeds for
every variant.

Evaluation, the same for every run:
- CoLA dev MCC after fine-tuning the pre-trained encoder (training/finetune/cola.py);
- BLiMP accuracy: the good sentence must get the higher sentence score. RTD objectives: sum of
  log(1 - p) from the Detector (uncalibrated). ``bert_mlm``: pseudo-log-likelihood (one [MASK] per
  subword). ``replace_mlm`` / ``all_tokens_mlm`` never see [MASK] in training, so they are scored in one
  unmasked pass: sum of log p(x_t | x), with the copy mechanism for ``all_tokens_mlm``;
- zero-shot GED F0.5 and AP on the JFLEG dev report half (threshold tuned on the tuning half, as
  benchmarks/quality/ged.py): RTD objectives use the Detector's word score; MLM objectives per-token surprisal
  1 - p(x_t | ...) from the same score as BLiMP, max over a word's subwords;
- the plateau check: validation MLM accuracy (the generator's for RTD objectives, the MLM head's
  otherwise) against the share of the corpus's most frequent token.

Writes ``result.json``, ``table.md`` and ``plot.png`` (objectives), ``gensize.png``, ``compute.png`` to
``--out-dir`` after every run (a cut-off sweep keeps what it finished) and prints one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.run import command_line
from electra_detect.fileio import atomic_save_figure, atomic_write_json, atomic_write_text

ROOT = Path(__file__).resolve().parents[2]


# name -> objective and model overrides. ``gen_*``: the generator-width sweep, all with untied embedding
# tables (a narrower generator cannot share ModernBERT's table), so width is the only thing that changes.
VARIANTS: dict[str, dict[str, Any]] = {
    "electra": {"objective": "electra"},
    "bert_mlm": {"objective": "bert_mlm"},
    "electra15": {"objective": "electra15"},
    "replace_mlm": {"objective": "replace_mlm"},
    "all_tokens_mlm": {"objective": "all_tokens_mlm"},
    "two_stage": {"objective": "electra", "gen_fraction": 1.0, "gen_full_depth": True, "two_stage": True},
    "gen_0.25": {"objective": "electra", "gen_fraction": 0.25, "embedding_sharing": "none"},
    "gen_0.5": {"objective": "electra", "gen_fraction": 0.5, "embedding_sharing": "none"},
    "gen_1": {"objective": "electra", "gen_fraction": 1.0, "embedding_sharing": "none"},
    "adversarial": {"objective": "adversarial"},
}
# In the order they run: the paper's headline pair first, so a cut-off sweep has answered it.
DEFAULT_VARIANTS = ["electra", "bert_mlm", "all_tokens_mlm", "replace_mlm", "electra15", "gen_0.25", "gen_0.5",
                    "gen_1", "two_stage"]
# GLUE dev score of the paper's Table 5 (BERT-Base-size models, same compute as BERT).
PAPER_GLUE = {"electra": 85.0, "all_tokens_mlm": 84.3, "replace_mlm": 82.4, "electra15": 82.4, "bert_mlm": 82.2}
LABELS = {"electra": "ELECTRA", "bert_mlm": "BERT (MLM)", "electra15": "ELECTRA 15%", "replace_mlm": "Replace MLM",
          "all_tokens_mlm": "All-Tokens MLM", "adversarial": "Adversarial ELECTRA", "gen_0.25": "gen 1/4",
          "gen_0.5": "gen 1/2", "gen_1": "gen 1", "two_stage": "two-stage (MLM, then ELECTRA)"}
METRICS = ("cola_mcc", "blimp_acc", "ged_f05", "ged_ap")
TITLES = {"cola_mcc": "CoLA dev MCC", "blimp_acc": "BLiMP accuracy", "ged_f05": "GED F0.5 (JFLEG)",
          "ged_ap": "GED AP (JFLEG)"}


def score_kind(objective: str) -> str:
    """Which sentence/token score a run is evaluated with (see the module docstring)."""
    if objective == "bert_mlm":
        return "pll"
    if objective in ("replace_mlm", "all_tokens_mlm"):
        return "one_pass"
    return "rtd"


# -- training FLOPs from the model shapes ----------------------------------------------------------
def encoder_flops_per_token(config: Any, seq_len: int, attention: bool = True) -> float:
    """Forward FLOPs of one token through an encoder (2 per multiply-add): Q/K/V/O projections, the
    feed-forward block (GeGLU's input projection is twice as wide) and attention scores + weighted sum
    over ``seq_len`` keys (ModernBERT's local layers still compute every score under sdpa's mask; torch's
    FLOP counter does not see those inside CPU sdpa, hence ``attention=False`` to compare with it)."""
    d, f, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    ffn = 3 * d * f if config.model_type == "modernbert" else 2 * d * f
    per_layer = 2 * (4 * d * d + ffn) + (4 * seq_len * d if attention else 0)
    embed = getattr(config, "embedding_size", d)
    projection = 2 * embed * d if embed != d else 0  # ELECTRA's embedding projection
    return layers * per_layer + projection


def mlm_head_flops(config: Any) -> float:
    """Forward FLOPs of one predicted position: transform (hidden -> hidden or embedding) + vocabulary."""
    d, vocab = config.hidden_size, config.vocab_size
    out = getattr(config, "embedding_size", d) if config.model_type == "electra" else d
    return 2 * (d * out + out * vocab)


def rtd_head_flops(config: Any) -> float:
    d = config.hidden_size
    return 2 * (d * d + d)


def train_flops_per_step(model_config: Any, objective: str, stage: str, vocab_size: int, tokens: int,
                         seq_len: int, mask_prob: float, attention: bool = True) -> float:
    """Training FLOPs of one update of ``tokens`` tokens. ``stage``: "" (one objective), "mlm" (two-stage's
    generator-only first stage) or "disc" (its second stage: the generator frozen, forward only)."""
    gen = model_config.generator_config(vocab_size)
    disc = model_config.discriminator_config(vocab_size)
    masked = mask_prob * tokens
    encoder = lambda config: encoder_flops_per_token(config, seq_len, attention) * tokens  # noqa: E731
    generator = encoder(gen) + mlm_head_flops(gen) * masked
    discriminator = encoder(disc) + rtd_head_flops(disc) * tokens
    if stage == "mlm":
        return 3 * generator
    if stage == "disc":
        return generator + 3 * discriminator
    if objective == "bert_mlm":
        return 3 * (encoder(disc) + mlm_head_flops(disc) * masked)
    if objective == "replace_mlm":
        return 3 * generator + 3 * (encoder(disc) + mlm_head_flops(disc) * masked)
    if objective == "all_tokens_mlm":
        return 3 * generator + 3 * (discriminator + mlm_head_flops(disc) * tokens)
    return 3 * generator + 3 * discriminator  # electra, electra15 (the head runs on every token), adversarial


def counted_flops_per_step(config: Any, work: Path, steps: int = 2) -> float:
    """torch's FlopCounterMode over real training: (FLOPs of 2n updates - FLOPs of n updates) / n, so the
    data preparation, validation and export both runs share cancel out."""
    from torch.utils.flop_counter import FlopCounterMode

    from electra_detect.training.pretraining.trainer import Trainer

    totals = []
    for n in (steps, 2 * steps):
        probe = dataclasses.replace(config)
        probe.train = dataclasses.replace(config.train, max_steps=n, warmup_steps=1, log_every=n,
                                          eval_every=n + 1, save_every=n + 1, max_minutes=0)
        run_dir = work / f"flops-probe-{n}"
        shutil.rmtree(run_dir, ignore_errors=True)
        with FlopCounterMode(display=False) as counter:
            Trainer(probe, run_dir, show_progress=False).run()
        totals.append(counter.get_total_flops())
        shutil.rmtree(run_dir, ignore_errors=True)
    return (totals[1] - totals[0]) / steps
# -- evaluation data -----------------------------------------------------------------------------
def prepare_data(shared: Path, out: Path, blimp_per_set: int, seed: int) -> dict[str, int]:
    """Compact copies of CoLA, BLiMP and JFLEG GED labels (ERRANT runs here, not on the GPU box)."""
    from electra_detect.tasks.ged.readers import read_parallel, split_sentences

    out.mkdir(parents=True, exist_ok=True)
    for name in ("in_domain_train.tsv", "in_domain_dev.tsv"):
        shutil.copyfile(shared / "cola" / name, out / f"cola_{name.split('_')[-1]}")
    pairs = []
    for path in sorted((shared / "blimp").glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        pairs += [{"good": r["sentence_good"], "bad": r["sentence_bad"], "uid": r["UID"]}
                  for r in rows[:blimp_per_set]]
    atomic_write_text(out / "blimp.jsonl", "".join(json.dumps(p) + "\n" for p in pairs))
    jfleg = shared / "jfleg" / "dev"
    sentences = read_parallel(jfleg / "dev.src", sorted(jfleg.glob("dev.ref[0-9]")), "majority")
    tune, report = split_sentences(sentences, 0.5, seed)
    atomic_write_json(out / "jfleg_ged.json", {
        "tune": [{"tokens": s.tokens, "labels": s.labels} for s in tune],
        "report": [{"tokens": s.tokens, "labels": s.labels} for s in report]})
    return {"cola_train": sum(1 for _ in open(out / "cola_train.tsv", encoding="utf-8")), "blimp_pairs": len(pairs),
            "jfleg_tune": len(tune), "jfleg_report": len(report)}


@dataclasses.dataclass
class EvalData:
    cola_train: tuple[list[str], list[int]]
    cola_dev: tuple[list[str], list[int]]
    blimp: list[dict[str, str]]
    ged_tune: list[Any]
    ged_report: list[Any]

    @classmethod
    def load(cls, folder: Path, blimp_per_set: int = 0) -> EvalData:
        from electra_detect.tasks.ged.readers import GedSentence
        from electra_detect.training.finetune.cola import read_cola

        blimp = [json.loads(line) for line in (folder / "blimp.jsonl").read_text(encoding="utf-8").splitlines()]
        if blimp_per_set:  # the first n pairs of each paradigm (PLL scoring of every pair is the slow part)
            by_set: dict[str, list[dict[str, str]]] = {}
            for pair in blimp:
                by_set.setdefault(pair["uid"], []).append(pair)
            blimp = [pair for pairs in by_set.values() for pair in pairs[:blimp_per_set]]
        raw = json.loads((folder / "jfleg_ged.json").read_text(encoding="utf-8"))
        to_ged = lambda rows: [GedSentence(r["tokens"], r["labels"]) for r in rows]  # noqa: E731
        return cls(read_cola(folder / "cola_train.tsv"), read_cola(folder / "cola_dev.tsv"), blimp,
                   to_ged(raw["tune"]), to_ged(raw["report"]))


# -- token scores for the MLM objectives -----------------------------------------------------------
def mlm_token_log_probs(run_dir: Path, objective: str, texts: list[str], device: str,
                        batch_size: int = 256) -> list[tuple[list[tuple[int, int]], np.ndarray]]:
    """Per-subword log p(observed) and character offsets from the run's ``mlm/`` model, for either encoder
    family. ``bert_mlm``: pseudo-log-likelihood through the core's masked-LM scorer (one [MASK] per subword).
    ``replace_mlm`` / ``all_tokens_mlm``: one unmasked pass, with the copy mechanism for All-Tokens MLM."""
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from electra_detect.batching import pad_ids
    from electra_detect.engines.torch_engine import load_discriminator, replaced_logits
    from electra_detect.tasks.pll import GeneratorScorer

    if objective == "bert_mlm":
        scores = GeneratorScorer.load(run_dir / "mlm", device).score(texts, batch_size)
        return [(s.offsets, s.log_probs) for s in scores]
    mlm = AutoModelForMaskedLM.from_pretrained(str(run_dir / "mlm"), use_safetensors=True).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(run_dir / "mlm"))
    tokenizer.model_max_length = 1 << 30  # long texts are cut to the first window below, not warned about
    body = int(mlm.config.max_position_embeddings) - 2
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    rows = [[tokenizer.cls_token_id, *ids[:body], tokenizer.sep_token_id] for ids in enc["input_ids"]]
    copy_head = (load_discriminator(run_dir / "discriminator").to(device).eval()
                 if objective == "all_tokens_mlm" else None)
    results: list[np.ndarray] = []
    for first in range(0, len(rows), batch_size):
        batch = rows[first:first + batch_size]
        input_ids, attention = (torch.from_numpy(a).to(device) for a in pad_ids(batch, tokenizer.pad_token_id))
        with torch.inference_mode():
            log_q = mlm(input_ids=input_ids, attention_mask=attention).logits.float().log_softmax(-1)
            observed = log_q.gather(2, input_ids.unsqueeze(2)).squeeze(2)  # [B, T] log p_MLM(observed token)
            if copy_head is not None:  # p = D + (1 - D) q for the (unreplaced) observed token, D = sigmoid(-r)
                r = replaced_logits(copy_head(input_ids=input_ids, attention_mask=attention).logits).float()
                observed = torch.logaddexp(torch.nn.functional.logsigmoid(-r),
                                           torch.nn.functional.logsigmoid(r) + observed)
        observed = observed.cpu().numpy()
        results += [observed[row, 1:len(ids) - 1] for row, ids in enumerate(batch)]
    return [([tuple(o) for o in enc[i].offsets[:len(results[i])]], results[i]) for i in range(len(texts))]


def evaluate_run(run_dir: Path, objective: str, data: EvalData, device: str, seed: int,
                 cola_epochs: int) -> dict[str, Any]:
    """CoLA MCC, BLiMP accuracy and zero-shot GED F0.5 of one pre-training run."""
    from electra_detect.tasks.ged.alignment import score_tokens, to_token_scores
    from electra_detect.tasks.ged.metrics import flatten, token_metrics, tune_threshold
    from electra_detect.training.finetune.cola import ColaConfig, finetune_cola

    started = time.perf_counter()
    cola = finetune_cola(run_dir / "discriminator", data.cola_train, data.cola_dev,
                         ColaConfig(epochs=cola_epochs, seed=seed), device=device)
    kind = score_kind(objective)
    good = [p["good"] for p in data.blimp]
    bad = [p["bad"] for p in data.blimp]
    if kind == "rtd":
        from electra_detect.detector import Detector

        detector = Detector.load(run_dir / "discriminator", device=device, calibrated=False)
        scores = detector.score(good + bad, batch_size=256)
        sentence = np.array([s.sentence_sum for s in scores])
        tune_scores = score_tokens(detector, data.ged_tune, batch_size=256)
        report_scores = score_tokens(detector, data.ged_report, batch_size=256)
    else:
        pieces = mlm_token_log_probs(run_dir, objective, good + bad, device)
        sentence = np.array([lp.sum() for _o, lp in pieces])

        def surprisal(sentences: list[Any]) -> list[np.ndarray]:
            out = mlm_token_log_probs(run_dir, objective, [s.text for s in sentences], device)
            return [to_token_scores(s.tokens, ((o[0], 1.0 - math.exp(lp)) for o, lp in zip(offs, lps,
                                                                                                strict=True)))
                    for s, (offs, lps) in zip(sentences, out, strict=True)]

        tune_scores, report_scores = surprisal(data.ged_tune), surprisal(data.ged_report)
    half = len(good)
    correct = sentence[:half] > sentence[half:]
    uids = [p["uid"] for p in data.blimp]
    per_set = {uid: float(np.mean([c for c, u in zip(correct, uids, strict=True) if u == uid]))
               for uid in sorted(set(uids))}
    threshold = tune_threshold(*flatten(data.ged_tune, tune_scores))
    metrics = token_metrics(*flatten(data.ged_report, report_scores), threshold)
    return {"cola_mcc": cola["mcc"], "cola_acc": cola["accuracy"], "blimp_acc": float(np.mean(list(per_set.values()))),
            "blimp_per_set": per_set, "ged_f05": metrics["f05"], "ged_precision": metrics["precision"],
            "ged_recall": metrics["recall"], "ged_ap": metrics["average_precision"], "score": kind,
            "eval_seconds": time.perf_counter() - started}


# -- one pre-training run --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Task:
    """One run of the sweep: a variant, a seed and the share of the FLOPs budget it trains for."""

    variant: str
    seed: int
    fraction: float = 1.0

    @property
    def key(self) -> str:
        return f"{self.variant}/seed{self.seed}/x{self.fraction:g}"


def build_config(args: argparse.Namespace, variant: str, seed: int, steps: int = 2):
    """The run config of ``variant``; ``steps`` updates with the same warm-up share for every run."""
    from electra_detect.training.pretraining.config import PAPER_MODEL, PRESETS, RunConfig

    spec = VARIANTS[variant]
    config = RunConfig()
    if args.paper_recipe:
        config.override("model", **PAPER_MODEL)
    model = config.model
    model.preset, model.vocab_size = args.preset, args.vocab_size
    model.gen_fraction = spec.get("gen_fraction", model.gen_fraction)
    model.embedding_sharing = spec.get("embedding_sharing", model.embedding_sharing)
    if spec.get("gen_full_depth"):  # two-stage: a discriminator-shaped generator, so stage two can start from it
        model.gen_layers = PRESETS[args.preset]["num_hidden_layers"]
    config.data.corpus = list(args.corpus)
    config.data.seq_len = args.seq_len
    config.data.cache_dir = args.cache_dir
    t = config.train
    t.objective = spec["objective"]
    t.batch_size, t.lr, t.seed, t.threads = args.batch_size, args.lr, seed, args.threads
    t.max_steps = max(steps, 2)
    t.warmup_steps = max(1, round(t.max_steps * args.warmup_fraction))
    t.max_minutes = 0
    t.log_every = max(1, min(25, t.max_steps // 8))
    t.eval_every = t.save_every = t.max_steps + 1  # one validation and one checkpoint, at the end
    t.eval_batches = args.eval_batches
    if spec.get("two_stage"):
        t.mlm_first_steps = t.max_steps // 2
    config.resolve()
    return config


def flops_per_step(args: argparse.Namespace, variant: str, vocab_size: int,
                   attention: bool = True) -> dict[str, float]:
    """Analytic training FLOPs of one update of ``variant`` (two-stage: of each stage)."""
    config = build_config(args, variant, 0)
    tokens = args.batch_size * args.seq_len
    count = lambda stage: train_flops_per_step(config.model, config.train.objective, stage,  # noqa: E731
                                               vocab_size, tokens, args.seq_len, config.train.mask_prob,
                                               attention)
    if VARIANTS[variant].get("two_stage"):
        return {"mlm": count("mlm"), "disc": count("disc")}
    return {"step": count("")}


def planned_steps(per_step: dict[str, float], budget: float) -> int:
    """Updates that spend ``budget`` FLOPs; two-stage: n generator updates + n discriminator updates."""
    if "mlm" in per_step:
        return 2 * max(1, round(budget / (per_step["mlm"] + per_step["disc"])))
    return max(2, round(budget / per_step["step"]))


def wall_time(run_dir: Path) -> dict[str, float]:
    """Training seconds, and seconds per update after the first logging window (the discarded warm-up)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r.get("split") == "train" and "elapsed_s" in r]
    if len(train) < 2:
        return {"train_seconds": train[-1]["elapsed_s"] if train else float("nan"),
                "seconds_per_step": float("nan")}
    first, last = train[0], train[-1]
    return {"train_seconds": round(last["elapsed_s"], 2),
            "seconds_per_step": (last["elapsed_s"] - first["elapsed_s"]) / (last["step"] - first["step"])}


def train_and_evaluate(task: Task, args: argparse.Namespace, plan: dict[str, Any]) -> dict[str, Any]:
    """Train one run for its share of the FLOPs budget, evaluate it, and return its row."""
    import torch

    from electra_detect.training.pretraining.trainer import Trainer

    torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    steps = planned_steps(plan["flops_per_step"][task.variant], plan["budget_flops"] * task.fraction)
    run_dir = Path(args.work_dir) / task.key.replace("/", "-")
    shutil.rmtree(run_dir, ignore_errors=True)
    config = build_config(args, task.variant, task.seed, steps)
    row: dict[str, Any] = {"key": task.key, "variant": task.variant, "seed": task.seed, "fraction": task.fraction,
                           "objective": config.train.objective, "gen_fraction": config.model.gen_fraction,
                           "embedding_sharing": config.model.embedding_sharing,
                           "mlm_first_steps": config.train.mlm_first_steps, "planned_steps": steps}
    per_step = plan["flops_per_step"][task.variant]
    row["train_flops"] = (steps // 2 * (per_step["mlm"] + per_step["disc"]) if "mlm" in per_step
                          else steps * per_step["step"])
    try:
        result = Trainer(config, run_dir, show_progress=False).run()
        row.update({"steps": result.steps, "tokens_seen": result.tokens_seen, "stop_reason": result.stop_reason,
                    "val_disc_auc": result.val_metrics.get("val_disc_auc"),
                    "val_mlm_acc": result.val_metrics.get("val_gen_acc"), **wall_time(run_dir)})
    except Exception as exc:  # one failed run must not take the sweep down; it is reported as failed
        return {**row, "error": f"train: {type(exc).__name__}: {exc}"}
    try:
        data = EvalData.load(Path(args.eval_data), args.blimp_per_set)
        row.update(evaluate_run(run_dir, row["objective"], data, device, task.seed, args.cola_epochs))
    except Exception as exc:  # noqa: BLE001 - same reason
        row["error"] = f"eval: {type(exc).__name__}: {exc}"
    if not args.keep_runs:
        shutil.rmtree(run_dir, ignore_errors=True)
    return row


def _worker(job: tuple[Task, argparse.Namespace, dict[str, Any]]) -> dict[str, Any]:
    return train_and_evaluate(*job)
# -- aggregation and reports -----------------------------------------------------------------------
def aggregate(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Mean ± std over the seeds of each variant's full-budget runs."""
    out: dict[str, dict[str, Any]] = {}
    for variant in VARIANTS:
        done = [r for r in rows if r["variant"] == variant and r["fraction"] == 1.0 and "error" not in r]
        if not done:
            continue
        entry: dict[str, Any] = {"runs": len(done), "score": done[0]["score"]}
        for field in ("steps", "tokens_seen", "train_flops", "train_seconds", "seconds_per_step", "val_mlm_acc"):
            entry[field] = float(statistics.mean(r[field] for r in done))
        for metric in METRICS:
            values = [r[metric] for r in done]
            entry[metric] = statistics.mean(values)
            entry[f"{metric}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
            entry[f"{metric}_values"] = values
        out[variant] = entry
    return out


def difference(a: dict[str, Any], b: dict[str, Any], metric: str) -> dict[str, float]:
    """Mean difference a - b over seeds with a Welch 95% confidence interval."""
    from scipy import stats

    va, vb = np.array(a[f"{metric}_values"]), np.array(b[f"{metric}_values"])
    diff = float(va.mean() - vb.mean())
    if len(va) < 2 or len(vb) < 2:
        return {"diff": diff, "low": float("nan"), "high": float("nan"), "noise": 0.0}
    sa, sb = va.var(ddof=1) / len(va), vb.var(ddof=1) / len(vb)
    se = math.sqrt(sa + sb)
    df = (sa + sb) ** 2 / ((sa ** 2 / (len(va) - 1) + sb ** 2 / (len(vb) - 1)) or 1e-12)
    half = float(stats.t.ppf(0.975, df)) * se if se > 0 else 0.0
    return {"diff": diff, "low": diff - half, "high": diff + half,
            "noise": max(a[f"{metric}_std"], b[f"{metric}_std"])}


# The paper's claims as ordered pairs: Table 5 (ELECTRA > All-Tokens MLM > Replace MLM ≈ ELECTRA 15% > BERT)
# and §3.2 (two-stage below ELECTRA, above BERT).
CLAIMS = [("electra", "bert_mlm"), ("electra", "all_tokens_mlm"), ("all_tokens_mlm", "replace_mlm"),
          ("all_tokens_mlm", "electra15"), ("replace_mlm", "bert_mlm"), ("electra15", "bert_mlm"),
          ("electra", "two_stage"), ("two_stage", "bert_mlm")]


def claims(agg: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each of the paper's ordered pairs on each metric: holds (CI above 0), fails (CI below 0) or open."""
    out = []
    for a, b in CLAIMS:
        if a not in agg or b not in agg:
            continue
        for metric in METRICS:
            d = difference(agg[a], agg[b], metric)
            verdict = ("holds" if d["low"] > 0 else "reversed" if d["high"] < 0 else
                       "not resolved" if not math.isnan(d["low"]) else "one seed")
            out.append({"better": a, "worse": b, "metric": metric, **d, "verdict": verdict,
                        "beyond_seed_std": d["diff"] > d["noise"]})
    return out


def _cell(entry: dict[str, Any] | None, metric: str) -> str:
    if not entry:
        return "–"
    return f"{entry[metric]:.3f} ± {entry[f'{metric}_std']:.3f}"


def write_reports(out_dir: Path, summary: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    agg = summary["aggregate"] = aggregate(summary["rows"])
    summary["claims"] = claims(agg)
    atomic_write_json(out_dir / "result.json", summary)
    setup, plan = summary["setup"], summary["plan"]
    baseline = plan["top_token_share"]
    head = ["# ELECTRA's efficiency claims at our scale", "",
            f"Device: {setup['device']}. Recipe: {setup['recipe']}, preset `{setup['preset']}`, batch "
            f"{setup['batch_size']} × {setup['seq_len']} tokens, lr {setup['lr']}, corpus "
            f"{', '.join(Path(c).name for c in setup['corpus']) or 'embedded State of the Union'}. "
            f"**Equal training FLOPs**: {plan['budget_flops']:.3g} per run (= {setup['budget_steps']} ELECTRA "
            f"updates); wall time is reported beside it. Mean ± std over seeds {setup['seeds']}.", "",
            f"Command: `{summary['command']}`", "",
            f"Plateau check: validation MLM accuracy against the share of the most frequent token "
            f"(`{plan['top_token']}`, {baseline:.3f}); a run has left the plateau at ≥ 2× that share.", ""]

    def row(variant: str, label: str | None = None, paper: bool = False) -> str:
        e = agg[variant]
        left = "yes" if e["val_mlm_acc"] >= 2 * baseline else "**no**"
        cells = [label or LABELS[variant], *([str(PAPER_GLUE.get(variant, "–"))] if paper else []),
                 *(_cell(e, m) for m in METRICS), f"{e['val_mlm_acc']:.3f} ({left})", f"{e['steps']:.0f}",
                 f"{e['train_flops']:.3g}", f"{e['train_seconds']:.0f}", f"{e['seconds_per_step']:.3f}"]
        return "| " + " | ".join(cells) + " |"

    cols = "CoLA dev MCC | BLiMP acc. | GED F0.5 | GED AP | val MLM acc. (left plateau) | updates | FLOPs | " \
           "train s | s/update after warm-up |"
    table = [f"| objective | paper GLUE (Table 5) | {cols}", "|---|---:|" + "---:|" * 9]
    table += [row(v, paper=True) for v in ("electra", "all_tokens_mlm", "replace_mlm", "electra15", "bert_mlm",
                                           "adversarial") if v in agg]
    gen = [f"| generator width / discriminator width | {cols}", "|---|" + "---:|" * 9]
    gen += [row(v) for v in ("gen_0.25", "gen_0.5", "gen_1") if v in agg]
    if "electra" in agg:
        gen.append(row("electra", "1 with tied embeddings (= ELECTRA row)"))
    two = [f"| training | {cols}", "|---|" + "---:|" * 9]
    two += [row(v) for v in ("bert_mlm", "two_stage", "electra") if v in agg]
    order = ["| claim (paper) | metric | mean difference | 95% CI (Welch) | larger seed std | here |",
             "|---|---|---:|---|---:|---|"]
    for c in summary["claims"]:
        order.append(f"| {LABELS[c['better']]} > {LABELS[c['worse']]} | {c['metric']} | {c['diff']:+.3f} | "
                     f"[{c['low']:+.3f}, {c['high']:+.3f}] | {c['noise']:.3f} | {c['verdict']}"
                     f"{' (beyond seed std)' if c['beyond_seed_std'] and c['verdict'] == 'holds' else ''} |")
    curve = ["| variant | share of budget | FLOPs | CoLA MCC | BLiMP | GED F0.5 | GED AP | val MLM acc. |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted((r for r in summary["rows"] if "error" not in r and r["variant"] in CURVE_VARIANTS),
                    key=lambda r: (r["variant"], r["fraction"], r["seed"])):
        curve.append(f"| {LABELS[r['variant']]} (seed {r['seed']}) | {r['fraction']:g} | {r['train_flops']:.3g} | "
                     f"{r['cola_mcc']:.3f} | {r['blimp_acc']:.3f} | {r['ged_f05']:.3f} | {r['ged_ap']:.3f} | "
                     f"{r['val_mlm_acc']:.3f} |")
    failed = [f"- {r['key']}: {r['error']}" for r in summary["rows"] if "error" in r]
    pending = [f"- {k}" for k in summary.get("pending", [])]
    text = "\n".join([*head, "## Objectives (paper Table 5)", "", *table, "", "![objectives](plot.png)", "",
                      "## Generator size (paper Fig. 3, left)", "", *gen, "", "![generator size](gensize.png)", "",
                      "## Two-stage training (paper Fig. 3, right)", "", *two, "",
                      "## Score against compute", "", *curve, "", "![compute](compute.png)", "",
                      "## Which of the paper's claims hold here", "", *order, "",
                      *(["## Failed runs", "", *failed, ""] if failed else []),
                      *(["## Runs not done (budget ran out)", "", *pending, ""] if pending else [])])
    atomic_write_text(out_dir / "table.md", text + "\n")
    _plots(out_dir, summary)


CURVE_VARIANTS = ("electra", "bert_mlm", "two_stage")


def _plots(out_dir: Path, summary: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agg = summary["aggregate"]
    present = [v for v in ("electra", "all_tokens_mlm", "replace_mlm", "electra15", "bert_mlm", "adversarial")
               if v in agg]
    if present:  # Table 5 analogue: our scores, the paper's GLUE on a second axis
        fig, axes = plt.subplots(1, len(METRICS) + 1, figsize=(3.6 * (len(METRICS) + 1), 3.8))
        for ax, metric in zip(axes, METRICS, strict=False):
            ax.bar(range(len(present)), [agg[v][metric] for v in present],
                   yerr=[agg[v][f"{metric}_std"] for v in present], capsize=4, color="#4c72b0")
            ax.set_xticks(range(len(present)), [LABELS[v] for v in present], rotation=35, ha="right", fontsize=8)
            ax.set_title(TITLES[metric])
        paper = [v for v in present if v in PAPER_GLUE]
        axes[-1].bar(range(len(paper)), [PAPER_GLUE[v] for v in paper], color="#999999")
        axes[-1].set_ylim(80, 86)
        axes[-1].set_xticks(range(len(paper)), [LABELS[v] for v in paper], rotation=35, ha="right", fontsize=8)
        axes[-1].set_title("paper: GLUE dev (Table 5)")
        fig.suptitle("Objectives at equal training FLOPs (mean ± std over seeds)")
        fig.tight_layout()
        atomic_save_figure(fig, out_dir / "plot.png")
    sizes = [(f, v) for f, v in ((0.25, "gen_0.25"), (0.5, "gen_0.5"), (1.0, "gen_1")) if v in agg]
    if sizes:  # Figure 3 left analogue
        fig, axes = plt.subplots(1, len(METRICS), figsize=(3.8 * len(METRICS), 3.6))
        for ax, metric in zip(axes, METRICS, strict=True):
            ax.errorbar([f for f, _ in sizes], [agg[v][metric] for _, v in sizes],
                        yerr=[agg[v][f"{metric}_std"] for _, v in sizes], marker="o", capsize=4, label="untied")
            if "electra" in agg:
                ax.errorbar([1.0], [agg["electra"][metric]], yerr=[agg["electra"][f"{metric}_std"]], marker="s",
                            capsize=4, linestyle="none", label="tied (ELECTRA)")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("generator width / discriminator width")
            ax.set_title(TITLES[metric])
        axes[0].legend(fontsize=8)
        fig.suptitle("Generator size at equal training FLOPs")
        fig.tight_layout()
        atomic_save_figure(fig, out_dir / "gensize.png")
    rows = [r for r in summary["rows"] if "error" not in r and r["variant"] in CURVE_VARIANTS]
    if rows:  # score against compute: every run of the three, its FLOPs on x
        fig, axes = plt.subplots(1, len(METRICS), figsize=(3.8 * len(METRICS), 3.6))
        for ax, metric in zip(axes, METRICS, strict=True):
            for variant in CURVE_VARIANTS:
                mine = sorted((r for r in rows if r["variant"] == variant), key=lambda r: r["train_flops"])
                if mine:
                    ax.plot([r["train_flops"] for r in mine], [r[metric] for r in mine], marker="o",
                            linestyle="-" if len({r["fraction"] for r in mine}) > 1 else "none",
                            label=LABELS[variant])
            ax.set_xscale("log")
            ax.set_xlabel("training FLOPs")
            ax.set_title(TITLES[metric])
        axes[0].legend(fontsize=8)
        fig.suptitle("Score against pre-training compute (each point one run)")
        fig.tight_layout()
        atomic_save_figure(fig, out_dir / "compute.png")


# -- driver ----------------------------------------------------------------------------------------
def make_plan(args: argparse.Namespace) -> dict[str, Any]:
    """Corpus prepared once; FLOPs per update of every variant; the budget; the plateau baseline."""
    from electra_detect.training.pretraining.data import SPECIAL_TOKENS, prepare_corpus, resolve_corpus

    config = build_config(args, "electra", 0)
    Path(args.cache_dir).mkdir(parents=True, exist_ok=True)
    corpus = prepare_corpus(resolve_corpus(list(args.corpus)), Path(args.cache_dir), args.vocab_size,
                            config.data.lowercase, config.data.doc_split, args.seq_len)
    vocab = (corpus.tokenizer_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    counts = np.bincount(np.asarray(corpus.tokens(), dtype=np.int64), minlength=len(vocab))
    counts[[vocab.index(t) for t in SPECIAL_TOKENS if t in vocab]] = 0
    top = int(counts.argmax())
    vocab_size = len(vocab)
    per_step = {v: flops_per_step(args, v, vocab_size) for v in VARIANTS}
    return {"flops_per_step": per_step, "budget_flops": args.budget_steps * per_step["electra"]["step"],
            "top_token": vocab[top], "top_token_share": float(counts[top] / counts.sum()),
            "vocab_size": vocab_size, "corpus_tokens": int(corpus.num_tokens)}


def tasks_of(args: argparse.Namespace) -> list[Task]:
    """Full-budget runs, variant by variant (every seed of one before the next), then the compute curve's
    shorter runs (first seed only)."""
    tasks = [Task(v, s) for v in args.variants for s in args.seeds]
    tasks += [Task(v, args.seeds[0], f) for f in args.curve_fractions for v in CURVE_VARIANTS if v in args.variants]
    return tasks


def finished_runs(todo: list[Task], args: argparse.Namespace, plan: dict[str, Any],
                  deadline: float) -> Iterator[tuple[Task, dict[str, Any]]]:
    """(task, row) as runs finish; none starts after ``deadline``. ``--jobs 1``: in this process, one after
    another; more: a pool of spawned processes, a fresh one per run (CUDA cannot be used in forked children)."""
    if args.jobs == 1:
        for task in todo:
            if time.monotonic() >= deadline:
                return
            yield task, train_and_evaluate(task, args, plan)
        return
    with mp.get_context("spawn").Pool(args.jobs, maxtasksperchild=1) as pool:
        pending = iter(todo)
        running: list[tuple[Task, Any]] = []
        while True:
            while len(running) < args.jobs and time.monotonic() < deadline:
                task = next(pending, None)
                if task is None:
                    break
                running.append((task, pool.apply_async(_worker, ((task, args, plan),))))
            if not running:
                return
            time.sleep(2)
            for task, handle in [r for r in running if r[1].ready()]:
                running.remove((task, handle))
                yield task, handle.get()


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    started = time.monotonic()
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"error: unknown variants {unknown}; choose from {list(VARIANTS)}")
    EvalData.load(Path(args.eval_data))  # fail before any training if the data are missing
    out_dir = Path(args.out_dir)
    previous = json.loads((out_dir / "result.json").read_text()) if args.resume and (out_dir / "result.json").exists() \
        else None
    plan = make_plan(args)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({os.cpu_count()} cores)"
    setup = {"device": device, "recipe": "paper (--paper-recipe)" if args.paper_recipe else "default",
             "preset": args.preset, "batch_size": args.batch_size, "seq_len": args.seq_len, "lr": args.lr,
             "budget_steps": args.budget_steps, "seeds": args.seeds, "corpus": list(args.corpus),
             "vocab_size": args.vocab_size, "cola_epochs": args.cola_epochs, "blimp_per_set": args.blimp_per_set,
             "threads": args.threads, "jobs": args.jobs}
    rows: list[dict[str, Any]] = []
    if previous is not None:
        if previous["setup"] | {"seeds": setup["seeds"], "jobs": setup["jobs"]} != setup:
            raise SystemExit("error: --resume with a different setup than result.json's; use a new --out-dir")
        rows = [r for r in previous["rows"] if "error" not in r]
    done = {r["key"] for r in rows}
    todo = [t for t in tasks_of(args) if t.key not in done]
    summary: dict[str, Any] = {"benchmark": "ablation", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                               "command": command_line(), "setup": setup, "plan": plan,
                               "rows": rows, "pending": [t.key for t in todo]}
    if args.check_flops:  # the analytic count against torch's counter, on real updates of two objectives
        summary["flops_check"] = {v: {"analytic": plan["flops_per_step"][v]["step"],
                                      "analytic_without_attention_scores":
                                          flops_per_step(args, v, plan["vocab_size"], attention=False)["step"],
                                      "counted": counted_flops_per_step(build_config(args, v, 0),
                                                                        Path(args.work_dir))}
                                  for v in ("electra", "bert_mlm")}
    elif previous is not None and "flops_check" in previous:
        summary["flops_check"] = previous["flops_check"]
    write_reports(out_dir, summary)
    deadline = started + args.total_minutes * 60 if args.total_minutes else math.inf
    for task, row in finished_runs(todo, args, plan, deadline):
        rows.append(row)
        summary["pending"].remove(task.key)
        summary["total_seconds"] = round(time.monotonic() - started, 1)
        write_reports(out_dir, summary)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()
                          if k in ("key", "steps", "train_seconds", "val_mlm_acc", "error", *METRICS)}),
              file=sys.stderr, flush=True)
    write_reports(out_dir, summary)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare-data", help="compact CoLA/BLiMP/JFLEG-GED copies for the run")
    prep.add_argument("--shared", default="../shared/data")
    prep.add_argument("--out", default="/tmp/ablation-data")
    prep.add_argument("--blimp-per-set", type=int, default=300)
    prep.add_argument("--seed", type=int, default=13, help="JFLEG tune/report split (benchmarks/quality/ged.py's)")
    go = sub.add_parser("run", help="train every variant at equal training FLOPs and evaluate")
    go.add_argument("--eval-data", default="/tmp/ablation-data")
    go.add_argument("--corpus", nargs="*", default=[], help="text files/folders; none = the embedded corpus")
    go.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS)
    go.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    go.add_argument("--budget-steps", type=int, default=200, help="budget = FLOPs of this many ELECTRA updates")
    go.add_argument("--curve-fractions", nargs="*", type=float, default=[0.25, 0.5],
                    help="shorter budgets (first seed) for the score-against-compute curve")
    go.add_argument("--paper-recipe", action="store_true", help="the paper's post-LN ELECTRA pair")
    go.add_argument("--preset", default="tiny")
    go.add_argument("--vocab-size", type=int, default=16000)
    go.add_argument("--seq-len", type=int, default=128)
    go.add_argument("--batch-size", type=int, default=32)
    go.add_argument("--lr", type=float, default=1e-3)
    go.add_argument("--warmup-fraction", type=float, default=0.1)
    go.add_argument("--eval-batches", type=int, default=8)
    go.add_argument("--cola-epochs", type=int, default=2)
    go.add_argument("--blimp-per-set", type=int, default=100, help="BLiMP pairs per paradigm (0 = all prepared)")
    go.add_argument("--threads", type=int, default=1, help="torch CPU threads per run")
    go.add_argument("--jobs", type=int, default=1, help="runs at once (one process each)")
    go.add_argument("--total-minutes", type=float, default=0.0, help="start no run after this many minutes")
    go.add_argument("--check-flops", action="store_true", help="count FLOPs of real updates with torch's counter")
    go.add_argument("--resume", action="store_true", help="keep the finished runs of --out-dir/result.json")
    go.add_argument("--cache-dir", default="/tmp/ablation-cache")
    go.add_argument("--work-dir", default="/tmp/ablation-runs")
    go.add_argument("--keep-runs", action="store_true")
    go.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results" / "ablation"))
    args = parser.parse_args()
    if args.command == "prepare-data":
        counts = prepare_data(Path(args.shared), Path(args.out), args.blimp_per_set, args.seed)
        print(json.dumps({"benchmark": "ablation-data", **counts}))
        return 0
    summary = run(args)
    print(json.dumps({"benchmark": "ablation", "device": summary["setup"]["device"],
                      "total_seconds": summary.get("total_seconds"), "pending": len(summary["pending"]),
                      **{f"{v}.{m}": round(e[m], 4) for v, e in summary["aggregate"].items() for m in METRICS}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
