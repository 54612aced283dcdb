"""Hostile-but-fair probe of ``electra-detect serve``, kept so its findings stay fixed.

Four parts, each against one real server process started here with the default limits:

1. Bad-input battery: malformed, mistyped, out-of-range and oversized bodies on every endpoint,
   sent over one keep-alive connection. Counts responses >= 500 and connection resets (both must
   be 0) and checks that each case gets the status it should.
2. Slow clients: connections that trickle a request head (or a body) a byte at a time; the server
   must drop them after its read timeout.
3. Heavy-request fairness: the heaviest request the limits allow (just under ``--max-tokens``) runs
   again and again while a small request is timed beside it (goal: every small request < 1 s); then
   a heavy request whose client gives up, after which the server must be back to normal at once.
4. Load: 50 closed-loop clients for ``--duration`` seconds (60 by default), one real sentence per
   request, with a bad request every tenth: errors (>= 500, resets, timeouts), requests/s, p50/p99.
   Then the issue's mixed load for 30 s: 25 clients sending one valid 9,450-character text per
   request beside 25 sending one sentence (before the fix, the sentences' p50 went to 28.9 s); a
   client told 503 overloaded waits its Retry-After.

    python -m benchmarks.robustness.server_abuse --model runs/small-onnx            # full run, ~2 minutes
    python -m benchmarks.robustness.server_abuse --model runs/small-onnx --quick    # 10-s load cell

Writes benchmarks/results/server_abuse/{result.json,table.md}; exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common.run import command_line
from benchmarks.common.servers import free_port, start_server

ROOT = Path(__file__).resolve().parents[2]

OUT_DIR = ROOT / "benchmarks" / "results" / "server_abuse"
SMALL = "The farmer saw a red house yesterday and went home."
JSON = {"content-type": "application/json"}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ------------------------------------------------------------------------------------------ 1. battery

def battery_cases(max_texts: int, max_chars: int, max_body: int) -> list[tuple[str, str, str, dict, bytes, set[int]]]:
    """(name, method, path, headers, body, acceptable statuses)."""
    huge = "9" * 400
    cases: list[tuple[str, str, str, dict, bytes, set[int]]] = []

    def add(name: str, path: str, body: bytes | str | object, expect: set[int], headers: dict | None = None,
            method: str = "POST") -> None:
        if not isinstance(body, bytes):
            body = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else json.dumps(body).encode()
        cases.append((name, method, path, JSON if headers is None else headers, body, expect))

    bad_json = {"truncated": b'{"texts": ["a"', "trailing": b'{"texts": ["a"]} x', "single quotes": b"{'texts': ['a']}",
                "bare word": b"hello", "empty object": b"{}", "array": b"[1,2]", "null": b"null",
                "bad utf-8": b'{"texts": ["\xff\xfe"]}', "lone surrogate": b'{"texts": ["\\ud800"]}',
                "NaN literal": b'{"texts": ["a"], "x": NaN}', "deep nesting": b"[" * 10_000 + b"]" * 10_000,
                "5000-digit number": b'{"texts": ["a"], "x": ' + b"1" * 5000 + b"}",
                "utf-8 BOM": b'\xef\xbb\xbf{"texts": ["a"]}'}
    for path, field in (("/v1/score", "texts"), ("/v1/ged", "texts"), ("/v1/rerank", "lists")):
        for name, body in bad_json.items():  # json.loads skips a UTF-8 BOM: that one may be a 200
            add(f"{path} {name}", path, body, {200, 400, 422} if "BOM" in name else {400, 413, 422})
        add(f"{path} no content-type, body", path, json.dumps({field: ["a"]}).encode(), {415}, headers={})
        add(f"{path} no content-type, no body", path, b"", {422}, headers={})
        add(f"{path} text/plain", path, json.dumps({field: ["a"]}).encode(), {415},
            headers={"content-type": "text/plain"})
        add(f"{path} form", path, b"texts=a", {415}, headers={"content-type": "application/x-www-form-urlencoded"})
        add(f"{path} body over limit", path, b'{"x": "' + b"a" * (max_body + 10) + b'"}', {413})
        for value in (None, 1, "a string", [None], [1], [[]], {"a": 1}, [True], [], [""], ["  "], ["\x00"],
                      ["a"] * (max_texts + 1), ["x" * (max_chars + 1)]):
            add(f"{path} {field}={json.dumps(value)[:30]}", path, {field: value},
                {200, 413, 422} if value == ["\x00"] else {413, 422})
        add(f"{path} extra field", path, {field: ["a"], "extra": 1}, {422})
        add(f"{path} unicode", path, {field: ["🙂 zero\u200bwidth \u202eRTL नमस्ते 你好"]}, {200})
        add(f"{path} GET", path, b"", {405}, headers={}, method="GET")
        add(f"{path} PUT", path, {field: ["a"]}, {405}, method="PUT")
    many_tokens = ["word " * (max_chars // 5 - 1)] * max_texts  # every limit but max_tokens respected
    add("/v1/score over max_tokens", "/v1/score", {"texts": many_tokens}, {413})
    for value in ("yes", 1, 0, None, "true", [True]):
        add(f"/v1/score tokens={json.dumps(value)}", "/v1/score", {"texts": ["a"], "tokens": value}, {422})
    numbers = {"400-digit int": huge, "-400-digit int": "-" + huge, "1e308": "1e308", "-1e308": "-1e308",
               "1e999": "1e999", "NaN": "NaN", "Infinity": "Infinity", "string": '"0.5"', "true": "true",
               "list": "[0.5]", "object": '{"v": 1}'}
    for name, raw in numbers.items():
        add(f"/v1/ged threshold={name}", "/v1/ged", f'{{"texts": ["a b"], "threshold": {raw}}}'.encode(), {422})
        for weight in ("lm_weight", "length_weight"):
            add(f"/v1/rerank {weight}={name}", "/v1/rerank",
                f'{{"lists": [["a b", "a c"]], "{weight}": {raw}}}'.encode(), {422})
        add(f"/v1/rerank score={name}", "/v1/rerank",
            f'{{"lists": [[{{"text": "a b", "score": {raw}}}]]}}'.encode(), {422})
    add("/v1/rerank score and length_weight 1e308", "/v1/rerank",
        b'{"lists": [[{"text": "a b", "score": 1e308}]], "length_weight": 1e308}', {422})
    for raw in ("[]", "[[]]", '[""]', '["\\t"]', '["a\\tNaN"]', '["a\\t1e999"]', f'["a\\t{huge}"]',
                '["a\\tnot-a-number"]', '[[{"score": 1}]]', '[[{"text": "a", "score": "1"}]]',
                '[[{"text": "a", "extra": 1}]]', "[[[\"nested\"]]]"):
        add(f"/v1/rerank lists={raw}", "/v1/rerank", f'{{"lists": {raw}}}'.encode(), {422})
    add("/v1/ged threshold 0", "/v1/ged", {"texts": ["a b"], "threshold": 0}, {200})
    add("/v1/rerank good", "/v1/rerank", {"lists": [[{"text": "a b", "score": -1}, "a c"]], "lm_weight": 2,
                                          "length_weight": -0.5}, {200})
    add("/v2/nothing", "/v2/nothing", b"", {404}, headers={}, method="GET")
    add("/healthz POST", "/healthz", {"a": 1}, {405})
    add("/metrics", "/metrics", b"", {200}, headers={}, method="GET")
    add("/docs", "/docs", b"", {200}, headers={}, method="GET")
    add("/openapi.json", "/openapi.json", b"", {200}, headers={}, method="GET")
    add("long path", "/" + "a" * 8000, b"", {404, 414, 431}, headers={}, method="GET")
    return cases


def raw_http(port: int, data: bytes, timeout: float = 10) -> bytes:
    """Bytes that are not HTTP a client library would send (the reply, or b'' when the server closes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
        return b"".join(chunks)


def run_battery(url: str, port: int, limits: dict[str, int]) -> dict[str, Any]:
    import httpx

    rows, server_errors, resets, unexpected = [], 0, 0, []
    with httpx.Client(base_url=url, timeout=60) as http:
        for name, method, path, headers, body, expect in battery_cases(limits["max_texts"], limits["max_chars"],
                                                                       limits["max_body_bytes"]):
            try:
                response = http.request(method, path, headers=headers, content=body)
                status, kind = response.status_code, ""
                if status >= 400 and response.headers.get("content-type", "").startswith("application/json"):
                    kind = response.json().get("error", {}).get("type", "")
            except httpx.TransportError as exc:
                status, kind = 0, type(exc).__name__
                resets += 1
            server_errors += status >= 500
            if status not in expect:
                unexpected.append({"case": name, "status": status, "expected": sorted(expect), "type": kind})
            rows.append({"case": name, "status": status, "type": kind})
    raw_cases = {"garbage request line": b"HELLO\r\n\r\n", "bad header": b"POST /v1/score HTTP/1.1\r\nHost x\r\n\r\n",
                 "huge header": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 70_000 + b"\r\n\r\n",
                 "lying content-length": b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                         b"Content-Length: 5\r\n\r\n{\"texts\": [\"a\"]}",
                 "bad chunked": b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                b"Transfer-Encoding: chunked\r\n\r\nzz\r\n"}
    for name, data in raw_cases.items():
        reply = raw_http(port, data)
        status = int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0
        server_errors += status >= 500
        rows.append({"case": f"raw: {name}", "status": status, "type": ""})
    alive = httpx.get(f"{url}/healthz", timeout=10).status_code == 200
    return {"cases": len(rows), "responses_5xx": server_errors, "connection_resets": resets,
            "unexpected_status": unexpected, "healthz_after": alive, "rows": rows}


# ------------------------------------------------------------------------------------------ 2. slow clients

def slow_clients(port: int, connections: int, interval: float, give_up: float) -> dict[str, Any]:
    """Each connection sends a byte every ``interval`` s (half of them a request head, half a body after a
    complete head) until the server closes it; seconds each was held."""
    held: list[float] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        head = b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n"
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=give_up) as sock:
            if index % 2:
                sock.sendall(head)
                payload = b'{"texts": ["' + b"a" * 380 + b'"]}'
            else:
                payload = head
            try:
                for byte in payload:
                    sock.sendall(bytes([byte]))
                    time.sleep(interval)
                    if time.monotonic() - started > give_up:
                        break
                    sock.setblocking(False)
                    try:
                        if sock.recv(65536) == b"":
                            break
                    except BlockingIOError:
                        pass
                    except OSError:
                        break
                    finally:
                        sock.setblocking(True)
            except OSError:
                pass
        with lock:
            held.append(time.monotonic() - started)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"connections": connections, "byte_every_s": interval, "max_held_s": round(max(held), 2),
            "median_held_s": round(statistics.median(held), 2), "give_up_s": give_up}


