"""The CLI as a user runs it: a real process, clear errors, signals, resume, scoring."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

CLI = [sys.executable, "-m", "electra_detect.cli"]
MICRO = ["--preset", "micro", "--vocab-size", "200", "--seq-len", "32", "--batch-size", "8", "--threads", "1",
         "--no-progress", "--log-every", "1", "--eval-batches", "2"]


def run_cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def assert_clean_error(result: subprocess.CompletedProcess, fragment: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and fragment in last, result.stderr


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "electra-detect"
    assert script.exists()
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "pretrain" in result.stdout and "score" in result.stdout


@pytest.mark.parametrize("case", ["missing", "empty", "binary", "bad-value", "bad-preset"])
def test_pretrain_rejects_bad_input(case: str, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    extra: list[str] = []
    expected = {"missing": "corpus path not found", "empty": "corpus is empty", "binary": "not UTF-8",
                "bad-value": "mask_prob", "bad-preset": "unknown preset"}[case]
    if case == "empty":
        corpus.write_text("\n\n")
    elif case == "binary":
        corpus.write_bytes(bytes(range(256)) * 10)
    elif case != "missing":
        corpus.write_text("Some text here.\n")
    if case == "bad-value":
        extra = ["--mask-prob", "1.5"]
    if case == "bad-preset":
        extra = ["--preset", "huge"]
    result = run_cli("pretrain", *MICRO, *extra, "--corpus", str(corpus), "--out", str(tmp_path / "run"),
                     "--cache-dir", str(tmp_path / "cache"), "--max-steps", "2")
    assert_clean_error(result, expected)
    assert not (tmp_path / "run" / "discriminator").exists()


def test_a_bad_pretrain_flag_is_reported_before_torch_loads(tmp_path: Path) -> None:
    probe = ("import sys\nfrom electra_detect.cli import main\ncode = main(['pretrain', '--preset', 'huge', '--out', "
             f"{str(tmp_path / 'run')!r}])\nprint(code, 'torch' in sys.modules, 'transformers' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert "unknown preset" in result.stderr
    assert result.stdout.split() == ["2", "False", "False"]


def test_score_rejects_bad_input(tmp_path: Path, micro_run: Path) -> None:
    assert_clean_error(run_cli("score", "--model", str(tmp_path / "nope"), "hello"), "model path not found")
    import pty

    reader, terminal = pty.openpty()  # a terminal on stdin and no text: an error, not a wait for typing
    try:
        result = subprocess.run([*CLI, "score", "--model", str(micro_run)], stdin=terminal, capture_output=True,
                                text=True, timeout=120)
    finally:
        os.close(reader)
        os.close(terminal)
    assert_clean_error(result, "no text to score")
    assert_clean_error(run_cli("score", "--model", str(micro_run), "--file", str(tmp_path / "x.txt")),
                       "input file not found")
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\xff\xfe\xfa")
    assert_clean_error(run_cli("score", "--model", str(micro_run), "--file", str(binary)), "not UTF-8")


def test_score_prints_highlights_and_json(tmp_path: Path, micro_run: Path) -> None:
    plain = run_cli("score", "--model", str(micro_run), "--threshold", "0", "The farmer saw a red house.")
    assert plain.returncode == 0, plain.stderr
    first = plain.stdout.splitlines()[0]
    assert "[[farmer]]" in first and "sentence score" in first
    texts = tmp_path / "texts.txt"
    texts.write_text("The farmer saw a red house.\n\nA doctor opened the window.\n")
    result = run_cli("score", "--model", str(micro_run), "--json", "--file", str(texts))
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["text"] for r in rows] == ["The farmer saw a red house.", "A doctor opened the window."]
    assert all(0 < t["p_replaced"] < 1 for r in rows for t in r["tokens"])
    assert rows[0]["words"][1]["word"] == "farmer"
    spelled = run_cli("score", "--model", str(micro_run), "--output-format", "json", "--file", str(texts))
    assert spelled.returncode == 0 and spelled.stdout == result.stdout  # --json is a spelling of it
    assert "sentence score" in run_cli("score", "--model", str(micro_run), "--output-format", "text", "--file",
                                       str(texts)).stdout
    github = run_cli("score", "--model", str(micro_run), "--output-format", "github", "x")  # ged's only
    assert github.returncode == 2 and "invalid choice: 'github'" in github.stderr


@pytest.mark.slow
def test_sigint_saves_and_resume_continues(tmp_path: Path, corpus_file: Path, cache_dir: Path) -> None:
    out = tmp_path / "run"
    args = [*CLI, "pretrain", *MICRO, "--corpus", str(corpus_file), "--cache-dir", str(cache_dir),
            "--out", str(out), "--max-steps", "100000", "--eval-every", "1000", "--save-every", "1000"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = out / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 3):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "interrupted at step" in stderr and "Traceback" not in stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["stop_reason"] == "SIGINT"
    stopped_at = summary["steps"]
    assert (out / "checkpoints" / f"step_{stopped_at:08d}").is_dir()
    assert (out / "discriminator" / "model.safetensors").exists()

    resumed = run_cli("pretrain", "--out", str(out), "--resume", "--max-steps", str(stopped_at + 3), "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["steps"] == stopped_at + 3
    steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines() if '"train"' in line]
    assert steps == list(range(1, stopped_at + 4))


@pytest.mark.slow
def test_two_process_ddp_run(tmp_path: Path, corpus_file: Path, cache_dir: Path) -> None:
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         "-m", "electra_detect.cli", "pretrain", *MICRO, "--corpus", str(corpus_file), "--cache-dir", str(cache_dir),
         "--out", str(out), "--max-steps", "6", "--eval-every", "3", "--save-every", "3"],
        capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    summaries = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(summaries) == 1, "only rank 0 reports"
    assert summaries[0]["steps"] == 6
    assert summaries[0]["tokens_seen"] == 6 * 8 * 2 * 32  # both processes' batches count
    state = json.loads((out / "checkpoints" / "step_00000006" / "trainer_state.json").read_text())
    assert state["trainer"]["world_size"] == 2
    assert (out / "discriminator" / "model.safetensors").exists()


def test_rerun_needs_overwrite_and_a_log_gets_one_line_per_interval(tmp_path: Path, corpus_file: Path,
                                                                    cache_dir: Path) -> None:
    out = tmp_path / "run"
    args = ["pretrain", *[a for a in MICRO if a != "--no-progress"], "--log-every", "5", "--corpus", str(corpus_file),
            "--cache-dir", str(cache_dir), "--out", str(out), "--max-steps", "10", "--eval-every", "100"]
    first = run_cli(*args)  # stderr is a pipe here, as in a CI log: no bar, one plain line per log interval
    assert first.returncode == 0, first.stderr
    progress = [line for line in first.stderr.splitlines() if line.startswith("pretrain step")]
    assert [line.split()[2] for line in progress] == ["5/10", "10/10"] and "\r" not in first.stderr
    assert_clean_error(run_cli(*args), "already holds a run")
    again = run_cli(*args, "--overwrite")  # what `make quickstart` does the second time
    assert again.returncode == 0, again.stderr
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2 + 1  # the old run's rows are gone


def test_continued_pretraining_defaults_to_the_rate_measured_to_work(micro_run: Path) -> None:
    from electra_detect.training.pretraining.config import RunConfig
    from electra_detect.training.pretraining.rundir import CONTINUED_LR, start_from

    assert start_from(RunConfig(), micro_run).train.lr == CONTINUED_LR == 3e-4
    from_file = RunConfig()
    from_file.train.lr = 5e-4  # a rate a --config file gave is kept
    assert start_from(from_file, micro_run).train.lr == 5e-4


def test_init_from_continues_a_run_on_new_text(tmp_path: Path, micro_run: Path, cache_dir: Path) -> None:
    other = tmp_path / "other.txt"  # text the source never saw, with words its tokenizer has not learnt
    other.write_text("\n\n".join(f"Zebras quietly crossed river number {i} at dawn." for i in range(300)) + "\n")
    out = tmp_path / "continued"
    args = ["pretrain", "--init-from", str(micro_run), "--corpus", str(other), "--cache-dir", str(cache_dir),
            "--out", str(out), "--max-steps", "1", "--lr", "1e-9", "--batch-size", "8", "--seq-len", "32",
            "--threads", "1", "--no-progress", "--eval-every", "100", "--warmup-steps", "1"]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    config = json.loads((out / "run_config.json").read_text())
    source = json.loads((micro_run / "run_config.json").read_text())
    assert config["model"] == source["model"] and config["train"]["init_from"] == str(micro_run.resolve())
    assert config["train"]["lr"] == 1e-9  # a given --lr wins over continued pre-training's default
    # the source's tokenizer, not one trained on the new text
    vocab = (out / "discriminator" / "vocab.txt").read_text()
    assert vocab == (micro_run / "discriminator" / "vocab.txt").read_text()
    # one update at lr 1e-9 leaves the source's weights: they were loaded, every tensor of both halves
    for part in ("discriminator", "generator"):
        before, after = load_file(micro_run / part / "model.safetensors"), load_file(out / part / "model.safetensors")
        assert before.keys() == after.keys()
        for key in before:
            torch.testing.assert_close(after[key], before[key], atol=1e-5, rtol=0, msg=f"{part}: {key}")
    assert_clean_error(run_cli(*args[:-2], "--out", str(tmp_path / "bigger"), "--preset", "tiny", "--seq-len", "32"),
                       "cannot start from")
    assert_clean_error(run_cli("pretrain", "--init-from", str(tmp_path), "--out", str(tmp_path / "x")),
                       "not a run directory")


@pytest.mark.parametrize("verb, value", [("score", "nan"), ("score", "5"), ("ged", "5"), ("ged", "-0.1"),
                                         ("ged", "inf")])
def test_thresholds_are_checked_before_the_model_loads(verb: str, value: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from electra_detect.cli import main

    assert main([verb, "--model", str(tmp_path / "no-model"), "--threshold", value, "some text"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --threshold must be a number in [0, 1]"), err


@pytest.mark.parametrize("verb", ["ged", "score"])
def test_help_renders(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    from electra_detect.cli import main

    with pytest.raises(SystemExit) as done:
        main([verb, "--help"])  # argparse reads a lone % in a help text as a format: a traceback, not help
    assert done.value.code == 0 and "--output-format" in capsys.readouterr().out


def test_text_file_is_read_in_bounded_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from electra_detect.cli import texts as cli
    from electra_detect.errors import CliError

    path = tmp_path / "big.txt"
    path.write_text("".join(f"line {i} of the file\n\n" for i in range(1000)), encoding="utf-8")
    handle = cli.open_texts(str(path))
    batches = cli.text_batches(["an argument"], str(path), handle)
    first = next(batches)
    assert first[0] == "an argument" and len(first) == cli.STREAM_TEXTS // 8  # a small first batch: output soon
    assert handle.tell() < path.stat().st_size / 10  # only what the first batch needed has been read
    rest = list(batches)
    assert all(len(batch) <= cli.STREAM_TEXTS for batch in rest)
    assert sum(map(len, rest)) + len(first) == 1001 and rest[-1][-1] == "line 999 of the file"

    monkeypatch.setattr(cli, "MAX_LINE_CHARS", 50)
    long = tmp_path / "long.txt"
    long.write_text("short\n" + "x" * 200 + "\n", encoding="utf-8")
    with pytest.raises(CliError, match="line 2 is longer than 50 characters"):
        list(cli.text_batches([], str(long), cli.open_texts(str(long))))


def test_score_file_streams_its_output(micro_run: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # block-buffered, as a pipe usually is
    proc = subprocess.Popen([*CLI, "score", "--model", str(micro_run), "--file", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    proc.stdin.write("The farmer saw a red house.\n" * 8)  # one first batch (a few KB of output); stdin stays open
    proc.stdin.flush()
    first = proc.stdout.readline()  # scored and written (flushed) before the input has even ended
    assert "sentence score" in first and proc.poll() is None
    proc.stdin.write("A doctor opened the window.\n" * 100)
    proc.stdin.close()
    rest = proc.stdout.read()
    assert proc.wait(timeout=120) == 0 and rest.count("sentence score") == 107


@pytest.mark.parametrize("how", ["no-argument", "dash"])
def test_ged_is_a_unix_filter(how: str, micro_run: Path) -> None:
    args = ["ged", "--output-format", "json", "--model", str(micro_run)] + (["--file", "-"] if how == "dash" else [])
    result = subprocess.run([*CLI, *args], input="She don't like it.\n\nThe farmer saw a red house.\n",
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["text"] for row in rows] == ["She don't like it.", "The farmer saw a red house."]
    assert all("flagged" in row and "threshold" in row for row in rows)


def test_ged_processes_write_what_one_process_writes_in_input_order(tmp_path: Path, micro_run: Path) -> None:
    # 1,100 lines make four batches (8, 512, 512, 68): two processes finish them out of order
    lines = [f"Line {i}: the farmer {'saw' if i % 3 else 'see'} {i} red houses." for i in range(1100)]
    texts = tmp_path / "lines.txt"
    texts.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ged = ["ged", "--output-format", "json", "--model", str(micro_run), "--engine", "torch", "--file", str(texts)]
    one, two = run_cli(*ged), run_cli(*ged, "--processes", "2")
    assert one.returncode == 0 and two.returncode == 0, two.stderr
    assert [json.loads(line)["text"] for line in two.stdout.splitlines()] == lines
    assert two.stdout == one.stdout
    assert two.stderr.count("engine: torch") == 1  # the engine line once, not once a process
    assert json.loads(two.stdout.splitlines()[0])["model"] == micro_run.name  # what served it, by name


@pytest.mark.parametrize("processes", ["1", "2"])
def test_ged_stops_quietly_when_its_reader_goes_away(processes: str, tmp_path: Path, micro_run: Path) -> None:
    texts = tmp_path / "lines.txt"
    texts.write_text("The farmer saw a red house.\n" * 3000, encoding="utf-8")
    proc = subprocess.Popen([*CLI, "ged", "--output-format", "json", "--model", str(micro_run), "--engine", "torch",
                             "--file", str(texts), "--processes", processes], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith('{"text"')
    proc.stdout.close()  # as `| head -1` does
    assert proc.wait(timeout=120) == 1
    assert "Traceback" not in proc.stderr.read()


def test_ged_interrupted_says_so_in_one_line(tmp_path: Path, micro_run: Path) -> None:
    texts = tmp_path / "lines.txt"
    texts.write_text("The farmer saw a red house.\n" * 3000, encoding="utf-8")
    # Ctrl-C as a terminal sends it: a test run started in the background (`make test &`) has SIGINT ignored, and
    # a child inherits that, so Python would never raise KeyboardInterrupt
    proc = subprocess.Popen([*CLI, "ged", "--output-format", "json", "--model", str(micro_run), "--engine", "torch",
                             "--file", str(texts), "--processes", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout.readline().startswith('{"text"')
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    rest, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and stderr.strip().splitlines()[-1] == "interrupted" and "Traceback" not in stderr, \
        f"exit {proc.returncode} after {len(rest.splitlines()) + 1} of 3000 lines; stderr: {stderr[-2000:]}"


def test_ged_processes_report_errors_as_one_line(tmp_path: Path, micro_run: Path) -> None:
    texts = tmp_path / "lines.txt"
    # the bad bytes past the decoder's first 8 KiB read, so the first batch (8 lines) is read before them
    texts.write_bytes(b"".join(b"The farmer saw a red house.\n" for _ in range(400)) + b"\xff\xfe\n")
    bad_line = run_cli("ged", "--output-format", "json", "--model", str(micro_run), "--engine", "torch", "--file",
                       str(texts), "--processes", "2")
    assert_clean_error(bad_line, "not UTF-8")
    assert len(bad_line.stdout.splitlines()) == 8  # the batch read before the bad line is written
    assert_clean_error(run_cli("ged", "--model", str(tmp_path / "none"), "--file", str(texts), "--processes", "2"),
                       "none")  # the model a worker cannot load, as the one error line
    assert_clean_error(run_cli("ged", "--model", str(micro_run), "--file", str(texts), "--processes", "0"),
                       "--processes must be >= 1")
    assert_clean_error(run_cli("ged", "--model", str(micro_run), "--file", str(texts), "--processes", "2",
                               "--workers", "2"), "--workers sets one process's scoring threads")


@pytest.mark.parametrize("verb", ["score", "ged"])
def test_empty_input_gives_empty_output(verb: str, tmp_path: Path, micro_run: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    for args, given in (([], ""), (["--file", "-"], "\n"), (["--file", str(empty)], None)):
        result = subprocess.run([*CLI, verb, "--model", str(micro_run), *args], input=given,
                                stdin=subprocess.DEVNULL if given is None else None, capture_output=True,
                                text=True, timeout=120)
        assert (result.returncode, result.stdout) == (0, ""), (args, result.stderr)
    bad = subprocess.run([*CLI, verb, "--model", str(micro_run)], input=b"fine\n\xff\xfe\n", capture_output=True,
                         timeout=120)
    assert bad.returncode == 2 and b"not UTF-8 text: standard input" in bad.stderr, bad.stderr


@pytest.mark.parametrize("how", ["no-argument", "dash"])
def test_rerank_reads_stdin_and_writes_stdout(how: str, micro_run: Path) -> None:
    hyps = [{"text": "the river flows", "score": -1.0}, {"text": "the river flow", "score": -1.5}]
    lists = "".join(json.dumps({"id": str(i), "hyps": hyps, "ref": "the river flows"}) + "\n" for i in range(3))
    args = ["rerank", "--model", str(micro_run), "--no-progress"] + (["-"] if how == "dash" else [])
    result = subprocess.run([*CLI, *args], input=lists, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["id"] for row in rows] == ["0", "1", "2"]  # stdout holds only the rows
    summary = json.loads(result.stderr.strip().splitlines()[-1])  # the summary goes to stderr
    assert summary["utterances"] == 3 and summary["out"] == "-"
    kaldi = subprocess.run([*CLI, *args], input="u1-1 the river flows\nu1-2 the river flow\n", capture_output=True,
                           text=True, timeout=300)
    assert kaldi.returncode == 0 and json.loads(kaldi.stdout)["id"] == "u1", kaldi.stderr  # sniffed as Kaldi text
    empty = subprocess.run([*CLI, *args], input="\n", capture_output=True, text=True, timeout=300)
    assert (empty.returncode, empty.stdout) == (0, ""), empty.stderr
    bad = subprocess.run([*CLI, *args], input='{"id": "x", "hyps": [{"text": "y", "score": "high"}]}\n',
                         capture_output=True, text=True, timeout=300)
    assert_clean_error(bad, "standard input:1")


def test_pretrain_micro_preset_runs_with_its_default_length(tmp_path: Path, corpus_file: Path,
                                                            cache_dir: Path) -> None:
    out = tmp_path / "run"
    result = run_cli("pretrain", "--preset", "micro", "--vocab-size", "200", "--batch-size", "4", "--threads", "1",
                     "--no-progress", "--max-steps", "2", "--eval-batches", "1", "--corpus", str(corpus_file),
                     "--cache-dir", str(cache_dir), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "run_config.json").read_text())["data"]["seq_len"] == 64


# The flags `pretrain` had before its flags were derived from the config dataclasses: every one still works.
PRETRAIN_FLAGS = ["--preset", "--vocab-size", "--architecture", "--gen-fraction", "--gen-layers", "--gen-heads",
                  "--embedding-sharing", "--dropout", "--local-window", "--global-every", "--seq-len", "--doc-split",
                  "--val-fraction", "--cache-dir", "--max-steps", "--max-minutes", "--batch-size", "--grad-accum",
                  "--lr", "--weight-decay", "--warmup-steps", "--clip-norm", "--clip-scope", "--disc-weight",
                  "--mask-prob", "--keep-original-prob", "--temperature", "--seed", "--log-every", "--eval-every",
                  "--eval-batches", "--save-every", "--keep-last", "--threads", "--objective", "--mlm-first-steps",
                  "--out", "--corpus", "--config", "--resume", "--overwrite", "--init-from", "--paper-recipe",
                  "--tie-all", "--keep-85-15", "--no-progress"]


def test_pretrain_flags_are_the_config_fields() -> None:
    import dataclasses

    from electra_detect.cli import build_parser
    from electra_detect.training.cli.pretrain import OWN_FLAGS, config_flags
    from electra_detect.training.pretraining import config

    flags = config_flags()
    expected = [(section, f.name, f.type) for section, kind in (("model", config.ModelConfig),
                                                                ("data", config.DataConfig),
                                                                ("train", config.TrainConfig))
                for f in dataclasses.fields(kind) if f.type in ("int", "float", "str", "bool")
                and f.name not in OWN_FLAGS]
    assert [(section, name, kind.__name__) for section, name, kind, _ in flags] == expected
    assert all(text for *_, text in flags)
    parser = build_parser()
    pretrain = parser._subparsers._group_actions[0].choices["pretrain"]
    known = {option for action in pretrain._actions for option in action.option_strings}
    assert set(PRETRAIN_FLAGS) <= known
    args = parser.parse_args(["pretrain", "--lr", "0.01", "--no-bf16", "--doc-split", "line"])
    assert (args.lr, args.bf16, args.doc_split, args.max_steps) == (0.01, False, "line", None)


def test_score_threshold_defaults_to_the_models_tuned_one(tmp_path: Path, micro_run: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: `score --threshold` defaulted to 0.5 and ignored ged.json, unlike every other verb."""
    import shutil

    from electra_detect.cli import main

    model = tmp_path / "model"
    shutil.copytree(micro_run / "discriminator", model)
    text = "The farmer saw a red house."
    outputs = {}
    for threshold in (0.0, 1.0):
        (model / "ged.json").write_text(json.dumps({"threshold": threshold, "space": "raw"}))
        assert main(["score", "--model", str(model), text]) == 0
        outputs[threshold] = capsys.readouterr().out.splitlines()[0]
    assert outputs[0.0].count("[[") == 7  # every word (and the full stop) reaches 0
    assert "[[" not in outputs[1.0]  # none reaches 1
    assert main(["score", "--model", str(model), "--threshold", "0", text]) == 0
    assert capsys.readouterr().out.splitlines()[0] == outputs[0.0]  # a given threshold still wins


