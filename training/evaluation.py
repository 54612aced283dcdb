"""Validation of the pre-training task: generator MLM accuracy, discriminator AUC/precision/recall."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import precision_score, recall_score, roc_auc_score

from electra_detect.detector import Detector
from electra_detect.ged import GedSentence, flatten, score_tokens
from electra_detect.training.masking import mask_tokens
from electra_detect.training.model import ElectraPretrainingModel


@torch.no_grad()
def evaluate(model: ElectraPretrainingModel, batches: list[torch.Tensor], *, mask_id: int,
             special_ids: list[int], mask_prob: float, disc_weight: float, temperature: float,
             seed: int, device: torch.device) -> dict[str, float | None]:
    """Same masking and sampling as training, with a fixed RNG so every evaluation sees the
    same corruption of the same blocks, and without touching the training RNG streams."""
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
        out = model(masked, attention, rng, disc_weight, temperature)
        losses.append(out.loss.item())
        gen_correct += (out.mlm_logits.argmax(-1) == masked.original[masked.masked]).sum().item()
        gen_total += int(masked.masked.sum())
        real = attention.bool()
        probs.append(torch.sigmoid(out.disc_logits.float()[real]).cpu().numpy())
        labels.append(out.disc_labels[real].cpu().numpy())
    model.train(was_training)
    if model.stage == "mlm" or model.objective in ("bert_mlm", "replace_mlm"):  # no replaced-token head trained
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
    (max over its subwords, ``electra_detect.ged.score_tokens``)."""
    corrupted = frequency_swaps([s for s in sentences if len(s.split()) >= 4], rate, seed)
    y, p = flatten(corrupted, score_tokens(detector, corrupted))
    return {"corruption_auc": float(roc_auc_score(y, p)), "words": int(len(y)), "swapped": int(y.sum()),
            "sentences": len(corrupted)}
