"""``electra-detect serve --ray``: the same app as Ray Serve replicas; a killed replica is replaced while the service
keeps answering. Runs in `make test`'s serial phase (a local Ray of 2 CPUs, the host's cores), and leaves nothing
running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KEY = "serve-ray-test-key"
RECOVERY_S = 10.0  # the bound: after a replica is killed, every request is answered 200 within this


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def replicas() -> list[object]:
    import psutil

    return [p for p in psutil.process_iter(["cmdline"]) if "ServeReplica:electra_detect" in " ".join(
        p.info["cmdline"] or [])]


def start_serve(replica_count: int) -> tuple[subprocess.Popen, str]:
    """``serve --ray`` on a free port with the test's key, on a local Ray of its own: the process and its base URL."""
    port = free_port()
    env = {**os.environ, "ELECTRA_DETECT_API_KEY": KEY, "RAY_ADDRESS": ""}
    server = subprocess.Popen([sys.executable, "-m", "electra_detect.cli", "serve", "--ray", "--replicas",
                               str(replica_count), "--port", str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    return server, f"http://127.0.0.1:{port}"


def wait_until_healthy(server: subprocess.Popen, base: str, replica_count: int = 0) -> None:
    """Until ``/healthz`` answers 200 and ``replica_count`` replicas run; fails with the server's stderr if it exits."""
    import httpx

    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=5).status_code == 200 and len(replicas()) >= replica_count:
                return
        except httpx.HTTPError:
            pass
        assert server.poll() is None, server.communicate()[1][-3000:]
        time.sleep(0.2)
    pytest.fail("the Serve deployment did not come up in 240 s")


def terminate(server: subprocess.Popen) -> str:
    """SIGTERM, as a process manager stops it; its stderr."""
    server.send_signal(signal.SIGTERM)
    try:
        return server.communicate(timeout=120)[1]
    except subprocess.TimeoutExpired:
        server.kill()
        return server.communicate()[1]


def assert_stopped_cleanly(server: subprocess.Popen, err: str) -> None:
    assert server.returncode == 0, err[-4000:]
    deadline = time.monotonic() + 30
    while replicas() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not replicas()  # nothing left running


@pytest.mark.serial
@pytest.mark.slow
def test_two_replicas_answer_with_keys_and_a_killed_one_is_replaced() -> None:
    import httpx

    server, base = start_serve(2)
    headers = {"X-API-Key": KEY}
    try:
        wait_until_healthy(server, base, replica_count=2)
        ged = httpx.post(f"{base}/v1/ged", json={"texts": ["He go to the store yesterday."]}, headers=headers,
                         timeout=30)
        assert ged.status_code == 200 and ged.json()["results"][0]["flagged"][0]["word"] == "go"
        check = httpx.post(f"{base}/v2/check", data={"text": "She don't like it.", "language": "en-US",
                                                      "apiKey": KEY}, timeout=30)
        assert check.status_code == 200 and check.json()["matches"]
        assert httpx.post(f"{base}/v1/ged", json={"texts": ["x"]}, timeout=30).status_code == 401  # keys on

        victim = replicas()[0]
        victim.send_signal(signal.SIGKILL)
        for _ in range(20):  # each of the next requests is answered, within the bound
            started = time.monotonic()
            while True:
                try:
                    answer = httpx.post(f"{base}/v1/ged", json={"texts": ["We was happy."]}, headers=headers,
                                        timeout=RECOVERY_S)
                    if answer.status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() - started < RECOVERY_S, "no 200 within the bound after a replica died"
                time.sleep(0.1)
        deadline = time.monotonic() + 120
        while len([p for p in replicas() if p.pid != victim.pid]) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len([p for p in replicas() if p.pid != victim.pid]) == 2  # Serve started a new one
    finally:
        err = terminate(server)
    assert_stopped_cleanly(server, err)


@pytest.mark.serial
@pytest.mark.slow
def test_sigterm_while_the_deployment_comes_up_still_shuts_down_cleanly() -> None:
    """The proxy answers before ``serve.run`` returns; a SIGTERM then met Ray's own handler, which aborts (-6)."""
    server, base = start_serve(1)
    try:
        wait_until_healthy(server, base)
    finally:
        err = terminate(server)  # at once: the proxy answers before ``serve.run`` returns
    assert_stopped_cleanly(server, err)
