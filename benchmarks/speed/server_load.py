"""Load test of ``electra-detect serve``: requests/s, p50/p99 latency, errors and server memory.

The script starts one real server process per mode (micro-batching on, off), then for each
concurrency (1, 8, 32 closed-loop clients) runs both modes back to back, order flipped at each
level, sending ``POST /v1/score`` with one real sentence per request for ``--duration`` seconds
(after a short warm-up) and sampling the server's RSS every second.
The clients run in this process on httpx; on a 2-core host they share the CPU with the server, as
a co-located client would. Memory is "flat" when the RSS at the end of a cell is within
``--flat-mib`` of its value after warm-up.

    electra-detect export --model MODEL --out runs/small-onnx     # the model under test, exported
    python -m benchmarks.speed.server_load --model runs/small-onnx      # 2 modes x 3 concurrencies x 60 s

Writes ``result.json``, ``table.md`` and ``plot.png`` to ``--out-dir`` (default ``benchmarks/results/server_load/``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common.run import command_line
from benchmarks.common.servers import free_port, sentences, start_server

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT_DIR = ROOT / "benchmarks" / "results" / "server_load"


def batch_stats(url: str) -> tuple[float, float]:
    import httpx

    text = httpx.get(f"{url}/metrics", timeout=10).text
    values = {}
    for name in ("electra_batch_texts_sum", "electra_batch_texts_count"):
        match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
        values[name] = float(match.group(1)) if match else 0.0
    return values["electra_batch_texts_sum"], values["electra_batch_texts_count"]


async def load(url: str, texts: list[str], concurrency: int, seconds: float, pid: int) -> dict[str, Any]:
    """Closed loop: each client sends its next request as soon as the last one is answered."""
    import httpx
    import psutil

    latencies: list[float] = []
    errors: list[str] = []
    rss: list[tuple[float, float]] = []
    process = psutil.Process(pid)
    stop_at = time.perf_counter() + seconds
    counter = iter(range(10**12))

    async def client(http: httpx.AsyncClient) -> None:
        while time.perf_counter() < stop_at:
            text = texts[next(counter) % len(texts)]
            started = time.perf_counter()
            try:
                response = await http.post(f"{url}/v1/score", json={"texts": [text], "tokens": False})
                ok = response.status_code == 200 and response.json()["results"][0]["text"] == text
                if not ok:
                    errors.append(f"{response.status_code}: {response.text[:200]}")
            except httpx.HTTPError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - started)

    async def sample_memory() -> None:
        begin = time.perf_counter()
        while time.perf_counter() < stop_at:
            rss.append((time.perf_counter() - begin, process.memory_info().rss / 2**20))
            await asyncio.sleep(1.0)

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        began = time.perf_counter()
        await asyncio.gather(sample_memory(), *(client(http) for _ in range(concurrency)))
        elapsed = time.perf_counter() - began
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else float("nan")

    return {"requests": len(latencies), "errors": len(errors), "error_examples": errors[:3],
            "seconds": elapsed, "requests_per_s": len(latencies) / elapsed, "p50_ms": pct(0.50), "p99_ms": pct(0.99),
            "mean_ms": statistics.fmean(latencies) * 1000 if latencies else float("nan"),
            "rss_mib_start": rss[0][1] if rss else float("nan"), "rss_mib_end": rss[-1][1] if rss else float("nan"),
            "rss_mib_max": max(r for _, r in rss) if rss else float("nan"), "rss_samples": len(rss),
            "rss_trace": [(round(t, 1), round(r, 1)) for t, r in rss[::max(1, len(rss) // 600)]]}  # for the plot


def render_markdown(result: dict[str, Any]) -> str:
    lines = [f"# Server load: {result['model']}", "",
             f"`POST /v1/score`, one real sentence per request, closed-loop clients on the same "
             f"{result['host_cores']}-core host, {result['duration_s']:g} s per cell after {result['warmup_s']:g} s "
             f"warm-up. Engine: {result['engine']}.", "",
             "| mode | clients | requests | req/s | p50 ms | p99 ms | errors | texts per model call | "
             "RSS MiB start → end (max) | memory flat | host load (1 min) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|"]
    for row in result["cells"]:
        lines.append(f"| {row['mode']} | {row['concurrency']} | {row['requests']:,} | {row['requests_per_s']:.1f} | "
                     f"{row['p50_ms']:.1f} | {row['p99_ms']:.1f} | {row['errors']} | "
                     f"{row['texts_per_model_call']:.2f} | "
                     f"{row['rss_mib_start']:.0f} → {row['rss_mib_end']:.0f} ({row['rss_mib_max']:.0f}) | "
                     f"{'yes' if row['memory_flat'] else '**no**'} | {row['load_average_1min']:.1f} |")
    lines += ["", f"Command: `{result['command']}`", ""]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from electra_detect.fileio import atomic_save_figure

    fig, (left, right, memory) = plt.subplots(1, 3, figsize=(13, 3.4))
    for mode, color in zip(dict.fromkeys(r["mode"] for r in result["cells"]), ("#4c72b0", "#dd8452"), strict=False):
        rows = [r for r in result["cells"] if r["mode"] == mode]
        xs = [r["concurrency"] for r in rows]
        left.plot(xs, [r["requests_per_s"] for r in rows], marker="o", color=color, label=mode)
        right.plot(xs, [r["p50_ms"] for r in rows], marker="o", color=color, label=f"{mode} p50")
        right.plot(xs, [r["p99_ms"] for r in rows], marker="x", linestyle="--", color=color, label=f"{mode} p99")
    for row in result["cells"]:  # a soak is read here: memory over the whole cell, one line per mode and level
        seconds, mib = zip(*row["rss_trace"], strict=True) if row.get("rss_trace") else ((), ())
        memory.plot(seconds, mib, label=f"{row['mode']} c={row['concurrency']}", linewidth=1)
    memory.set(xlabel="seconds into the cell", ylabel="server RSS MiB", title="memory")
    memory.legend(fontsize=7)
    left.set(xlabel="concurrent clients", ylabel="requests / s", xscale="log", title="throughput")
    right.set(xlabel="concurrent clients", ylabel="latency ms", xscale="log", yscale="log", title="latency")
    left.legend(fontsize=8)
    right.legend(fontsize=7)
    fig.tight_layout()
    atomic_save_figure(fig, path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="export dir (or a run/discriminator dir holding onnx/)")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--modes", default="batching,no-batching")
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--flat-mib", type=float, default=20.0, help="max RSS growth within a cell called flat")
    parser.add_argument("--server-args", default="", help="extra `serve` flags, e.g. '--variant int8'")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    args = parser.parse_args()

    import httpx
    from tqdm import tqdm

    from electra_detect.fileio import atomic_write_json, atomic_write_text

    texts = sentences()
    levels = [int(c) for c in args.concurrency.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    if any(m not in ("batching", "no-batching") for m in modes):
        raise SystemExit("--modes: batching and/or no-batching")
    cells: list[dict[str, Any]] = []
    engine = ""
    progress = tqdm(total=len(modes) * len(levels), desc="cells", unit="cell")
    servers: dict[str, tuple[subprocess.Popen, str, Path]] = {}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    try:
        for mode in modes:  # all servers up at once (an idle one costs no CPU), so the modes can alternate
            port = free_port()
            extra = shlex.split(args.server_args) + ["--batching", "off" if mode == "no-batching" else "on"]
            log = args.out_dir / f".server_load_{mode}.log"
            servers[mode] = (start_server(args.model, port, extra, log), f"http://127.0.0.1:{port}", log)
        health = httpx.get(f"{servers[modes[0]][1]}/healthz", timeout=10).json()
        engine = f"{health['engine']} {health['variant']} on {health['provider']}"
        for step, concurrency in enumerate(levels):
            # adjacent in time, order flipped each level: a noisy stretch of the shared host hits both modes
            for mode in (modes if step % 2 == 0 else modes[::-1]):
                proc, url, _ = servers[mode]
                asyncio.run(load(url, texts, concurrency, args.warmup, proc.pid))
                before = batch_stats(url)
                row = asyncio.run(load(url, texts, concurrency, args.duration, proc.pid))
                after = batch_stats(url)
                calls = after[1] - before[1]
                row.update({"mode": mode, "concurrency": concurrency,
                            "texts_per_model_call": (after[0] - before[0]) / calls if calls else float("nan"),
                            "memory_flat": row["rss_mib_end"] - row["rss_mib_start"] <= args.flat_mib,
                            "load_average_1min": os.getloadavg()[0]})
                cells.append(row)
                progress.update()
                progress.set_postfix_str(f"{mode} c={concurrency}: {row['requests_per_s']:.0f} req/s")
    finally:
        for proc, _, log in servers.values():
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.unlink(missing_ok=True)
    cells.sort(key=lambda c: (modes.index(c["mode"]), c["concurrency"]))
    progress.close()
    result = {"benchmark": "server_load", "model": args.model, "engine": engine, "duration_s": args.duration,
              "warmup_s": args.warmup, "host_cores": os.cpu_count(), "cells": cells,
              "zero_errors": all(c["errors"] == 0 for c in cells),
              "memory_flat": all(c["memory_flat"] for c in cells),
              "command": command_line(),
              "load_average_1_5_15": os.getloadavg(),  # a shared host: read the figures against this
              "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    atomic_write_json(args.out_dir / "result.json", result)
    atomic_write_text(args.out_dir / "table.md", render_markdown(result))
    plot(result, args.out_dir / "plot.png")
    print(json.dumps({"benchmark": "server_load", "zero_errors": result["zero_errors"],
                      "memory_flat": result["memory_flat"],
                      **{f"{c['mode']}_c{c['concurrency']}_rps": round(c["requests_per_s"], 1) for c in cells},
                      **{f"{c['mode']}_c{c['concurrency']}_p99_ms": round(c["p99_ms"], 1) for c in cells}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
