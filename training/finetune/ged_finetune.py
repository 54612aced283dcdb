"""Fine-tune a discriminator as a grammatical error detector.

The model keeps its discriminator class (``load_discriminator``): its replaced-token head already
answers "is this token wrong here?", so it *is* the initial error head, and the fine-tuned directory is still a
discriminator that ``Detector`` loads unchanged (p_replaced becomes p(error)). Every subword of
a labelled whitespace token takes that token's label (``label_subwords="all"``), or only its first, the rest
ignored (``"first"``); the loss is BCE over the labelled subwords. An encoder ELECTRA cannot take (MPNet) trains as
its own stock token classifier with one ``error`` label.

Training data may mix formats (``--data fce.tsv:tsv wi.m2:m2``): a binary format (MultiGED's TSV) carries no
types, so its tokens train the binary loss only, and the type losses learn from the tokens whose data names them.

With ``types`` the model is the encoder's stock token classifier (``ElectraForTokenClassification``, ...) with
named channels: ``error`` (the binary logit the Detector reads), ``op:M|R|U`` (ERRANT's operation) and
``type:<main>`` (ERRANT's main types seen often enough in the training data). One encoder pass serves both heads;
the type channels are trained with cross-entropy on the error tokens only.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from electra_detect.batching import pad_ids
from electra_detect.detector import Detector
from electra_detect.edit_tags import KEEP, TAG_PREFIX
from electra_detect.engines import typed_channels, usable_positions
from electra_detect.engines.torch_engine import load_discriminator, replaced_logits
from electra_detect.fileio import atomic_write_dir, atomic_write_json
from electra_detect.model_dir import resolve_model_dir
from electra_detect.tasks.ged.alignment import score_tokens
from electra_detect.tasks.ged.error_types import split_type
from electra_detect.tasks.ged.metrics import flatten, token_metrics, tune_threshold
from electra_detect.tasks.ged.readers import GedSentence
from electra_detect.training.finetune.loop import drop_checkpoint, train_loop
from electra_detect.training.finetune.trained_part import (
    parameter_prefix,
    parse_part,
    prepare_part,
    save_trained_part,
    scoring_dir,
)
from electra_detect.training.optim import build_optimizer, warmup_linear_decay
from electra_detect.training.pretraining.data import corpus_sentences
from electra_detect.training.synthetic.synthetic_errors import ErrorConfig, ErrorMaker


@dataclass
class FinetuneConfig:
    epochs: int = 2
    batch_size: int = 16
    lr: float = 5e-5
    warmup_fraction: float = 0.1
    max_length: int = 128
    seed: int = 0
    max_steps: int = 0  # 0 = epochs decide
    types: bool = False  # add ERRANT operation and main-type channels (a token classifier)
    channels: tuple[str, ...] = ()  # the typed channels to use (default: the start model's, else the data's)
    type_weight: float = 0.1  # of the type losses beside detection: at 1 they cost 0.065 FCE dev F0.5, at 0.1 nothing
    checkpoint_every: int = 0  # steps between resumable checkpoints in OUT.partial/ (0: none); a re-run resumes
    label_subwords: str = "all"  # "all": every subword takes its word's label; "first": the first, the rest ignored
    bf16: bool | None = None  # autocast the forward to bf16, fp32 weights; None: on CUDA only (docs/teacher.md)
    tags: tuple[str, ...] = ()  # an edit-tag vocabulary (tag_vocabulary.build_vocabulary): a ``tag:`` channel each
    tag_weight: float = 1.0  # of the tag loss beside detection
    head_lr_scale: float = 1.0  # the fresh classifier's learning rate over ``lr`` (a tag head starts from nothing)
    max_minutes: float = 0.0  # stop after this long (0: none); what was trained is saved
    log: str = ""  # a JSON-lines file of the loss every 50 steps ("" : none)
    part: str = ""  # train and save only a part (trained_part.py: lora[:RANK], top:N) of the base encoder


LABEL_SUBWORDS = ("all", "first")
DATA_FORMATS = ("m2", "tsv", "bea", "tagged")  # what a --data PATH:FORMAT suffix may name (parallel needs --refs)


OPERATIONS = ("M", "R", "U")
SOFT_STEPS = 101  # a tag model's detection target is packed in hundredths: 0/1 labels, or a teacher's p
MIN_TYPE_TOKENS = 20  # a rarer main type trains as OTHER: too few tokens to learn a class of its own


def type_channels(sentences: Sequence[GedSentence]) -> list[str]:
    """The typed model's channel names: ``error``, ``op:M``, ``op:R``, ``op:U``, then ``type:<main>`` for each
    main type with at least MIN_TYPE_TOKENS training tokens, and ``type:OTHER`` last."""
    counts = Counter(split_type(types[0])[1] for s in sentences for types in s.types if types)
    mains = sorted(m for m, n in counts.items() if n >= MIN_TYPE_TOKENS and m != "OTHER")
    return ["error", *(f"op:{op}" for op in OPERATIONS), *(f"type:{m}" for m in mains), "type:OTHER"]


def model_channels(model_dir: Path) -> list[str]:
    """The named channels of a typed GED model directory (a second typed stage keeps its head), else []."""
    rest = typed_channels(json.loads((Path(model_dir) / "config.json").read_text()))
    return ["error", *rest] if rest else []


def tag_targets(sentence: GedSentence, channels: Sequence[str]) -> list[int]:
    """Per token: its tag's index among the ``tag:`` channels where the tag loss reads it (an error token, or a
    token with an edit: a ``$KEEP`` on a clean token is left out, and so is an unknown or out-of-vocabulary tag),
    else -100."""
    index = {name[len(TAG_PREFIX):]: i for i, name in enumerate(c for c in channels if c.startswith(TAG_PREFIX))}
    out = []
    for position, tag in enumerate(sentence.tags or [None] * len(sentence.tokens)):
        wanted = tag is not None and (sentence.labels[position] >= 0.5 or tag != KEEP)  # labels may be a teacher's p
        out.append(index.get(tag, -100) if wanted else -100)
    return out


def type_targets(sentence: GedSentence, channels: Sequence[str]) -> list[tuple[int, int]]:
    """Per token: (operation index, main-type index) of its first edit, (-100, -100) where it has none."""
    if channels and channels[-1].startswith(TAG_PREFIX):  # a tag model: the tag index in the first place
        return [(tag, 0) if tag >= 0 else (-100, -100) for tag in tag_targets(sentence, channels)]
    mains = {name[5:]: i for i, name in enumerate(c for c in channels if c.startswith("type:"))}
    out = []
    for types in sentence.types or [[] for _ in sentence.tokens]:
        if not types:
            out.append((-100, -100))
            continue
        op, main = split_type(types[0])
        out.append((OPERATIONS.index(op), mains.get(main, mains["OTHER"])))
    return out


def synthetic_examples(corpus: Sequence[str], count: int, seed: int = 0, config: ErrorConfig | None = None,
                       neighbours_from: str | Path | None = None) -> list[GedSentence]:
    """``count`` corpus sentences, ``config.error_rate`` of them with errors (training/synthetic/synthetic_errors.py);
    the acoustic mix works on recogniser-form text (``rerank.normalise``: lower case, no punctuation); the realistic
    mix (training/synthetic/realistic_errors.py) draws its sentences at random from the whole corpus, its word-choice
    errors from the input embeddings of the model in ``neighbours_from``."""
    if config is not None and config.mix == "realistic":
        from electra_detect.training.synthetic.realistic_corpus import realistic_examples

        return realistic_examples(list(corpus), count, seed, str(neighbours_from) if neighbours_from else None,
                                  config.judge_threshold)
    clean = corpus_sentences(corpus, count)
    if config is not None and config.mix == "acoustic":
        from electra_detect.tasks.rerank.wer import normalise

        clean = [words for words in (normalise(" ".join(tokens)).split() for tokens in clean) if words]
    maker = ErrorMaker.for_corpus(clean, config, seed)
    return [maker.corrupt(tokens) for tokens in clean]


def encode(tokenizer: Any, sentences: Sequence[GedSentence], max_length: int,
           channels: Sequence[str] = (), label_subwords: str = "all") -> list[tuple[list[int], list[int]]]:
    """Subword ids with [CLS]/[SEP] and per-subword labels (-1 on specials, and with ``label_subwords="first"`` on
    every subword after a word's first). With type ``channels`` each label is packed as
    ``label + 2 * (1 + op + 3 * (1 + main))``: one int per subword, so the batching stays the binary one;
    :func:`unpack_labels` reverses it. A sentence without types (binary data) packs its binary labels alone.
    With ``tag:`` channels a word's label is its target in hundredths (a teacher's p, or 0/1), packed on its first
    subword as ``hundredths + SOFT_STEPS * (1 + tag)`` (:func:`unpack_tags`)."""
    if label_subwords not in LABEL_SUBWORDS:
        raise ValueError(f"label_subwords must be one of {', '.join(LABEL_SUBWORDS)}, not {label_subwords!r}")
    encoded = tokenizer([s.tokens for s in sentences], is_split_into_words=True, truncation=True,
                        max_length=max_length)
    out = []
    for index, sentence in enumerate(sentences):
        word_ids = encoded.word_ids(index)
        tagged = bool(channels) and channels[-1].startswith(TAG_PREFIX)
        targets = type_targets(sentence, channels) if channels else None
        labels = []
        for position, w in enumerate(word_ids):
            later = bool(position) and word_ids[position - 1] == w  # not the word's first subword
            if w is None or (label_subwords == "first" and later):
                labels.append(-1)
            elif tagged:  # the tag on the word's first subword (where it is decoded), on errors and edits
                tag = targets[w][0]
                target = round(float(sentence.labels[w]) * (SOFT_STEPS - 1))
                labels.append(target + (SOFT_STEPS * (1 + tag) if tag >= 0 and not later else 0))
            elif targets is None or targets[w][0] < 0 or not sentence.labels[w]:  # types only on errors
                labels.append(sentence.labels[w])
            else:
                op, main = targets[w]
                labels.append(sentence.labels[w] + 2 * (1 + op + 3 * (1 + main)))
        out.append((encoded["input_ids"][index], labels))
    return out


def unpack_labels(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(binary label (-1 on specials), operation (-100: none), main type (-100: none)) from :func:`encode`'s ints."""
    real = packed >= 0
    label = torch.where(real, packed % 2, -1)
    rest = torch.where(real, packed // 2, 0)  # 0: no type; else 1 + op + 3 * (1 + main)
    typed = real & (rest > 0)
    op = torch.where(typed, (rest - 1) % 3, -100)
    main = torch.where(typed, (rest - 1) // 3 - 1, -100)
    return label, op, main


def unpack_tags(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(detection target in [0, 1] (-1 on specials), tag index (-100: none)) from :func:`encode`'s ints for a tag
    model."""
    real = packed >= 0
    label = torch.where(real, (packed % SOFT_STEPS).float() / (SOFT_STEPS - 1), -1.0)
    tag = torch.where(real, packed // SOFT_STEPS - 1, -100)
    return label, torch.where(tag >= 0, tag, -100)


def keep_error_channel(model: Any, source: Path) -> bool:
    """Copy the start model's ``error`` channel (its detection row) into a fresh typed head, so a new tag head does
    not make detection start over; False when the start has no such channel (an ELECTRA discriminator)."""
    from safetensors.torch import load_file

    config = json.loads((source / "config.json").read_text())
    if (config.get("id2label") or {}).get("0") != "error" or not (source / "model.safetensors").exists():
        return False
    weights = load_file(str(source / "model.safetensors"))
    if "classifier.weight" not in weights:
        return False
    with torch.no_grad():
        model.classifier.weight[0] = weights["classifier.weight"][0].float()
        model.classifier.bias[0] = weights["classifier.bias"][0].float()
    return True


def typed_model(source: Path, channels: Sequence[str]) -> Any:
    """The source encoder under its stock token-classification class with the named channels (a fresh head)."""
    from transformers import AutoModelForTokenClassification

    return AutoModelForTokenClassification.from_pretrained(
        str(source), num_labels=len(channels), id2label=dict(enumerate(channels)),
        label2id={c: i for i, c in enumerate(channels)}, ignore_mismatched_sizes=True, use_safetensors=True)


# Batches are formed inside shuffled pools of this many batches, sorted by length (HF's group_by_length): padding
# falls from ~half of every batch to a few tokens, while the batch order stays random.
LENGTH_POOL = 50


def length_batches(examples: Sequence[tuple[list[int], list[int]]], batch_size: int, pad_id: int,
                   rng: random.Random) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(ids, attention, per-token rows padded with -1) batches, formed inside shuffled pools sorted by length."""
    order = list(range(len(examples)))
    rng.shuffle(order)
    pool = batch_size * LENGTH_POOL
    groups = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start:start + pool], key=lambda i: len(examples[i][0]))
        groups += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(groups)
    for group in groups:
        chunk = [examples[i] for i in group]
        ids, attention = pad_ids([token_ids for token_ids, _ in chunk], pad_id)
        labels, _ = pad_ids([token_labels for _, token_labels in chunk], -1)  # -1: not a real token
        yield torch.from_numpy(ids), torch.from_numpy(attention), torch.from_numpy(labels)


def finetune(model_path: str | Path, out_dir: str | Path, train: list[GedSentence],
             dev: list[GedSentence] | None = None, config: FinetuneConfig | None = None,
             show_progress: bool = True, base_model: str | None = None) -> dict[str, Any]:
    """Train, tune the threshold on ``dev`` (max F0.5), and write an HF directory + ``ged.json`` (its
    ``base_model``: ``base_model`` when given, e.g. the encoder's name behind a temporary start, else the path)."""
    from transformers import AutoTokenizer

    config = config or FinetuneConfig()
    if not train:
        raise ValueError("no training sentences")
    source = resolve_model_dir(model_path)
    torch.manual_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    if config.tags:
        channels = ["error", *(TAG_PREFIX + tag for tag in config.tags)]
    else:
        channels = list(config.channels) or (model_channels(source) or type_channels(train) if config.types else [])
    model = typed_model(source, channels) if channels else load_discriminator(source)
    model.float()  # fp32 weights whatever the start holds: an fp16 checkpoint trained in fp16 went to NaN (DEVICE.md)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # a GPU makes this minutes -> seconds
    model.to(device)
    bf16 = device.type == "cuda" if config.bf16 is None else config.bf16  # CPU bf16: as good, 5x slower here
    limit = min(config.max_length, usable_positions(model.config.to_dict()))
    if not (channels and channels[-1].startswith(TAG_PREFIX)) and any(0 < y < 1 for s in train for y in s.labels):
        from electra_detect.errors import GedDataError

        raise GedDataError("soft detection targets (a teacher's p) train a tag model only: add --tags")
    examples = encode(tokenizer, train, limit, channels, config.label_subwords)
    steps_per_epoch = -(-len(examples) // config.batch_size)
    total = config.max_steps or steps_per_epoch * config.epochs
    tagged = bool(channels) and channels[-1].startswith(TAG_PREFIX)
    if tagged:
        keep_error_channel(model, source)
    part = parse_part(config.part) if config.part else None
    model = prepare_part(model, part) if part else model
    optimizer = build_optimizer(model, config.lr, 0.01, head=parameter_prefix(model) + "classifier.",
                                head_lr_scale=config.head_lr_scale)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_linear_decay(max(1, round(total * config.warmup_fraction)), total))
    rng = random.Random(config.seed)

    def loss_of(batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        ids, attention, labels = (t.to(device) for t in batch)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            output = model(input_ids=ids, attention_mask=attention).logits
        output = output.float()  # the losses in fp32 whatever the forward ran in
        logits = replaced_logits(output)
        if tagged:
            labels, tags = unpack_tags(labels)
            real = labels >= 0
            loss = F.binary_cross_entropy_with_logits(logits[real], labels[real])  # soft where a teacher's p
            if (tags >= 0).any():  # the tag channels learn on error and edited tokens
                loss = loss + config.tag_weight * F.cross_entropy(output[..., 1:][tags >= 0], tags[tags >= 0])
            return loss
        labels, ops, mains = unpack_labels(labels)
        real = labels >= 0
        loss = F.binary_cross_entropy_with_logits(logits[real], labels[real].float())
        if channels and (ops >= 0).any():  # the type channels learn on error tokens only
            loss = loss + config.type_weight * (F.cross_entropy(output[..., 1:4][ops >= 0], ops[ops >= 0])
                                                + F.cross_entropy(output[..., 4:][mains >= 0], mains[mains >= 0]))
        return loss

    partial = Path(str(out_dir) + ".partial") / "checkpoint.pt"  # resumable state of an unfinished run
    result = train_loop(model, optimizer, scheduler,
                        lambda: length_batches(examples, config.batch_size, tokenizer.pad_token_id, rng),
                        loss_of, total, checkpoint=partial, checkpoint_every=config.checkpoint_every,
                        max_minutes=config.max_minutes, desc="ged train", show_progress=show_progress,
                        log=Path(config.log) if config.log else None)
    step, losses = result.step, result.losses
    model.eval().cpu()

    def fill(tmp: Path) -> None:
        if part:  # only what training changed: the base's weights and tokenizer join it at assembly
            save_trained_part(model, tmp, base_model or str(source), part)
            return
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))

    atomic_write_dir(Path(out_dir), fill)
    drop_checkpoint(partial)  # finished: the resumable state is no longer needed
    summary: dict[str, Any] = {"base_model": base_model or str(source), "train_sentences": len(train), "steps": step,
                               "minutes": result.minutes, "stopped": result.stopped,
                               "first_loss": losses[0], "last_loss": float(np.mean(losses[-20:])),
                               "label_subwords": config.label_subwords, "bf16": bf16,
                               "threshold": 0.5, "space": "raw"}  # tuned on this model's raw probabilities
    if channels and not tagged:
        summary["types"] = channels
    if dev:
        with scoring_dir(out_dir, model, tokenizer) as scored:  # a trained part scores as its full model
            labels, scores = flatten(dev, score_tokens(Detector.load(scored), dev))
        summary["threshold"] = tune_threshold(labels, scores)
        summary["dev"] = token_metrics(labels, scores, summary["threshold"])
    atomic_write_json(Path(out_dir) / "ged.json", summary)
    return summary


