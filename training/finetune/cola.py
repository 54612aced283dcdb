"""CoLA fine-tuning of a pre-trained encoder: the ablation benchmark's downstream task.

Why here and this small: the ELECTRA paper's efficiency claims are about what the pre-trained
*encoder* is worth downstream, so every objective's encoder (the discriminator's, which the MLM
objectives share with their MLM head) gets the same recipe: a fresh 2-way classification head
(``ElectraForSequenceClassification``), pre-training's AdamW and linear warm-up/decay
(``training/optim.py``), a few epochs, then
Matthews correlation (the GLUE metric for CoLA, scikit-learn's) on the dev set.
"""

from __future__ import annotations

import csv
import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from sklearn.metrics import matthews_corrcoef

from electra_detect.errors import UserError
from electra_detect.training.finetune.loop import train_loop
from electra_detect.training.optim import optimizer_and_schedule


class ColaDataError(UserError, ValueError):
    """A CoLA file is missing or malformed."""


@dataclass
class ColaConfig:
    epochs: int = 3
    lr: float = 3e-4  # the paper's ELECTRA-Small fine-tuning rate
    batch_size: int = 32
    max_length: int = 64
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    seed: int = 0
    max_train: int = 0  # 0 = every training sentence


def read_cola(path: str | Path) -> tuple[list[str], list[int]]:
    """GLUE/CoLA TSV without header: ``source, label (1 = acceptable), original mark, sentence``."""
    path = Path(path)
    if not path.exists():
        raise ColaDataError(f"CoLA file not found: {path}")
    sentences, labels = [], []
    with open(path, encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE), start=1):
            if len(row) < 4 or row[1] not in ("0", "1"):
                raise ColaDataError(f"{path}:{number}: expected 4 tab-separated columns with label 0/1")
            labels.append(int(row[1]))
            sentences.append(row[3])
    return sentences, labels


def finetune_cola(model_dir: str | Path, train: tuple[list[str], list[int]], dev: tuple[list[str], list[int]],
                  config: ColaConfig | None = None, device: str | None = None,
                  show_progress: bool = False) -> dict[str, float]:
    """Fine-tune the encoder in ``model_dir`` on ``train``; return dev MCC and accuracy."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    config = config or ColaConfig()
    started = time.perf_counter()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(config.seed)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the fresh classifier head's "newly initialized" warning is expected
    try:
        model = AutoModelForSequenceClassification.from_pretrained(str(model_dir), num_labels=2, use_safetensors=True,
                                                                   ignore_mismatched_sizes=True).to(device)
    finally:
        hf_logging.set_verbosity(verbosity)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    max_length = min(config.max_length, int(model.config.max_position_embeddings))

    sentences, labels = train
    order = list(range(len(sentences)))
    rng = random.Random(config.seed)
    if config.max_train:
        rng.shuffle(order)
        order = order[:config.max_train]
    steps_per_epoch = math.ceil(len(order) / config.batch_size)
    total = max(1, steps_per_epoch * config.epochs)
    warmup = max(1, int(total * config.warmup_fraction))
    optimizer, scheduler = optimizer_and_schedule(model, config.lr, config.weight_decay, warmup, total)

    def encode(texts: list[str]) -> dict[str, torch.Tensor]:
        batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        return {k: v.to(device) for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}

    def epoch_batches() -> Iterator[list[int]]:  # the kept sentences reshuffled in place each epoch
        rng.shuffle(order)
        for first in range(0, len(order), config.batch_size):
            yield order[first:first + config.batch_size]

    def loss_of(chosen: list[int]) -> torch.Tensor:
        target = torch.tensor([labels[i] for i in chosen], device=device)
        return model(**encode([sentences[i] for i in chosen]), labels=target).loss

    train_loop(model, optimizer, scheduler, epoch_batches, loss_of, steps_per_epoch * config.epochs, desc="cola",
               show_progress=show_progress)  # not `total`: no sentences or no epochs train no step, as before

    model.eval()
    dev_sentences, dev_labels = dev
    predictions: list[int] = []
    with torch.inference_mode():
        for first in range(0, len(dev_sentences), 128):
            logits = model(**encode(dev_sentences[first:first + 128])).logits
            predictions.extend(logits.argmax(-1).tolist())
    correct = sum(int(p == y) for p, y in zip(predictions, dev_labels, strict=True))
    return {"mcc": float(matthews_corrcoef(dev_labels, predictions)), "accuracy": correct / len(dev_labels),
            "train_sentences": len(order), "steps": total, "seconds": time.perf_counter() - started}
