"""Distillation: a large teacher's word-level p(error), operation and type move into the small shipped student.

Three jobs, each a plain function (``electra-detect distill text|label|train`` call them):

1. ``build_text_sets`` (distill_text.py) writes the text to label under ``runs/``: the learner training sentences,
   corpus sentences with realistic synthetic errors, and clean corpus sentences.
2. ``label_text_set`` (distill_labels.py) runs the teacher(s) through ``Detector`` on a set, shard by shard.
3. ``distill`` (this module) trains the student (any start ``ged train`` takes) on the teacher's probabilities (soft
   binary cross-entropy, temperature optional), the gold labels where a sentence has them (a weight), and the
   teacher's hard types where it flags a word (gold types where the data has them), then writes an ordinary typed
   model dir (stock ``transformers`` class, tokenizer, ``ged.json`` with the threshold tuned on the dev sets' tuning
   halves).

The student is trained on words, not subwords: teacher and student need not share a tokenizer (MPNet's and
MiniLM's WordPiece vocabularies differ), every subword of a word takes the word's targets, as ``ged train`` does.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from electra_detect.errors import GedDataError
from electra_detect.fileio import atomic_write_dir, atomic_write_json
from electra_detect.tasks.ged.error_types import split_type
from electra_detect.tasks.ged.readers import GedSentence, read_labelled, split_sentences
from electra_detect.training.finetune.distill_labels import OPERATIONS, Example, load_labelled_set
from electra_detect.training.finetune.distill_text import parse_data_spec

DEV_SPLIT_SEED = 13  # `ged eval --split`'s seed: tuning and report halves are the ones every GED figure uses


@dataclass
class DistillConfig:
    epochs: int = 1
    batch_size: int = 32
    lr: float = 1e-4
    warmup_fraction: float = 0.1
    max_length: int = 128
    seed: int = 0
    max_steps: int = 0  # 0: epochs decide
    max_minutes: float = 0.0  # stop training after this long (a device call's limit); 0: none
    temperature: float = 1.0  # softens teacher and student alike (loss scaled by T^2)
    gold_weight: float = 1.0  # of the gold BCE on annotated (learner) words, beside the teacher's soft BCE at 1
    synthetic_weight: float = 0.0  # of the BCE on the made errors' labels in the corrupted set
    type_weight: float = 0.1  # of the operation and main-type cross-entropies (as ged train's --type-weight)
    subwords: str = "all"  # "all": every subword takes its word's targets (ged train's recipe); "first": the first
    fp16: bool = False  # save the weights in float16 (the shipped form)
    teacher_sample: int = 500  # examples on which the student's distance to the teacher is measured


def type_index(edit_type: str, mains: Sequence[str]) -> tuple[int, int]:
    """(operation index, main-type index) of an ERRANT type among the channels' main types (else OTHER)."""
    op, main = split_type(edit_type)
    other = mains.index("OTHER") if "OTHER" in mains else -100
    return OPERATIONS.index(op), mains.index(main) if main in mains else other


@dataclass
class Targets:
    """Per-subword targets of the whole training set, flat; a batch row holds indices into them (-1: none)."""

    soft: np.ndarray  # teacher p (-1: no teacher label)
    gold: np.ndarray  # 0/1 (-1: none)
    weight: np.ndarray  # the gold term's weight at that subword
    op: np.ndarray  # -100: no type target
    main: np.ndarray

    def tensors(self, device: torch.device) -> dict[str, torch.Tensor]:
        return {"soft": torch.tensor(self.soft, dtype=torch.float32, device=device),
                "gold": torch.tensor(self.gold, dtype=torch.float32, device=device),
                "weight": torch.tensor(self.weight, dtype=torch.float32, device=device),
                "op": torch.tensor(self.op, dtype=torch.long, device=device),
                "main": torch.tensor(self.main, dtype=torch.long, device=device)}