def data_format(spec: str | Path, default: str) -> tuple[Path, str]:
    """``PATH[:FORMAT]`` -> (path, format): a trailing ``:m2``, ``:tsv`` or ``:bea`` names the file's format, else
    ``default`` (``--format``); a path that itself ends so can be given as ``PATH:FORMAT``."""
    text = str(spec)
    path, _, suffix = text.rpartition(":")
    return (Path(path), suffix) if path and suffix in DATA_FORMATS else (Path(text), default)


def ged_training_data(files: Sequence[str | Path], fmt: str, refs: Sequence[str | Path] = (), combine: str = "first",
                      dev_file: str | Path | None = None, dev_split: float = 0.0,
                      seed: int = 0) -> tuple[list[GedSentence], list[GedSentence]]:
    """(train, dev) labelled sentences for ``ged train``: every file in its own format (``PATH:FORMAT``, see
    :func:`data_format`) or ``fmt`` (e.g. MultiGED's FCE TSV and W&I A/B/C M2, in order), dev from ``dev_file``
    (the same rule) or a fixed-seed ``dev_split`` share held out of them."""
    from electra_detect.errors import GedDataError
    from electra_detect.tasks.ged.readers import split_sentences

    sources = [data_format(spec, fmt) for spec in files]
    parallel = [path for path, kind in sources if kind == "parallel"]
    if parallel and len(files) > 1:  # --refs are the corrections of one source file
        raise GedDataError("--format parallel takes one --data file (its --refs are that file's corrections)")
    dev_source = data_format(dev_file, fmt) if dev_file else None
    if dev_source and dev_source[1] == "parallel":
        raise GedDataError("--dev does not take parallel data (its --refs are the training file's): use --dev-split")
    train = [sentence for path, kind in sources for sentence in read_any(path, kind, refs, combine)]
    dev: list[GedSentence] = []
    if train and dev_split:
        dev, train = split_sentences(train, dev_split, seed)
    if dev_source:
        dev = read_any(dev_source[0], dev_source[1], refs, combine)
    return train, dev


