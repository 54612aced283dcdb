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


@pytest.mark.serial
@pytest.mark.slow
def test_two_replicas_answer_with_keys_and_a_killed_one_is_replaced() -> None:
    import httpx

    port = free_port()
    env = {**os.environ, "ELECTRA_DETECT_API_KEY": KEY, "RAY_ADDRESS": ""}
    server = subprocess.Popen([sys.executable, "-m", "electra_detect.cli", "serve", "--ray", "--replicas", "2",
                               "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, cwd=ROOT)
    base, headers = f"http://127.0.0.1:{port}", {"X-API-Key": KEY}
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/healthz", timeout=5).status_code == 200 and len(replicas()) == 2:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, server.communicate()[1][-3000:]
            time.sleep(0.5)
        else:
            pytest.fail("the Serve deployment did not come up in 240 s")
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
        server.send_signal(signal.SIGTERM)
        try:
            _, err = server.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
            _, err = server.communicate()
    assert server.returncode == 0, err[-4000:]
    deadline = time.monotonic() + 30
    while replicas() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not replicas()  # nothing left running


@pytest.mark.serial
@pytest.mark.slow
def test_sigterm_while_the_deployment_comes_up_still_shuts_down_cleanly() -> None:
    """The proxy answers before ``serve.run`` returns; a SIGTERM then met Ray's own handler, which aborts (-6)."""
    import httpx

    port = free_port()
    env = {**os.environ, "ELECTRA_DETECT_API_KEY": KEY, "RAY_ADDRESS": ""}
    server = subprocess.Popen([sys.executable, "-m", "electra_detect.cli", "serve", "--ray", "--replicas", "1",
                               "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and server.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            _, err = server.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
            _, err = server.communicate()
    assert server.returncode == 0, err[-4000:]
    deadline = time.monotonic() + 30
    while replicas() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not replicas()
