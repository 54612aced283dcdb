"""Rules beside the model (``ged --with-rules``): the model's word scores lifted where harper-py flags a word,
against the model alone and harper-py alone, on the same report halves.

    python -m benchmarks.quality.ged_rules --model models/electra-minilm/ged --fce runs/data/fce

For each set (FCE dev, JFLEG dev; split by the fixed seed into a tuning and a report half) the lift weight and its
threshold are tuned for F0.5 on the tuning half (electra_detect/rules.py ``tune_rules``), the model alone gets its
own tuned threshold, and both are scored on the report half with a 95% paired-bootstrap interval of the
difference. harper-py's flags come from benchmarks/common/peers.py, as in every peer comparison. Writes
``result.json`` and ``table.md`` to ``--out-dir``; with ``--write-setting`` the setting tuned on FCE dev's tuning half
goes into the model's ``ged.json`` under ``"rules"`` (what ``ged --with-rules`` reads).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import peers
from benchmarks.common.ged_halves import f05_per_resample, load_sets
from benchmarks.common.run import command_line
from electra_detect.detector import Detector
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.rules import lift, tune_rules
from electra_detect.tasks.ged import alignment, metrics


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="models/electra-minilm/ged")
    parser.add_argument("--fce", required=True, help="folder with fce-dev.json (BEA-2019 JSON release)")
    parser.add_argument("--jfleg", default="../shared/data/jfleg/dev")
    parser.add_argument("--split-seed", type=int, default=13)
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parents[1] / "results" / "ged_rules"))
    parser.add_argument("--write-setting", action="store_true", help="store FCE dev's tuned setting in ged.json")
    args = parser.parse_args()
    sets = load_sets(Path(args.fce), Path(args.jfleg), args.split_seed)
    detector = Detector.load(args.model, engine="torch")
    harper = peers.HarperPeer()
    rows, settings = [], {}
    rng = np.random.default_rng(0)
    for set_name, split in sets.items():
        halves = {}
        for half in ("tune", "report"):
            sentences = split[half]
            scores = alignment.score_tokens(detector, sentences)
            flags = [alignment.flags_to_token_labels(s.tokens, spans).astype(float)
                     for s, spans in zip(sentences, harper.flag([s.text for s in sentences]), strict=True)]
            halves[half] = (sentences, scores, flags)
        sentences, scores, flags = halves["tune"]
        labels, flat = metrics.flatten(sentences, scores)
        alone_threshold = metrics.tune_threshold(labels, flat)
        setting = tune_rules(labels, flat, np.concatenate(flags))
        settings[set_name] = setting.to_json()
        report, scores, flags = halves["report"]
        lifted = [lift(s, f, setting.weight) for s, f in zip(scores, flags, strict=True)]
        resamples = rng.integers(0, len(report), size=(1000, len(report)))
        alone = f05_per_resample(report, scores, alone_threshold, resamples)
        both = f05_per_resample(report, lifted, setting.threshold, resamples)
        rules_only = f05_per_resample(report, flags, 0.5, resamples)
        for system, values, threshold, boot in (("model alone", scores, alone_threshold, alone),
                                                 ("model with rules", lifted, setting.threshold, both),
                                                 ("harper-py alone", flags, 0.5, rules_only)):
            row = metrics.token_metrics(*metrics.flatten(report, values), threshold)
            low, high = np.percentile(boot - alone, [2.5, 97.5])
            rows.append({"set": set_name, "system": system, **row, "minus_model_ci95": [low, high],
                         **({"weight": setting.weight} if system == "model with rules" else {})})
    summary = {"benchmark": "ged_rules", "model": args.model, "settings": settings, "rows": rows,
               "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "command": command_line()}
    out = Path(args.out_dir)
    atomic_write_json(out / "result.json", summary)
    lines = ["# Rules beside the model", "", f"Command: `{summary['command']}` ({summary['date']}). Weight and "
             "threshold tuned for F0.5 on each set's tuning half; metrics on its report half; the interval is the "
             "95% paired bootstrap of F0.5 minus the model alone's.", "",
             "| set | system | weight | F0.5 | P | R | Δ vs model alone [95%] |", "|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['set']} | {r['system']} | {r.get('weight', '–')} | {r['f05']:.3f} | {r['precision']:.3f} "
                     f"| {r['recall']:.3f} | [{r['minus_model_ci95'][0]:+.3f}, {r['minus_model_ci95'][1]:+.3f}] |")
    atomic_write_text(out / "table.md", "\n".join(lines) + "\n")
    if args.write_setting:
        path = Path(args.model) / "ged.json"
        saved = json.loads(path.read_text())
        saved["rules"] = {**settings["FCE dev"], "tuned_on": "FCE dev tuning half (benchmarks/quality/ged_rules.py)"}
        atomic_write_json(path, saved)
    print(json.dumps({"benchmark": "ged_rules", "settings": settings}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
