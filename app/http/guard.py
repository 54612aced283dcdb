"""What stands between a socket and the app: the ASGI guard (Host header, API keys, each client's share of
requests, media type, body size and read time, request metrics, last-resort 500) and uvicorn's HTTP protocol with
the server's socket timeouts."""

from __future__ import annotations

import asyncio
import http
import logging
import select
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi.responses import JSONResponse

from electra_detect.app.clients import API_KEY_FIELD, API_KEY_HEADER, client_of, key_name, named_key
from electra_detect.app.http.errors import error_response, internal_error
from electra_detect.app.http.forms import FIELDS_SCOPE_KEY, FormError, request_fields
from electra_detect.app.metrics import Metrics
from electra_detect.app.settings import ServerSettings

log = logging.getLogger("electra_detect.server")

CLIENT_SCOPE_KEY = "electra_detect.client"  # where the Guard leaves the request's client for the routes
ERROR_ID_KEY = "electra_detect.error_id"  # the id a 500 answer names and the log line carries
FORM_MEDIA = ("application/x-www-form-urlencoded", "multipart/form-data")
LINGER_S, LINGER_BYTES = 5.0, 4 << 20  # after refusing a head: how long and how much of the rest is read and dropped


def host_allowed(host_header: str, allowed: tuple[str, ...]) -> bool:
    """Whether a Host header names one of ``allowed`` (starlette's TrustedHostMiddleware rule: an exact name, or
    ``*.example.com`` for its subdomains, ``*`` for any; the port is ignored). Here, not the middleware itself, so
    that the refusal is a JSON 400 like every other error."""
    if not allowed or "*" in allowed:
        return True
    host = host_header.strip().lower()
    if host.startswith("[") and "]" in host:  # [IPv6 address]:port
        host = host[1:host.find("]")]
    elif host.count(":") == 1:  # name:port
        host = host.split(":")[0]
    return any(host == pattern or (pattern.startswith("*.") and host.endswith(pattern[1:])) for pattern in allowed)


