"""Pre-training on two "nodes" of one host: ``torchrun --nnodes 2`` with a c10d rendezvous on 127.0.0.1.

Masking and sampling are seeded per sample (``SampleRng``), each rank draws the global batch's block ids and takes
its share, and the logged figures are averaged over the ranks; so two nodes of 8 texts a step give the loss curve
of one process of 16, up to float32's reduction order (DDP's gradient all-reduce, and the two halves' loss means
averaged instead of one mean): the bound below is 1e-4 of the loss over a few dozen Adam steps.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_cli import MICRO

STEPS = 300


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pretrain_args(corpus: Path, cache: Path, out: Path, batch_size: int, *extra: str) -> list[str]:
    args = [a for a in MICRO]
    args[args.index("--batch-size") + 1] = str(batch_size)
    return ["-m", "electra_detect.cli", "pretrain", *args, "--corpus", str(corpus), "--cache-dir", str(cache),
            "--out", str(out), "--max-steps", str(STEPS), "--eval-every", "1000", "--save-every", "10", *extra]


def two_nodes(corpus: Path, cache: Path, out: Path, *extra: str) -> list[subprocess.Popen]:
    """Two torchrun launchers, one process each, meeting at a c10d rendezvous on 127.0.0.1 (as two hosts would)."""
    port, env = free_port(), {**os.environ, "OMP_NUM_THREADS": "1"}
    return [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
                              "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "test",
                              *pretrain_args(corpus, cache, out, 8, *extra)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True) for _ in range(2)]


def losses(out: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {row["step"]: row["loss"] for row in rows if row.get("split") == "train"}


@pytest.mark.slow
def test_two_nodes_give_one_process_curve_and_a_lost_rank_resumes_to_it(tmp_path: Path, corpus_file: Path,
                                                                         cache_dir: Path) -> None:
    single = tmp_path / "single"
    one = subprocess.run([sys.executable, *pretrain_args(corpus_file, cache_dir, single, 16)], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert one.returncode == 0, one.stderr[-2000:]
    whole = tmp_path / "two_nodes"
    for node in two_nodes(corpus_file, cache_dir, whole):
        _, err = node.communicate(timeout=300)
        assert node.returncode == 0, err[-3000:]
    expected, got = losses(single), losses(whole)
    assert sorted(got) == list(range(1, STEPS + 1)) == sorted(expected)
    worst = max(abs(got[step] - expected[step]) / abs(expected[step]) for step in expected)
    print("worst relative difference, two nodes vs one process:", worst)
    for step in expected:
        assert abs(got[step] - expected[step]) <= 1e-4 * abs(expected[step]), (step, got[step], expected[step])
    state = json.loads((whole / "checkpoints" / f"step_{STEPS:08d}" / "trainer_state.json").read_text())
    assert state["trainer"]["world_size"] == 2 and not list(whole.glob("checkpoints/*.tmp*"))

    # a node lost mid-run: the other rank ends with one clear line; the same command with --resume finishes the curve
    lost = tmp_path / "lost"
    first, second = two_nodes(corpus_file, cache_dir, lost)
    metrics = lost / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 40):
        time.sleep(0.05)
    import psutil

    node = psutil.Process(second.pid)
    for process in [*node.children(recursive=True), node]:  # the launcher and its worker: a machine that went away
        process.send_signal(signal.SIGKILL)
    second.wait(timeout=30)
    _, err = first.communicate(timeout=300)
    assert first.returncode != 0 and "another rank was lost at step" in err and "--resume" in err, err[-3000:]
    assert "Traceback" not in err.split("another rank was lost")[0][-300:]
    saved = sorted(p.name for p in (lost / "checkpoints").glob("step_*"))
    assert saved and f"step_{STEPS:08d}" not in saved
    for node in two_nodes(corpus_file, cache_dir, lost, "--resume"):
        _, err = node.communicate(timeout=300)
        assert node.returncode == 0, err[-3000:]
    resumed = losses(lost)
    assert sorted(resumed) == list(range(1, STEPS + 1))
    for step in resumed:
        assert abs(resumed[step] - got[step]) <= 1e-4 * abs(got[step]), (step, resumed[step], got[step])