# ------------------------------------------------------------------------------------------ 3. fairness

def heaviest_request(model: str, max_tokens: int, max_texts: int, max_chars: int) -> tuple[list[str], int]:
    """Texts of max_chars characters (fewer for the last), as many as fit under max_tokens model tokens."""
    from electra_detect.detector import Detector

    detector = Detector.load(model, engine="onnx", device="cpu", threads=1)
    base = ("The committee discovered that the old bridge near the school had been painted again before the "
            "storm, and every student remembered it. ")
    text = (base * (max_chars // len(base) + 1))[:max_chars].rsplit(" ", 1)[0]
    texts: list[str] = []
    while len(texts) < max_texts:
        trial = [*texts, text]
        if detector.job(trial, 4).cost > max_tokens:
            words = text.split()
            lo, hi = 1, len(words)
            while lo < hi:  # the longest prefix that still fits
                mid = (lo + hi + 1) // 2
                if detector.job([*texts, " ".join(words[:mid])], 4).cost <= max_tokens:
                    lo = mid
                else:
                    hi = mid - 1
            texts.append(" ".join(words[:lo]))
            break
        texts = trial
    return texts, detector.job(texts, 4).cost


def fairness(url: str, model: str, limits: dict[str, Any], rounds: int) -> dict[str, Any]:
    import httpx

    texts, cost = heaviest_request(model, limits["max_tokens"], limits["max_texts"], limits["max_chars"])
    small = {"texts": [SMALL]}
    out: dict[str, Any] = {"heavy_texts": len(texts), "heavy_chars": sum(map(len, texts)), "heavy_model_tokens": cost}
    with httpx.Client(base_url=url, timeout=120) as http:
        idle = []
        for _ in range(10):
            t0 = time.perf_counter()
            assert http.post("/v1/score", json=small).status_code == 200
            idle.append(time.perf_counter() - t0)
        out["small_alone_p50_s"] = round(statistics.median(idle), 3)
        t0 = time.perf_counter()
        old_worst = http.post("/v1/score", json={"texts": ["word " * (limits["max_chars"] // 5 - 1)] *
                                                 limits["max_texts"]})
        out["old_worst_case"] = {"status": old_worst.status_code, "seconds": round(time.perf_counter() - t0, 3),
                                 "type": old_worst.json()["error"]["type"] if old_worst.status_code >= 400 else ""}

    heavy_times: list[float] = []
    heavy_status: list[int] = []
    stop = threading.Event()

    def heavy_client() -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            for _ in range(rounds):
                t0 = time.perf_counter()
                heavy_status.append(http.post("/v1/score", json={"texts": texts}).status_code)
                heavy_times.append(time.perf_counter() - t0)
        stop.set()

    thread = threading.Thread(target=heavy_client)
    thread.start()
    time.sleep(0.3)
    beside: list[float] = []
    statuses: list[int] = []
    with httpx.Client(base_url=url, timeout=120) as http:
        while not stop.is_set():
            t0 = time.perf_counter()
            statuses.append(http.post("/v1/score", json=small).status_code)
            beside.append(time.perf_counter() - t0)
            time.sleep(0.05)
    thread.join()
    out.update(heavy_rounds=rounds, heavy_status=sorted(set(heavy_status)),
               heavy_seconds_p50=round(statistics.median(heavy_times), 2), heavy_seconds_max=round(max(heavy_times), 2),
               small_beside_heavy={"n": len(beside), "p50_s": round(pct(beside, 0.5), 3),
                                   "p99_s": round(pct(beside, 0.99), 3),
                                   "max_s": round(max(beside, default=float("nan")), 3),
                                   "non_200": sum(s != 200 for s in statuses)})

    # A heavy request whose client gives up after 1 s: the model must stop working on it.
    def dropped() -> float:
        import re

        text = httpx.get(f"{url}/metrics", timeout=10).text
        match = re.search(r"^electra_dropped_requests_total (\S+)$", text, re.MULTILINE)
        return float(match.group(1)) if match else 0.0

    before = dropped()
    abandoned_at = time.perf_counter()
    try:
        httpx.post(f"{url}/v1/score", json={"texts": texts}, timeout=1.0)
    except httpx.TimeoutException:
        pass
    abandoned_at = time.perf_counter()
    after = []
    with httpx.Client(base_url=url, timeout=60) as http:
        for _ in range(5):
            t0 = time.perf_counter()
            http.post("/v1/score", json=small)
            after.append(time.perf_counter() - t0)
    out["after_client_gave_up"] = {"first_small_s": round(after[0], 3), "max_small_s": round(max(after), 3),
                                   "normal_again_after_s": round(time.perf_counter() - abandoned_at
                                                                 - sum(after[1:]), 3),
                                   "model_dropped_requests": dropped() - before}
    return out


def deadline_check(model: str, texts_model: dict[str, Any], log: Path, extra: list[str]) -> dict[str, Any]:
    """A server whose timeout is shorter than the heavy request: 504 at the deadline, normal right after."""
    import httpx

    port = free_port()
    proc = start_server(model, port, ["--timeout", "1.5", *extra], log)
    url = f"http://127.0.0.1:{port}"
    try:
        texts, _ = heaviest_request(model, texts_model["max_tokens"], texts_model["max_texts"],
                                    texts_model["max_chars"])
        t0 = time.perf_counter()
        status = httpx.post(f"{url}/v1/score", json={"texts": texts * 1}, timeout=60).status_code
        heavy = time.perf_counter() - t0
        t1 = time.perf_counter()
        small = httpx.post(f"{url}/v1/score", json={"texts": [SMALL]}, timeout=60)
        return {"server_timeout_s": 1.5, "heavy_status": status, "heavy_seconds": round(heavy, 3),
                "small_after_status": small.status_code, "small_after_s": round(time.perf_counter() - t1, 3)}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


# ------------------------------------------------------------------------------------------ 4. load

async def load(url: str, clients: int, seconds: float) -> dict[str, Any]:
    import httpx

    from benchmarks.common import servers

    texts = servers.sentences(2000)
    latencies: list[float] = []
    counts = {"ok": 0, "4xx": 0, "5xx": 0, "resets": 0, "timeouts": 0, "bad_not_4xx": 0}
    end = time.monotonic() + seconds

    async def client(index: int, http: httpx.AsyncClient) -> None:
        n = index
        while time.monotonic() < end:
            n += clients
            bad = (n // clients + index) % 10 == 0  # every client: one request in ten is bad
            body = {"texts": [texts[n % len(texts)]], "tokens": "yes" if bad else False}
            t0 = time.perf_counter()
            try:
                response = await http.post(f"{url}/v1/score", json=body)
            except httpx.TimeoutException:
                counts["timeouts"] += 1
                continue
            except httpx.TransportError:
                counts["resets"] += 1
                continue
            latencies.append(time.perf_counter() - t0)
            status = response.status_code
            counts["5xx" if status >= 500 else "4xx" if status >= 400 else "ok"] += 1
            counts["bad_not_4xx"] += bad and not 400 <= status < 500

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=clients)) as http:
        await asyncio.gather(*(client(i, http) for i in range(clients)))
    total = counts["ok"] + counts["4xx"] + counts["5xx"]
    return {"clients": clients, "seconds": seconds, "requests": total, "requests_per_s": round(total / seconds, 1),
            **counts, "errors": counts["5xx"] + counts["resets"] + counts["timeouts"] + counts["bad_not_4xx"],
            "p50_s": round(pct(latencies, 0.5), 3), "p99_s": round(pct(latencies, 0.99), 3),
            "max_s": round(max(latencies), 3)}


async def mixed(url: str, clients: int, seconds: float) -> dict[str, Any]:
    """The issue's mixed load: half the clients send one valid 9,450-character text per request, the other half
    one sentence; latency of each half."""
    import httpx

    from benchmarks.common import servers

    texts = servers.sentences(2000)
    long_text = (" ".join(texts) * 2)[:9450].rsplit(" ", 1)[0]
    stats: dict[str, dict[str, Any]] = {k: {"latencies": [], "status": {}} for k in ("heavy", "normal")}
    end = time.monotonic() + seconds

    async def client(index: int, http: httpx.AsyncClient) -> None:
        kind = "heavy" if index % 2 else "normal"
        n = index
        while time.monotonic() < end:
            n += clients
            body = {"texts": [long_text if kind == "heavy" else texts[n % len(texts)]], "tokens": False}
            t0 = time.perf_counter()
            retry = 0.0
            try:
                response = await http.post(f"{url}/v1/score", json=body)
                status = response.status_code
                retry = float(response.headers.get("retry-after", 0)) if status == 503 else 0.0
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            stats[kind]["latencies"].append(time.perf_counter() - t0)
            if retry:  # a well-behaved client waits as told
                await asyncio.sleep(retry)
            stats[kind]["status"][str(status)] = stats[kind]["status"].get(str(status), 0) + 1

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=clients)) as http:
        await asyncio.gather(*(client(i, http) for i in range(clients)))
    out: dict[str, Any] = {"clients": clients, "seconds": seconds, "heavy_chars": len(long_text)}
    for kind, row in stats.items():
        lat = row["latencies"]
        out[kind] = {"requests": len(lat), "status": row["status"], "p50_s": round(pct(lat, 0.5), 3),
                     "p99_s": round(pct(lat, 0.99), 3), "max_s": round(max(lat), 3) if lat else None}
    return out


# ------------------------------------------------------------------------------------------ report

def goals(result: dict[str, Any]) -> dict[str, bool]:
    b, f, ld = result["battery"], result["fairness"], result["load"]
    return {"battery: 0 responses >= 500": b["responses_5xx"] == 0,
            "battery: 0 connection resets": b["connection_resets"] == 0,
            "battery: every case its expected status": not b["unexpected_status"],
            "slow clients dropped within read timeout + 2 s":
                result["slow_clients"]["max_held_s"] <= result["limits"]["read_timeout_s"] + 2,
            "small request beside the heaviest: max < 1 s": f["small_beside_heavy"]["max_s"] < 1.0,
            "small requests beside the heaviest all 200": f["small_beside_heavy"]["non_200"] == 0,
            "normal right after a heavy client gave up (< 1 s)": f["after_client_gave_up"]["max_small_s"] < 1.0,
            "past its deadline: 504, then a small request < 1 s":
                result["deadline"]["heavy_status"] == 504 and result["deadline"]["small_after_s"] < 1.0,
            f"load: {ld['clients']} clients x {ld['seconds']:g} s, 0 errors": ld["errors"] == 0,
            "mixed load: every sentence request 200": set(result["mixed"]["normal"]["status"]) == {"200"},
            "mixed load: long texts 200 or 503 overloaded": set(result["mixed"]["heavy"]["status"]) <= {"200", "503"}}


def render_markdown(result: dict[str, Any]) -> str:
    b, s, f, d, ld, m = (result[k] for k in ("battery", "slow_clients", "fairness", "deadline", "load", "mixed"))
    lines = [f"# Server abuse probe ({result['date']}, {result['host']})", "",
             f"Model `{result['model']}`, server defaults: "
             + ", ".join(f"{k} {v}" for k, v in result["limits"].items()) + f". Command: `{result['command']}`.", "",
             "| goal | met |", "|---|---|"]
    lines += [f"| {name} | {'yes' if ok else '**no**'} |" for name, ok in result["goals"].items()]
    lines += ["", "| part | measurement |", "|---|---|",
              f"| battery | {b['cases']} cases: {b['responses_5xx']} responses >= 500, "
              f"{b['connection_resets']} resets, "
              f"{len(b['unexpected_status'])} unexpected statuses, /healthz after: {b['healthz_after']} |",
              f"| slow clients | {s['connections']} connections, a byte every {s['byte_every_s']} s: held at most "
              f"{s['max_held_s']} s (median {s['median_held_s']} s) |",
              f"| heaviest request | {f['heavy_texts']} texts, {f['heavy_chars']:,} characters, "
              f"{f['heavy_model_tokens']:,} model tokens: {f['heavy_seconds_p50']} s (max {f['heavy_seconds_max']} s), "
              f"status {f['heavy_status']} |",
              f"| old worst case (64 x 10,000 chars) | {f['old_worst_case']['status']} "
              f"{f['old_worst_case']['type']} in {f['old_worst_case']['seconds']} s |",
              f"| small request alone | p50 {f['small_alone_p50_s']} s |",
              f"| small request beside the heaviest | n {f['small_beside_heavy']['n']}, p50 "
              f"{f['small_beside_heavy']['p50_s']} s, p99 {f['small_beside_heavy']['p99_s']} s, max "
              f"{f['small_beside_heavy']['max_s']} s, non-200 {f['small_beside_heavy']['non_200']} |",
              f"| after a heavy client gave up at 1 s | first small "
              f"{f['after_client_gave_up']['first_small_s']} s, max "
              f"{f['after_client_gave_up']['max_small_s']} s; requests the model dropped: "
              f"{f['after_client_gave_up']['model_dropped_requests']:g} |",
              f"| heavy past a 1.5-s server timeout | {d['heavy_status']} after {d['heavy_seconds']} s; next small "
              f"{d['small_after_status']} in {d['small_after_s']} s |",
              f"| load | {ld['clients']} clients x {ld['seconds']:g} s (every 10th request bad): "
              f"{ld['requests']} requests, "
              f"{ld['requests_per_s']} req/s, p50 {ld['p50_s']} s, p99 {ld['p99_s']} s, max {ld['max_s']} s; "
              f"5xx {ld['5xx']}, resets {ld['resets']}, timeouts {ld['timeouts']}, bad not 4xx {ld['bad_not_4xx']} |",
              f"| mixed load | {m['clients'] // 2} clients sending one {m['heavy_chars']:,}-character text, "
              f"{m['clients'] // 2} one sentence, {m['seconds']:g} s: sentence p50 {m['normal']['p50_s']} s, p99 "
              f"{m['normal']['p99_s']} s ({m['normal']['requests']} requests, {m['normal']['status']}); long text "
              f"p50 {m['heavy']['p50_s']} s, p99 {m['heavy']['p99_s']} s ({m['heavy']['requests']}, "
              f"{m['heavy']['status']}) |"]
    if b["unexpected_status"]:
        lines += ["", "Unexpected statuses:", ""] + [f"- {u}" for u in b["unexpected_status"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="export dir (or a run/discriminator dir holding onnx/)")
    parser.add_argument("--quick", action="store_true", help="10-s load cell, 2 heavy rounds, 10 slow clients")
    parser.add_argument("--duration", type=float, help="load seconds (default 60; 10 with --quick)")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--server-args", default="", help="extra `serve` flags")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    duration = args.duration or (10.0 if args.quick else 60.0)
    from electra_detect.app.settings import ServerSettings

    defaults = ServerSettings()
    limits = {"max_texts": defaults.max_texts, "max_chars": defaults.max_chars, "max_tokens": defaults.max_tokens,
              "max_body_bytes": defaults.max_body_bytes, "timeout_s": defaults.timeout_s,
              "read_timeout_s": defaults.read_timeout_s, "step_tokens": defaults.step_tokens}
    extra = args.server_args.split()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="server-abuse-"))  # server logs: read for tracebacks, kept out of results
    log = logs / "server.log"
    port = free_port()
    proc = start_server(args.model, port, extra, log)
    url = f"http://127.0.0.1:{port}"
    result: dict[str, Any] = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                              "host": f"{platform.machine()}, {os.cpu_count()} cores", "model": args.model,
                              "limits": limits,
                              "command": command_line()}
    try:
        started = time.perf_counter()
        result["battery"] = run_battery(url, port, limits)
        print(f"battery: {result['battery']['cases']} cases, {result['battery']['responses_5xx']} >= 500, "
              f"{result['battery']['connection_resets']} resets, {len(result['battery']['unexpected_status'])} "
              f"unexpected ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        result["slow_clients"] = slow_clients(port, 10 if args.quick else 20, 0.5, limits["read_timeout_s"] * 3)
        print(f"slow clients: {result['slow_clients']}", file=sys.stderr)
        result["fairness"] = fairness(url, args.model, limits, 2 if args.quick else 4)
        print(f"fairness: {json.dumps(result['fairness'])}", file=sys.stderr)
        result["load"] = asyncio.run(load(url, args.clients, duration))
        print(f"load: {json.dumps(result['load'])}", file=sys.stderr)
        result["mixed"] = asyncio.run(mixed(url, args.clients, 10.0 if args.quick else 30.0))
        print(f"mixed: {json.dumps(result['mixed'])}", file=sys.stderr)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=90)
    result["deadline"] = deadline_check(args.model, limits, logs / "server_deadline.log", extra)
    print(f"deadline: {result['deadline']}", file=sys.stderr)
    tracebacks = log.read_text().count("Traceback")
    result["server_log_tracebacks"] = tracebacks
    result["goals"] = goals(result)
    result["goals"]["server log: no tracebacks"] = tracebacks == 0
    (args.out_dir / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out_dir / "table.md").write_text(render_markdown(result))
    print(render_markdown(result))
    return 0 if all(result["goals"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
