"""The ``picky`` level's threshold: the one that flags more, tuned on the tuning halves of FCE dev and JFLEG dev.

    python -m benchmarks.quality.ged_levels --fce runs/data/fce --jfleg $DATA/jfleg/dev [--write-setting]

The default threshold (``ged.json`` ``"threshold"``) maximises the mean F0.5 over both tuning halves (precision
weighs more); ``picky`` maximises their mean F1 (precision and recall alike), so it sits lower and flags more: what
LanguageTool's ``level=picky`` asks for. Both are reported on the report halves (split seed 13). The model is scored
as ``ged`` runs it (engine auto). ``--write-setting`` stores ``"levels": {"picky": t}`` in the model's ``ged.json``
(where ``Detector.threshold(level="picky")`` reads it), leaving its other keys as they are.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.common.ged_halves import load_sets
from benchmarks.common.run import command_line
from electra_detect.detector import Detector
from electra_detect.fileio import atomic_write_json
from electra_detect.tasks.ged.alignment import score_tokens
from electra_detect.tasks.ged.metrics import f_beta, flatten, shared_threshold, token_metrics

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "electra-minilm"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fce", type=Path, required=True, help="folder holding fce-dev.json")
    parser.add_argument("--jfleg", type=Path, required=True, help="JFLEG dev folder (dev.src, dev.ref0-3)")
    parser.add_argument("--model", type=Path, default=SHIPPED)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out-dir", type=Path, default=Path("benchmarks/results/ged_levels"))
    parser.add_argument("--write-setting", action="store_true", help="store the picky threshold in ged.json")
    args = parser.parse_args(argv)

    sets = load_sets(args.fce, args.jfleg, args.seed)
    detector = Detector.load(args.model, task="ged", engine="auto")
    print(detector.describe(), file=sys.stderr)
    scores = {name: {half: score_tokens(detector, split[half]) for half in ("tune", "report")}
              for name, split in sets.items()}
    tunes = [flatten(sets[name]["tune"], scores[name]["tune"]) for name in sets]
    thresholds = {"default (ged.json)": detector.threshold(), "picky (max mean F1)": shared_threshold(tunes, 1.0)}
    rows = {}
    for label, threshold in thresholds.items():
        rows[label] = {"threshold": threshold}
        for name in sets:
            metrics = token_metrics(*flatten(sets[name]["report"], scores[name]["report"]), threshold)
            f1 = f_beta(metrics["precision"], metrics["recall"], 1.0)
            rows[label][name] = {k: round(v, 4) for k, v in (("precision", metrics["precision"]),
                                                             ("recall", metrics["recall"]), ("f05", metrics["f05"]),
                                                             ("f1", f1), ("flagged", metrics["flagged"]))}
    out = {"command": command_line(), "model": str(args.model), "engine": detector.describe(), "report": rows}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out_dir / "ged_levels.json", out)
    if args.write_setting:
        path = detector.model_dir / "ged.json"
        spec = json.loads(path.read_text())
        spec["levels"] = {"picky": thresholds["picky (max mean F1)"],
                          "picky_tuned_on": f"the tuning halves of FCE dev and JFLEG dev (split seed {args.seed}): the "
                                            "threshold with the highest mean F1 over both "
                                            "(benchmarks/quality/ged_levels.py)"}
        atomic_write_json(path, spec)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
