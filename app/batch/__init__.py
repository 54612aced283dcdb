"""``electra-detect batch ged|score``: a corpus checked on Ray Data, on one host or a cluster, exactly once and
resumable (docs/scale_out.md).

A front, like the server: it calls the checker the one-host verbs call (``GedChecker``, ``Detector.stream``) and
never imports the CLI's verb modules. Only argparse here: the CLI imports every verb at start-up, and only this
front imports Ray (the ``cluster`` extra), when a job runs.
"""

from __future__ import annotations

import argparse


def add_batch(sub: argparse._SubParsersAction) -> None:
    from electra_detect.cli import verb
    from electra_detect.cli.engine import add_engine_args, add_model_arg
    from electra_detect.cli.options import add_ged_option_args, add_threshold_arg

    batch = verb(sub, "batch", run_batch, help="check or score a corpus on Ray Data (a local Ray, or a cluster)",
                 description="A corpus checked (ged) or scored (score) by a pool of Ray actors, each holding one "
                             "model; output as shards under --output, exactly once, resumable (docs/scale_out.md).")
    verbs = batch.add_subparsers(dest="batch_verb", required=True)
    for name, help_text in (("ged", "flag grammatical errors: one row a text, as `ged --suggest` prints it, plus id"),
                            ("score", "score texts: one row a text, as `score --json` prints it, plus id")):
        p = verbs.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=run_batch)
        g = p.add_argument_group("input and output")
        g.add_argument("--input", nargs="+", required=True, metavar="PATH",
                       help="files, directories or globs: .txt (one text a line), .jsonl (--field), .parquet (--field)")
        g.add_argument("--output", required=True, metavar="DIR",
                       help="directory of the shards and their manifest; the same command with the same DIR resumes")
        g.add_argument("--output-format", choices=("jsonl", "parquet"), default="jsonl",
                       help="jsonl (default): the one-host verb's JSON objects; parquet: the same fields as columns")
        g.add_argument("--field", default="text", help="JSONL field or Parquet column holding the text (default text)")
        g.add_argument("--id-field", default="id",
                       help="field or column holding each text's id (default id); without one, file:line (or row)")
        g.add_argument("--shard-size", type=int, default=1000, help="texts a shard (default 1000): the unit written "
                                                                    "atomically, and so what a stopped job redoes")
        g.add_argument("--max-chars", type=int, default=100_000,
                       help="a longer text is an error row, not checked (default 100000)")
        g.add_argument("--overwrite", action="store_true",
                       help="empty --output first when it holds anything but this job's own output")
        r = p.add_argument_group("where it runs")
        r.add_argument("--address", help="a running Ray cluster: auto, ray://HOST:10001 or HOST:6379 (default: a "
                                         "local Ray started for the job and stopped after it)")
        r.add_argument("--actors", type=int, help="actors, each holding one model (default: as many as the cluster's "
                                                  "CPUs hold at --cpus-per-actor)")
        r.add_argument("--cpus-per-actor", type=float, default=1.0,
                       help="CPUs an actor holds: its onnxruntime threads (default 1)")
        r.add_argument("--gpus-per-actor", type=float, default=0.0,
                       help="GPUs an actor holds; > 0 runs onnxruntime on CUDA (default 0)")
        add_model_arg(p)
        add_engine_args(p, workers=False)
        if name == "ged":
            add_threshold_arg(p)
            p.add_argument("--suggest", action="store_true", help="give each flagged word its suggestions")
            add_ged_option_args(p)


def run_batch(args: argparse.Namespace) -> int:
    """The flags as a ``BatchJob``, run to its end (or to Ctrl-C/SIGTERM: the same command then resumes)."""
    from electra_detect.app.batch.job import BatchJob, run

    job = BatchJob(verb=args.batch_verb, inputs=args.input, output=args.output, model=args.model,
                   output_format=args.output_format, address=args.address, actors=args.actors,
                   cpus_per_actor=args.cpus_per_actor, gpus_per_actor=args.gpus_per_actor,
                   shard_size=args.shard_size, field=args.field, id_field=args.id_field or None,
                   max_chars=args.max_chars, engine=args.engine, variant=args.variant,
                   ged_options=ged_keywords(args) if args.batch_verb == "ged" else {}, overwrite=args.overwrite)
    run(job)
    return 0


def ged_keywords(args: argparse.Namespace) -> dict:
    """``build_ged_options``' keywords from the flags, checked now (before any work); the personal dictionary's
    words are read here, on the driver, and travel as the options' own words (an actor reads no file of its host)."""
    from electra_detect.cli.options import check_dictionary_file, ged_options
    from electra_detect.tasks.ged.dictionary import default_dictionary_path, read_entries

    check_dictionary_file(args.dictionary)
    ged_options(args, suggest=args.suggest)  # raises the one-line error of a bad value
    path = args.dictionary or default_dictionary_path()
    from pathlib import Path

    words = [*(read_entries(Path(path)) if Path(path).is_file() else []), *args.word]
    return {"threshold": args.threshold, "level": args.level, "disabled_rules": sorted(args.disable),
            "enabled_rules": sorted(args.enable), "disabled_categories": sorted(args.disable_category),
            "enabled_categories": sorted(args.enable_category), "enabled_only": args.enabled_only,
            "words": sorted(set(words)), "suggest": args.suggest, "use_dictionary_file": False,
            "threshold_name": "--threshold"}
