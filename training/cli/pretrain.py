"""``electra-detect pretrain``: pre-train an ELECTRA generator + discriminator (training/pretraining/trainer.py).

Its flags are the run config's fields (:func:`config_flags`) plus a few of its own; only argparse at the top:
torch and the trainer load inside the verb.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from electra_detect.cli import DEFAULT_MODEL, verb
from electra_detect.training.cli.options import add_no_progress_arg

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
    add_no_progress_arg(p, "no progress bar")
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


