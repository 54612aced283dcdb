"""``electra-detect <verb>``: one thin front for pre-training and scoring.

Verbs import their packages lazily so ``electra-detect score`` never loads the trainer.
Known failures print one ``error:`` line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEFAULT_MODEL = os.environ.get("ELECTRA_DETECT_MODEL", "runs/quickstart")

# (flag, config section, field, type, help). None defaults: only flags the user gave override.
PRETRAIN_OPTIONS: list[tuple[str, str, str, Any, str]] = [
    ("--preset", "model", "preset", str, "model preset: micro, tiny, small, base"),
    ("--vocab-size", "model", "vocab_size", int, "WordPiece vocabulary size (default 16000)"),
    ("--architecture", "model", "architecture", str,
     "encoder family: modernbert (pre-LN, rotary; default) or electra (the paper's post-LN encoder)"),
    ("--gen-fraction", "model", "gen_fraction", float, "generator width / discriminator width (default 1.0)"),
    ("--gen-layers", "model", "gen_layers", int, "generator depth (default 0: half the discriminator's)"),
    ("--gen-heads", "model", "gen_heads", int, "generator attention heads (default 0: scaled, at least 2)"),
    ("--embedding-sharing", "model", "embedding_sharing", str,
     "tied (one table for both halves; default), gdes (DeBERTa-V3 gradient-disentangled) or none"),
    ("--dropout", "model", "dropout", float, "dropout probability (default 0)"),
    ("--local-window", "model", "local_window", int,
     "modernbert: width of the local-attention layers' window (default 32; 0 = all layers global)"),
    ("--global-every", "model", "global_every", int, "modernbert: every n-th layer is global (default 2)"),
    ("--seq-len", "data", "seq_len", int, "block length in tokens (default: the preset's, 128; micro 64)"),
    ("--doc-split", "data", "doc_split", str, "'blank' (paragraphs) or 'line' (one document per line)"),
    ("--val-fraction", "data", "val_fraction", float, "share of blocks held out for validation"),
    ("--cache-dir", "data", "cache_dir", str, "tokenized-corpus cache (default $ELECTRA_DETECT_CACHE or ~/.cache)"),
    ("--max-steps", "train", "max_steps", int, "optimizer steps (default 2000)"),
    ("--max-minutes", "train", "max_minutes", float, "time budget for this invocation; 0 = none"),
    ("--batch-size", "train", "batch_size", int, "sequences per step per process"),
    ("--grad-accum", "train", "grad_accum", int, "micro-batches per optimizer step"),
    ("--lr", "train", "lr", float, "peak learning rate"),
    ("--weight-decay", "train", "weight_decay", float, "AdamW weight decay"),
    ("--warmup-steps", "train", "warmup_steps", int, "linear warm-up steps"),
    ("--clip-norm", "train", "clip_norm", float, "gradient clipping norm"),
    ("--clip-scope", "train", "clip_scope", str,
     "per_module (generator and discriminator clipped apart; default) or global (the paper's)"),
    ("--disc-weight", "train", "disc_weight", float, "lambda in L_MLM + lambda * L_Disc (default 50)"),
    ("--mask-prob", "train", "mask_prob", float, "share of positions masked (default 0.15)"),
    ("--keep-original-prob", "train", "keep_original_prob", float,
     "share of masked positions that keep their token (0.15 = reference 85/15 split)"),
    ("--temperature", "train", "temperature", float, "generator sampling temperature"),
    ("--seed", "train", "seed", int, "random seed"),
    ("--log-every", "train", "log_every", int, "steps between metrics.jsonl rows"),
    ("--eval-every", "train", "eval_every", int, "steps between validations"),
    ("--eval-batches", "train", "eval_batches", int, "validation batches per evaluation"),
    ("--save-every", "train", "save_every", int, "steps between checkpoints"),
    ("--keep-last", "train", "keep_last", int, "checkpoints kept"),
    ("--threads", "train", "threads", int, "torch CPU threads (0 = default)"),
    ("--objective", "train", "objective", str,
     "electra (default), bert_mlm, electra15, replace_mlm, all_tokens_mlm, adversarial"),
    ("--mlm-first-steps", "train", "mlm_first_steps", int,
     "two-stage training: plain MLM for this many steps, then ELECTRA (default 0)"),
]

# Verbs that live beside the feature they front: each module has ``add_parser(sub)`` and sets
# ``func`` (and optionally ``known_errors``, exception types reported as one ``error:`` line).
PLUGIN_VERBS = ("electra_detect.rerank_cli", "electra_detect.export_cli", "app.serve_cli", "app.demo_cli",
                "training.corpus_cli")


def _add_pretrain(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pretrain", help="pre-train an ELECTRA generator + discriminator",
                       description="Pre-train ELECTRA (replaced-token detection) on text files, folders or "
                                   "globs; with no --corpus, on the embedded State of the Union corpus.")
    p.add_argument("--out", default=DEFAULT_MODEL, help=f"run directory (default {DEFAULT_MODEL})")
    p.add_argument("--corpus", nargs="+", default=None, metavar="PATH", help="text files, folders or globs")
    p.add_argument("--config", help="TOML or JSON run config; flags override it")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace the run already in --out (start it again)")
    p.add_argument("--init-from", metavar="DIR",
                   help="continue pre-training from a run or shipped model directory: its model settings, "
                        "tokenizer and weights; a fresh optimizer with warm-up")
    p.add_argument("--paper-recipe", action="store_true",
                   help="the paper's model: post-LN ELECTRA, 1/4-width full-depth generator, tied embeddings, "
                        "dropout 0.1 (other flags still override)")
    p.add_argument("--tie-all", action="store_true", default=None,
                   help="share the whole encoder (needs --gen-fraction 1)")
    p.add_argument("--keep-85-15", action="store_true",
                   help="reference masking: 15%% of masked positions keep the original token")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    for flag, _section, _field, kind, help_text in PRETRAIN_OPTIONS:
        p.add_argument(flag, type=kind, default=None, help=help_text)
    p.set_defaults(func=cmd_pretrain)


def cmd_pretrain(args: argparse.Namespace) -> int:
    from electra_detect.training.config import PAPER_MODEL, ConfigError, RunConfig
    from electra_detect.training.trainer import Trainer, load_run_config, start_from

    out = Path(args.out)
    if args.resume and (out / "run_config.json").exists():
        config = load_run_config(out)
    elif args.config:
        config = RunConfig.from_file(args.config)
    else:
        config = RunConfig()
    if args.init_from and not args.resume:
        config = start_from(config, Path(args.init_from))
    if args.paper_recipe:
        config.override("model", **PAPER_MODEL)
    for flag, section, name, _kind, _help in PRETRAIN_OPTIONS:
        config.override(section, **{name: getattr(args, flag.lstrip("-").replace("-", "_"))})
    config.override("model", tie_all=args.tie_all)
    if args.keep_85_15:
        config.train.keep_original_prob = 0.15
    if args.corpus is not None:
        config.data.corpus = list(args.corpus)
    if args.overwrite and args.resume:
        raise ConfigError("--overwrite and --resume contradict each other")
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


def _add_score(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help="per-token replaced probabilities for text",
                       description="Score text with a discriminator and highlight suspicious words.")
    p.add_argument("text", nargs="*", help="text(s) to score")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"run dir or discriminator dir (default {DEFAULT_MODEL})")
    p.add_argument("--file", help="score each non-empty line of this file ('-' = stdin)")
    p.add_argument("--json", action="store_true", help="one JSON object per text")
    p.add_argument("--threshold", type=float, default=0.5, help="highlight words with score >= this")
    p.set_defaults(func=cmd_score)


class CliError(ValueError):
    """A flag value the verb cannot use (one ``error:`` line, exit 2)."""


def check_unit_interval(value: float | None, flag: str) -> None:
    """Thresholds are probabilities: a finite number in [0, 1] (nan and 5 are refused, as the server does)."""
    if value is not None and not (math.isfinite(value) and 0 <= value <= 1):
        raise CliError(f"{flag} must be a number in [0, 1], got {value:g}")


STREAM_TEXTS = 64  # texts scored per batch when reading --file: memory stays bounded whatever the file's size
STREAM_CHARS = 256_000  # ... and at most about this many characters per batch
MAX_LINE_CHARS = 1_000_000  # one line longer than this is an error, not a memory blow-up


def _open_texts(args: argparse.Namespace) -> Any:
    """Open --file now (so a missing file is reported before the model loads); None without --file."""
    if not args.file:
        return None
    try:
        return sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")
    except FileNotFoundError:
        raise SystemExit(_fail(f"input file not found: {args.file}")) from None
    except OSError as exc:
        raise SystemExit(_fail(f"cannot read {args.file}: {exc.strerror}")) from None


def _text_batches(args: argparse.Namespace, handle: Any) -> Iterator[list[str]]:
    """The text arguments, then --file's non-empty lines, in batches of up to STREAM_TEXTS texts and about
    STREAM_CHARS characters (the first batch smaller, so that results show soon); read as they are needed,
    with a progress bar (bytes read) when stderr is a terminal. Fails with one ``error:`` line when there
    is no text at all."""
    from tqdm import tqdm

    batch = [t for t in args.text if t.strip()]
    sent, number, error = 0, 0, None
    chars, limit = sum(map(len, batch)), STREAM_TEXTS // 8
    size = None
    if handle is not None and handle is not sys.stdin:
        try:
            size = os.fstat(handle.fileno()).st_size
        except OSError:
            pass
    bar = tqdm(total=size, unit="B", unit_scale=True, desc=args.verb, file=sys.stderr, leave=False,
               disable=handle is None or not sys.stderr.isatty())
    try:
        if handle is not None:
            with handle:
                while line := handle.readline(MAX_LINE_CHARS + 2):
                    number += 1
                    bar.update(len(line.encode("utf-8")))
                    if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
                        error = f"{args.file}: line {number} is longer than {MAX_LINE_CHARS:,} characters; split it"
                        break
                    text = line.rstrip("\n")
                    if not text.strip():
                        continue
                    batch.append(text)
                    chars += len(text)
                    if len(batch) >= limit or chars >= STREAM_CHARS:
                        sent += len(batch)
                        yield batch
                        batch, chars, limit = [], 0, STREAM_TEXTS
    except UnicodeDecodeError:
        error = f"input file is not UTF-8 text: {args.file}"
    except OSError as exc:
        error = f"cannot read {args.file}: {exc.strerror}"
    finally:
        bar.close()  # before any error line: the bar never follows or overwrites it
    if error is None and not batch and not sent:
        error = "no text to score: give text arguments or --file"
    if error is not None:
        raise SystemExit(_fail(error))
    if batch:
        yield batch


def cmd_score(args: argparse.Namespace) -> int:
    from electra_detect.detector import Detector
    from electra_detect.highlight import render_highlight, render_table

    check_unit_interval(args.threshold, "--threshold")
    handle = _open_texts(args)
    batches = _text_batches(args, handle)
    first = next(batches)  # "no text" and an unreadable first line are reported before the model loads
    detector = Detector.load(args.model)
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    for batch in itertools.chain([first], batches):
        lines = []
        for scores in detector.score(batch):
            if args.json:
                lines.append(json.dumps(scores.to_dict()))
            else:
                lines += [render_highlight(scores, args.threshold, color=color), render_table(scores)]
        print("\n".join(lines), flush=True)  # written as it goes: a long file shows results at once
    return 0


def _add_ged(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ged", help="flag grammatical errors in text (JSON lines out); `ged eval` scores a data set",
                       description="Zero-shot grammatical error detection: words whose replaced probability "
                                   "is >= --threshold are flagged. `electra-detect ged eval --help` for evaluation.")
    p.add_argument("text", nargs="*", help="text(s) to check")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"run or model dir (its fine-tuned ged/ when it has one) or a discriminator dir "
                        f"(default {DEFAULT_MODEL})")
    p.add_argument("--file", help="check each non-empty line of this file ('-' = stdin)")
    p.add_argument("--threshold", type=float, help="flag words with score >= this (default: the model's "
                                                  "tuned ged.json threshold, else 0.5)")
    p.set_defaults(func=cmd_ged)

    e = sub.add_parser("ged-eval", help="evaluate GED on labelled data (also spelled `ged eval`)",
                       description="Token-level precision, recall, F0.5 and average precision on M2 or token-TSV "
                                   "data. The threshold is given, tuned on --tune-on, or tuned on a fixed-seed half "
                                   "of --data with --split (then reported on the other half).")
    e.add_argument("--model", default=DEFAULT_MODEL,
                   help="run or model dir (its fine-tuned ged/ when it has one) or a discriminator dir")
    e.add_argument("--zero-shot", action="store_true",
                   help="evaluate the pre-trained discriminator even when the model dir holds a fine-tuned ged/")
    e.add_argument("--data", required=True, help="labelled data file")
    e.add_argument("--format", choices=["m2", "tsv", "parallel"], required=True, dest="fmt",
                   help="parallel: --data is the source file, --refs its corrections (ERRANT aligns them)")
    e.add_argument("--refs", nargs="+", default=[], help="correction file(s) for --format parallel")
    e.add_argument("--combine", choices=["first", "any", "majority"], default="first",
                   help="how several --refs make one label per token")
    e.add_argument("--threshold", type=float, help="fixed threshold (default: tuned, else the model's ged.json, "
                                                  "else 0.5)")
    e.add_argument("--tune-on", help="tune the threshold for max F0.5 on this file (m2/tsv; same format)")
    e.add_argument("--split", action="store_true", help="tune on half of --data, report on the other half")
    e.add_argument("--seed", type=int, default=13, help="seed of the --split")
    e.add_argument("--annotator", type=int, default=0, help="M2 annotator id whose edits are the labels")
    e.add_argument("--per-pos-thresholds", action="store_true",
                   help="also tune one threshold per universal POS tag (spaCy) on the tuning data; used when it "
                        "beats the single threshold in 2-fold cross-validation on the tuning data")
    e.set_defaults(func=cmd_ged_eval)

    t = sub.add_parser("ged-train", help="fine-tune a discriminator for GED (also spelled `ged train`)",
                       description="Fine-tune the discriminator's replaced-token head as an error detector on "
                                   "labelled data and/or synthetic errors made from clean corpus text. The result "
                                   "is a discriminator dir (with ged.json: the F0.5-tuned threshold).")
    t.add_argument("--model", default=DEFAULT_MODEL, help="run dir or discriminator dir to start from")
    t.add_argument("--out", required=True,
                   help="output directory; MODEL/ged makes `ged`, `ged eval`, the server and the demo use it")
    t.add_argument("--data", help="labelled training data")
    t.add_argument("--format", choices=["m2", "tsv", "parallel"], default="m2", dest="fmt")
    t.add_argument("--refs", nargs="+", default=[], help="correction file(s) for --format parallel")
    t.add_argument("--combine", choices=["first", "any", "majority"], default="first")
    t.add_argument("--dev-split", type=float, default=0.0,
                   help="hold out this share of --data (fixed seed) to tune the threshold")
    t.add_argument("--synthetic", type=int, default=0, help="add N corpus sentences with synthetic errors")
    t.add_argument("--corpus", nargs="+", default=[], help="text for --synthetic (default: embedded SOTU corpus)")
    t.add_argument("--epochs", type=int, default=2)
    t.add_argument("--max-steps", type=int, default=0)
    t.add_argument("--batch-size", type=int, default=16)
    t.add_argument("--lr", type=float, default=5e-5)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--no-progress", action="store_true")
    t.set_defaults(func=cmd_ged_train)


def cmd_ged(args: argparse.Namespace) -> int:
    from electra_detect.detector import Detector
    from electra_detect.ged import default_threshold

    check_unit_interval(args.threshold, "--threshold")
    detector = Detector.load(args.model, task="ged")
    threshold = default_threshold(detector.model_dir) if args.threshold is None else args.threshold
    for batch in _text_batches(args, _open_texts(args)):
        lines = []
        for scores in detector.score(batch):
            flagged = [{"word": w.word, "start": w.start, "end": w.end, "score": round(w.score, 4)}
                       for w in scores.words if w.score >= threshold]
            lines.append(json.dumps({"text": scores.text, "threshold": threshold, "flagged": flagged}))
        print("\n".join(lines), flush=True)
    return 0


def _read_labelled(args: argparse.Namespace, path: str):
    from electra_detect import ged

    if args.fmt == "parallel":
        if not args.refs:
            raise ged.GedDataError("--format parallel needs --refs CORRECTION_FILE [...]")
        return ged.read_parallel(path, args.refs, args.combine)
    if args.fmt == "m2":
        return ged.read_m2(path, getattr(args, "annotator", 0))
    return ged.read_token_tsv(path)


def cmd_ged_train(args: argparse.Namespace) -> int:
    from electra_detect import ged
    from electra_detect.training.ged_finetune import FinetuneConfig, finetune, synthetic_examples

    train: list[ged.GedSentence] = []
    dev: list[ged.GedSentence] = []
    if args.data:
        train = _read_labelled(args, args.data)
        if args.dev_split:
            dev, train = ged.split_sentences(train, args.dev_split, args.seed)
    if args.synthetic:
        train += synthetic_examples(args.corpus, args.synthetic, args.seed)
    if not train:
        raise ged.GedDataError("nothing to train on: give --data and/or --synthetic N")
    config = FinetuneConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                            max_steps=args.max_steps)
    summary = finetune(args.model, args.out, train, dev or None, config, show_progress=not args.no_progress)
    print(json.dumps(summary))
    return 0


def cmd_ged_eval(args: argparse.Namespace) -> int:
    import time

    from electra_detect import ged
    from electra_detect.detector import Detector

    check_unit_interval(args.threshold, "--threshold")
    sentences = _read_labelled(args, args.data)
    if not sentences:
        raise ged.GedDataError(f"{args.data} holds no sentences")
    task = "score" if args.zero_shot else "ged"
    detector = Detector.load(args.model, task=task)
    tuning: list[ged.GedSentence] = []
    if args.split:
        tuning, sentences = ged.split_sentences(sentences, 0.5, args.seed)
    elif args.tune_on:
        if args.fmt == "parallel":  # --refs belong to --data; a second source would need its own
            raise ged.GedDataError("--tune-on is not available with --format parallel; use --split")
        tuning = _read_labelled(args, args.tune_on)
    if args.per_pos_thresholds and (not tuning or args.threshold is not None):
        raise ged.GedDataError("--per-pos-thresholds tunes its thresholds: give --split or --tune-on, "
                               "and no --threshold")
    threshold = args.threshold
    needs_tuning = tuning and (threshold is None or args.per_pos_thresholds)
    tune_scores = ged.score_tokens(detector, tuning) if needs_tuning else []
    if threshold is None and tuning:
        threshold = ged.tune_threshold(*ged.flatten(tuning, tune_scores))
    threshold = ged.default_threshold(detector.model_dir) if threshold is None else threshold
    started = time.perf_counter()
    scores = ged.score_tokens(detector, sentences)
    seconds = time.perf_counter() - started
    report = ged.token_metrics(*ged.flatten(sentences, scores), threshold)
    report.update(sentences=len(sentences), seconds=round(seconds, 3),
                  sentences_per_s=round(len(sentences) / max(seconds, 1e-9), 2),
                  threshold_source="given" if args.threshold is not None else ("tuned" if tuning else "model"),
                  per_type=ged.per_type_recall(sentences, scores, threshold), calibration=detector.calibration,
                  model_dir=str(detector.model_dir))
    if args.per_pos_thresholds:
        report = _with_pos_thresholds(report, detector, tuning, tune_scores, sentences, scores, args.seed)
    print(json.dumps(report))
    return 0


def _with_pos_thresholds(report: dict[str, Any], detector: Any, tuning: list, tune_scores: list, sentences: list,
                         scores: list, seed: int) -> dict[str, Any]:
    """Choose single vs per-POS thresholds on the tuning data; report both on the report data.

    The headline metrics are those of the adopted choice (``threshold_source`` says which)."""
    from electra_detect import ged

    nlp = ged.load_tagger()
    choice = ged.select_pos_thresholds(tuning, tune_scores, ged.tag_pos(tuning, nlp), seed=seed)
    labels, values = ged.flatten(sentences, scores)
    pos = [tag for tags in ged.tag_pos(sentences, nlp) for tag in tags]
    per_pos = ged.pos_threshold_metrics(labels, values, pos, choice["thresholds"], choice["global_threshold"])
    choice.update(report_single={k: report[k] for k in ("f05", "precision", "recall", "threshold")},
                  report_per_pos={k: per_pos[k] for k in ("f05", "precision", "recall")})
    if choice["adopted"]:
        report.update({k: per_pos[k] for k in ("precision", "recall", "f05", "flagged")},
                      threshold_source="tuned per POS")
        flags = values >= ged.thresholds_for(pos, choice["thresholds"], choice["global_threshold"])
        start = 0
        per_sentence = []
        for sentence in sentences:  # per-type recall under the per-POS flags: flags as 0/1 scores
            per_sentence.append(flags[start:start + len(sentence.tokens)].astype(float))
            start += len(sentence.tokens)
        report["per_type"] = ged.per_type_recall(sentences, per_sentence, 0.5)
    report["per_pos"] = choice
    return report


def _add_calibrate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="fit calibration of replaced probabilities; writes calibration.json",
                       description="Fit temperature / Platt / isotonic calibration on half of the data and report "
                                   "ECE, MCE, Brier, NLL and AUC on the other half, raw and calibrated. Source rtd: "
                                   "--text files corrupted by the run's own generator; source ged: labelled data.")
    p.add_argument("--model", default=DEFAULT_MODEL, help="run dir (rtd needs its generator/)")
    p.add_argument("--text", nargs="+", default=[], help="held-out text files for source rtd (one text per line)")
    p.add_argument("--data", help="GED data for source ged")
    p.add_argument("--format", choices=["m2", "tsv", "parallel"], default="m2", dest="fmt")
    p.add_argument("--refs", nargs="+", default=[])
    p.add_argument("--combine", choices=["first", "any", "majority"], default="majority")
    p.add_argument("--method", choices=["temperature", "platt", "isotonic"], default="temperature")
    p.add_argument("--plot", help="reliability diagram PNG path")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dry-run", action="store_true", help="report only; do not write calibration.json")
    p.set_defaults(func=cmd_calibrate)


def _read_text_files(paths: list[str]) -> list[str]:
    """Non-empty lines of UTF-8 text files, one text per line. calibrate and pos-bias fit and test on all of
    them together, so they hold the texts (not the files) in memory; score, ged and rerank stream instead."""
    texts: list[str] = []
    for path in paths:  # line by line: the file's text is never held twice (whole and split)
        try:
            with open(path, encoding="utf-8") as handle:
                while line := handle.readline(MAX_LINE_CHARS + 2):
                    if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
                        raise ValueError(f"text file {path} has a line longer than {MAX_LINE_CHARS:,} characters")
                    if line.strip():
                        texts.append(line.strip())
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read text file {path}: {exc}") from None
    return texts


def cmd_calibrate(args: argparse.Namespace) -> int:
    from electra_detect.calibration.fit import calibrate

    texts = _read_text_files(args.text)
    sentences = _read_labelled(args, args.data) if args.data else []
    if bool(texts) == bool(sentences):
        raise ValueError("give exactly one source: --text FILE... (rtd) or --data FILE (ged)")
    report = calibrate(args.model, texts=texts, sentences=sentences, method=args.method, seed=args.seed,
                       plot=Path(args.plot) if args.plot else None, save=not args.dry_run)
    print(json.dumps(report))
    return 0


def _add_pos_bias(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pos-bias", help="replaced probability, false-positive rate and recall per part of speech",
                       description="Tag words with spaCy and report per universal POS tag, with sentence-bootstrap "
                                   "intervals and Holm-corrected tests against the overall rate (JSON, Markdown, PNG). "
                                   "Clean --text: mean p and false-positive rate. --text --corrupt: the text corrupted "
                                   "by the run's generator: which POS it replaces, recall per POS. --ged: recall of "
                                   "true errors per POS. Raw and calibrated scores side by side when the model has "
                                   "a calibration.json.")
    p.add_argument("--model", default=DEFAULT_MODEL, help="run dir (--corrupt needs its generator/)")
    p.add_argument("--text", nargs="+", default=[], help="clean text files (one text per line)")
    p.add_argument("--corrupt", action="store_true", help="corrupt --text with the run's generator (pre-training task)")
    p.add_argument("--rounds", type=int, default=1, help="--corrupt: corrupt the texts this many times (new seeds)")
    p.add_argument("--ged", help="labelled GED data (formats as in `ged eval`)")
    p.add_argument("--format", choices=["m2", "tsv", "parallel"], default="m2", dest="fmt")
    p.add_argument("--refs", nargs="+", default=[], help="correction file(s) for --format parallel")
    p.add_argument("--combine", choices=["first", "any", "majority"], default="majority")
    p.add_argument("--annotator", type=int, default=0)
    p.add_argument("--out-dir", default="pos-bias", help="where pos_bias.{json,md,png} go")
    p.add_argument("--threshold", type=float, help="flag threshold (default: the model's ged.json, else 0.5)")
    p.add_argument("--raw", action="store_true", help="raw scores only (ignore the model's calibration.json)")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_pos_bias)


def cmd_pos_bias(args: argparse.Namespace) -> int:
    from electra_detect.calibration.pos_bias import analyse, clean_rows, corrupt_rows, ged_rows, load_tagger, write_report
    from electra_detect.calibrators import load_calibration
    from electra_detect.detector import Detector, resolve_model_dir
    from electra_detect.ged import default_threshold

    check_unit_interval(args.threshold, "--threshold")
    if bool(args.text) == bool(args.ged):
        raise ValueError("give exactly one source: --text FILE... (clean, or with --corrupt) or --ged FILE")
    if args.corrupt and not args.text:
        raise ValueError("--corrupt corrupts --text files")
    if args.rounds < 1 or args.bootstrap < 10:
        raise ValueError("--rounds must be >= 1 and --bootstrap >= 10")
    generator = Path(args.model) / "generator"
    if args.corrupt and not generator.is_dir():
        raise ValueError(f"--corrupt needs the run dir's generator/ next to discriminator/ ({args.model})")
    texts = _read_text_files(args.text)
    sentences = _read_labelled(args, args.ged) if args.ged else []
    if not texts and not sentences:
        raise ValueError("no text to analyse")
    calibrator = None if args.raw else load_calibration(resolve_model_dir(args.model))
    detector = Detector.load(args.model, calibrated=False)  # raw once; calibrated = the calibrator on the same logits
    threshold = default_threshold(args.model) if args.threshold is None else args.threshold
    nlp = load_tagger()
    if sentences:
        mode, rows = "ged", ged_rows(detector, sentences, nlp)
    elif args.corrupt:
        mode, rows = "corrupt", corrupt_rows(detector, generator, texts, nlp, args.seed, args.rounds, progress=True)
    else:
        mode, rows = "clean", clean_rows(detector, texts, nlp)
    report = analyse(rows, mode, threshold, calibrator, args.bootstrap, args.seed)
    if mode == "corrupt":
        report["rounds"] = args.rounds
    titles = {"clean": "clean text", "corrupt": "generator-corrupted text", "ged": "GED data"}
    paths = write_report(report, Path(args.out_dir), f"POS bias on {titles[mode]} ({Path(args.model).name})")
    summary = {"mode": mode, "tokens": report["tokens"], "threshold": threshold, "calibration": report["calibration"],
               "overall_fpr": report["overall_fpr"], "overall_recall": report.get("overall_recall"),
               "differs": [t for t, r in report["tags"].items() if r.get("differs_from_overall")],
               "recall_differs": [t for t, r in report["tags"].items() if r.get("recall_differs")],
               **{k: str(v) for k, v in paths.items()}}
    print(json.dumps(summary))
    return 0


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="electra-detect",
                                     description="ELECTRA replaced-token detection as a disfluency signal.")
    sub = parser.add_subparsers(dest="verb", required=True)
    _add_pretrain(sub)
    _add_score(sub)
    _add_ged(sub)
    _add_calibrate(sub)
    _add_pos_bias(sub)
    for name in PLUGIN_VERBS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and (name == exc.name or name.startswith(exc.name + ".")):  # feature (or package) absent
                continue
            raise
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["ged"] and argv[1:2] in (["eval"], ["train"]):  # `ged eval`; `ged "text"` stays free
        argv = [f"ged-{argv[1]}", *argv[2:]]
    args = build_parser().parse_args(argv)
    from electra_detect.detector import DetectorError

    known: tuple[type[BaseException], ...] = (DetectorError, FileNotFoundError, PermissionError, CliError)
    if args.verb.startswith("ged") or args.verb in ("calibrate", "pos-bias"):  # ged.py pulls in scikit-learn
        from electra_detect.ged import GedDataError

        known += (GedDataError,)
    if args.verb == "pretrain":
        from electra_detect.training.checkpoint import CheckpointError
        from electra_detect.training.config import ConfigError
        from electra_detect.training.data import CorpusError

        known += (CheckpointError, ConfigError, CorpusError)
    known += tuple(getattr(args, "known_errors", ()))
    if args.verb in ("calibrate", "pos-bias"):
        known += (ValueError,)
    if args.verb == "ged-train":
        from electra_detect.training.data import CorpusError

        known += (CorpusError,)
    try:
        return args.func(args)
    except known as exc:
        return _fail(str(exc))


if __name__ == "__main__":
    sys.exit(main())
