"""What one server process is configured with: limits, batching and authentication.

Each field that ``serve`` exposes names its flag and help in its metadata (``serve_flags`` makes the flags from
them, as ``pretrain``'s come from ``RunConfig``), and ``__post_init__`` checks every value, so a bad setting is
refused the same way from the command line and from code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any


class SettingsError(ValueError):
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
    ged_threshold: float | None = field(default=None, metadata=_flag(
        "--ged-threshold", "default /v1/ged threshold (default: ged.json, else 0.5)"))
    suggest: bool = field(default=True, metadata=_flag(
        "--no-suggest", "answer /v2/check without replacements (saves the scoring of the candidates)"))

    def __post_init__(self) -> None:
        for item in fields(self):
            flag, value = item.metadata.get("flag", item.name), getattr(self, item.name)
            if item.type == "int" and value < 1:
                raise SettingsError(f"{flag} must be >= 1")
            if item.type == "float" and not (math.isfinite(value) and value >= 0 and
                                             (value > 0 or "low" in item.metadata)):
                bound = ">= 0" if "low" in item.metadata else "> 0"
                raise SettingsError(f"{flag} must be a finite number {bound}")
        if self.ged_threshold is not None and not 0 <= self.ged_threshold <= 1:  # NaN fails too
            raise SettingsError("--ged-threshold must be a number in [0, 1]")


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