def word_targets(example: Example, mains: Sequence[str], teacher_threshold: float,
                 weights: dict[str, float]) -> np.ndarray:
    """[words, 5] per word: teacher p, gold (-1: none), the gold term's weight, operation and main type (-100:
    none). A word's type target: its gold type where it is a gold error, else the teacher's where the teacher
    flags it (p >= its threshold), else none."""
    n = len(example.tokens)
    weight = weights.get(example.kind, 0.0) if example.gold is not None else 0.0
    gold = np.asarray(example.gold, np.float32) if weight > 0 else np.full(n, -1.0, np.float32)
    op, main = np.full(n, -100), np.full(n, -100)
    if mains:
        flagged = (example.p >= teacher_threshold) & (example.op >= 0)
        op[flagged], main[flagged] = example.op[flagged], example.main[flagged]
        if example.gold_types and example.gold:
            for w, (label, edit_type) in enumerate(zip(example.gold, example.gold_types, strict=True)):
                if label and edit_type:
                    op[w], main[w] = type_index(edit_type, mains)
    return np.stack([example.p.astype(np.float32), gold, np.full(n, weight, np.float32), op, main], axis=1)


def encode_examples(tokenizer: Any, examples: Sequence[Example], mains: Sequence[str], teacher_threshold: float,
                    config: DistillConfig) -> tuple[list[tuple[list[int], list[int]]], Targets]:
    """Subword ids and, per subword, an index into the flat :class:`Targets` (-1 on specials and, with
    ``subwords="first"``, on a word's later subwords); every other subword takes its word's targets."""
    weights = {"learner": config.gold_weight, "synthetic": config.synthetic_weight}
    encoded = tokenizer([e.tokens for e in examples], is_split_into_words=True, truncation=True,
                        max_length=config.max_length)
    out, blocks, used = [], [], 0
    for index, example in enumerate(examples):
        words = np.array([-1 if w is None else w for w in encoded.word_ids(index)])
        keep = words >= 0
        if config.subwords == "first":
            keep &= np.r_[True, words[1:] != words[:-1]]
        rows = np.full(len(words), -1)
        rows[keep] = used + np.arange(int(keep.sum()))
        blocks.append(word_targets(example, mains, teacher_threshold, weights)[words[keep]])
        used += int(keep.sum())
        out.append((encoded["input_ids"][index], rows.tolist()))
    flat = np.concatenate(blocks) if blocks else np.zeros((0, 5))
    return out, Targets(flat[:, 0], flat[:, 1], flat[:, 2], flat[:, 3].astype(np.int64), flat[:, 4].astype(np.int64))


