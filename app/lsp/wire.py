"""The language server's wire: the bytes between the editor and pygls, bounded and kept in step.

pygls reads a message as headers and a body (``pygls.io_.run_async``) and trusts both: it reads whatever
``Content-Length`` says at once (a huge one is a MemoryError that ends the server), a missing, negative, non-numeric
or wrong one leaves it reading the stream out of step for good, and a body that is not JSON gets no answer.

``WireInput`` is the stream pygls' own reader reads (it calls ``readline`` and ``read``): it frames the editor's bytes
itself and hands pygls only well-formed messages, one ``Content-Length`` header and a JSON-RPC object of at most
``limit`` bytes. Each bad one is answered on ``WireOutput`` (-32700 not JSON or not framed, -32600 not a JSON-RPC
message or too long; id null when none can be read), and after bytes it cannot frame it skips to the next
``Content-Length:`` header, so the messages after it are read. ``GuardedProtocol`` adds the spec's rules around
``initialize`` and ``shutdown``: -32002 for a request before ``initialize``, notifications before it dropped, -32600
for a request after ``shutdown``.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import deque
from typing import Any, BinaryIO

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol

from electra_detect.errors import UserError

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, SERVER_NOT_INITIALIZED = -32700, -32600, -32602, -32002
HEADER_LINE_BYTES = 4096  # a header line is a name and a number; a longer "line" is a body read out of step
HEADER_BLOCK_BYTES = 16 * 1024
CHUNK_BYTES = 1 << 16
_CONTENT_LENGTH = re.compile(rb"content-length:", re.IGNORECASE)
_HEADER_NAME = re.compile(rb"[A-Za-z0-9-]+")

logger = logging.getLogger(__name__)


def reason(exc: BaseException) -> str:
    """An exception as one non-empty line for the editor: its message, else what it is (``MemoryError()`` says
    nothing)."""
    lines = str(exc).strip().splitlines()
    text = lines[0].strip() if lines else ""
    if isinstance(exc, MemoryError):
        return f"out of memory{f' ({text})' if text else ''}"
    if not text:
        return f"{type(exc).__name__} (no message)"
    return text if len(text) <= 300 else text[:300] + "..."


def preview(data: bytes | str, size: int = 40) -> str:
    """The start of untrusted bytes or text for a message (never all of a megabyte)."""
    shown = data[:size]
    return f"{shown!r}{'...' if len(data) > size else ''}"


class Unframed(UserError, ValueError):
    """Bytes where a message's headers should be that are not headers: the client's input, told in one line."""


class WireOutput:
    """The editor's end of the stream, written under one lock: pygls writes its messages from the event loop, the
    reader's thread writes its answers to bad ones, and neither may cut into the other."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self.lock:
            self.stream.write(data)

    def flush(self) -> None:
        with self.lock:
            self.stream.flush()

    def close(self) -> None:
        self.stream.close()

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode("utf-8")
        with self.lock:
            self.stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.stream.flush()

    def send_error(self, msg_id: int | str | None, code: int, message: str) -> None:
        logger.warning("answered %s with %d: %s", msg_id, code, message)
        self.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    def show(self, message: str, kind: types.MessageType = types.MessageType.Error) -> None:
        """A ``window/showMessage`` (the one notification the spec allows before ``initialize`` is answered)."""
        self.send({"jsonrpc": "2.0", "method": types.WINDOW_SHOW_MESSAGE,
                   "params": {"type": int(kind), "message": message}})


