"""``electra-detect ged train`` (``ged-train`` on the parser): fine-tune a discriminator as a GED error detector.

The fine-tune is training/finetune/ged_finetune.py's; only argparse at the top: torch and the data readers load
inside the verb.
"""

from __future__ import annotations

import argparse
import json

from electra_detect.cli import DEFAULT_MODEL, subverb
from electra_detect.cli.options import add_labelled_data_args
from electra_detect.training.cli.options import add_checkpoint_every_arg, add_no_progress_arg


def add_ged_train(sub: argparse._SubParsersAction) -> None:
    """``ged train`` (spelled ``ged-train`` on the parser): the GED fine-tune of the training layer."""
    t = subverb(sub, "ged", "train", run_ged_train,
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
    t.add_argument("--part", metavar="lora[:RANK]|top:N",
                   help="train and save only part of the base encoder --model names (mpnet or an encoder folder), "
                        "for assembly on it later: lora[:RANK] (LoRA, rank 16 by default, on every layer's attention "
                        "and feed-forward; the heads in full) or top:N (the top N layers and the heads; the rest "
                        "frozen). OUT then holds the part, no full weights and no tokenizer")
    add_checkpoint_every_arg(t)
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
    add_no_progress_arg(t)


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

    if args.part:  # a bad spec or a base that is no encoder fails before any data is read
        from electra_detect.training.finetune.trained_part import parse_part, part_base

        part_base(args.model, parse_part(args.part))
    train, dev = ged_training_data(args.data, args.fmt, args.refs, args.combine, dev_file=args.dev,
                                   dev_split=args.dev_split, seed=args.seed)
    config = FinetuneConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                            max_steps=args.max_steps, types=args.types, type_weight=args.type_weight,
                            checkpoint_every=args.checkpoint_every, label_subwords=args.label_subwords,
                            bf16=args.bf16, tag_weight=args.tag_weight, head_lr_scale=args.head_lr_scale,
                            max_minutes=args.max_minutes, log=args.log, part=args.part or "")
    vocabulary = None
    if args.tags:
        from electra_detect.training.finetune.tag_vocabulary import build_vocabulary

        if not any(s.tags for s in train):
            from electra_detect.errors import GedDataError

            raise GedDataError("--tags needs --data in the tagged format (PATH:tagged), whose tokens carry tags")
        if args.tags_from:
            from electra_detect.training.finetune.tag_vocabulary import read_vocabulary

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
        from electra_detect.training.finetune.tag_vocabulary import write_tag_files

        tags, types, counts, deleted = vocabulary
        words = {w for s in train for w in s.tokens} | {w for s in train for e in s.edits for w in
                                                        (e.correction or "").split()}
        write_tag_files(args.out, tags, types, counts, deleted, words, source=" ".join(str(d) for d in args.data))
    print(json.dumps(summary))
    return 0