class Guard:
    """ASGI middleware: Host header, API keys, who the client is (left in the scope for the routes), Content-Type,
    body-size limit on received bytes, body read timeout, request metrics, and the last word on an unexpected
    exception (a JSON 500 with an error id on a connection that stays usable; the log has the traceback). What a
    request may cost is the Service's business (``Service.check``), not the Guard's.

    ``paths``: the app's routes (each its own metrics label; any other path is "other"); ``form_paths``: routes
    whose body is a form (LanguageTool's, as its clients send them; every other route reads JSON);
    ``key_field_paths``: routes that may carry the key as LanguageTool's ``apiKey`` field instead of the header.

    Pure ASGI (not BaseHTTPMiddleware) so the body can be counted as it arrives and a 413 sent
    before the app sees an oversized payload.
    """

    def __init__(self, app: Any, settings: ServerSettings, metrics: Metrics, paths: frozenset[str] = frozenset(),
                 form_paths: frozenset[str] = frozenset(), key_field_paths: frozenset[str] = frozenset()) -> None:
        self.app, self.settings, self.metrics = app, settings, metrics
        self.paths, self.form_paths, self.key_field_paths = paths, form_paths, key_field_paths

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]], send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        label = path if path in self.paths else "other"
        started = time.perf_counter()
        status_box = {"status": 500, "started": False}

        async def send_counted(message: dict) -> None:
            if message["type"] == "http.response.start":
                status_box["status"] = message["status"]
                status_box["started"] = True
            await send(message)

        self.metrics.inflight.inc()
        try:
            writes = scope["method"] in ("POST", "PUT", "PATCH")
            body: bytes | None = None  # read early only when the key may be in it
            key: str | None = None  # the key's name when it came as a LanguageTool apiKey field
            rejection, key_in_fields = self._reject(scope)
            if rejection is None and key_in_fields:
                if writes:
                    rejection = self._content_type(scope, form=True)
                    if rejection is None:
                        body, rejection = await self._read_body(scope, receive)
                if rejection is None:
                    key, rejection = self._field_key(scope, body or b"")
            if rejection is None:
                scope[CLIENT_SCOPE_KEY] = client_of(scope, self.settings, key)
            if rejection is None and writes and body is None:
                rejection = self._content_type(scope, form=path in self.form_paths)
                if rejection is None:
                    body, rejection = await self._read_body(scope, receive)
            if rejection is None and writes and body is not None:
                if body.strip() and b"content-type" not in dict(scope.get("headers") or []):
                    rejection = error_response(415, "unsupported_media_type",
                                               "send JSON with a Content-Type: application/json header")
                if rejection is None:
                    receive = _replay(body, receive)
            if rejection is not None:
                await rejection(scope, receive, send_counted)
            else:
                await self.app(scope, receive, send_counted)
        except Exception:  # a bug, not the client's fault: answer it, keep the connection and the process
            if ERROR_ID_KEY in scope:  # the app's handler answered and logged it (starlette re-raises after that)
                return
            error_id = scope[ERROR_ID_KEY] = uuid.uuid4().hex[:12]
            log.exception("internal error %s on %s %s", error_id, scope["method"], path)
            if not status_box["started"]:
                await internal_error(error_id)(scope, receive, send_counted)
        finally:
            self.metrics.inflight.dec()
            self.metrics.requests.labels(label, str(status_box["status"])).inc()
            self.metrics.latency.labels(label).observe(time.perf_counter() - started)

    def _reject(self, scope: dict) -> tuple[JSONResponse | None, bool]:
        """(the refusal by Host header or API key header, or None; whether the key is to be read from the request's
        fields instead: a LanguageTool route without a valid header key, as LanguageTool's clients send it)."""
        headers = dict(scope.get("headers") or [])
        if not host_allowed(headers.get(b"host", b"").decode("latin-1"), self.settings.allowed_hosts):
            return error_response(400, "invalid_host", "the Host header names a host this server does not serve"), False
        url = len(scope.get("raw_path") or scope["path"].encode()) + len(scope.get("query_string", b"")) + 1
        if url > self.settings.max_head_bytes:  # h11 only measures a head that arrives in pieces (http_protocol)
            return error_response(414, "uri_too_long", uri_too_long(self.settings.max_head_bytes)), False
        keys_sent = sum(name == API_KEY_HEADER.encode() for name, _ in scope.get("headers") or [])
        if self.settings.api_keys and keys_sent > 1:  # which was meant cannot be told; the last won: (wrong, good) in
            return error_response(400, "bad_request", f"the {API_KEY_HEADER} header is given more than once: give it "
                                                      f"once"), False
        if self.settings.api_keys and scope["path"] != "/healthz":
            if key_name(headers, self.settings.api_keys) is None:
                # A key in the field only when no header is sent: a wrong header is wrong whatever the field says.
                if scope["path"] in self.key_field_paths and API_KEY_HEADER.encode() not in headers:
                    return None, True
                return error_response(401, "unauthorized", f"missing or wrong {API_KEY_HEADER} header"), False
        return None, False

    def _field_key(self, scope: dict, body: bytes) -> tuple[str | None, JSONResponse | None]:
        """(the name of the key in the request's ``apiKey`` field, or the refusal): the fields read once, left in
        the scope for the route."""
        content_type = dict(scope.get("headers") or []).get(b"content-type")
        try:
            fields = request_fields(scope["method"], scope.get("query_string", b""), body,
                                    None if content_type is None else content_type.decode("latin-1"))
        except FormError as exc:
            return None, error_response(exc.status, exc.kind, exc.message)
        scope[FIELDS_SCOPE_KEY] = fields
        name = named_key(fields.get(API_KEY_FIELD, ""), self.settings.api_keys)
        if name is None:
            return None, error_response(401, "unauthorized", f"missing or wrong {API_KEY_HEADER} header or "
                                                             f"{API_KEY_FIELD} field")
        return name, None

    @staticmethod
    def _content_type(scope: dict, form: bool = False) -> JSONResponse | None:
        """A Content-Type other than JSON is a 415 (other than a form, on a LanguageTool route, ``form``); a
        missing one is judged once the body is read (a POST with no body at all is the app's 422, with a body
        it is a 415)."""
        headers = dict(scope.get("headers") or [])
        kind = headers.get(b"content-type", b"application/json").decode("latin-1")
        media = kind.split(";")[0].strip().lower()
        if form:
            if media in FORM_MEDIA or b"content-type" not in headers:
                return None
            return error_response(415, "unsupported_media_type", f"send a form ({' or '.join(FORM_MEDIA)}), "
                                                                  f"not {media or 'nothing'}")
        if media != "application/json" and not media.endswith("+json"):
            return error_response(415, "unsupported_media_type", f"send JSON (Content-Type: application/json), "
                                                                  f"not {media or 'nothing'}")
        return None

    async def _read_body(self, scope: dict, receive: Callable) -> tuple[bytes, JSONResponse | None]:
        limit = self.settings.max_body_bytes
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        too_big = error_response(413, "body_too_large", f"request body over {limit} bytes")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return b"", too_big
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.read_timeout_s
        chunks, size = [], 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:  # a slow (or stalled) client: answer and close, do not hold the connection
                late = error_response(408, "request_timeout", f"the request body did not arrive within "
                                                              f"{self.settings.read_timeout_s:g} s")
                late.headers["connection"] = "close"
                return b"", late
            if message["type"] == "http.disconnect":
                return b"", error_response(400, "disconnected", "client disconnected")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return b"", too_big
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), None


