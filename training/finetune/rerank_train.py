"""``electra-detect rerank train``: a hypothesis scorer learned on a recogniser's own n-best lists, list-wise.

    total = asr + Σ_f w_f · feature_f(p(replaced) of the hypothesis's tokens)       (tasks/rerank/listwise.py)

Phases, top to bottom in ``train_reranker``:
  1. the lists: every hypothesis tokenised as the Detector does, its word errors against the reference, and its
     tokens labelled wrong/right by alignment (the recogniser-error labels of ``benchmarks/quality/asr/own_errors.py``);
  2. the weights alone on the start model's frozen features: a list-wise fit that starts phase 3 (and is what
     the start model alone gives when its weights are learned on the task);
  3. encoder and weights together: the expected word error rate over each list's softmax (MWER, as RescoreBERT;
     or ``softmax``: cross-entropy against the lists' low-WER hypotheses) plus the token loss on the labels;
     then, with ``refit`` lists (``--refit-on``), the weights alone fitted again on the trained encoder's
     features of those in-domain lists;
  4. written as a reranker directory (``discriminator/`` with its ``reranker.json``); WER on ``dev`` lists when
     given.

Features are scaled by their spread inside lists while training (the recogniser's scores differ by hundredths
within a list, the pooled log-probabilities by units), and the weights are stored in the raw scale.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from electra_detect.batching import pad_ids
from electra_detect.engines.torch_engine import load_discriminator, replaced_logits
from electra_detect.fileio import atomic_write_dir, atomic_write_json
from electra_detect.model_dir import resolve_model_dir
from electra_detect.tasks.rerank.listwise import COUNT_THRESHOLD, FEATURES, Reranker
from electra_detect.tasks.rerank.nbest import Utterance
from electra_detect.tasks.rerank.wer import hypothesis_word_errors, normalise, word_errors
from electra_detect.training.finetune.loop import drop_checkpoint, train_loop
from electra_detect.training.optim import warmup_linear_decay

LOSSES = ("mwer", "softmax")


@dataclass
class RerankTrainConfig:
    epochs: int = 2
    lists_per_batch: int = 4
    lr: float = 5e-5  # the encoder's (as ged train's)
    weight_lr: float = 0.02  # the feature weights' (in the scaled space)
    token_weight: float = 1.0  # the token loss beside the list loss: keeps p(replaced) a per-word confidence
    loss: str = "mwer"
    linear_only: bool = False  # phase 2 only: the start model's encoder, weights learned on the lists
    max_lists: int = 0  # 0: all (a training-set-size curve uses fewer)
    max_length: int = 64
    seed: int = 0
    checkpoint_every: int = 0  # steps between resumable states in OUT.partial/ (0: none)


@dataclass
class EncodedList:
    """One utterance's hypotheses as model inputs: ids ([CLS] … [SEP]), token labels (-1: special), the
    recogniser's scores, word counts, word errors and the reference's length."""

    ids: list[list[int]]
    labels: list[list[int]]
    asr: np.ndarray
    words: np.ndarray
    errors: np.ndarray
    ref_words: int


# ------------------------------------------------------------------------------------------------ phase 1

def token_labels(tokenizer: Any, text: str, word_labels: Sequence[int | None]) -> tuple[list[int], list[int]]:
    """(token ids, 0/1 per token): a token takes the label of the whitespace word its characters sit in."""
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    starts, position = [], 0
    for word in text.split():
        position = text.index(word, position)
        starts.append(position)
        position += len(word)
    labels = []
    for start, _ in encoding["offset_mapping"]:
        word = max(0, int(np.searchsorted(starts, start, side="right")) - 1)
        labels.append(int(word_labels[word] or 0) if word < len(word_labels) else 0)
    return list(encoding["input_ids"]), labels


def encode_lists(tokenizer: Any, utts: Sequence[Utterance], max_length: int) -> list[EncodedList]:
    """Phase 1 for every utterance with a reference; a hypothesis longer than ``max_length`` is cut (its
    features then cover its first tokens, as the training saw)."""
    out = []
    for utt in utts:
        if not utt.ref or not normalise(utt.ref):
            continue
        texts = [h.text for h in utt.hyps]
        errors, ref_words = word_errors(utt.ref, texts)
        ids, labels = [], []
        for text in texts:
            words = hypothesis_word_errors(utt.ref, text, mark_deletions=True) if text.strip() else []
            token_ids, token_tags = token_labels(tokenizer, text, words)
            token_ids, token_tags = token_ids[:max_length - 2], token_tags[:max_length - 2]
            ids.append([tokenizer.cls_token_id, *token_ids, tokenizer.sep_token_id])
            labels.append([-1, *token_tags, -1])
        out.append(EncodedList(ids, labels, np.array([h.asr_score for h in utt.hyps]),
                               np.array([len(t.split()) for t in texts], dtype=np.float64), errors, ref_words))
    return out


# ------------------------------------------------------------------------------------------------ the scorer

def pooled(logits: torch.Tensor, mask: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
    """listwise.pooled_features in torch: [hyps, tokens] logits and 0/1 mask -> [hyps, len(FEATURES)]."""
    mask = mask.float()
    n = mask.sum(-1)
    log_ok = F.logsigmoid(-logits)  # log(1 - sigmoid(z)), exact for large z
    p = torch.sigmoid(logits)
    total = (log_ok * mask).sum(-1)
    lowest = torch.where(mask > 0, log_ok, torch.zeros_like(log_ok)).min(-1).values
    count = ((p >= COUNT_THRESHOLD).float() * mask).sum(-1)  # a step function: no gradient, its weight learns
    return torch.stack([words, total, total / n.clamp(min=1), lowest, (p * mask).sum(-1), count.detach()], -1)


class ListScorer(torch.nn.Module):
    """The encoder, the feature weights (scaled space) and the softmax's sharpness, as one module."""

    def __init__(self, encoder: torch.nn.Module, asr_scale: float, feature_scale: np.ndarray) -> None:
        super().__init__()
        self.encoder = encoder
        self.register_buffer("asr_scale", torch.tensor(float(asr_scale)))
        self.register_buffer("feature_scale", torch.tensor(feature_scale, dtype=torch.float32))
        self.theta = torch.nn.Parameter(torch.zeros(len(FEATURES)))
        self.log_sharpness = torch.nn.Parameter(torch.zeros(()))

    def totals(self, asr: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """The reranker's total in the scaled space (asr / its spread + Σ θ · feature / its spread)."""
        return asr / self.asr_scale + (features / self.feature_scale) @ self.theta

    def raw_weights(self) -> dict[str, float]:
        """w_f of total = asr + Σ w_f feature_f (the scaled total times asr's spread)."""
        weights = (self.theta.detach() * self.asr_scale / self.feature_scale).tolist()
        return dict(zip(FEATURES, weights, strict=True))

    def features(self, ids: torch.Tensor, attention: torch.Tensor, mask: torch.Tensor,
                 words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = replaced_logits(self.encoder(input_ids=ids, attention_mask=attention).logits)
        return pooled(logits, mask, words), logits


def list_loss(totals: torch.Tensor, errors: torch.Tensor, ref_words: torch.Tensor, valid: torch.Tensor,
              sharpness: torch.Tensor, kind: str) -> torch.Tensor:
    """Mean over lists [lists, hyps] (``valid`` marks real hypotheses): MWER = Σ P(h) (e_h − mean e) with
    P = softmax(sharpness · total) and e the word error rate; ``softmax`` = −log P of the lists' best hypotheses."""
    scores = torch.where(valid, sharpness * totals, torch.full_like(totals, -1e9))
    log_p = torch.log_softmax(scores, -1)
    rate = torch.where(valid, errors / ref_words[:, None], torch.zeros_like(errors))
    if kind == "mwer":
        mean = rate.sum(-1, keepdim=True) / valid.sum(-1, keepdim=True)
        return (log_p.exp() * torch.where(valid, rate - mean, torch.zeros_like(rate))).sum(-1).mean()
    best = valid & (errors == torch.where(valid, errors, torch.full_like(errors, 1e9)).min(-1, keepdim=True).values)
    return -torch.logsumexp(torch.where(best, log_p, torch.full_like(log_p, -1e9)), -1).mean()


def batch_tensors(lists: Sequence[EncodedList], pad_id: int) -> dict[str, torch.Tensor]:
    """A batch of lists as model inputs ([all hyps, tokens]) and list tensors ([lists, widest list])."""
    ids = [row for item in lists for row in item.ids]
    labels = [row for item in lists for row in item.labels]
    input_ids, attention = pad_ids(ids, pad_id)
    label_ids, _ = pad_ids(labels, -1)
    width = max(len(item.ids) for item in lists)

    def grid(values: Sequence[np.ndarray], fill: float) -> torch.Tensor:
        out = np.full((len(lists), width), fill)
        for row, v in enumerate(values):
            out[row, :len(v)] = v
        return torch.tensor(out, dtype=torch.float32)

    return {"ids": torch.from_numpy(input_ids), "attention": torch.from_numpy(attention),
            "labels": torch.from_numpy(label_ids), "words": torch.tensor(np.concatenate([i.words for i in lists]),
                                                                      dtype=torch.float32),
            "asr": grid([i.asr for i in lists], 0.0), "errors": grid([i.errors for i in lists], 0.0),
            "valid": grid([np.ones(len(i.ids)) for i in lists], 0.0) > 0,
            "ref_words": torch.tensor([float(i.ref_words) for i in lists])}


def to_lists(flat: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """[all hyps, F] -> [lists, widest, F] in valid's layout (zeros in the padding)."""
    out = flat.new_zeros((*valid.shape, flat.shape[-1]))
    out[valid] = flat
    return out


@torch.no_grad()
def frozen_features(scorer: ListScorer, lists: Sequence[EncodedList], pad_id: int, batch: int = 32
                    ) -> list[np.ndarray]:
    """[hyps, F] features of every list under the current encoder (eval mode)."""
    scorer.eval()
    out = []
    for start in range(0, len(lists), batch):
        chunk = lists[start:start + batch]
        t = batch_tensors(chunk, pad_id)
        features, _ = scorer.features(t["ids"], t["attention"], t["labels"] >= 0, t["words"])
        offset = 0
        for item in chunk:
            out.append(features[offset:offset + len(item.ids)].numpy().astype(np.float64))
            offset += len(item.ids)
    return out


def spreads(lists: Sequence[EncodedList], features: Sequence[np.ndarray]) -> tuple[float, np.ndarray]:
    """The within-list standard deviation of the recogniser's score and of each feature (1 where constant)."""
    asr = np.concatenate([item.asr - item.asr.mean() for item in lists])
    centred = np.concatenate([f - f.mean(0) for f in features])
    deviation = centred.std(0)
    return float(asr.std() or 1.0), np.where(deviation > 1e-9, deviation, 1.0)


def list_wer(lists: Sequence[EncodedList], features: Sequence[np.ndarray], weights: dict[str, float]) -> float:
    """Corpus WER of the hypotheses ``total = asr + Σ w f`` chooses."""
    vector = np.array([weights[name] for name in FEATURES])
    wrong = sum(item.errors[int(np.argmax(item.asr + f @ vector))] for item, f in zip(lists, features, strict=True))
    return float(wrong / sum(item.ref_words for item in lists))


def fit_weights(scorer: ListScorer, lists: Sequence[EncodedList], features: Sequence[np.ndarray], loss: str,
                iterations: int = 400, lr: float = 0.05) -> None:
    """Phase 2: θ and the sharpness by full-batch Adam on frozen features (the encoder is not touched)."""
    width = max(len(item.ids) for item in lists)
    grid = np.zeros((len(lists), width, len(FEATURES)))
    for row, f in enumerate(features):
        grid[row, :len(f)] = f
    valid = torch.zeros(len(lists), width, dtype=torch.bool)
    asr, errors = torch.zeros(len(lists), width), torch.zeros(len(lists), width)
    for row, item in enumerate(lists):
        valid[row, :len(item.ids)] = True
        asr[row, :len(item.ids)] = torch.tensor(item.asr - item.asr.max())
        errors[row, :len(item.ids)] = torch.tensor(item.errors)
    ref_words = torch.tensor([float(item.ref_words) for item in lists])
    grid_t = torch.tensor(grid, dtype=torch.float32)
    optimizer = torch.optim.Adam([scorer.theta, scorer.log_sharpness], lr=lr)
    for _ in range(iterations):
        value = list_loss(scorer.totals(asr, grid_t), errors, ref_words, valid, scorer.log_sharpness.exp(), loss)
        optimizer.zero_grad()
        value.backward()
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)  # no gradient of this fit may leak into phase 3's first update


# ------------------------------------------------------------------------------------------------ the run

def train_reranker(model_path: str | Path, out_dir: str | Path, train: Sequence[Utterance],
                   dev: Sequence[Utterance] | None = None, config: RerankTrainConfig | None = None,
                   show_progress: bool = True, refit: Sequence[Utterance] | None = None) -> dict[str, Any]:
    """Train on ``train``'s lists (references needed), write the reranker directory, return its summary.

    ``refit``: in-domain lists (your dev set) on whose frozen features the weights are fitted again after
    training; ``dev`` is only reported (in-sample when it is the same lists)."""
    from transformers import AutoTokenizer

    config = config or RerankTrainConfig()
    if config.loss not in LOSSES:
        raise ValueError(f"unknown list loss {config.loss!r} (use {', '.join(LOSSES)})")
    source = resolve_model_dir(model_path)
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    encoder = load_discriminator(source)
    pad = tokenizer.pad_token_id

    # Phase 1: the lists (a curve point takes the first N of a seeded shuffle)
    train = list(train)
    rng.shuffle(train)
    if config.max_lists:
        train = train[:config.max_lists]
    lists = [item for item in encode_lists(tokenizer, train, config.max_length) if len(item.ids) > 1]
    if not lists:
        raise ValueError("no training list with a reference and two or more hypotheses")
    dev_lists = encode_lists(tokenizer, dev, config.max_length) if dev else []

    # Phase 2: the weights on the start model's frozen features
    scorer = ListScorer(encoder, 1.0, np.ones(len(FEATURES)))  # the scales are the features' spreads, next
    start_features = frozen_features(scorer, lists, pad)
    asr_scale, feature_scale = spreads(lists, start_features)
    scorer.asr_scale.fill_(asr_scale)
    scorer.feature_scale.copy_(torch.tensor(feature_scale, dtype=torch.float32))
    fit_weights(scorer, lists, start_features, config.loss)
    linear_weights = scorer.raw_weights()
    summary: dict[str, Any] = {"start_model": str(source), "train_lists": len(lists),
                               "train_hypotheses": sum(len(i.ids) for i in lists), "config": asdict(config),
                               "linear_weights": linear_weights,
                               "train_wer_1best": list_wer(lists, start_features, dict.fromkeys(FEATURES, 0.0)),
                               "train_wer_linear": list_wer(lists, start_features, linear_weights)}
    if dev_lists:
        dev_start = frozen_features(scorer, dev_lists, pad)
        summary["dev_wer_1best"] = list_wer(dev_lists, dev_start, dict.fromkeys(FEATURES, 0.0))
        summary["dev_wer_linear"] = list_wer(dev_lists, dev_start, linear_weights)

    # Phase 3: encoder and weights together
    step, losses = 0, []
    partial = Path(str(out_dir) + ".partial") / "checkpoint.pt"  # resumable state of an unfinished phase 3
    if not config.linear_only:
        steps_per_epoch = math.ceil(len(lists) / config.lists_per_batch)
        total = steps_per_epoch * config.epochs
        groups = [{"params": [p for n, p in scorer.named_parameters() if n.startswith("encoder.")], "lr": config.lr,
                   "weight_decay": 0.01},
                  {"params": [scorer.theta], "lr": config.weight_lr, "weight_decay": 0.0}]
        scorer.log_sharpness.requires_grad_(False)  # phase 2's; learned on, MWER sharpens to an argmax with no gradient
        optimizer = torch.optim.AdamW(groups, betas=(0.9, 0.999), eps=1e-6)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_linear_decay(max(1, total // 10), total))

        def epoch_batches() -> Iterator[list[EncodedList]]:  # a fresh seeded order each epoch
            order = list(range(len(lists)))
            rng.shuffle(order)
            for first in range(0, len(order), config.lists_per_batch):
                yield [lists[i] for i in order[first:first + config.lists_per_batch]]

        def loss_of(batch: list[EncodedList]) -> torch.Tensor:
            t = batch_tensors(batch, pad)
            real = t["labels"] >= 0
            flat, logits = scorer.features(t["ids"], t["attention"], real, t["words"])
            top = torch.where(t["valid"], t["asr"], torch.full_like(t["asr"], -1e9)).max(-1).values
            asr = t["asr"] - top[:, None]  # softmax-invariant; keeps the totals small
            totals = scorer.totals(asr, to_lists(flat, t["valid"]))
            loss = list_loss(totals, t["errors"], t["ref_words"], t["valid"], scorer.log_sharpness.exp(), config.loss)
            if config.token_weight:
                loss = loss + config.token_weight * F.binary_cross_entropy_with_logits(
                    logits[real], t["labels"][real].float())
            return loss

        result = train_loop(scorer, optimizer, schedule, epoch_batches, loss_of, total, checkpoint=partial,
                            checkpoint_every=config.checkpoint_every, desc="rerank train",
                            show_progress=show_progress)
        step, losses = result.step, result.losses
    # Phase 3b: the weights re-fitted on in-domain lists (training lists may differ from the test's voices and noise)
    if refit:
        refit_lists = [item for item in encode_lists(tokenizer, refit, config.max_length) if len(item.ids) > 1]
        if not refit_lists:
            raise ValueError("no refit list with a reference and two or more hypotheses")
        summary.update(weights_trained=scorer.raw_weights(), refit_lists=len(refit_lists))
        scorer.log_sharpness.requires_grad_(True)
        fit_weights(scorer, refit_lists, frozen_features(scorer, refit_lists, pad), config.loss)
    weights = scorer.raw_weights()
    summary.update(steps=step, weights=weights, sharpness=float(scorer.log_sharpness.detach().exp()),
                   first_loss=losses[0] if losses else None,
                   last_loss=float(np.mean(losses[-20:])) if losses else None)
    if dev_lists:
        summary["dev_wer"] = list_wer(dev_lists, frozen_features(scorer, dev_lists, pad), weights)

    # Phase 4: the reranker directory
    summary["minutes"] = round((time.monotonic() - started) / 60, 3)
    encoder = scorer.encoder.eval()

    def fill(tmp: Path) -> None:
        encoder.save_pretrained(str(tmp / "discriminator"), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp / "discriminator"))
        Reranker(weights, {k: v for k, v in summary.items() if k != "weights"}).save(tmp / "discriminator")
        atomic_write_json(tmp / "rerank_train.json", summary)

    atomic_write_dir(Path(out_dir), fill)
    drop_checkpoint(partial)  # finished: the resumable state is no longer needed
    return summary
