"""The calibration layer's verbs: ``calibrate`` and ``pos-bias`` (registered through the
``electra_detect.verbs`` entry points; only argparse at the top)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from electra_detect.calibration import CalibrationError
from electra_detect.cli import DEFAULT_MODEL, verb
from electra_detect.cli.options import add_labelled_data_args, add_threshold_arg


def add_calibrate(sub: argparse._SubParsersAction) -> None:
    p = verb(sub, "calibrate", run_calibrate,
             help="fit calibration of replaced probabilities; writes calibration.json",
             description="Fit temperature / Platt / isotonic calibration on half of the data and report "
                         "ECE, MCE, Brier, NLL and AUC on the other half, raw and calibrated. Source rtd: "
                         "--text files corrupted by the run's own generator; source ged: labelled data.")
    p.add_argument("--model", default=DEFAULT_MODEL, help="run dir (rtd needs its generator/)")
    p.add_argument("--text", nargs="+", default=[], help="held-out text files for source rtd (one text per line)")
    p.add_argument("--data", help="GED data for source ged")
    add_labelled_data_args(p, annotator=False)
    p.add_argument("--method", choices=["temperature", "platt", "isotonic"], default="temperature")
    p.add_argument("--plot", help="reliability diagram PNG path")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dry-run", action="store_true", help="report only; do not write calibration.json")


def run_calibrate(args: argparse.Namespace) -> int:
    from electra_detect.calibration.fit import calibrate
    from electra_detect.cli.texts import read_text_files
    from electra_detect.tasks.ged.readers import read_labelled

    texts = read_text_files(args.text)
    sentences = read_labelled(args.data, args.fmt, args.refs, args.combine) if args.data else []
    if bool(texts) == bool(sentences):
        raise CalibrationError("give exactly one source: --text FILE... (rtd) or --data FILE (ged)")
    report = calibrate(args.model, texts=texts, sentences=sentences, method=args.method, seed=args.seed,
                       plot=Path(args.plot) if args.plot else None, save=not args.dry_run)
    print(json.dumps(report))
    return 0


def add_pos_bias(sub: argparse._SubParsersAction) -> None:
    p = verb(sub, "pos-bias", run_pos_bias,
             help="replaced probability, false-positive rate and recall per part of speech",
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
    add_labelled_data_args(p)
    p.add_argument("--out-dir", default="pos-bias", help="where pos_bias.{json,md,png} go")
    add_threshold_arg(p, "report")
    p.add_argument("--raw", action="store_true", help="raw scores only (ignore the model's calibration.json)")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)


def run_pos_bias(args: argparse.Namespace) -> int:
    from electra_detect.calibration.pos_bias import analyse_source, write_report
    from electra_detect.calibrators import load_calibration
    from electra_detect.cli.texts import check_unit_interval, read_text_files
    from electra_detect.detector import Detector
    from electra_detect.model_dir import resolve_model_dir
    from electra_detect.tasks.ged.readers import read_labelled

    check_unit_interval(args.threshold, "--threshold")
    if bool(args.text) == bool(args.ged):
        raise CalibrationError("give exactly one source: --text FILE... (clean, or with --corrupt) or --ged FILE")
    if args.corrupt and not args.text:
        raise CalibrationError("--corrupt corrupts --text files")
    if args.rounds < 1 or args.bootstrap < 10:
        raise CalibrationError("--rounds must be >= 1 and --bootstrap >= 10")
    generator = Path(args.model) / "generator"
    if args.corrupt and not generator.is_dir():
        raise CalibrationError(f"--corrupt needs the run dir's generator/ next to discriminator/ ({args.model})")
    texts = read_text_files(args.text)
    sentences = read_labelled(args.ged, args.fmt, args.refs, args.combine, args.annotator) if args.ged else []
    if not texts and not sentences:
        raise CalibrationError("no text to analyse")
    calibrator = None if args.raw else load_calibration(resolve_model_dir(args.model))
    detector = Detector.load(args.model, calibrated=False)  # raw once; calibrated = the calibrator on the same logits
    threshold = detector.threshold() if args.threshold is None else args.threshold
    report = analyse_source(detector, threshold, texts, sentences, generator if args.corrupt else None, args.rounds,
                            calibrator, args.bootstrap, args.seed)
    mode = report["mode"]
    titles = {"clean": "clean text", "corrupt": "generator-corrupted text", "ged": "GED data"}
    paths = write_report(report, Path(args.out_dir), f"POS bias on {titles[mode]} ({Path(args.model).name})")
    summary = {"mode": mode, "tokens": report["tokens"], "threshold": threshold, "calibration": report["calibration"],
               "overall_fpr": report["overall_fpr"], "overall_recall": report.get("overall_recall"),
               "differs": [t for t, r in report["tags"].items() if r.get("differs_from_overall")],
               "recall_differs": [t for t, r in report["tags"].items() if r.get("recall_differs")],
               **{k: str(v) for k, v in paths.items()}}
    print(json.dumps(summary))
    return 0
