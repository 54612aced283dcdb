"""What one server process is configured with: limits, batching and authentication.

Each field that ``serve`` exposes names its flag and help in its metadata (``serve_flags`` makes the flags from
them, as ``pretrain``'s come from ``RunConfig``), and ``__post_init__`` checks every value, so a bad setting is
refused the same way from the command line and from code.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from electra_detect.errors import UserError

MIN_KEY_CHARS = 8  # an API key shorter than this is refused (guessable)


class SettingsError(UserError, ValueError):
    """A setting the server cannot run with (its message names the flag)."""


def _flag(name: str, help_text: str, **extra: Any) -> dict[str, Any]:
    return {"flag": name, "help": help_text, **extra}


@dataclass
class ServerSettings:
    max_texts: int = field(default=64, metadata=_flag("--max-texts", "texts (or hypotheses) per request"))
    max_chars: int = field(default=10_000, metadata=_flag("--max-chars", "characters per text"))
    max_body_bytes: int = field(default=1 << 20, metadata=_flag("--max-body-bytes", "request body size limit"))
    max_tokens: int = field(default=32_768, metadata=_flag(
        "--max-tokens", "model tokens per request: every text's windows with [CLS]/[SEP], overlap counted (413 "
                        "too_many_tokens above it; docs/serving.md says what it costs)"))
    timeout_s: float = field(default=30.0, metadata=_flag(
        "--timeout", "seconds a request may take, queueing included (504; the model stops working on it)"))
    step_tokens: int = field(default=1024, metadata=_flag(
        "--step-tokens", "model tokens per scheduling step: requests take turns a step at a time, so a heavy request "
                         "holds up a small one for about one step"))
    read_timeout_s: float = field(default=10.0, metadata=_flag(
        "--read-timeout", "seconds a client has to send a request's head, and again its body (408; slower clients "
                          "are disconnected)"))
    # An idle keep-alive connection is closed after this: longer than client pools keep one (httpx 5 s, aiohttp
    # 15 s), so the client drops it first and never sends a request into a connection the server is closing.
    keep_alive_s: float = 30.0
    batching: bool = True  # `serve --batching auto|on|off` decides it from the engine (app/cli.py)
    max_batch: int = field(default=32, metadata=_flag("--max-batch", "texts per model call when batching"))
    model_batch: int = field(default=4, metadata=_flag(
        "--model-batch", "rows per engine run: a merged call is split into length-sorted runs of this size "
                         "(4 suits a CPU, where padding costs more than small batches; try 32 on a GPU)"))
    max_wait_ms: float = field(default=0.0, metadata=_flag(
        "--max-wait-ms", "how long a batch waits to fill (default 0: merge what queued while the model was busy; "
                         "a wait only added latency on the 2-core CPU measured, it may pay on a GPU)", low=0.0))
    api_key: str | None = None  # required in the X-API-Key header when set (`serve` reads it from --api-key-env)
    # Every key a client may send in X-API-Key, with the name its requests are counted under (fairness, logs);
    # `serve --api-keys-file`. ``api_key`` joins it as "default". Empty and no api_key: no key needed.
    api_keys: dict[str, str] = field(default_factory=dict)
    client_requests: int = field(default=64, metadata=_flag(
        "--client-requests", "requests one client (an API key, else an address) may have in flight, and as many "
                             "small ones (a quarter of --step-tokens or less: a sentence) besides; past it 429 with "
                             "Retry-After"))
    client_tokens: int = field(default=32_768, metadata=_flag(
        "--client-tokens", "model tokens one client may have queued or in progress; past it 429 with Retry-After (a "
                           "client with nothing in flight is always let in, and so is a short request: --step-tokens "
                           "or less)"))
    max_requests: int = field(default=512, metadata=_flag(
        "--max-requests", "requests in flight over all clients; past it 429 with Retry-After"))
    check_budget: int = field(default=32_768, metadata=_flag(
        "--check-budget", "model tokens one check (/v1/ged, /v2/check) may cause: its texts' tokens over it are a "
                          "413 over_budget before any scoring; its candidates (suggestions) are cut to the rest"))
    # Addresses (or networks) of reverse proxies whose X-Forwarded-For names the client; `serve --trusted-proxy`.
    trusted_proxies: tuple[str, ...] = ()
    # Host header values served (DNS-rebinding defence; "*.example.com" matches subdomains); empty: any.
    allowed_hosts: tuple[str, ...] = ()
    docs: bool = False  # the Swagger UI at /docs (`serve --docs`; it loads from a CDN); /openapi.json is always on
    ged_threshold: float | None = field(default=None, metadata=_flag(
        "--ged-threshold", "default /v1/ged threshold (default: ged.json, else 0.5)"))
    suggest: bool = field(default=True, metadata=_flag(
        "--no-suggest", "answer /v2/check without replacements (saves the scoring of the candidates; the types are the "
                        "same: a type names the edit to the first candidate, found without scoring)"))
    # The personal dictionary file (`serve --dictionary`); None: $ELECTRA_DETECT_DICTIONARY, else the XDG file.
    dictionary: str | None = None

    @property
    def max_head_bytes(self) -> int:
        """The longest request head (URL and headers) read: room for a GET /v2/check of ``max_chars`` characters
        percent-encoded (at most 12 bytes a character) and its options, at least h11's default 16 KiB; a longer
        URL is a JSON 414 (``guard.http_protocol``)."""
        return max(16 * 1024, 12 * self.max_chars + 8 * 1024)

    def __post_init__(self) -> None:
        for item in fields(self):
            flag, value = item.metadata.get("flag", item.name), getattr(self, item.name)
            if item.type == "int" and (type(value) is not int or value < 1):
                raise SettingsError(f"{flag} must be a whole number >= 1")
            if item.type == "float" and not (type(value) in (int, float) and math.isfinite(value) and value >= 0
                                             and (value > 0 or "low" in item.metadata)):
                bound = ">= 0" if "low" in item.metadata else "> 0"
                raise SettingsError(f"{flag} must be a finite number {bound}")
            if item.type == "bool" and not isinstance(value, bool):
                raise SettingsError(f"{flag} must be true or false")
        if self.ged_threshold is not None:
            from electra_detect.errors import DetectorError
            from electra_detect.model_dir import check_threshold

            try:
                check_threshold(self.ged_threshold, "--ged-threshold")  # the one range check of a flag threshold
            except DetectorError as exc:
                raise SettingsError(str(exc)) from None
        if not isinstance(self.api_keys, dict) or not all(isinstance(k, str) and isinstance(n, str) and n.strip()
                                                          for k, n in self.api_keys.items()):
            raise SettingsError("api_keys must map each key to a client name")
        if self.api_key is not None:
            check_key(self.api_key, "the API key")
            self.api_keys = {**self.api_keys, self.api_key: self.api_keys.get(self.api_key, "default")}
        for key, name in self.api_keys.items():
            check_key(key, f"API key {name!r}")
        self.trusted_proxies = tuple(self.trusted_proxies)
        for proxy in self.trusted_proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise SettingsError(f"--trusted-proxy {proxy!r} is not an IP address or network") from None
        self.allowed_hosts = tuple(host.strip().lower() for host in self.allowed_hosts)
        for host in self.allowed_hosts:
            if not host or any(c.isspace() or c in "/@" for c in host) or "*" in host.lstrip("*"):
                raise SettingsError(f"--allowed-host {host!r} is not a host name (a leading '*.' may match "
                                    f"subdomains)")


def check_key(key: str, what: str) -> None:
    """A key a client can send in a header: printable ASCII without spaces, at least MIN_KEY_CHARS long."""
    if len(key) < MIN_KEY_CHARS or not all("!" <= c <= "~" for c in key):
        raise SettingsError(f"{what} must be at least {MIN_KEY_CHARS} printable ASCII characters without spaces")


def read_keys_file(path: str | Path) -> dict[str, str]:
    """API key -> client name from a keys file: one key a line, optionally followed by whitespace and a name
    (default ``key<line number>``, never the key itself); blank lines and lines starting with # are skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"--api-keys-file {path}: cannot read it ({exc})") from None
    keys: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        parts = line.split(None, 1)
        if not parts or parts[0].startswith("#"):
            continue
        key, name = parts[0], parts[1].strip() if len(parts) > 1 else f"key{number}"
        check_key(key, f"--api-keys-file {path} line {number}: the key")
        if key in keys:
            raise SettingsError(f"--api-keys-file {path} line {number}: the key is already on an earlier line")
        keys[key] = name
    if not keys:
        raise SettingsError(f"--api-keys-file {path} holds no key")
    return keys


def serve_flags() -> list[tuple[str, str, Any, dict[str, Any]]]:
    """(field name, flag, default, argparse keywords) of every setting ``serve`` exposes."""
    out = []
    for item in fields(ServerSettings):
        if "flag" not in item.metadata:
            continue
        flag, help_text = item.metadata["flag"], item.metadata["help"]
        if item.type == "bool":  # a --no-X flag turns a default-on setting off
            out.append((item.name, flag, item.default, {"action": "store_false", "dest": item.name,
                                                        "help": help_text}))
            continue
        kind = {"int": int, "float": float, "float | None": float}[item.type]
        out.append((item.name, flag, item.default, {"type": kind, "default": item.default, "dest": item.name,
                                                    "metavar": flag[2:].upper().replace("-", "_"), "help": help_text}))
    return out
