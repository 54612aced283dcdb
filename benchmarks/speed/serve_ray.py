"""`serve --ray --replicas 2` against the one-process `serve`, side by side in one run, and a replica killed under
load.

    python -m benchmarks.speed.serve_ray [--clients 16] [--duration 30] [--out benchmarks/results/serve_ray]

Each server runs alone on this host (the clients share its cores, as co-located clients would): closed-loop
clients POST /v1/ged with one sentence of the embedded corpus each, for ``--duration`` seconds after a warm-up.
Then, under the same load on the Ray deployment, one replica is killed (SIGKILL): the failed requests are counted
in the 30 s after the kill, and after those.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common.run import ROOT, command_line, write_result
from benchmarks.common.servers import free_port, sentences

KEY = "serve-ray-bench"


async def load(url: str, texts: list[str], clients: int, seconds: float, on_time: Any = None) -> list[tuple]:
    """(start, seconds, ok) of every request of ``clients`` closed-loop clients over ``seconds``."""
    import httpx

    done: list[tuple] = []
    stop = time.monotonic() + seconds

    async def client(i: int) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            n = i
            while time.monotonic() < stop:
                start = time.monotonic()
                try:
                    answer = await http.post(f"{url}/v1/ged", json={"texts": [texts[n % len(texts)]]},
                                             headers={"X-API-Key": KEY})
                    ok = answer.status_code == 200
                except Exception:  # noqa: BLE001 - a refused or reset connection is a failed request
                    ok = False
                done.append((start, time.monotonic() - start, ok))
                n += clients

    tasks = [asyncio.create_task(client(i)) for i in range(clients)]
    if on_time is not None:
        await on_time()
    await asyncio.gather(*tasks)
    return done


def start(command: list[str], url: str) -> subprocess.Popen:
    import httpx

    env = {**os.environ, "ELECTRA_DETECT_API_KEY": KEY, "RAY_ADDRESS": ""}
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"{' '.join(command)} did not come up")


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()


def summary(done: list[tuple], seconds: float) -> dict[str, Any]:
    import statistics

    ok = [d for _, d, good in done if good]
    return {"requests": len(done), "failed": len(done) - len(ok), "req_per_s": round(len(ok) / seconds, 2),
            "p50_ms": round(statistics.median(ok) * 1000, 1) if ok else None,
            "p95_ms": round(sorted(ok)[int(0.95 * (len(ok) - 1))] * 1000, 1) if ok else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--out", default="benchmarks/results/serve_ray")
    args = parser.parse_args(argv)
    texts = sentences(500)
    cli = [sys.executable, "-m", "electra_detect.cli", "serve"]
    result: dict[str, Any] = {"command": command_line(), "host_cores": os.cpu_count(), "clients": args.clients}
    for name, extra in (("one_process", []), ("ray_2_replicas", ["--ray", "--replicas", "2"])):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = start([*cli, "--port", str(port), *extra], url)
        try:
            asyncio.run(load(url, texts, args.clients, args.warmup))
            result[name] = summary(asyncio.run(load(url, texts, args.clients, args.duration)), args.duration)
            print(name, result[name], file=sys.stderr, flush=True)
            if name == "ray_2_replicas":
                result["replica_killed"] = killed_under_load(url, texts, args.clients)
        finally:
            stop(proc)
    ratio = result["ray_2_replicas"]["req_per_s"] / result["one_process"]["req_per_s"]
    kill = result["replica_killed"]
    result["goals"] = {"ray_over_one_process": round(ratio, 3), "ratio_met": ratio >= 0.9,
                       "failed_in_30s_share": kill["failed_share_30s"], "kill_met": kill["failed_share_30s"] <= 0.01
                       and kill["failed_after_30s"] == 0}
    write_result(Path(args.out), result, table(result))
    return 0


def killed_under_load(url: str, texts: list[str], clients: int) -> dict[str, Any]:
    import psutil

    replicas = [p for p in psutil.process_iter(["cmdline"]) if "ServeReplica:electra_detect" in " ".join(
        p.info["cmdline"] or [])]
    moment: dict[str, float] = {}

    async def kill_soon() -> None:
        await asyncio.sleep(5)
        moment["t"] = time.monotonic()
        replicas[0].send_signal(signal.SIGKILL)

    done = asyncio.run(load(url, texts, clients, 60, kill_soon))
    t = moment["t"]
    within = [d for d in done if t <= d[0] < t + 30]
    after = [d for d in done if d[0] >= t + 30]
    failed = sum(1 for d in within if not d[2])
    return {"requests_30s": len(within), "failed_30s": failed,
            "failed_share_30s": round(failed / max(len(within), 1), 4),
            "requests_after_30s": len(after), "failed_after_30s": sum(1 for d in after if not d[2])}


def table(r: dict[str, Any]) -> str:
    rows = [f"{r['clients']} clients POST /v1/ged (one sentence), {r['host_cores']} cores, one run: `{r['command']}`",
            "", "| server | req/s | p50 ms | p95 ms | failed |", "|---|---|---|---|---|"]
    for name in ("one_process", "ray_2_replicas"):
        s = r[name]
        rows.append(f"| {name.replace('_', ' ')} | {s['req_per_s']} | {s['p50_ms']} | {s['p95_ms']} | {s['failed']} |")
    k, g = r["replica_killed"], r["goals"]
    rows += ["", f"One replica killed under load: {k['failed_30s']} of {k['requests_30s']} requests failed in the 30 s "
                 f"after ({k['failed_share_30s']:.2%}), {k['failed_after_30s']} of {k['requests_after_30s']} after.",
             "", "| goal | measured | met |", "|---|---|---|",
             f"| 2 replicas ≥ 0.9x the one-process req/s | {g['ray_over_one_process']} | {g['ratio_met']} |",
             f"| ≤ 1% failed in the 30 s after a kill, none after | {g['failed_in_30s_share']:.2%}, "
             f"{k['failed_after_30s']} after | {g['kill_met']} |"]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    sys.exit(main())
