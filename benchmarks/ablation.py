"""The ELECTRA paper's efficiency claims at small scale: objectives, generator size, two-stage training.

    # once, on the machine that has ../shared and ERRANT (JFLEG labels need spaCy + ERRANT):
    python benchmarks/ablation.py prepare-data --shared ../shared/data --out .gpu/ablation-data
    # then, anywhere (a GPU machine for the real comparison):
    python benchmarks/ablation.py run --eval-data .gpu/ablation-data --corpus .gpu/sotu.txt \\
        --preset tiny --seconds-per-run 20 --seeds 0 1 2 --out-dir benchmarks/results/ablation

Equal compute = equal wall-clock on one device: every run trains for ``--seconds-per-run`` seconds.
A short probe run measures each variant's step rate first, so its ``max_steps`` (and with it the
linear LR decay) ends inside the budget; ``max_minutes`` is the hard cap. Seeds run in parallel
processes, one per seed, each variant's seeds side by side with a barrier before and after training,
so every run of a variant shares the device in the same way. Same corpus, tokenizer, blocks,
optimiser and seeds for every variant.

Evaluation, the same for every run:
- CoLA dev MCC after fine-tuning the pre-trained encoder (training/cola.py);
- BLiMP accuracy: the good sentence must get the higher sentence score. RTD objectives
  (``electra``, ``electra15``, ``adversarial``, generator sweep, two-stage): sum of log(1 - p) from
  the Detector (uncalibrated). ``bert_mlm``: pseudo-log-likelihood (one [MASK] per subword).
  ``replace_mlm`` / ``all_tokens_mlm`` never see [MASK] in training, so they are scored in one
  unmasked pass: sum of log p(x_t | x), with the copy mechanism for ``all_tokens_mlm``;
- zero-shot GED F0.5 on the JFLEG dev report half (thresholds tuned on the tuning half, as
  benchmarks/ged.py): RTD objectives use the Detector's word score; MLM objectives use per-token
  surprisal 1 - p(x_t | ...) from the same score as BLiMP, max over a word's subwords.

Writes ``ablation.json``, ``ablation.md`` and one PNG per claim (objectives, generator size,
two-stage) to ``--out-dir`` after every variant (a cut-off sweep keeps what it finished), and
prints one JSON line.
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
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from electra_detect.fileio import atomic_save_figure, atomic_write_json, atomic_write_text  # noqa: E402

# name -> (objective, model/train overrides). Generator sweep: ``electra`` itself is gen_fraction 1/4.
VARIANTS: dict[str, dict[str, Any]] = {
    "electra": {"objective": "electra"},
    "bert_mlm": {"objective": "bert_mlm"},
    "electra15": {"objective": "electra15"},
    "replace_mlm": {"objective": "replace_mlm"},
    "all_tokens_mlm": {"objective": "all_tokens_mlm"},
    "gen_0.125": {"objective": "electra", "gen_fraction": 0.125},
    "gen_0.5": {"objective": "electra", "gen_fraction": 0.5},
    "gen_1_tied": {"objective": "electra", "gen_fraction": 1.0, "tie_all": True},
    "two_stage": {"objective": "electra", "gen_fraction": 1.0, "two_stage": True},
    "adversarial": {"objective": "adversarial"},
}
DEFAULT_VARIANTS = [v for v in VARIANTS if v != "adversarial"]
# GLUE dev score of the paper's Table 5 (BERT-Base-size models, same compute as BERT).
PAPER_GLUE = {"electra": 85.0, "all_tokens_mlm": 84.3, "replace_mlm": 82.4, "electra15": 82.4, "bert_mlm": 82.2}
LABELS = {"electra": "ELECTRA", "bert_mlm": "BERT (MLM)", "electra15": "ELECTRA 15%", "replace_mlm": "Replace MLM",
          "all_tokens_mlm": "All-Tokens MLM", "adversarial": "Adversarial ELECTRA", "gen_0.125": "gen 1/8",
          "gen_0.5": "gen 1/2", "gen_1_tied": "gen 1 (tied)", "two_stage": "two-stage (MLM, then ELECTRA)"}
METRICS = ("cola_mcc", "blimp_acc", "ged_f05")


def score_kind(objective: str) -> str:
    """Which sentence/token score a run is evaluated with (see the module docstring)."""
    if objective == "bert_mlm":
        return "pll"
    if objective in ("replace_mlm", "all_tokens_mlm"):
        return "one_pass"
    return "rtd"


# -- evaluation data -----------------------------------------------------------------------------
def prepare_data(shared: Path, out: Path, blimp_per_set: int, seed: int) -> dict[str, int]:
    """Compact copies of CoLA, BLiMP and JFLEG GED labels (ERRANT runs here, not on the GPU box)."""
    from electra_detect import ged

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
    sentences = ged.read_parallel(jfleg / "dev.src", sorted(jfleg.glob("dev.ref[0-9]")), "majority")
    tune, report = ged.split_sentences(sentences, 0.5, seed)
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
    def load(cls, folder: Path) -> EvalData:
        from electra_detect.ged import GedSentence
        from electra_detect.training.cola import read_cola

        blimp = [json.loads(line) for line in (folder / "blimp.jsonl").read_text(encoding="utf-8").splitlines()]
        raw = json.loads((folder / "jfleg_ged.json").read_text(encoding="utf-8"))
        to_ged = lambda rows: [GedSentence(r["tokens"], r["labels"]) for r in rows]  # noqa: E731
        return cls(read_cola(folder / "cola_train.tsv"), read_cola(folder / "cola_dev.tsv"), blimp,
                   to_ged(raw["tune"]), to_ged(raw["report"]))


# -- token scores for the MLM objectives -----------------------------------------------------------
def mlm_token_log_probs(run_dir: Path, objective: str, texts: list[str], device: str,
                        batch_size: int = 512) -> list[tuple[list[tuple[int, int]], np.ndarray]]:
    """Per-subword log p(observed) and character offsets for ``bert_mlm`` (PLL), ``replace_mlm`` and
    ``all_tokens_mlm`` (one unmasked pass). Written here rather than reusing GeneratorScorer, which
    scores ``generator/`` on the CPU only; this one runs the exported ``mlm/`` model on ``device``."""
    import torch
    from transformers import AutoTokenizer, ElectraForMaskedLM, ElectraForPreTraining

    mlm = ElectraForMaskedLM.from_pretrained(str(run_dir / "mlm"), use_safetensors=True).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(run_dir / "mlm"))
    tokenizer.model_max_length = 1 << 30  # long texts are cut to the first window below, not warned about
    body = int(mlm.config.max_position_embeddings) - 2
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    ids_list = [ids[:body] for ids in enc["input_ids"]]
    copy_head = None
    if objective == "all_tokens_mlm":
        copy_head = ElectraForPreTraining.from_pretrained(str(run_dir / "discriminator"),
                                                          use_safetensors=True).to(device).eval()
    # rows: (text index, position to read or -1 for all, input ids with specials, target ids with specials)
    rows: list[tuple[int, int, list[int], list[int]]] = []
    for index, ids in enumerate(ids_list):
        full = [tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]
        if objective == "bert_mlm":
            for position in range(len(ids)):
                masked = list(full)
                masked[position + 1] = tokenizer.mask_token_id
                rows.append((index, position, masked, full))
        else:
            rows.append((index, -1, full, full))
    results = [np.zeros(len(ids)) for ids in ids_list]
    for first in range(0, len(rows), batch_size):
        batch = rows[first:first + batch_size]
        width = max(len(r[2]) for r in batch)
        input_ids = torch.full((len(batch), width), tokenizer.pad_token_id, dtype=torch.long)
        targets = torch.full((len(batch), width), tokenizer.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (_i, _p, ids, target) in enumerate(batch):
            input_ids[row, :len(ids)] = torch.tensor(ids)
            targets[row, :len(ids)] = torch.tensor(target)
            attention[row, :len(ids)] = 1
        input_ids, targets, attention = input_ids.to(device), targets.to(device), attention.to(device)
        with torch.inference_mode():
            hidden = mlm.electra(input_ids=input_ids, attention_mask=attention).last_hidden_state
            if objective == "bert_mlm":  # vocabulary projection at the one masked position of each row only
                rows_at = torch.arange(len(batch), device=device)
                where = torch.tensor([r[1] + 1 for r in batch], device=device)
                log_q = mlm.generator_lm_head(mlm.generator_predictions(hidden[rows_at, where])).float()
                picked = log_q.log_softmax(-1).gather(1, targets[rows_at, where].unsqueeze(1)).squeeze(1)
                observed = torch.zeros(input_ids.shape, device=device)
                observed[rows_at, where] = picked
            else:
                log_q = mlm.generator_lm_head(mlm.generator_predictions(hidden)).float().log_softmax(-1)
                observed = log_q.gather(2, targets.unsqueeze(2)).squeeze(2)  # [B, T] log p_MLM(observed token)
            if copy_head is not None:  # p = D + (1 - D) q for the (unreplaced) observed token, D = sigmoid(-r)
                r = copy_head(input_ids=input_ids, attention_mask=attention).logits.float()
                observed = torch.logaddexp(torch.nn.functional.logsigmoid(-r),
                                           torch.nn.functional.logsigmoid(r) + observed)
            observed = observed.cpu().numpy()
        for row, (index, position, ids, _target) in enumerate(batch):
            if position >= 0:
                results[index][position] = observed[row, position + 1]
            else:
                results[index][:] = observed[row, 1:len(ids) - 1]
    return [([tuple(o) for o in enc[i].offsets[:len(results[i])]], results[i]) for i in range(len(texts))]


def evaluate_run(run_dir: Path, objective: str, data: EvalData, device: str, seed: int,
                 cola_epochs: int) -> dict[str, Any]:
    """CoLA MCC, BLiMP accuracy and zero-shot GED F0.5 of one pre-training run."""
    from electra_detect import ged
    from electra_detect.training.cola import ColaConfig, finetune_cola

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
        tune_scores = ged.score_tokens(detector, data.ged_tune, batch_size=256)
        report_scores = ged.score_tokens(detector, data.ged_report, batch_size=256)
    else:
        pieces = mlm_token_log_probs(run_dir, objective, good + bad, device)
        sentence = np.array([lp.sum() for _o, lp in pieces])

        def surprisal(sentences: list[Any]) -> list[np.ndarray]:
            out = mlm_token_log_probs(run_dir, objective, [s.text for s in sentences], device)
            return [ged.to_token_scores(s.tokens, ((o[0], 1.0 - math.exp(lp)) for o, lp in zip(offs, lps,
                                                                                                strict=True)))
                    for s, (offs, lps) in zip(sentences, out, strict=True)]

        tune_scores, report_scores = surprisal(data.ged_tune), surprisal(data.ged_report)
    half = len(good)
    correct = sentence[:half] > sentence[half:]
    uids = [p["uid"] for p in data.blimp]
    per_set = {uid: float(np.mean([c for c, u in zip(correct, uids, strict=True) if u == uid]))
               for uid in sorted(set(uids))}
    threshold = ged.tune_threshold(*ged.flatten(data.ged_tune, tune_scores))
    metrics = ged.token_metrics(*ged.flatten(data.ged_report, report_scores), threshold)
    return {"cola_mcc": cola["mcc"], "cola_acc": cola["accuracy"], "blimp_acc": float(np.mean(list(per_set.values()))),
            "blimp_per_set": per_set, "ged_f05": metrics["f05"], "ged_precision": metrics["precision"],
            "ged_recall": metrics["recall"], "ged_ap": metrics["average_precision"], "score": kind,
            "eval_seconds": time.perf_counter() - started}


# -- one pre-training run --------------------------------------------------------------------------
def build_config(args: argparse.Namespace, variant: str, seed: int, steps: int, seconds: float):
    from electra_detect.training.config import PAPER_MODEL, RunConfig

    spec = VARIANTS[variant]
    config = RunConfig()
    config.override("model", **PAPER_MODEL)  # the paper's claims are about its model (issue 15 may move this)
    config.model.preset = args.preset
    config.model.vocab_size = args.vocab_size
    config.model.gen_fraction = spec.get("gen_fraction", 0.25)
    config.model.tie_all = spec.get("tie_all", False)
    config.data.corpus = list(args.corpus)
    config.data.seq_len = args.seq_len
    config.data.cache_dir = args.cache_dir
    t = config.train
    t.objective = spec["objective"]
    t.batch_size, t.lr, t.seed, t.threads = args.batch_size, args.lr, seed, args.threads
    t.max_steps = max(steps, 2)
    t.warmup_steps = max(1, min(args.warmup_steps, t.max_steps // 10))
    t.max_minutes = seconds / 60
    t.log_every = max(1, min(20, t.max_steps // 4))
    t.eval_every = t.save_every = t.max_steps + 1  # one validation and one checkpoint, at the end
    t.eval_batches = 4
    if spec.get("two_stage"):
        t.mlm_first_steps = t.max_steps // 2
    return config


def train_variant(args: argparse.Namespace, variant: str, seed: int, work: Path,
                  probe_only: bool = False) -> dict[str, Any]:
    """Probe the step rate, then train for ``args.seconds_per_run`` seconds' worth of steps."""
    from electra_detect.training.trainer import Trainer

    probe_dir = work / f"probe-{variant}-{seed}"
    shutil.rmtree(probe_dir, ignore_errors=True)
    two_stage = bool(VARIANTS[variant].get("two_stage"))
    # Two-stage: probe both stages (MLM alone, then ELECTRA) in one run of twice the steps.
    probe = build_config(args, variant, seed, args.probe_steps * (2 if two_stage else 1), 600)
    probe.train.log_every = max(1, args.probe_steps // 3)
    probe.train.mlm_first_steps = args.probe_steps if two_stage else 0
    Trainer(probe, probe_dir, show_progress=False).run()
    rows = [json.loads(line) for line in (probe_dir / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if r.get("split") == "train"]
    rate = train_rows[-1]["tokens_per_s"]  # the last window: past warm-up
    shutil.rmtree(probe_dir, ignore_errors=True)
    tokens_per_step = args.batch_size * args.seq_len
    steps = int(rate * args.seconds_per_run * 0.92 / tokens_per_step)
    if two_stage:  # n MLM steps + n ELECTRA steps in the budget: n = T / (1/r1 + 1/r2)
        stage_one = [r for r in train_rows if r["step"] <= args.probe_steps][-1]["tokens_per_s"]
        per_stage = args.seconds_per_run * 0.92 / (tokens_per_step / stage_one + tokens_per_step / rate)
        steps = 2 * int(per_stage)
        rate = 2 / (1 / stage_one + 1 / rate)  # the mean rate over the whole run
    if probe_only:
        return {"variant": variant, "seed": seed, "probe_tokens_per_s": rate}
    run_dir = work / f"{variant}-seed{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    config = build_config(args, variant, seed, steps, args.seconds_per_run * 1.05)
    result = Trainer(config, run_dir, show_progress=False).run()
    return {"variant": variant, "seed": seed, "objective": config.train.objective,
            "gen_fraction": config.model.gen_fraction, "tie_all": config.model.tie_all,
            "mlm_first_steps": config.train.mlm_first_steps, "planned_steps": steps, "steps": result.steps,
            "tokens_seen": result.tokens_seen, "train_seconds": round(result.minutes * 60, 2),
            "stop_reason": result.stop_reason, "probe_tokens_per_s": rate,
            "val_disc_auc": result.val_metrics.get("val_disc_auc"),
            "val_gen_acc": result.val_metrics.get("val_gen_acc"),
            "run_dir": str(run_dir)}


def _worker(task: tuple[argparse.Namespace, str, int, Any]) -> dict[str, Any]:
    args, variant, seed, barrier = task
    import torch

    torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    work = Path(args.work_dir)
    _wait(barrier)
    try:
        row = train_variant(args, variant, seed, work)
    except Exception as exc:  # one failed run must not take the sweep down; it is reported as failed
        _wait(barrier)
        return {"variant": variant, "seed": seed, "error": f"train: {type(exc).__name__}: {exc}"}
    _wait(barrier)  # evaluation of one seed never overlaps training of another
    try:
        data = EvalData.load(Path(args.eval_data))
        row.update(evaluate_run(Path(row["run_dir"]), row["objective"], data, device, seed, args.cola_epochs))
    except Exception as exc:  # noqa: BLE001 - same reason
        row["error"] = f"eval: {type(exc).__name__}: {exc}"
    if not args.keep_runs:
        shutil.rmtree(row["run_dir"], ignore_errors=True)
    return row


def _warm_up(task: tuple[argparse.Namespace, str, int]) -> dict[str, Any]:
    """One discarded probe per seed process before the sweep. Why: in the first GPU sweep the first
    variant's probe also paid each process's CUDA/cuBLAS start-up, under-measured its rate by ~20%,
    and so that variant (ELECTRA) trained ~17 s instead of 20."""
    args, variant, seed = task
    import torch

    torch.set_num_threads(args.threads)
    return train_variant(args, variant, seed, Path(args.work_dir), probe_only=True)


def _wait(barrier: Any) -> None:
    if barrier is None:
        return
    try:
        barrier.wait(timeout=900)
    except threading.BrokenBarrierError:
        pass


# -- aggregation and reports -----------------------------------------------------------------------
def aggregate(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for variant in VARIANTS:
        done = [r for r in rows if r["variant"] == variant and "error" not in r]
        if not done:
            continue
        entry: dict[str, Any] = {"runs": len(done), "score": done[0]["score"],
                                 "steps": float(statistics.mean(r["steps"] for r in done)),
                                 "tokens_seen": float(statistics.mean(r["tokens_seen"] for r in done)),
                                 "train_seconds": statistics.mean(r["train_seconds"] for r in done)}
        for metric in METRICS:
            values = [r[metric] for r in done]
            entry[metric] = statistics.mean(values)
            entry[f"{metric}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
        out[variant] = entry
    return out


def _cell(entry: dict[str, Any] | None, metric: str) -> str:
    if not entry:
        return "–"
    return f"{entry[metric]:.3f} ± {entry[f'{metric}_std']:.3f}"


def orderings(agg: dict[str, dict[str, Any]]) -> list[str]:
    """Which of the paper's orderings hold here, by mean and by more than the larger seed std."""
    lines = []
    pairs = [("electra", "bert_mlm"), ("electra", "all_tokens_mlm"), ("all_tokens_mlm", "replace_mlm"),
             ("electra", "electra15"), ("replace_mlm", "bert_mlm"), ("electra", "gen_1_tied"),
             ("electra", "two_stage")]
    for a, b in pairs:
        if a not in agg or b not in agg:
            continue
        for metric in METRICS:
            diff = agg[a][metric] - agg[b][metric]
            noise = max(agg[a][f"{metric}_std"], agg[b][f"{metric}_std"])
            verdict = ("holds beyond seed std" if diff > noise else "holds by mean only" if diff > 0
                       else "tie" if diff == 0 else "fails")
            lines.append(f"| {LABELS[a]} > {LABELS[b]} | {metric} | {diff:+.3f} | {noise:.3f} | {verdict} |")
    return lines


def write_reports(out_dir: Path, summary: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / "ablation.json", summary)
    agg = summary["aggregate"]
    setup = summary["setup"]
    head = ["# ELECTRA efficiency claims at small scale", "",
            f"Device: {setup['device']}. Preset `{setup['preset']}`, batch {setup['batch_size']} × "
            f"{setup['seq_len']} tokens, lr {setup['lr']}, target **{setup['seconds_per_run']} s of training per run** "
            f"(equal wall-clock as the aim; each run's measured training seconds are in the table's JSON, "
            f"{len(setup['seeds'])} seeds run side by side), corpus "
            f"{', '.join(Path(c).name for c in setup['corpus'])}. Mean ± std over seeds {setup['seeds']}. "
            f"Command: `{summary['command']}`", "",
            "Scores: *rtd* = sum of log(1 − p replaced) (BLiMP) and word score (GED); *pll* = MLM "
            "pseudo-log-likelihood, one [MASK] per subword; *one_pass* = log p(x_t | x) unmasked "
            "(copy mechanism for All-Tokens MLM). GED = zero-shot F0.5 on the JFLEG dev report half.", ""]
    table = ["| objective | paper GLUE (Table 5) | CoLA dev MCC | BLiMP acc. | GED F0.5 | score | steps | "
             "tokens seen |", "|---|---:|---:|---:|---:|---|---:|---:|"]
    for variant in ("electra", "all_tokens_mlm", "replace_mlm", "electra15", "bert_mlm", "adversarial"):
        if variant in agg:
            e = agg[variant]
            table.append(f"| {LABELS[variant]} | {PAPER_GLUE.get(variant, '–')} | {_cell(e, 'cola_mcc')} | "
                         f"{_cell(e, 'blimp_acc')} | {_cell(e, 'ged_f05')} | {e['score']} | {e['steps']:.0f} | "
                         f"{e['tokens_seen'] / 1e6:.2f}M |")
    gen = ["| generator size | CoLA dev MCC | BLiMP acc. | GED F0.5 | steps |", "|---|---:|---:|---:|---:|"]
    for variant in ("gen_0.125", "electra", "gen_0.5", "gen_1_tied"):
        if variant in agg:
            e = agg[variant]
            label = "gen 1/4 (= ELECTRA)" if variant == "electra" else LABELS[variant]
            gen.append(f"| {label} | {_cell(e, 'cola_mcc')} | {_cell(e, 'blimp_acc')} | {_cell(e, 'ged_f05')} | "
                       f"{e['steps']:.0f} |")
    two = ["| training | CoLA dev MCC | BLiMP acc. | GED F0.5 | steps |", "|---|---:|---:|---:|---:|"]
    for variant in ("bert_mlm", "two_stage", "electra"):
        if variant in agg:
            e = agg[variant]
            two.append(f"| {LABELS[variant]} | {_cell(e, 'cola_mcc')} | {_cell(e, 'blimp_acc')} | "
                       f"{_cell(e, 'ged_f05')} | {e['steps']:.0f} |")
    order = ["| ordering (paper) | metric | mean difference | larger seed std | here |", "|---|---|---:|---:|---|",
             *orderings(agg)]
    failed = [f"- {r['variant']} seed {r['seed']}: {r['error']}" for r in summary["rows"] if "error" in r]
    text = "\n".join([*head, "## Objectives (paper Table 5)", "", *table, "",
                      "![objectives](ablation_objectives.png)", "", "## Generator size (paper Fig. 3, left)", "",
                      *gen, "", "![generator size](ablation_gensize.png)", "",
                      "## Two-stage training (paper Fig. 3, right)", "", *two, "",
                      "![two-stage](ablation_twostage.png)", "", "## Which orderings hold here", "", *order, "",
                      *(["## Failed runs", "", *failed, ""] if failed else [])])
    atomic_write_text(out_dir / "ablation.md", text + "\n")
    _plots(out_dir, agg)


def _plots(out_dir: Path, agg: dict[str, dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles = {"cola_mcc": "CoLA dev MCC", "blimp_acc": "BLiMP accuracy", "ged_f05": "GED F0.5 (JFLEG)"}

    def bars(variants: list[str], name: str, suptitle: str) -> None:
        present = [v for v in variants if v in agg]
        if not present:
            return
        fig, axes = plt.subplots(1, len(METRICS), figsize=(4.2 * len(METRICS), 3.8))
        for ax, metric in zip(axes, METRICS, strict=True):
            means = [agg[v][metric] for v in present]
            stds = [agg[v][f"{metric}_std"] for v in present]
            ax.bar(range(len(present)), means, yerr=stds, capsize=4, color="#4c72b0")
            ax.set_xticks(range(len(present)), [LABELS[v] for v in present], rotation=35, ha="right", fontsize=8)
            ax.set_title(titles[metric])
        fig.suptitle(suptitle)
        fig.tight_layout()
        atomic_save_figure(fig, out_dir / name)

    bars(["electra", "all_tokens_mlm", "replace_mlm", "electra15", "bert_mlm", "adversarial"],
         "ablation_objectives.png", "Objectives at equal wall-clock (mean ± std over seeds)")
    bars(["bert_mlm", "two_stage", "electra"], "ablation_twostage.png", "Two-stage vs ELECTRA vs BERT")
    sizes = [(0.125, "gen_0.125"), (0.25, "electra"), (0.5, "gen_0.5"), (1.0, "gen_1_tied")]
    sizes = [(f, v) for f, v in sizes if v in agg]
    if sizes:
        fig, axes = plt.subplots(1, len(METRICS), figsize=(4.2 * len(METRICS), 3.6))
        for ax, metric in zip(axes, METRICS, strict=True):
            ax.errorbar([f for f, _ in sizes], [agg[v][metric] for _, v in sizes],
                        yerr=[agg[v][f"{metric}_std"] for _, v in sizes], marker="o", capsize=4)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("generator width / discriminator width (1 = tied)")
            ax.set_title(titles[metric])
        fig.suptitle("Generator size at equal wall-clock")
        fig.tight_layout()
        atomic_save_figure(fig, out_dir / "ablation_gensize.png")


# -- driver ----------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from electra_detect.training.data import prepare_corpus, resolve_corpus

    started = time.monotonic()
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"error: unknown variants {unknown}; choose from {list(VARIANTS)}")
    EvalData.load(Path(args.eval_data))  # fail before any training if the data are missing
    Path(args.cache_dir).mkdir(parents=True, exist_ok=True)
    prepare_corpus(resolve_corpus(list(args.corpus)), Path(args.cache_dir), args.vocab_size, True, "blank",
                   args.seq_len)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({os.cpu_count()} cores)"
    summary: dict[str, Any] = {
        "benchmark": "ablation", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", *sys.argv]), "rows": [], "aggregate": {}, "skipped": [],
        "setup": {"device": device, "preset": args.preset, "batch_size": args.batch_size, "seq_len": args.seq_len,
                  "lr": args.lr, "seconds_per_run": args.seconds_per_run, "seeds": args.seeds,
                  "corpus": list(args.corpus), "vocab_size": args.vocab_size, "cola_epochs": args.cola_epochs,
                  "prepare_seconds": round(time.monotonic() - started, 1)}}
    context = mp.get_context("spawn")  # CUDA cannot be used in forked children
    manager = None if args.sequential else context.Manager()
    per_variant: list[float] = []
    pool = None if args.sequential else context.Pool(len(args.seeds))
    try:
        if pool is not None and args.variants and not args.no_warm_up:
            summary["warm_up"] = pool.map(_warm_up, [(args, args.variants[0], seed) for seed in args.seeds])
        for variant in args.variants:
            elapsed = time.monotonic() - started
            estimate = max(per_variant) if per_variant else args.seconds_per_run * 2
            if args.total_seconds and elapsed + estimate > args.total_seconds:
                summary["skipped"].append(variant)
                continue
            t0 = time.monotonic()
            if pool is None:  # one process, seeds one after another (tests, or a device too small to share)
                rows = [_worker((args, variant, seed, None)) for seed in args.seeds]
            else:
                barrier = manager.Barrier(len(args.seeds)) if len(args.seeds) > 1 else None
                rows = pool.map(_worker, [(args, variant, seed, barrier) for seed in args.seeds])
            per_variant.append(time.monotonic() - t0)
            summary["rows"].extend(rows)
            summary["aggregate"] = aggregate(summary["rows"])
            summary["total_seconds"] = round(time.monotonic() - started, 1)
            write_reports(Path(args.out_dir), summary)
            print(json.dumps({"variant": variant, "seconds": round(per_variant[-1], 1),
                              **{k: round(v, 4) for k, v in summary["aggregate"].get(variant, {}).items()
                                 if isinstance(v, float)}}), file=sys.stderr, flush=True)
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    write_reports(Path(args.out_dir), summary)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare-data", help="compact CoLA/BLiMP/JFLEG-GED copies for the run")
    prep.add_argument("--shared", default="../shared/data")
    prep.add_argument("--out", default=".gpu/ablation-data")
    prep.add_argument("--blimp-per-set", type=int, default=300)
    prep.add_argument("--seed", type=int, default=13, help="JFLEG tune/report split (benchmarks/ged.py's)")
    go = sub.add_parser("run", help="train every variant at equal wall-clock and evaluate")
    go.add_argument("--eval-data", default=".gpu/ablation-data")
    go.add_argument("--corpus", nargs="+", required=True)
    go.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS)
    go.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    go.add_argument("--preset", default="tiny")
    go.add_argument("--vocab-size", type=int, default=16000)
    go.add_argument("--seq-len", type=int, default=128)
    go.add_argument("--batch-size", type=int, default=128)
    go.add_argument("--lr", type=float, default=1e-3)
    go.add_argument("--warmup-steps", type=int, default=100)
    go.add_argument("--seconds-per-run", type=float, default=20.0)
    go.add_argument("--probe-steps", type=int, default=15)
    go.add_argument("--total-seconds", type=float, default=0.0, help="skip variants that would end past this")
    go.add_argument("--cola-epochs", type=int, default=3)
    go.add_argument("--threads", type=int, default=1, help="torch CPU threads per seed process")
    go.add_argument("--cache-dir", default="/tmp/ablation-cache")
    go.add_argument("--work-dir", default="/tmp/ablation-runs")
    go.add_argument("--keep-runs", action="store_true")
    go.add_argument("--sequential", action="store_true", help="seeds one after another in this process")
    go.add_argument("--no-warm-up", action="store_true", help="skip the discarded probe before the sweep")
    go.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results" / "ablation"))
    args = parser.parse_args()
    if args.command == "prepare-data":
        counts = prepare_data(Path(args.shared), Path(args.out), args.blimp_per_set, args.seed)
        print(json.dumps({"benchmark": "ablation-data", **counts}))
        return 0
    summary = run(args)
    print(json.dumps({"benchmark": "ablation", "device": summary["setup"]["device"],
                      "total_seconds": summary.get("total_seconds"), "skipped": summary["skipped"],
                      **{f"{v}.{m}": round(e[m], 4) for v, e in summary["aggregate"].items() for m in METRICS}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
