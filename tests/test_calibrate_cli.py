"""`electra-detect calibrate` on a micro run: both sources, a saved file the Detector then applies."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from electra_detect.detector import Detector
from tests.conftest import synthetic_text

CLI = [sys.executable, "-m", "electra_detect.cli", "calibrate"]


def test_rtd_source_fits_reports_plots_and_saves(tmp_path: Path, micro_run: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(micro_run, run, ignore=shutil.ignore_patterns("checkpoints"))
    held_out = tmp_path / "held.txt"
    held_out.write_text(synthetic_text(120, seed=77))
    result = subprocess.run([*CLI, "--model", str(run), "--text", str(held_out), "--plot", str(tmp_path / "r.png")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["source"] == "rtd" and report["report_tokens"] > 500
    assert 0 < report["raw"]["positive_rate"] < 0.3  # about 15% masked, minus samples equal to the original
    assert report["temperature"]["auc"] == pytest.approx(report["raw"]["auc"], abs=1e-9)
    assert report["temperature"]["nll"] <= report["raw"]["nll"] + 0.01
    assert (tmp_path / "r.png").stat().st_size > 5000
    assert Detector.load(run).calibration == "temperature"


def test_ged_source_and_errors(tmp_path: Path, micro_run: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(micro_run, run, ignore=shutil.ignore_patterns("checkpoints"))
    tsv = tmp_path / "g.tsv"
    rows = []
    for sentence in synthetic_text(60, seed=3).replace(".", " .").split(" ."):
        for word in sentence.split():
            rows.append(f"{word}\t{'i' if word == 'house' else 'c'}")
        rows.append("")
    tsv.write_text("\n".join(rows))
    result = subprocess.run([*CLI, "--model", str(run), "--data", str(tsv), "--format", "tsv", "--method", "isotonic",
                             "--dry-run"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["source"] == "ged" and report["chosen"] == "isotonic" and "saved_to" not in report
    assert not (run / "discriminator" / "calibration.json").exists()
    both = subprocess.run([*CLI, "--model", str(run)], capture_output=True, text=True, timeout=120)
    assert both.returncode == 2 and "exactly one source" in both.stderr