class WireInput:
    """The editor's stream as pygls' reader sees it (``readline``, ``read``): only well-formed messages of at most
    ``limit`` bytes; bad ones answered on ``output`` and skipped (see the module's docstring)."""

    def __init__(self, stream: BinaryIO, output: WireOutput, limit: int, source: str = "electra-detect") -> None:
        self._read = getattr(stream, "read1", None) or stream.read  # read1: what is there, not a full chunk
        self.output, self.limit, self.source = output, limit, source
        self.buffer = bytearray()
        self.lines: deque[bytes] = deque()
        self.body = b""
        self.skipping = False  # after bytes that could not be framed: skip to the next Content-Length header
        self.current: tuple[int | str | None, str | None] = (None, None)  # the id and method handed to pygls last

    # --- pygls' reader interface -----------------------------------------------------------------------------------

    def readline(self) -> bytes:
        if self.lines:
            return self.lines.popleft()
        body = self.next_message()
        if body is None:
            return b""  # the editor closed the stream: pygls' loop ends
        self.body = body
        self.lines.append(b"\r\n")
        return b"Content-Length: %d\r\n" % len(body)

    def read(self, size: int) -> bytes:
        body, self.body = self.body, b""
        return body

    # --- framing -----------------------------------------------------------------------------------------------

    def next_message(self) -> bytes | None:
        """The next well-formed message's body; None when the stream ends."""
        while True:
            if self.skipping:
                if not self.skip_to_header():
                    return None
                self.skipping = False
            try:
                length = self.headers()
            except Unframed as exc:
                self.output.send_error(None, PARSE_ERROR, f"{exc}; skipped to the next Content-Length header")
                del self.buffer[:1]  # past this header block's own start, so the search finds the next one
                self.skipping = True
                continue
            if length is None:
                return None
            if length > self.limit:
                message = (f"a message of {length:,} bytes is over the language server's limit of {self.limit:,} "
                           f"bytes; skipped")
                self.output.send_error(None, INVALID_REQUEST, message)
                self.output.show(f"{self.source}: {message} (a document that large is not checked)")
                self.skipping = True  # not read: a Content-Length that large may be a lie, so look for the next header
                continue
            body = self.take(length)
            if body is None:
                return None
            problem = self.check(body)
            if problem is None:
                return body
            msg_id, code, message = problem
            self.output.send_error(msg_id, code, message)
            if code == PARSE_ERROR:
                self.buffer[:0] = body  # a wrong Content-Length: the next message's header may lie inside it
                self.skipping = True

    def fill(self) -> bool:
        """Read what the stream has into the buffer; False at its end."""
        chunk = self._read(CHUNK_BYTES)
        if not chunk:
            return False
        self.buffer += chunk
        return True

    def headers(self) -> int | None:
        """The Content-Length of the header block at the start of the buffer, the block consumed; None when the
        stream ends first. Raises Unframed (the buffer left as it was) for anything but headers."""
        pos, length, named = 0, None, False
        while True:
            end = self.buffer.find(b"\n", pos, pos + HEADER_LINE_BYTES + 1)
            if end < 0:
                if len(self.buffer) - pos > HEADER_LINE_BYTES:
                    raise Unframed(f"{len(self.buffer) - pos:,}+ bytes without a line break where a header should "
                                   f"be: {preview(bytes(self.buffer[pos:pos + 40]))}")
                if not self.fill():
                    return None
                continue
            line = bytes(self.buffer[pos:end]).rstrip(b"\r")
            pos = end + 1
            if pos > HEADER_BLOCK_BYTES:
                raise Unframed(f"a message's headers run past {HEADER_BLOCK_BYTES:,} bytes")
            if not line.strip():
                if not named:  # blank lines between messages
                    del self.buffer[:pos]
                    pos = 0
                    continue
                if length is None:
                    raise Unframed("a message's headers have no Content-Length")
                del self.buffer[:pos]
                return length
            name, colon, value = line.partition(b":")
            if not colon or not _HEADER_NAME.fullmatch(name.strip()):
                raise Unframed(f"not a header line: {preview(line)}")
            named = True
            if name.strip().lower() == b"content-length":
                value = value.strip()
                if not value.isdigit():
                    raise Unframed(f"Content-Length {preview(value)} is not a number of bytes")
                if length is not None and int(value) != length:
                    raise Unframed(f"two Content-Length headers disagree ({length} and {int(value)})")
                length = int(value)

    def take(self, size: int) -> bytes | None:
        """The next ``size`` bytes (``size`` is within the limit); None when the stream ends first."""
        while len(self.buffer) < size:
            if not self.fill():
                return None
        with memoryview(self.buffer) as view:
            body = bytes(view[:size])
        del self.buffer[:size]
        return body

    def skip_to_header(self) -> bool:
        """Drop bytes up to the next ``Content-Length:`` (in any case); False when the stream ends first."""
        keep = len(b"content-length:") - 1  # a header cut between two reads is found in the next one
        while True:
            found = _CONTENT_LENGTH.search(self.buffer)
            if found:
                del self.buffer[:found.start()]
                return True
            if len(self.buffer) > keep:
                del self.buffer[:len(self.buffer) - keep]
            if not self.fill():
                return False

    def check(self, body: bytes) -> tuple[int | str | None, int, str] | None:
        """None when ``body`` is a JSON-RPC message pygls can take, else the answer: (id, code, message)."""
        try:
            message = json.loads(body)
        except (ValueError, RecursionError, MemoryError) as exc:  # ValueError: JSONDecodeError, UnicodeDecodeError
            return None, PARSE_ERROR, f"a message of {len(body):,} bytes is not JSON ({reason(exc)}): {preview(body)}"
        if not isinstance(message, dict):
            return None, INVALID_REQUEST, f"a message must be a JSON object, not a JSON {type(message).__name__}"
        msg_id = message.get("id")
        valid_id = isinstance(msg_id, int | str) and not isinstance(msg_id, bool)
        answer_id = msg_id if valid_id else None
        if message.get("jsonrpc") != "2.0":
            return answer_id, INVALID_REQUEST, 'a message must have "jsonrpc": "2.0"'
        if "method" in message:
            if not isinstance(message["method"], str):
                return answer_id, INVALID_REQUEST, "a message's method must be a string"
            if "id" in message and not valid_id:
                return None, INVALID_REQUEST, f"a request's id must be a number or a string, got {preview(str(msg_id))}"
        elif "id" not in message or not ("result" in message or "error" in message):
            return answer_id, INVALID_REQUEST, "a message must be a request, a notification or a response"
        self.current = (answer_id, message.get("method"))
        return None


class GuardedProtocol(LanguageServerProtocol):
    """pygls' protocol with the spec's rules around the session: before ``initialize`` a request is answered -32002
    and a notification dropped (``exit`` excepted); a second ``initialize`` and any request after ``shutdown`` are
    answered -32600 (pygls answers none of them: a client waiting on one would wait for ever)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initialize_seen = False

    def handle_message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        msg_id = getattr(message, "id", None) if method is not None else None
        if method == types.INITIALIZE:
            if self.initialize_seen:
                return self.refuse(msg_id, INVALID_REQUEST, "initialize was sent already")
            self.initialize_seen = True
        elif method is not None and method != types.EXIT:
            if not self.initialize_seen:
                if msg_id is not None:
                    return self.refuse(msg_id, SERVER_NOT_INITIALIZED,
                                       f"{method} before initialize: the server is not initialized")
                logger.warning("dropped %s: it came before initialize", method)
                return None
            if self._shutdown and msg_id is not None:
                return self.refuse(msg_id, INVALID_REQUEST, f"{method} after shutdown: the server is shutting down")
        return super().handle_message(message)

    def refuse(self, msg_id: int | str, code: int, message: str) -> None:
        logger.warning("answered %s with %d: %s", msg_id, code, message)
        self._send_response(msg_id, None, types.ResponseError(code=code, message=message))
