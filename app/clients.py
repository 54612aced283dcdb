"""Who a request comes from, and how much of the server each client holds: the shares behind 429 answers.

A client is its API key's name when the server has keys, else its address (with ``trusted_proxies``, the address
a listed proxy names in X-Forwarded-For). Each client may hold ``client_requests`` requests and ``client_tokens``
model tokens in flight, and all clients together ``max_requests`` requests: past a share the server answers 429
with ``Retry-After`` at once, as text-embeddings-inference does past ``--max-concurrent-requests`` and Triton past
``max_queue_size``, instead of queueing work that would only slow every other client down. Everything here runs on
the event loop thread, so the counts need no lock.

A client's *small* requests (a sentence or a paragraph: at most a quarter of a scheduling step, ``small``) hold a
share of ``client_requests`` of their own beside the others': editors, plugins and office machines behind one
address are one client, and a batch job's pool of connections that fills the address's share with its requests
leaves the editor's sentences their own (the model thread serves them ahead too: ``batcher.FairQueue``).
"""

from __future__ import annotations

import hmac
import ipaddress
import math
from collections.abc import Callable
from dataclasses import dataclass

from electra_detect.app.settings import ServerSettings

API_KEY_HEADER = "x-api-key"
MAX_RETRY_AFTER_S = 60
SMALL_PARTS = 4  # a small request is at most a quarter of a scheduling step


API_KEY_FIELD = "apiKey"  # LanguageTool's form field (and query parameter) for the key


def key_name(headers: dict[bytes, bytes], keys: dict[str, str]) -> str | None:
    """The client name of the X-API-Key header's key, None when it is missing or not one of ``keys``."""
    return named_key(headers.get(API_KEY_HEADER.encode(), b""), keys)


def named_key(given: bytes | str, keys: dict[str, str]) -> str | None:
    """The client name of the key ``given`` (a header's bytes or a form field), None when it is not one of
    ``keys``; every key is compared in constant time (the answer's timing does not tell which key was near)."""
    if isinstance(given, str):
        given = given.encode("utf-8", "surrogatepass")
    found = None
    for key, name in keys.items():
        if hmac.compare_digest(given, key.encode()):
            found = name
    return found


def _in(address: str, networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(peer: str | None, forwarded_for: str | None, trusted_proxies: tuple[str, ...]) -> str:
    """The client's address: the peer's, or, when the peer is a trusted proxy, the right-most address of
    X-Forwarded-For that is not a trusted proxy itself (addresses further left are the client's own claim)."""
    peer = peer or "unknown"
    networks = [ipaddress.ip_network(proxy, strict=False) for proxy in trusted_proxies]
    if not networks or not forwarded_for or not _in(peer, networks):
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _in(hop, networks):
            return hop if _valid_ip(hop) else peer
    return hops[0] if hops and _valid_ip(hops[0]) else peer


def _valid_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def client_of(scope: dict, settings: ServerSettings, key: str | None = None) -> str:
    """``key:<name>`` when the server has API keys (the request's key was checked already; ``key``: its name when
    it came in a form field, else the header's), else ``ip:<address>``."""
    headers = dict(scope.get("headers") or [])
    if settings.api_keys:
        return f"key:{key or key_name(headers, settings.api_keys) or '-'}"
    peer = (scope.get("client") or (None,))[0]
    forwarded = headers.get(b"x-forwarded-for")
    return "ip:" + client_address(peer, forwarded.decode("latin-1") if forwarded else None, settings.trusted_proxies)


def small(tokens: int, settings: ServerSettings) -> bool:
    """Whether a request of ``tokens`` model tokens is small: at most a quarter of a scheduling step (``step_tokens``;
    256 model tokens by default: a paragraph), the size the model thread merges and serves ahead of bigger ones."""
    return tokens <= settings.step_tokens // SMALL_PARTS


@dataclass
class Load:
    requests: int = 0  # requests in flight, small ones included
    tokens: int = 0
    small: int = 0  # small requests in flight: a share of their own


class Refused(Exception):
    """A request past its client's (or the server's) share: answered 429 with ``retry_after`` seconds."""

    def __init__(self, reason: str, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.reason, self.message, self.retry_after = reason, message, retry_after


class Shares:
    """Requests and model tokens each client holds in flight, and the refusals past a share.

    ``rate`` gives the model's present speed in tokens per second (0 when unknown): ``Retry-After`` is about the
    time the client's own work in flight needs to finish at that speed, at least 1 s and at most 60 s.
    """

    def __init__(self, settings: ServerSettings, rate: Callable[[], float]) -> None:
        self.settings, self.rate = settings, rate
        self.clients: dict[str, Load] = {}
        self.requests = 0

    def retry_after(self, client: str) -> int:
        tokens, rate = self.clients.get(client, Load()).tokens, self.rate()
        return max(1, min(MAX_RETRY_AFTER_S, math.ceil(tokens / rate) if rate else 1))

    def enter(self, client: str, small: bool = False) -> None:
        """Count one more request of ``client``, or raise Refused past ``client_requests`` (a ``small`` one: past the
        client's ``client_requests`` small requests, whatever else it holds) or ``max_requests``."""
        load = self.clients.get(client, Load())  # kept only once let in: refused clients leave nothing behind
        held, kind = (load.small, "small requests") if small else (load.requests - load.small, "requests")
        if held >= self.settings.client_requests:
            raise Refused("client_requests", f"this client has {held} {kind} in flight, its share is "
                                             f"{self.settings.client_requests}; retry after the Retry-After seconds",
                          self.retry_after(client))
        if self.requests >= self.settings.max_requests:
            raise Refused("max_requests", f"the server has {self.requests} requests in flight, its limit; retry "
                                          f"after the Retry-After seconds", self.retry_after(client))
        load.requests += 1
        load.small += small
        self.requests += 1
        self.clients[client] = load

    def leave(self, client: str, small: bool = False) -> None:
        load = self.clients[client]
        load.requests -= 1
        load.small -= small
        self.requests -= 1
        if not load.requests and not load.tokens:
            del self.clients[client]

    def take(self, client: str, tokens: int, refuse: bool = True) -> None:
        """Count ``tokens`` more model tokens of ``client``, or (when ``refuse``) raise Refused when they would take
        it past ``client_tokens`` (a client with no tokens in flight is always let in: its request is bounded
        already)."""
        load = self.clients.get(client, Load())
        if refuse and load.tokens and load.tokens + tokens > self.settings.client_tokens:
            raise Refused("client_tokens", f"this client has {load.tokens} model tokens queued or in progress; "
                                           f"{tokens} more would pass its share of {self.settings.client_tokens}; "
                                           f"retry after the Retry-After seconds", self.retry_after(client))
        load.tokens += tokens
        self.clients[client] = load

    def give(self, client: str, tokens: int) -> None:
        load = self.clients[client]
        load.tokens -= tokens
        if not load.requests and not load.tokens:
            del self.clients[client]