def read_any(path: Path, fmt: str, refs: Sequence[str | Path] = (), combine: str = "first") -> list[GedSentence]:
    """A labelled file in any format ``ged train`` reads: the readers' (m2, tsv, bea, parallel) or ``tagged`` (the
    edit-tag JSON lines of ``edit_tag_data``: detection labels, edits and each token's tag)."""
    from electra_detect.tasks.ged.readers import read_labelled

    if fmt == "tagged":
        from electra_detect.training.finetune.edit_tag_data import read_tagged

        return [sentence.ged() for sentence in read_tagged(path)]
    return read_labelled(path, fmt=fmt, refs=refs, combine=combine)


def model_dir_of(start: str | Path) -> Path:
    """The folder holding a start model's weights and vocab: a run dir's discriminator/, else the folder itself."""
    path = Path(start)
    return path / "discriminator" if (path / "discriminator").is_dir() else path


@contextmanager
def start_model(model: str) -> Iterator[str]:
    """A GED fine-tune's start: a discriminator (a run dir, an ELECTRA, a token classifier such as an earlier GED
    model) as it is, or an encoder (training/pretraining/encoders.py: a BERT as an ELECTRA discriminator, MPNet as its
    token classifier) written as one to a temporary folder first."""
    from electra_detect.training.pretraining import encoders

    path = Path(model)
    if (path / "discriminator").is_dir() or _is_discriminator(path):
        yield model
        return
    discriminator, tokenizer = encoders.ged_start_from_encoder(model)
    with tempfile.TemporaryDirectory(prefix="electra-detect-encoder-") as tmp:
        discriminator.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        yield tmp


def _is_discriminator(path: Path) -> bool:
    """An ELECTRA or a token classifier (what ``load_discriminator`` maps); a bare encoder (``MPNetForMaskedLM``,
    ``BertModel``) is not."""
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return config.get("model_type") == "electra" or any(
        str(name).endswith("ForTokenClassification") for name in config.get("architectures") or ())