@pytest.mark.parametrize("fmt, content, fragment", [
    ("m2", "S Fine .\nX not an edit line\n", "bad.txt:2: expected an 'S ' or 'A ' line"),
    ("tsv", "Fine\tc\nbroken line\n", "bad.txt:2: expected 'token<TAB>c|i|NA'"),
    ("bea", '{"text": "Fine.", "edits": []}\n{not json\n', "bad.txt:2: not a BEA-2019 JSON essay"),
    ("parallel", "one\ntwo\n", "has 1 lines but"),
    ("m2", "A 0 1|||R:DET|||a|||REQUIRED|||-NONE-|||0\n", "bad.txt:1: edit line before any sentence line")])
def test_malformed_labelled_data_is_one_error_line(tmp_path: Path, fmt: str, content: str, fragment: str) -> None:
    verb = ["ged", "train"] if content.startswith("A ") else ["ged", "eval"]  # train reads through the same readers
    data = tmp_path / "bad.txt"
    data.write_text(content, encoding="utf-8")
    (tmp_path / "ref.txt").write_text("one\n", encoding="utf-8")
    extra = ["--refs", str(tmp_path / "ref.txt")] if fmt == "parallel" else []
    out = ["--out", str(tmp_path / "out")] if verb[1] == "train" else []
    result = run_cli(*verb, "--data", str(data), "--format", fmt, *extra, *out)
    assert_clean_error(result, fragment)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_model_defaults_to_the_shipped_model_then_the_environment() -> None:
    """`--model` falls back to $ELECTRA_DETECT_MODEL, else the shipped model in the checkout."""
    probe = "from electra_detect.cli import DEFAULT_MODEL, SHIPPED_MODEL; print(DEFAULT_MODEL); print(SHIPPED_MODEL)"
    env = {k: v for k, v in os.environ.items() if k != "ELECTRA_DETECT_MODEL"}
    default, shipped = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                                      timeout=60, check=True).stdout.split("\n")[:2]
    assert Path(shipped).is_dir() and (Path(shipped) / "ged").is_dir()
    assert default == shipped
    chosen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
                            env={**env, "ELECTRA_DETECT_MODEL": "elsewhere"}).stdout.split("\n")[0]
    assert chosen == "elsewhere"


