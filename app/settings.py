"""What one server process is configured with: limits, batching and authentication."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ServerSettings:
    max_texts: int = 64  # texts per request (hypotheses, for /v1/rerank)
    max_chars: int = 10_000  # characters per text
    max_body_bytes: int = 1 << 20
    max_tokens: int = 32_768  # model tokens per request: its texts' windows, [CLS]/[SEP] and window overlap counted
    timeout_s: float = 30.0  # per request, queueing included
    step_tokens: int = 1024  # model tokens per scheduling step: how long a request can hold up another one
    read_timeout_s: float = 10.0  # to send a request's head, and again its body; slower clients are dropped
    # An idle keep-alive connection is closed after this: longer than client pools keep one (httpx 5 s, aiohttp
    # 15 s), so the client drops it first and never sends a request into a connection the server is closing.
    keep_alive_s: float = 30.0
    batching: bool = True
    max_batch: int = 32  # texts merged into one model call when batching
    model_batch: int = 4  # rows per engine run inside a call, length-sorted: on CPU small runs pad least
    max_wait_ms: float = 0.0  # how long the first request holds a batch open; 0 = merge only what already waits
    api_key: str | None = None  # required in the X-API-Key header when set
    ged_threshold: float | None = None  # default /v1/ged threshold; None = the Detector's tuned one
    suggest: bool = True  # /v2/check fills LanguageTool's replacements (one more scoring pass a request)