def distill_loss(output: torch.Tensor, rows: torch.Tensor, targets: dict[str, torch.Tensor], typed: bool,
                 config: DistillConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """Soft BCE against the teacher's p (temperature T: both sides' logits / T, scaled by T^2) + the weighted gold
    BCE + ``type_weight`` x the operation and main-type cross-entropies. ``output``: [batch, seq] logits or
    [batch, seq, channels]; ``rows``: [batch, seq] indices into the flat targets (-1: none)."""
    from electra_detect.engines.torch_engine import replaced_logits

    logits = replaced_logits(output).float()
    real = rows >= 0
    index = rows[real]
    z = logits[real]
    soft = targets["soft"][index]
    has_soft = soft >= 0
    t = config.temperature
    soft_target = torch.sigmoid(torch.logit(soft[has_soft].clamp(1e-4, 1 - 1e-4)) / t)
    loss_soft = F.binary_cross_entropy_with_logits(z[has_soft] / t, soft_target) * t * t if has_soft.any() \
        else z.sum() * 0
    gold, weight = targets["gold"][index], targets["weight"][index]
    has_gold = (gold >= 0) & (weight > 0)
    loss_gold = (F.binary_cross_entropy_with_logits(z[has_gold], gold[has_gold], reduction="none")
                 * weight[has_gold]).mean() if has_gold.any() else z.sum() * 0
    loss = loss_soft + loss_gold
    parts = {"soft": float(loss_soft.detach()), "gold": float(loss_gold.detach())}
    if typed:
        op, main = targets["op"][index], targets["main"][index]
        channels = output[real].float()
        loss_type = z.sum() * 0
        if (op >= 0).any():
            loss_type = loss_type + F.cross_entropy(channels[:, 1:4][op >= 0], op[op >= 0])
        if (main >= 0).any():
            loss_type = loss_type + F.cross_entropy(channels[:, 4:][main >= 0], main[main >= 0])
        loss = loss + config.type_weight * loss_type
        parts["type"] = float(loss_type.detach())
    return loss, parts


def student_model(source: Path, channels: Sequence[str]) -> Any:
    """The start under its stock token classifier with the teacher's channels; the start's own head rows are kept
    by channel name where it has them (a typed start: ``ged-synthetic``), the rest start fresh."""
    from electra_detect.engines.torch_engine import load_discriminator
    from electra_detect.training.finetune.ged_finetune import model_channels, typed_model

    if not channels:
        return load_discriminator(source)
    own = model_channels(source)
    model = typed_model(source, channels)
    head = getattr(model, "classifier", None)
    if own and list(own) != list(channels) and isinstance(head, torch.nn.Linear):
        start = typed_model(source, own).classifier
        with torch.no_grad():
            for row, name in enumerate(channels):
                if name in own:
                    head.weight[row] = start.weight[own.index(name)]
                    head.bias[row] = start.bias[own.index(name)]
    return model


def teacher_gap(detector: Any, examples: Sequence[Example]) -> dict[str, float]:
    """How far a model's word scores are from the teacher's on these examples: mean |p - p_teacher| and the share
    of words on which both sides of 0.5 agree."""
    from electra_detect.tasks.ged.alignment import score_tokens

    if not examples:
        return {}
    scores = score_tokens(detector, [GedSentence(e.tokens, [0] * len(e.tokens)) for e in examples])
    ours, theirs = np.concatenate(scores), np.concatenate([e.p for e in examples])
    return {"mean_abs_diff": round(float(np.abs(ours - theirs).mean()), 4),
            "agreement": round(float(((ours >= 0.5) == (theirs >= 0.5)).mean()), 4)}


def dev_report(model_dir: Path, dev: dict[str, list[GedSentence]], device: str | None = None) -> dict[str, Any]:
    """Each dev set cut into its tuning and report halves (``ged eval --split``'s seed); the shared threshold tuned
    on the tuning halves; per set F0.5 etc. on both halves at that threshold and at the set's own tuned one."""
    from electra_detect.detector import Detector
    from electra_detect.tasks.ged.alignment import score_tokens
    from electra_detect.tasks.ged.metrics import flatten, shared_threshold, token_metrics, tune_threshold

    detector = Detector.load(model_dir, device=device, engine="torch")
    halves, tunes = {}, []
    for name, sentences in dev.items():
        tune, report = split_sentences(sentences, 0.5, DEV_SPLIT_SEED)
        halves[name] = (flatten(tune, score_tokens(detector, tune, 64)), flatten(report, score_tokens(detector,
                                                                                                      report, 64)))
        tunes.append(halves[name][0])
    threshold = shared_threshold(tunes)
    sets = {}
    for name, ((tl, ts), (rl, rs)) in halves.items():
        own = tune_threshold(tl, ts)
        sets[name] = {"tune": token_metrics(tl, ts, threshold), "report": token_metrics(rl, rs, threshold),
                      "own_threshold": own, "report_at_own": token_metrics(rl, rs, own)}
    return {"threshold": threshold, "threshold_tuned_on": f"the tuning halves of {', '.join(dev)} (split seed "
                                                          f"{DEV_SPLIT_SEED}): the highest mean F0.5", "sets": sets}


def distill(start: str | Path, out: str | Path, labelled: Sequence[tuple[Path, Path]],
            dev: dict[str, list[GedSentence]] | None = None, config: DistillConfig | None = None,
            show_progress: bool = True, card: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train the student from ``start`` on the (text set, labels dir) pairs and write a typed model dir to ``out``
    with ``ged.json``: the threshold tuned on ``dev``'s tuning halves, the figures on both halves, the teacher,
    text sets, data and licences (``card`` adds fields)."""
    from transformers import AutoTokenizer

    from electra_detect.engines import usable_positions
    from electra_detect.model_dir import resolve_model_dir
    from electra_detect.training.finetune.ged_finetune import length_batches
    from electra_detect.training.finetune.loop import train_loop
    from electra_detect.training.optim import optimizer_and_schedule

    config = config or DistillConfig()
    if config.subwords not in ("all", "first"):
        raise GedDataError("subwords must be 'all' or 'first'")
    examples, manifests = [], []
    for text, labels in labelled:
        loaded, manifest = load_labelled_set(text, labels)
        examples += loaded
        manifests.append(manifest)
    if not examples:
        raise GedDataError("nothing to distil on: give labelled text sets")
    if any(m["channels"] != manifests[0]["channels"] for m in manifests):
        raise GedDataError("the sets were labelled by teachers with different type channels")
    channels = ["error", *manifests[0]["channels"]] if manifests[0]["channels"] else []  # the teacher's heads
    mains = manifests[0]["types"]
    teacher_threshold = float(np.mean([m["teacher_threshold"] for m in manifests]))
    source = resolve_model_dir(start)
    torch.manual_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    sample = random.Random(config.seed).sample(examples, min(config.teacher_sample, len(examples)))
    gap_before = _gap(source, sample)
    model = student_model(source, channels)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    model.to(device)
    limit = min(config.max_length, usable_positions(model.config.to_dict()))
    encoded, flat = encode_examples(tokenizer, examples, mains, teacher_threshold,
                                    DistillConfig(**{**asdict(config), "max_length": limit}))
    targets = flat.tensors(device)
    steps_per_epoch = -(-len(encoded) // config.batch_size)
    total = config.max_steps or steps_per_epoch * config.epochs
    optimizer, scheduler = optimizer_and_schedule(model, config.lr, 0.01,
                                                  max(1, round(total * config.warmup_fraction)), total)
    rng = random.Random(config.seed)
    parts: list[dict[str, float]] = []  # each step's loss terms, for the summary

    def loss_of(batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        ids, attention, rows = (t.to(device) for t in batch)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):  # bf16 on a GPU, fp32 weights
            output = model(input_ids=ids, attention_mask=attention).logits
        loss, part = distill_loss(output, rows, targets, bool(channels), config)
        parts.append(part)
        return loss

    started = time.monotonic()
    result = train_loop(model, optimizer, scheduler,
                        lambda: length_batches(encoded, config.batch_size, tokenizer.pad_token_id, rng),
                        loss_of, total, max_minutes=config.max_minutes, desc="distill train",
                        show_progress=show_progress)
    step, losses, stop = result.step, result.losses, result.stopped
    model.eval().cpu()
    if config.fp16:
        model.half()

    def fill(tmp: Path) -> None:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))

    out = Path(out)
    atomic_write_dir(out, fill)
    window = max(1, min(20, len(losses) // 4))
    summary: dict[str, Any] = {
        "base_model": str(start), "recipe": "distillation (training/finetune/distill.py)", "config": asdict(config),
        "train_sentences": len(examples), "steps": step, "planned_steps": total, "stopped_by": stop,
        "minutes": round((time.monotonic() - started) / 60, 3), "first_loss": float(np.mean(losses[:window])),
        "last_loss": float(np.mean(losses[-window:])),
        "last_loss_parts": {k: float(np.mean([p[k] for p in parts[-window:]])) for k in parts[-1]},
        "teacher": {"models": sorted({t for m in manifests for t in (*m["teachers"], *m["half_teachers"])}),
                    "threshold": teacher_threshold},
        "text_sets": [{"text": m["text"], "sentences": m["sentences"]} for m in manifests],
        "teacher_gap": {"before": gap_before, "after": _gap(out, sample)},
        "threshold": 0.5, "space": "raw"}
    if channels:
        summary["types"] = channels
    summary.update(card or {})
    if dev:
        report = dev_report(out, dev)
        summary["threshold"] = report["threshold"]
        summary["threshold_tuned_on"] = report["threshold_tuned_on"]
        summary["dev"] = report["sets"]
    atomic_write_json(out / "ged.json", summary)
    return summary


def _gap(model_dir: Path, sample: Sequence[Example]) -> dict[str, float]:
    from electra_detect.detector import Detector

    return teacher_gap(Detector.load(model_dir, engine="torch"), sample)


def read_dev_sets(specs: Sequence[str]) -> dict[str, list[GedSentence]]:
    """``PATH:FORMAT`` dev files -> {file name: sentences} (MultiGED's en_fce_dev.tsv, JFLEG dev as TSV)."""
    out = {}
    for spec in specs:
        path, fmt = parse_data_spec(spec)
        out[path.name] = read_labelled(path, fmt)
    return out


def card_for(manifest_path: Path | None, sets: Sequence[str]) -> dict[str, Any]:
    """The training data and licences of the text sets used (from ``build_text_sets``' manifest)."""
    if manifest_path is None or not manifest_path.is_file():
        return {}
    manifest = json.loads(manifest_path.read_text())
    data = []
    for name in sets:
        entry = manifest["sets"].get(name)
        if not entry:
            continue
        if name == "learner":
            data += [{"name": f["name"], "files": [f["file"]], "licence": f["licence"], "sentences": f["sentences"]}
                     for f in entry["files"]]
        else:
            data.append({"name": f"{name} corpus text", "sentences": entry["sentences"], "sources": entry["sources"]})
    return {"training_data": data}