# Verbs whose flag is not yet the shared one (switch it to the shared definition, then remove the pair here).
SHARED_OPTION_GAPS: set[tuple[str, str]] = set()


def _verb_options() -> dict[str, dict[str, object]]:
    """{verb: {flag: its argparse action}} over every verb and sub-verb the CLI has."""
    import argparse

    from electra_detect.cli import build_parser

    found: dict[str, dict[str, object]] = {}

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(f"{name} {sub_name}".strip(), sub)
            for flag in action.option_strings:
                found.setdefault(name, {})[flag] = action

    walk("", build_parser())
    return found


def test_options_shared_by_verbs_are_the_one_definition() -> None:
    """--model, the engine options (--threads where the verb has --engine), --dictionary, a labelled-data verb's
    --format/--refs/--combine/--annotator and an n-best verb's --format take the same choices, default, type and arity
    on every verb: those of cli.engine and cli.options, where each is defined once (a required flag's default
    aside)."""
    import argparse

    from electra_detect.cli.engine import add_engine_args, add_model_arg
    from electra_detect.cli.options import (
        LABELLED_FORMATS,
        add_dictionary_arg,
        add_labelled_data_args,
        add_nbest_format_arg,
    )

    def reference(add) -> dict[str, object]:
        parser = argparse.ArgumentParser()
        add(parser)
        return {flag: action for action in parser._actions for flag in action.option_strings}

    def shape(action, required: bool = False) -> tuple:
        return (sorted(action.choices) if action.choices else None, None if required else action.default,
                action.type, action.nargs, action.metavar)

    common = {**reference(add_model_arg), **reference(lambda p: add_engine_args(p, workers=False, device=True)),
              **reference(add_dictionary_arg)}
    engine = reference(lambda p: add_engine_args(p, workers=False, threads=True))  # torch's --threads elsewhere
    labelled, nbest = reference(add_labelled_data_args), reference(add_nbest_format_arg)
    checked, gaps = set(), set()
    for verb, options in _verb_options().items():
        fmt = options.get("--format")
        family = {} if fmt is None else labelled if set(fmt.choices or ()) == set(LABELLED_FORMATS) else nbest
        for flag, expected in {**common, **family, **(engine if "--engine" in options else {})}.items():
            if flag not in options or flag == "--model" and options[flag].required:  # distill train: the student's
                continue
            action = options[flag]
            if shape(action, action.required) != shape(expected, action.required):
                gaps.add((verb, flag))
            checked.add((verb, flag))
    assert gaps == SHARED_OPTION_GAPS, "a verb's shared flag differs from its one definition (or a gap was closed)"
    assert {("ged", "--dictionary"), ("ged-eval", "--combine"), ("rerank", "--format"), ("export", "--model"),
            ("ged-train", "--combine"), ("serve", "--engine"), ("calibrate", "--combine"), ("pos-bias", "--annotator"),
            ("rerank-train", "--format"), ("serve", "--threads"), ("lsp", "--threads"), ("demo", "--dictionary"),
            ("lsp", "--dictionary")} <= checked


