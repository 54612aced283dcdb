"""What git tracks under benchmarks/results: a benchmark's result is ``result.json``, ``table.md`` and ``plot.png`` in
its folder (a ``README.md`` beside them where a folder needs words); every other file is one of ``KEPT``, each with
why it stays, so that a new per-step log (its command remakes it) fails here instead of landing in git."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = "benchmarks/results"
STANDARD = {"result.json", "table.md", "plot.png", "README.md"}

# The other files that stay, as patterns relative to benchmarks/results, each with why. A per-step log that no doc
# reads does not belong here: delete it (its command remakes it) instead of adding it.
KEPT = {
    # second plots that benchmarks write beside plot.png, or in its place; the docs show them
    "ablation/compute.png": "ablation.py's score-against-compute plot, shown in docs/ablation.md",
    "ablation/gensize.png": "ablation.py's generator-size plot, shown in docs/ablation.md",
    "asr_listwise/curve.png": "asr/rescore.py's curve over training lists, linked from docs/rerank.md",
    "asr_listwise_2000/curve.png": "asr/rescore.py's curve over training lists (the 2,000-list run)",
    "ged_learner/curve.png": "ged_learner.py's plot (it writes no plot.png), linked from docs/ged_training.md",
    "ged_learner_levers/curve.png": "ged_learner.py's plot for the levers' run (it writes no plot.png)",
    "synthetic_curve/curve.png": "synthetic_curve.py's plot (it writes no plot.png), shown in docs/synthetic_errors.md",
    "warmstart/f05_vs_compute.png": "warmstart.py's plot (it writes no plot.png), shown in docs/warmstart.md",
    # measurements a report is remade from: `compute_curve --report` reads them, so they are its inputs
    "compute_curve/points/*.json": "one point's measurements; compute_curve --report remakes its table from them",
    "compute_curve/shipped_recipe/points/*.json": "the same, for the shipped recipe's comparison",
    "compute_curve/zero_shot_pairs.json": "paired zero-shot comparisons kept across runs; the report reads them",
    # records of runs on a lent GPU, which no CPU here remakes; docs/pretraining.md and docs/warmstart.md link them
    "compute_curve/gpu/*/metrics.jsonl": "a GPU pre-training run's train and validation rows (the logged rates)",
    "compute_curve/gpu/*/probe_metrics.jsonl": "the same run's step-rate probe",
    "compute_curve/gpu/*/pretrain.log": "the same run's log",
    "compute_curve/gpu/*/run_config.json": "the same run's full config",
    "compute_curve/gpu/*/summary.json": "the same run's steps, tokens, minutes and last metrics",
    "gpu_serving/serving_check.log": "the device serving check's log, linked from docs/inference.md",
    "gpu_serving/nvidia_smi.csv": "the device's GPU, driver and memory, listed in gpu_serving/README.md",
    "teacher_device/device/call*.log": "the teacher's device calls' logs; docs/teacher.md says they are there",
    "teacher_device/device/teachers.json": "a device call's teacher scores: teacher_device's input (its command)",
    "teacher_device/device/students.json": "a device call's student scores: teacher_device's input (its command)",
    "teacher_device/device/labels.json": "what the device call labelled, beside the scores it returned",
    # the export's parity table, which gpu_check copies beside its result; docs/serving.md links one
    "gpu_check/parity.md": "the ONNX export's parity table on the GPU, linked from docs/serving.md",
    "electra-tiny/gpu_check/parity.md": "the same for the tiny model",
    "gpu_serving/parity.md": "the same for the serving check, listed in gpu_serving/README.md",
    # wall times of model_report.sh's steps, linked from docs/results.md and docs/results_tiny.md
    "model_report/model_report.log": "model_report.sh's log of each step's wall time, linked from docs/results.md",
    "electra-tiny/model_report/model_report.log": "the same for the tiny model, linked from docs/results_tiny.md",
    # earlier runs of a benchmark, kept for the comparisons docs/inference.md draws from them
    "ged_file_speed/earlier/*-result.json": "an earlier ged_file_speed run, linked from docs/inference.md",
    "ged_file_speed/earlier/*-table.md": "an earlier ged_file_speed run's table, linked from docs/inference.md",
    "ged_file_speed/earlier/*-plot.png": "an earlier ged_file_speed run's plot",
    "host_cost/earlier/*-result.json": "an earlier host_cost run, linked from docs/inference.md",
    "host_cost/earlier/*-table.md": "an earlier host_cost run's table",
    # results under their own names: what these benchmarks and `ged eval` write
    "ged_levels/ged_levels.json": "ged_levels.py's result, linked from docs/results.md",
    "ged_types/ged_types.json": "ged_types.py's result",
    "ged_types/ged_types.md": "ged_types.py's table",
    "ged_shipped/*.json": "`ged eval` outputs of the previous ged/, linked from docs/results.md",
    "ged_tags_students/detection_*.json": "ged_tags.py's detection half, kept so that a re-told run re-uses it",
    # a person's input, not a measurement
    "word_choice/judgements.tsv": "a person's verdict per sampled sentence, which word_choice_sample.py reads",
}


def tracked_result_files() -> list[str]:
    """The files git tracks under benchmarks/results that the tree still has (a deletion not yet committed is
    gone), relative to benchmarks/results; skips where there is no git or no checkout."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the tracked files cannot be listed")
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", RESULTS], capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout: {listed.stderr.decode(errors='replace').strip()}")
    paths = [p for p in listed.stdout.decode().split("\0") if p]
    return sorted(p[len(RESULTS) + 1:] for p in paths if (ROOT / p).exists())


def matches(path: str, pattern: str) -> bool:
    """Whether ``path`` matches ``pattern`` folder by folder (a ``*`` never crosses a ``/``)."""
    parts, wanted = path.split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(fnmatch.fnmatchcase(p, w) for p, w in zip(parts, wanted, strict=True))


def unexpected(files: list[str]) -> list[str]:
    """Files that are neither a standard result file nor matched by a ``KEPT`` pattern."""
    return [f for f in files if Path(f).name not in STANDARD and not any(matches(f, pattern) for pattern in KEPT)]


def test_every_tracked_result_file_is_standard_or_kept() -> None:
    files = tracked_result_files()
    assert files, "no tracked files under benchmarks/results"
    assert unexpected(files) == [], "a per-step log? delete it, or add it to KEPT with why"


def test_every_kept_pattern_still_names_a_file() -> None:
    """A ``KEPT`` entry whose files are gone is dropped from the list, so that the list says what is there."""
    files = tracked_result_files()
    stale = [pattern for pattern in KEPT if not any(matches(f, pattern) for f in files)]
    assert stale == []


def test_the_check_catches_a_new_per_step_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """A per-step log added under a result folder (here only in the listing, no file made) fails the check."""
    files = tracked_result_files()
    monkeypatch.setattr(sys.modules[__name__], "tracked_result_files", lambda: [*files, "suggestions/metrics.jsonl"])
    assert unexpected(tracked_result_files()) == ["suggestions/metrics.jsonl"]
    deeper = ["gpu_check/nvidia_smi.csv", "compute_curve/points/run/pretrain.json"]  # a pattern's * stays in its folder
    assert unexpected(deeper) == deeper
