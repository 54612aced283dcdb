"""``electra-detect distill text|label|train``: a teacher's word labels on much text, and a student trained on them.

Registered through the ``electra_detect.verbs`` entry point ``distill`` (pyproject.toml); only argparse at the top:
torch, transformers and the Detector load inside the verbs. The recipe and the device calls: docs/distillation.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from electra_detect.cli import verb
from electra_detect.training.cli.options import add_no_progress_arg, no_subverb, positive_int


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def add_distill(sub: argparse._SubParsersAction) -> None:
    p = verb(sub, "distill", no_subverb,
             help="distil a large GED teacher into a small student (text sets, teacher labels, student training)",
             description="Three steps: `distill text` writes the text to label (learner sentences in two halves, "
                         "corpus sentences with realistic errors, clean ones); `distill label` runs the teacher(s) "
                         "over a set through the Detector (resumable shards); `distill train` trains a student on "
                         "the teacher's probabilities and types plus gold labels (docs/distillation.md).")
    verbs = p.add_subparsers(dest="distill_verb", required=True)

    t = verbs.add_parser("text", help="write the distillation text sets (learner, corrupted, clean) to a folder")
    t.add_argument("--out", required=True, help="folder for learner.jsonl.gz, corrupted.jsonl.gz, clean.jsonl.gz")
    t.add_argument("--learner", nargs="+", default=[], metavar="PATH[:FORMAT]",
                   help="labelled learner training files (m2, tsv, bea), e.g. en_fce_train.tsv:tsv A.train.m2:m2; "
                        "each is also cut into two halves (learner/half0, half1) for the half teachers")
    t.add_argument("--corpus", nargs="+", default=[], metavar="PATH",
                   help="`corpus build` folders or text files for --corrupted and --clean")
    t.add_argument("--corrupted", type=_count, default=0, help="corpus sentences given realistic synthetic errors")
    t.add_argument("--clean", type=_count, default=0, help="further corpus sentences kept as they are")
    t.add_argument("--neighbours-from", metavar="DIR",
                   help="model whose input embeddings give the word-choice errors (e.g. the MiniLM discriminator)")
    t.add_argument("--seed", type=int, default=0, help="seed of the halves, the draw and the errors")
    t.add_argument("--overwrite", action="store_true", help="rewrite sets already in --out")
    t.add_argument("--workers", type=positive_int, default=1,
                   help="processes making the corrupted set (one a core; the text does not depend on it)")
    t.add_argument("--chunk-size", type=positive_int, default=5_000,
                   help="corrupted sentences a chunk: each is written as done, a re-run resumes after them")
    t.set_defaults(func=run_text)

    lab = verbs.add_parser("label", help="label a text set with the teacher(s); resumable")
    lab.add_argument("text", help="a text set (.jsonl.gz from `distill text`)")
    lab.add_argument("--out", required=True, help="labels folder (labels.json + shard-N.npz); a re-run resumes")
    lab.add_argument("--teacher", nargs="+", default=[], metavar="DIR",
                     help="teacher model dir(s); several: their mean p (e.g. two seeds)")
    lab.add_argument("--half-teachers", nargs=2, default=[], metavar=("A", "B"),
                     help="A trained on learner half 0, B on half 1: each learner sentence is labelled by the one "
                          "that did not see it (sentences without a half by --teacher, else by both)")
    lab.add_argument("--shard-size", type=positive_int, default=10_000)
    lab.add_argument("--batch-size", type=positive_int, default=64, help="windows per engine run")
    lab.add_argument("--device", help="cpu or cuda (default: cuda when there is one)")
    lab.add_argument("--limit", type=_count, default=0, help="label only the first N sentences (0: all)")
    lab.add_argument("--part", default="0/1", metavar="I/N",
                     help="label only shards I, I+N, I+2N, ...: N processes share a set (and a GPU)")
    add_no_progress_arg(lab)
    lab.set_defaults(func=run_label)

    tr = verbs.add_parser("train", help="train a student on teacher labels (+ gold); writes a typed model dir")
    tr.add_argument("--model", required=True, help="the student's start (e.g. models/electra-minilm/ged-synthetic)")
    tr.add_argument("--out", required=True, help="the student model dir to write (with ged.json)")
    tr.add_argument("--texts", required=True, help="folder of the text sets (`distill text --out`)")
    tr.add_argument("--labels", required=True, help="folder holding one labels folder per set (learner/, ...)")
    tr.add_argument("--sets", nargs="+", choices=["learner", "corrupted", "clean"], default=["learner"],
                    help="the arm: learner | learner corrupted | learner corrupted clean")
    tr.add_argument("--dev", nargs="*", default=[], metavar="PATH[:FORMAT]",
                    help="dev sets whose tuning halves (split seed 13) tune the threshold; figures on both halves")
    tr.add_argument("--epochs", type=positive_int, default=1)
    tr.add_argument("--max-steps", type=_count, default=0)
    tr.add_argument("--max-minutes", type=float, default=0.0, help="stop training after this long (0: no limit)")
    tr.add_argument("--batch-size", type=positive_int, default=32)
    tr.add_argument("--lr", type=float, default=1e-4)
    tr.add_argument("--temperature", type=float, default=1.0)
    tr.add_argument("--gold-weight", type=float, default=1.0, help="weight of the gold BCE on learner words")
    tr.add_argument("--synthetic-weight", type=float, default=0.0,
                    help="weight of the BCE on the corrupted set's made-error labels")
    tr.add_argument("--type-weight", type=float, default=0.1)
    tr.add_argument("--subwords", choices=["all", "first"], default="all",
                    help="which subwords of a word take its targets")
    tr.add_argument("--fp16", action="store_true", help="save the weights in float16 (the shipped form)")
    tr.add_argument("--seed", type=int, default=0)
    add_no_progress_arg(tr)
    tr.set_defaults(func=run_train)

    tg = verbs.add_parser("tagged", help="a tag teacher's labels as tagged data for `ged train --tags` (hard or soft)")
    tg.add_argument("text", help="the labelled text set (.jsonl.gz)")
    tg.add_argument("--labels", required=True, help="its labels folder (from `distill label`, a tag teacher's)")
    tg.add_argument("--out", required=True, help="the tagged JSON-lines file to write")
    tg.add_argument("--threshold", type=float, help="the teacher's flag threshold (default: the labels' own)")
    tg.add_argument("--soft", action="store_true", help="the teacher's p as the detection target, not 0/1")
    tg.add_argument("--gold", nargs="+", default=[], metavar="TAGGED",
                    help="the set's own tagged files in its order (the learner set): their tags kept, their labels "
                         "mixed with the teacher's p")
    tg.add_argument("--teacher-share", type=float, default=0.5, help="the teacher's share of a mixed target")
    tg.add_argument("--limit", type=_count, default=0, help="write the first N sentences only (0: all)")
    tg.set_defaults(func=run_tagged)


def run_text(args: argparse.Namespace) -> int:
    from electra_detect.training.finetune.distill_text import build_text_sets, parse_data_spec

    learner = [parse_data_spec(spec) for spec in args.learner]
    if not learner and not args.corrupted and not args.clean:
        from electra_detect.errors import CliError

        raise CliError("nothing to write: give --learner FILES and/or --corrupted N / --clean N")
    manifest = build_text_sets(args.out, learner, args.corpus, args.corrupted, args.clean, args.seed,
                               args.neighbours_from, args.overwrite, args.workers, args.chunk_size,
                               log=lambda message: print(message, file=sys.stderr, flush=True))
    print(json.dumps({name: entry["sentences"] for name, entry in manifest["sets"].items()}))
    return 0


def _part(text: str) -> tuple[int, int]:
    from electra_detect.errors import CliError

    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        raise CliError(f"--part wants I/N, e.g. 0/4, got {text!r}") from None
    if not 0 <= index < count:
        raise CliError(f"--part {text}: I must be in 0..N-1")
    return index, count


def run_label(args: argparse.Namespace) -> int:
    import torch

    from electra_detect.training.finetune.distill_labels import label_text_set

    part = _part(args.part)
    torch.set_float32_matmul_precision("high")  # TF32 on a GPU: labels to 3 digits, the engine's matmuls ~3x faster
    manifest = label_text_set(args.text, args.out, args.teacher, args.half_teachers, args.shard_size,
                              args.batch_size, args.device, args.limit, show_progress=not args.no_progress,
                              part=part)
    print(json.dumps({k: manifest[k] for k in ("text", "sentences", "teachers", "half_teachers", "types",
                                                "teacher_threshold", "sentences_per_second_last_run", "done")}))
    return 0


def run_train(args: argparse.Namespace) -> int:
    from electra_detect.errors import CliError
    from electra_detect.training.finetune.distill import DistillConfig, card_for, distill, read_dev_sets

    if args.temperature <= 0:
        raise CliError("--temperature must be above 0")
    texts, labels = Path(args.texts), Path(args.labels)
    labelled = [(texts / f"{name}.jsonl.gz", labels / name) for name in args.sets]
    config = DistillConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                           max_steps=args.max_steps, max_minutes=args.max_minutes, temperature=args.temperature,
                           gold_weight=args.gold_weight, synthetic_weight=args.synthetic_weight,
                           type_weight=args.type_weight, subwords=args.subwords, fp16=args.fp16)
    card = {**card_for(texts / "manifest.json", args.sets), "arm": "+".join(args.sets)}
    summary = distill(args.model, args.out, labelled, read_dev_sets(args.dev) or None, config,
                      show_progress=not args.no_progress, card=card)
    print(json.dumps({k: summary.get(k) for k in ("arm", "train_sentences", "steps", "minutes", "first_loss",
                                                   "last_loss", "threshold", "teacher_gap", "dev")}))
    return 0


def run_tagged(args: argparse.Namespace) -> int:
    from electra_detect.errors import CliError
    from electra_detect.model_dir import check_threshold
    from electra_detect.training.finetune.distill_labels import teacher_tagged
    from electra_detect.training.finetune.edit_tag_data import read_tagged, write_tagged

    if not 0.0 <= args.teacher_share <= 1.0:
        raise CliError("--teacher-share must lie in [0, 1]")
    threshold = args.threshold
    if threshold is not None:
        check_threshold(threshold, "--threshold")  # the flag threshold the teacher's p is cut at: a probability
    else:
        try:
            threshold = float(json.loads((Path(args.labels) / "labels.json").read_text())["teacher_threshold"])
        except (OSError, ValueError, KeyError) as exc:
            raise CliError(f"{args.labels}: no teacher threshold in labels.json ({type(exc).__name__}); "
                           "give --threshold") from None
    gold = [s for path in args.gold for s in read_tagged(path)]
    sentences = teacher_tagged(args.text, args.labels, threshold, args.soft, gold, args.teacher_share)
    sentences = sentences[:args.limit] if args.limit else sentences
    write_tagged(args.out, sentences)
    print(json.dumps({"sentences": len(sentences), "threshold": round(threshold, 4),
                      "target": "mixed" if gold else "soft" if args.soft else "hard"}))
    return 0
