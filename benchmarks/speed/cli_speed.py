"""`electra-detect ged --file` speed, side by side in one run: torch vs onnxruntime fp32 vs int8, for the
shipped tiny model and a warm-start-shaped model (6 layers, 384 wide: MiniLM's shape), with harper-py on the
same sentences.

Per configuration: time to first output line (process start to the first JSON line, the ONNX export already
cached), sentences/s (lines written after the first, over the time after it), and peak RSS at two file sizes
(sampled every 0.1 s) to show memory does not grow with the file. A run is stopped after ``--max-seconds`` and
its speed taken over the lines it wrote (the slow torch configurations do not finish 100k sentences).

Sentences: JFLEG dev (source and its four references, real learner English and its corrections; FCE-like
lengths, FCE itself may not be redistributed), one per line, cycled to ``--sentences`` lines.
The warm-start-shaped model: speed depends on shape only, so ``--warm-model`` may name any such discriminator;
without it one is made by a tiny `electra-detect ged train --model minilm` run in a temp dir (a trained
head, so the int8 parity gate judges real flags).

    python -m benchmarks.speed.cli_speed --jfleg /work/shared/data/jfleg/dev [--warm-model DIR]

Writes result.json, table.md and plot.png to ``--out-dir`` (default benchmarks/results/cli_speed/).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.common.run import command_line, engine_line

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "benchmarks" / "results" / "cli_speed"
CLI = [sys.executable, "-m", "electra_detect.cli"]
CONFIGS = (("torch", "torch", None), ("onnxruntime fp32", "onnx", "fp32"), ("onnxruntime int8", "onnx", "int8"))


def write_sentences(jfleg: Path, path: Path, count: int) -> int:
    """``count`` lines cycled from JFLEG dev's source and references; returns the distinct sentences used."""
    lines = []
    for name in ("dev.src", "dev.ref0", "dev.ref1", "dev.ref2", "dev.ref3"):
        lines += [line.strip() for line in (jfleg / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    with open(path, "w", encoding="utf-8") as handle:
        for index in range(count):
            handle.write(lines[index % len(lines)] + "\n")
    return len(lines)


def run_cli(args: list[str], max_seconds: float, env: dict[str, str]) -> dict:
    """Run one CLI command; time its first output line, count lines, sample peak RSS."""
    from benchmarks.speed.cli_stream import PeakRss

    started = time.perf_counter()
    proc = subprocess.Popen([*CLI, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    memory = PeakRss(proc.pid)
    stopper = threading.Timer(max_seconds, proc.terminate)
    stopper.start()
    first, rows = None, 0
    for _ in proc.stdout:
        if first is None:
            first = time.perf_counter() - started
        rows += 1
    last = time.perf_counter() - started
    proc.wait()
    stopper.cancel()
    peak = memory.stop()
    stderr = proc.stderr.read()
    stopped = proc.returncode != 0 and last >= max_seconds - 0.5
    if proc.returncode != 0 and not stopped:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {stderr[-2000:]}")
    engine = engine_line(stderr)
    return {"first_output_s": round(first or -1, 3), "lines": rows, "seconds": round(last, 2),
            "sentences_per_s": round((rows - 1) / (last - first), 1) if first and rows > 1 and last > first else None,
            "peak_rss_mib": round(peak / (1 << 20), 1), "stopped_early": stopped, "engine_line": engine}


def harper_speed(path: Path, max_seconds: float) -> dict:
    from benchmarks.common.peers import HarperPeer

    peer = HarperPeer()
    started, rows = time.perf_counter(), 0
    with open(path, encoding="utf-8") as handle:
        batch = []
        for line in handle:
            batch.append(line.rstrip("\n"))
            if len(batch) == 256:
                peer.flag(batch)
                rows += len(batch)
                batch = []
                if time.perf_counter() - started > max_seconds:
                    break
    seconds = time.perf_counter() - started
    return {"version": peer.version, "lines": rows, "seconds": round(seconds, 2),
            "sentences_per_s": round(rows / seconds, 1)}


def make_warm_model(work: Path, env: dict[str, str]) -> Path:
    out = work / "warm-ged"
    subprocess.run([*CLI, "ged", "train", "--model", "minilm", "--out", str(out), "--synthetic", "400",
                    "--max-steps", "40", "--batch-size", "16", "--no-progress"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    return out


def table(result: dict) -> str:
    lines = [f"# `electra-detect ged --file` speed ({result['host']}; {result['date']})", "",
             f"{result['sentences']:,} sentences cycled from JFLEG dev ({result['distinct']:,} distinct, mean "
             f"{result['mean_words']:.1f} words); small file {result['small']:,}. Runs stopped after "
             f"{result['max_seconds']:g} s are marked *, their speed taken over the lines written. Load average at "
             f"start {result['load_average'][0]:.2f} (the 2 cores were shared with other jobs).", "",
             "| model | engine | first output s | × faster than torch | sentences/s | × torch | peak RSS MiB, "
             f"{result['small']:,} → {result['sentences']:,} lines |",
             "|---|---|---:|---:|---:|---:|---|"]
    for model, rows in result["models"].items():
        torch_row = rows["torch"]
        for name, row in ((name, rows[name]) for name, _, _ in CONFIGS):
            big, small = row["big"], row["small"]
            ratio_first = torch_row["small"]["first_output_s"] / small["first_output_s"]
            ratio_speed = (big["sentences_per_s"] or 0) / (torch_row["big"]["sentences_per_s"] or 1)
            mark = "*" if big["stopped_early"] else ""
            lines.append(f"| {model} | {name} | {small['first_output_s']:.2f} | {ratio_first:.1f} | "
                         f"{big['sentences_per_s']:,.0f}{mark} ({big['lines']:,} lines) | {ratio_speed:.1f} | "
                         f"{small['peak_rss_mib']:.0f} → {big['peak_rss_mib']:.0f} |")
    harper = result["harper"]
    lines += ["", f"{harper['version']} on the same file, in-process (no start-up counted): "
              f"{harper['sentences_per_s']:,.0f} sentences/s ({harper['lines']:,} lines).", "",
              f"Command: `{result['command']}`"]
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from electra_detect.fileio import atomic_save_figure

    labels, speeds, colours = [], [], []
    for model, rows in result["models"].items():
        for (name, _, _), colour in zip(CONFIGS, ("#999", "#69c", "#36a"), strict=True):  # CONFIGS order: json sorts
            labels.append(f"{model.split(' (')[0]}\n{name.replace('onnxruntime ', 'ORT ')}")
            speeds.append(rows[name]["big"]["sentences_per_s"] or 0)
            colours.append(colour)
    labels.append("harper-py")
    speeds.append(result["harper"]["sentences_per_s"])
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar(range(len(speeds)), speeds, color=[*colours, "#c63"])
    ax.set_xticks(range(len(speeds)), labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("sentences / s (log)")
    ax.set_title("electra-detect ged --file on 2 CPU cores")
    fig.tight_layout()
    atomic_save_figure(fig, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jfleg", type=Path, default=Path("/work/shared/data/jfleg/dev"))
    parser.add_argument("--tiny-model", default="models/electra-tiny")
    parser.add_argument("--warm-model", type=Path, help="a warm-start-shaped discriminator (default: make one)")
    parser.add_argument("--sentences", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000, help="the smaller file (RSS at two sizes)")
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    from electra_detect.fileio import atomic_write_json, atomic_write_text

    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="cli-speed-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(work / "cache")}  # a fresh export cache
        big, small = work / "big.txt", work / "small.txt"
        distinct = write_sentences(args.jfleg, big, args.sentences)
        write_sentences(args.jfleg, small, args.small)
        words = [len(line.split()) for line in big.read_text(encoding="utf-8").splitlines()[:distinct]]
        warm = args.warm_model or make_warm_model(work, env)
        result = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                  "host": f"{platform.machine()}, {os.cpu_count()} cores", "load_average": load,
                  "sentences": args.sentences, "small": args.small, "distinct": distinct,
                  "mean_words": sum(words) / len(words), "max_seconds": args.max_seconds, "models": {},
                  "command": command_line()}
        for label, model in (("tiny (models/electra-tiny)", args.tiny_model), ("warm-start shape (6×384)", warm)):
            # the first use exports into the fresh cache: timed once, then every timed run starts from the cache
            cold = run_cli(["ged", "--output-format", "json", "--model", str(model), "The cat sat on the mat ."],
                           600, env)
            rows = {}
            for name, engine, variant in CONFIGS:
                flags = ["--engine", engine, *(["--variant", variant] if variant else [])]
                ged = ["ged", "--output-format", "json", "--model", str(model), *flags]
                rows[name] = {size: run_cli([*ged, "--file", str(path)], args.max_seconds, env)
                              for size, path in (("small", small), ("big", big))}
                print(json.dumps({"model": label, "config": name, **rows[name]["big"]}), file=sys.stderr, flush=True)
            rows["torch"]["first_use_export_s"] = cold["seconds"]
            result["models"][label] = rows
        result["harper"] = harper_speed(big, args.max_seconds)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out_dir / "result.json", result)
    atomic_write_text(args.out_dir / "table.md", table(result))
    plot(result, args.out_dir / "plot.png")
    print(json.dumps({k: v for k, v in result.items() if k != "models"} | {
        "speeds": {m: {n: r["big"]["sentences_per_s"] for n, r in rows.items()}
                   for m, rows in result["models"].items()},
        "first_output_s": {m: {n: r["small"]["first_output_s"] for n, r in rows.items()}
                           for m, rows in result["models"].items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
