"""The quickstart recipe on the embedded corpus vs a built corpus, same number of updates.

    python -m benchmarks.studies.corpus_compare --corpus runs/corpus --steps 1000

Each arm is one ``electra-detect pretrain --preset tiny`` process (default recipe, seed 0, one thread
unless ``--threads``), one after the other. Reported per arm: validation discriminator AUC and
generator accuracy (each on its own corpus' held-out blocks, so they compare only loosely), and the
generator-free corruption AUC on JFLEG ``dev.ref0`` (the same held-out text for both: the fair figure).
Writes ``result.json`` and ``table.md`` to ``--out-dir`` (default ``benchmarks/results/corpus_compare/``);
prints one JSON line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common.run import command_line
from electra_detect.detector import Detector
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.training.pretraining.evaluation import corruption_auc

ROOT = Path(__file__).resolve().parents[2]



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="a built corpus dir (`electra-detect corpus build --out DIR`)")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--jfleg", default=str(ROOT.parent / "shared" / "data" / "jfleg" / "dev" / "dev.ref0"))
    ap.add_argument("--work-dir", default="runs/corpus-compare")
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results" / "corpus_compare"))
    args = ap.parse_args()

    sentences = [line.strip() for line in open(args.jfleg, encoding="utf-8") if line.strip()]
    rows = []
    for name, corpus in (("embedded (sotu)", []), (f"built ({args.corpus})", ["--corpus", args.corpus])):
        out = Path(args.work_dir) / ("embedded" if not corpus else "built")
        command = [sys.executable, "-m", "electra_detect.cli", "pretrain", "--preset", "tiny", "--out", str(out),
                   "--overwrite", "--max-steps", str(args.steps), "--threads", str(args.threads), "--no-progress",
                   "--eval-every", str(args.steps), *corpus]
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"{name}: pretrain failed:\n{result.stderr[-2000:]}")
        summary = json.loads(result.stdout.strip().splitlines()[-1])
        auc = corruption_auc(Detector.load(out, calibrated=False), sentences)
        rows.append({"corpus": name, "steps": summary["steps"], "minutes_with_preparation":
                     round((time.perf_counter() - started) / 60, 2), "val_disc_auc": summary["val_disc_auc"],
                     "val_gen_acc": summary["val_gen_acc"], "corruption_auc": auc["corruption_auc"]})
        print(json.dumps(rows[-1]), file=sys.stderr)
    report = {"benchmark": "corpus_compare", "rows": rows, "command": command_line(),
              "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    out_dir = Path(args.out_dir)
    atomic_write_json(out_dir / "result.json", report)
    lines = ["# Quickstart recipe: embedded vs built corpus, same updates", "", f"Command: `{report['command']}`", "",
             "| corpus | updates × 32 | val disc. AUC | val gen. acc. | corruption AUC (JFLEG dev.ref0) | minutes |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['corpus']} | {r['steps']} | {r['val_disc_auc']:.3f} | {r['val_gen_acc']:.3f} | "
              f"{r['corruption_auc']:.3f} | {r['minutes_with_preparation']} |" for r in rows]
    atomic_write_text(out_dir / "table.md", "\n".join(lines) + "\n")
    print(json.dumps({"benchmark": "corpus_compare", **{r["corpus"]: round(r["corruption_auc"], 4) for r in rows}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