# Exceptions of the project that are not a user's to fix through a verb, each with why: everything else a module
# defines derives from UserError, which every verb reports as one `error:` line (exit 2).
NOT_USER_ERRORS = {
    "electra_detect.app.api_errors.ApiError",  # the server's JSON error answer itself, with its status
    "electra_detect.app.clients.Refused",  # the server's admission refusing a request (a 429/503 answer)
    "electra_detect.app.http.forms.FormError",  # a /v2/check form the server answers 400/413; no verb reads forms
    "electra_detect.app.http.languagetool_api.CheckError",  # a /v2/check request answered 4xx; no verb raises it
    "electra_detect.app.demo.errors.InputProblem",  # shown in the demo's page while it runs, never at the verb's start
    "electra_detect.app.lsp.checks.Cancelled",  # a stale check stopped: control flow inside the language server
}
LAYER_FOLDERS = {"electra_detect": "electra_detect", "training": "electra_detect.training",
                 "app": "electra_detect.app", "calibration": "electra_detect.calibration"}


def _project_exception_classes() -> dict[str, type]:
    """Every exception class the project's modules define, by its full name: the modules whose source defines a class
    with a base named like an exception are imported, and their classes read with inspect."""
    import ast
    import importlib
    import inspect

    import electra_detect

    root = Path(electra_detect.__file__).resolve().parents[1]
    found: dict[str, type] = {}
    for folder, package in LAYER_FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            bases = {ast.unparse(base).split(".")[-1] for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                     for base in node.bases}
            if not any(base.endswith(("Error", "Exception", "Unavailable", "Export")) for base in bases):
                continue
            parts = path.relative_to(root / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            module = importlib.import_module(name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, BaseException) and cls.__module__ == name:
                    found[f"{name}.{cls.__qualname__}"] = cls
    return found


def test_every_error_a_verb_reports_is_a_user_error() -> None:
    """The CLI reports UserError (and a file it cannot find or open) as one `error:` line, whatever the verb: every
    exception the project defines is one, or is named above with why not."""
    from electra_detect.cli import USER_ERRORS
    from electra_detect.errors import UserError

    classes = _project_exception_classes()
    assert NOT_USER_ERRORS <= set(classes), "an exception named as no user error is gone: remove it from the list"
    not_user = sorted(name for name, cls in classes.items() if not issubclass(cls, UserError))
    assert not_user == sorted(NOT_USER_ERRORS), "an exception a verb may raise is no UserError"
    # the errors each verb listed before there was one base, every layer's among them
    for name in ("electra_detect.errors.DetectorError", "electra_detect.errors.CorruptExport",
                 "electra_detect.errors.MarkupError", "electra_detect.training.pretraining.config.ConfigError",
                 "electra_detect.training.pretraining.errors.CheckpointError",
                 "electra_detect.training.corpus.fetch.FetchError", "electra_detect.calibration.CalibrationError",
                 "electra_detect.app.settings.SettingsError", "electra_detect.app.lsp.settings.SettingsError",
                 "electra_detect.app.cli.ServeError", "electra_detect.app.demo.errors.DemoError",
                 "electra_detect.app.lsp.LspError"):
        assert issubclass(classes[name], USER_ERRORS), name
    from electra_detect.markup import MarkupError

    assert MarkupError is classes["electra_detect.errors.MarkupError"]  # still importable where it was


@pytest.mark.parametrize("argv, fragment", [
    (["corpus", "build", "--out", "{tmp}/c", "--sources", "no-such-source"], "unknown corpus source"),
    (["calibrate", "--model", "{tmp}"], "give exactly one source"),
    (["ged", "--markup", "latex", "--model", "{tmp}/none", "text"], "model path not found"),
    (["serve", "--model", "{tmp}", "--port", "0"], "--port 0 is not a TCP port")])
def test_a_layers_user_error_is_one_line(argv: list[str], fragment: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from electra_detect.cli import main

    assert main([arg.replace("{tmp}", str(tmp_path)) for arg in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and fragment in err[0], err
