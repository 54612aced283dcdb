"""What the demo's server takes: upload sizes and their total (``UploadBudget``), the queue, and the logins."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from electra_detect.app.demo.errors import DemoError

FILE_SIZE = r"(?i)[0-9]+(\.[0-9]+)?\s*(b|kb|mb|gb|tb)"


@dataclass
class DemoLimits:
    """What the demo's server takes: ``max_file_size`` per upload (Gradio's size string, e.g. "1mb"),
    ``max_total_uploads`` all uploads together (the same form; past it an upload is refused 413), at most
    ``queue_size`` jobs waiting (more get "queue full" at once), ``concurrency`` jobs run at a time, and the
    (username, password) pairs that may log in (empty: no login)."""

    max_file_size: str = "1mb"
    queue_size: int = 16
    concurrency: int = 1
    auth: list[tuple[str, str]] = field(default_factory=list)
    max_total_uploads: str = "32mb"

    def __post_init__(self) -> None:
        if self.queue_size < 1 or self.concurrency < 1:
            raise DemoError("--queue-size and --concurrency must be >= 1")
        for flag, size in (("--max-file-size", self.max_file_size), ("--max-total-uploads", self.max_total_uploads)):
            if not re.fullmatch(FILE_SIZE, str(size).strip()):  # the sizes Gradio's launch() reads
                raise DemoError(f"{flag} {size!r} is not a size (e.g. 500kb, 1mb)")


def size_bytes(size: str) -> int:
    """Bytes of a size string as Gradio reads one ("1mb": 1024 ** 2 bytes; "500kb", "2 gb", "10b")."""
    number, unit = re.fullmatch(r"(?i)([0-9]+(?:\.[0-9]+)?)\s*(b|kb|mb|gb|tb)", size.strip()).groups()
    return int(float(number) * 1024 ** ("b", "kb", "mb", "gb", "tb").index(unit.lower()))


class UploadBudget:
    """ASGI middleware on Gradio's app: an upload (a POST to a path ending in ``/upload``) is refused 413 when the
    files the demo holds (``folder``) and the uploads in progress (their declared length, else ``per_upload``) would
    pass ``limit`` bytes. Gradio caps each file (``max_file_size``) but not their number: 150 uploads of 1 MB left
    145 MB behind. Here, not in Gradio (it has no such setting), so the cap holds whatever the page shows."""

    def __init__(self, app: Any, folder: str, limit: int, per_upload: int) -> None:
        self.app, self.folder, self.limit, self.per_upload = app, Path(folder), limit, per_upload
        self.in_flight = 0  # bytes reserved by uploads being received (the event loop's thread only)

    def held(self) -> int:
        """Bytes of the files under the folder now."""
        return sum(p.stat().st_size for p in self.folder.rglob("*") if p.is_file()) if self.folder.exists() else 0

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].endswith("/upload"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        reserve = int(declared) if declared.isdigit() else self.per_upload
        if self.held() + self.in_flight + reserve > self.limit:
            from starlette.responses import PlainTextResponse

            answer = PlainTextResponse(f"the demo holds its most uploads ({self.limit:,} bytes in all); none is "
                                       f"taken now", status_code=413)
            await answer(scope, receive, send)
            return
        self.in_flight += reserve
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= reserve


def parse_auth(pairs: list[str] | None = None, auth_file: str | Path | None = None) -> list[tuple[str, str]]:
    """(username, password) pairs from ``user:password`` strings and a file of such lines (blank lines and lines
    starting with # skipped); the password is what follows the first colon."""
    lines = list(pairs or [])
    if auth_file is not None:
        try:
            text = Path(auth_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DemoError(f"--auth-file {auth_file}: cannot read it ({exc})") from None
        lines += [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        if not lines:
            raise DemoError(f"--auth-file {auth_file} holds no username:password line")
    found = []
    for line in lines:
        user, sep, password = line.partition(":")
        if not sep or not user or not password:
            raise DemoError("an auth entry must be username:password, both non-empty")
        found.append((user, password))
    return found
