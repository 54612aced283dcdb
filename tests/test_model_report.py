"""benchmarks/model_report.sh refuses, before writing anything, a step that needs a generator the model lacks."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_report(model: Path, out: Path, steps: str, pll: str = "no") -> subprocess.CompletedProcess:
    env = {**os.environ, "OUT": str(out), "STEPS": steps, "PLL": pll, "PYTHON": "false"}  # no step may start
    return subprocess.run(["bash", str(ROOT / "benchmarks" / "model_report.sh"), str(model), "corpus.txt"],
                          env=env, capture_output=True, text=True, timeout=60)


def test_steps_needing_the_generator_are_refused_without_one(tmp_path: Path) -> None:
    shipped = tmp_path / "shipped"
    (shipped / "discriminator").mkdir(parents=True)
    for steps, pll in [("ged", "no"), ("corruption calibration", "no"), ("blimp", "no"), ("asr", "yes")]:
        done = run_report(shipped, tmp_path / "out", steps, pll)
        assert done.returncode == 2, (steps, done.stderr)
        assert "has no generator/" in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert not (tmp_path / "out").exists()  # refused before any step wrote a result


def test_steps_without_the_generator_are_not_refused(tmp_path: Path) -> None:
    shipped = tmp_path / "shipped"
    (shipped / "discriminator").mkdir(parents=True)
    done = run_report(shipped, tmp_path / "out", "asr", pll="no")  # PYTHON=false: the step starts, then fails
    assert "has no generator/" not in done.stderr and "== asr:" in done.stderr, done.stderr
    (shipped / "generator").mkdir()
    done = run_report(shipped, tmp_path / "out2", "ged")
    assert "has no generator/" not in done.stderr and "== ged:" in done.stderr, done.stderr
