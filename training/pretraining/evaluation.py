"""Metrics of the pre-training task: per train step (``StepStats``) and on validation (``evaluate``: generator
MLM accuracy, discriminator AUC/precision/recall)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.metrics import precision_score, recall_score, roc_auc_score

from electra_detect.detector import Detector
from electra_detect.tasks.ged.alignment import score_tokens
from electra_detect.tasks.ged.metrics import flatten
from electra_detect.tasks.ged.readers import GedSentence
from electra_detect.training.pretraining import objectives
from electra_detect.training.pretraining.masking import MaskedBatch, mask_tokens
from electra_detect.training.pretraining.model import ElectraPretrainingModel
from electra_detect.training.pretraining.objectives import ElectraOutput


@dataclass
class StepStats:
    """Sums over one optimizer step's micro-batches of what the train rows of metrics.jsonl report."""

    grad_accum: int
    sums: dict[str, float] = field(default_factory=lambda: {"loss": 0.0, "mlm_loss": 0.0, "disc_loss": 0.0})
    gen_correct: int = 0
    gen_total: int = 0
    disc_correct: int = 0
    real_total: int = 0
    replaced: int = 0

    @torch.no_grad()
    def add(self, out: ElectraOutput, masked: MaskedBatch) -> None:
        values = {"loss": out.loss.item(), "mlm_loss": out.mlm_loss.item(), "disc_loss": out.disc_loss.item(),
                  **out.extra}
        for key, value in values.items():
            self.sums[key] = self.sums.get(key, 0.0) + value / self.grad_accum
        self.gen_correct += (out.mlm_logits.argmax(-1) == masked.original[masked.masked]).sum().item()
        self.gen_total += int(masked.masked.sum())
        self.disc_correct += ((out.disc_logits > 0).long() == out.disc_labels).sum().item()
        self.real_total += masked.original.numel()
        self.replaced += int(out.disc_labels.sum())

    def row(self, rtd_head: bool, grad_norm: float, norms: dict[str, float]) -> dict[str, float]:
        """Discriminator accuracy is NaN (logged as null) for an objective without a replaced-token head."""
        return {**self.sums, "gen_acc": self.gen_correct / max(self.gen_total, 1),
                "disc_acc": self.disc_correct / self.real_total if rtd_head else float("nan"),
                "replaced_frac": self.replaced / self.real_total, "grad_norm": grad_norm, **norms}


@torch.no_grad()
def evaluate(model: ElectraPretrainingModel, objective: str, batches: list[torch.Tensor], *, mask_id: int,
             special_ids: list[int], mask_prob: float, disc_weight: float, temperature: float,
             seed: int, device: torch.device) -> dict[str, float | None]:
    """Same masking and sampling as training, with a fixed RNG so every evaluation sees the
    same corruption of the same blocks, and without touching the training RNG streams. The discriminator
    metrics are ``None`` for an objective without a replaced-token head (``Objective.rtd_head``)."""
    was_training = model.training
    model.eval()
    rng = torch.Generator(device=device).manual_seed(seed)
    probs, labels, losses = [], [], []
    gen_correct = gen_total = 0
    for input_ids in batches:
        input_ids = input_ids.to(device)
        attention = torch.ones_like(input_ids)
        masked = mask_tokens(input_ids, attention, mask_id=mask_id, special_ids=special_ids,
                             mask_prob=mask_prob, generator=rng)
        out = objectives.compute_loss(model, objective, masked, attention, rng, disc_weight, temperature)
        losses.append(out.loss.item())
        gen_correct += (out.mlm_logits.argmax(-1) == masked.original[masked.masked]).sum().item()
        gen_total += int(masked.masked.sum())
        real = attention.bool()
        probs.append(torch.sigmoid(out.disc_logits.float()[real]).cpu().numpy())
        labels.append(out.disc_labels[real].cpu().numpy())
    model.train(was_training)
    if not objectives.get(objective).rtd_head:
        return {"val_loss": float(np.mean(losses)), "val_gen_acc": gen_correct / max(gen_total, 1),
                "val_disc_auc": None, "val_disc_precision": None, "val_disc_recall": None, "val_disc_acc": None,
                "val_replaced_frac": None}
    p = np.concatenate(probs)
    y = np.concatenate(labels)
    flagged = p >= 0.5
    both_classes = 0 < y.sum() < len(y)
    return {
        "val_loss": float(np.mean(losses)),
        "val_gen_acc": gen_correct / max(gen_total, 1),
        "val_disc_auc": float(roc_auc_score(y, p)) if both_classes else None,
        "val_disc_precision": float(precision_score(y, flagged, zero_division=0)),
        "val_disc_recall": float(recall_score(y, flagged, zero_division=0)),
        "val_disc_acc": float((flagged == y.astype(bool)).mean()),
        "val_replaced_frac": float(y.mean()),
    }


def frequency_swaps(sentences: list[str], rate: float = 0.15, seed: int = 0) -> list[GedSentence]:
    """Swap ``rate`` of each sentence's whitespace words for words drawn by frequency from all of them.

    A drawn word is never the word it replaces; a swapped word is labelled 1. Word identity tells nothing
    here: a swapped-in word is exactly as common as the corpus makes it, so only context can tell it apart.
    """
    rng = np.random.default_rng(seed)
    split = [s.split() for s in sentences]
    vocabulary = [w for words in split for w in words]
    out = []
    for words in split:
        k = max(1, round(rate * len(words))) if words else 0
        chosen = set(rng.choice(len(words), size=k, replace=False).tolist()) if k else set()
        swapped = list(words)
        for i in chosen:
            while swapped[i] == words[i]:
                swapped[i] = vocabulary[rng.integers(len(vocabulary))]
        out.append(GedSentence(swapped, [int(i in chosen) for i in range(len(words))]))
    return out


def corruption_auc(detector: Detector, sentences: list[str], rate: float = 0.15, seed: int = 0) -> dict[str, float]:
    """Generator-free check that a discriminator reads context: word-level ROC AUC on fluent sentences
    with ``rate`` of their words swapped for frequency-sampled words, each word scored as GED scores it
    (max over its subwords, ``electra_detect.tasks.ged.alignment.score_tokens``)."""
    corrupted = frequency_swaps([s for s in sentences if len(s.split()) >= 4], rate, seed)
    y, p = flatten(corrupted, score_tokens(detector, corrupted))
    return {"corruption_auc": float(roc_auc_score(y, p)), "words": int(len(y)), "swapped": int(y.sum()),
            "sentences": len(corrupted)}