def _replay(body: bytes, original: Callable[[], Awaitable[dict]]) -> Callable[[], Awaitable[dict]]:
    """The body we already read, then the real channel (which reports a disconnect)."""
    sent = False

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await original()

    return receive


def http_protocol(read_timeout_s: float, max_head_bytes: int = 16 * 1024) -> type:
    """uvicorn's h11 protocol with the server's socket timeouts, and JSON answers to a head it cannot read.

    - A request head must arrive within ``read_timeout_s`` of a new connection opening, or of its first
      byte on a kept-alive one (uvicorn's keep-alive timer is cancelled by any byte, so a client trickling
      a header a byte at a time was held forever).
    - An idle keep-alive connection (no byte since the last response) is uvicorn's keep-alive timeout
      (``ServerSettings.keep_alive_s``), and is never closed while a request's bytes wait unread on the
      socket: closing then resets the connection, and the client loses a request it had already sent.
    - A request head that grows past ``max_head_bytes`` before it ends (uvicorn's ``h11_max_incomplete_event_size``,
      which the server sets to ``ServerSettings.max_head_bytes``) is a JSON 414 ``uri_too_long`` when its URL alone
      is over it (a GET /v2/check of a long text: send it as a POST form), else 431; any other unreadable head a
      JSON 400 (uvicorn answers these in plain text). A long URL that arrives whole is the Guard's 414.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedProtocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            self._disarm()  # idle from here: the keep-alive timeout's business, not the head's
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def timeout_keep_alive_handler(self) -> None:
            if self._bytes_waiting():  # a request arrived as the idle time ran out: read it, look again later
                self.timeout_keep_alive_task = self.loop.call_later(1.0, self.timeout_keep_alive_handler)
                return
            super().timeout_keep_alive_handler()

        def send_400_response(self, msg: str) -> None:  # uvicorn's answer to a head h11 refused
            status, body = head_error(self.conn.trailing_data[0], max_head_bytes, msg)
            headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
            for event in (h11.Response(status_code=status, headers=headers), h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event) or b"")
            self._linger()

        def _head_too_long(self, data: bytes) -> bool:
            """Refuse a request head over ``max_head_bytes`` that arrived whole: h11's limit measures only a head
            still incomplete after a read, so one read of 200 KB (a loaded server reads late, and more at once) was
            parsed and served."""
            pending = bytes(self.conn.trailing_data[0]) + data
            if len(pending) <= max_head_bytes or pending.find(b"\r\n\r\n", 0, max_head_bytes + 4) >= 0:
                return False
            status, body = head_error(pending, max_head_bytes)
            head = (f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode()
            self.transport.write(head + body)
            self._linger()
            return True

        def _linger(self) -> None:
            """Close after the answer without resetting the connection: closing a socket with the client's bytes
            still unread sends a TCP reset, and the client loses the answer (200 KB of headers got a reset, not
            their 431). So the answer is sent with our end shut for writing, and what the client still sends is
            read and dropped until it closes, for at most ``LINGER_S`` and ``LINGER_BYTES`` (nginx's
            lingering_close)."""
            self._lingering, self._lingered = True, 0
            self._disarm()
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self.loop.call_later(LINGER_S, self.transport.close)

        def data_received(self, data: bytes) -> None:
            if getattr(self, "_lingering", False):  # after a refused head: drop it, close once it is too much
                self._lingered += len(data)
                if self._lingered > LINGER_BYTES:
                    self.transport.close()
                return
            if self._head_timer is None and self.conn.their_state is h11.IDLE:
                self._arm()  # the first bytes of a new request head: the head's clock starts
            if self.conn.their_state is h11.IDLE and self._head_too_long(data):
                return
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._disarm()

        def eof_received(self) -> bool | None:
            if getattr(self, "_lingering", False):
                self.transport.close()  # the client has sent everything and read the answer
                return None
            return super().eof_received()

        def _arm(self) -> None:
            self._disarm()
            if not self.transport.is_closing():
                self._head_timer = self.loop.call_later(read_timeout_s, self._head_timeout)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timeout(self) -> None:
            self._head_timer = None
            if self.conn.their_state is not h11.IDLE or self.transport.is_closing():
                return
            if self._bytes_waiting() and not self.conn.trailing_data[0]:
                self._arm()  # a fresh connection's first bytes are here, not yet read: their own clock starts
                return
            self.transport.close()

        def _bytes_waiting(self) -> bool:
            """Unread bytes (or the client's close) on the socket; False when it cannot be told."""
            sock = self.transport.get_extra_info("socket")
            try:
                if sock is None:
                    return False
                if not hasattr(select, "poll"):  # Windows: select (poll has no limit on descriptor numbers)
                    return bool(select.select([sock.fileno()], [], [], 0)[0])
                poller = select.poll()
                poller.register(sock.fileno(), select.POLLIN)
                return bool(poller.poll(0))
            except (OSError, ValueError):
                return False

    return TimedProtocol


def head_error(received: bytes, max_head_bytes: int, fallback: str = "invalid HTTP request") -> tuple[int, bytes]:
    """(status, JSON body) for a request head that could not be read: ``received`` is what had arrived of it,
    ``fallback`` uvicorn's own words when it was not too long."""
    import json

    if len(received) > max_head_bytes:
        line_end = received.find(b"\r\n", 0, max_head_bytes + 2)
        if line_end < 0:
            status, kind, message = 414, "uri_too_long", uri_too_long(max_head_bytes)
        else:
            status, kind, message = 431, "headers_too_large", f"the request's headers are over {max_head_bytes} bytes"
    else:
        status, kind, message = 400, "bad_request", fallback
    return status, json.dumps({"error": {"type": kind, "message": message}}).encode()


def uri_too_long(max_head_bytes: int) -> str:
    return (f"the URL is over {max_head_bytes} bytes, the most this server reads of a request head: send a long text "
            f"to /v2/check as a POST form (the same fields in the body) instead of a GET")
