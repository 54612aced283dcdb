"""`electra-detect lsp` against hostile input (issue 68): a raw stdio client that can send what no LSP client library
would (a wrong Content-Length, a body that is not JSON, a request before initialize, a document over the size limit,
a disable-rule command aimed outside the workspace), and the files the server reads bounded.

None of these needs the model: the servers here are given a model path that does not exist (the load fails at once
and is a message), and what is tested is answered before any check. Unit tests of the bounded reads and of the
message's reason run in this process.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from lsprotocol import types  # noqa: E402

from electra_detect.app.lsp import handlers as lsp_handlers  # noqa: E402
from electra_detect.app.lsp import server as lsp_server  # noqa: E402

SERVER = [str(Path(sys.executable).parent / "electra-detect"), "lsp"]
WAIT_S = 60.0
RULE = "ELECTRA_DETECT_R_VERB_TENSE"


def frame(body: bytes | str) -> bytes:
    body = body.encode("utf-8") if isinstance(body, str) else body
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def message(msg_id: int | None, method: str, params: object = None) -> bytes:
    content: dict = {"jsonrpc": "2.0", "method": method}
    if msg_id is not None:
        content["id"] = msg_id
    if params is not None:
        content["params"] = params
    return frame(json.dumps(content))


def initialize(msg_id: int = 1, folders: list[Path] = ()) -> bytes:
    return message(msg_id, "initialize", {
        "processId": None, "capabilities": {}, "rootUri": folders[0].as_uri() if folders else None,
        "workspaceFolders": [{"uri": f.as_uri(), "name": f.name} for f in folders] or None})


class RawClient:
    """``electra-detect lsp`` in a subprocess, spoken to in bytes; what it sends is parsed into ``received``."""

    def __init__(self, tmp: Path, *flags: str) -> None:
        self.log = tmp / "server.log"
        env = {**os.environ, "ELECTRA_DETECT_DICTIONARY": str(tmp / "dictionary.txt"),
               "XDG_CONFIG_HOME": str(tmp / "config")}
        with self.log.open("wb") as log:  # stderr to a file: an unread pipe would stall the server when full
            self.process = subprocess.Popen([*SERVER, "--model", str(tmp / "no-such-model"), *flags],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
        self.queue: queue.Queue = queue.Queue()
        self.received: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    return
                if not line.strip():
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            self.queue.put(json.loads(stream.read(length)))

    def send(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def wait(self, condition, what: str, timeout: float = WAIT_S) -> dict:
        """The first message received (now or before) for which ``condition`` holds."""
        deadline = time.monotonic() + timeout
        while True:
            for found in self.received:
                if condition(found):
                    return found
            left = deadline - time.monotonic()
            if left <= 0 or self.process.poll() is not None and self.queue.empty():
                tail = self.log.read_text(errors="replace")[-2000:]
                raise AssertionError(f"no {what} (server exit status {self.process.poll()}); received "
                                     f"{self.received!r}; its log ends: {tail}")
            try:
                self.received.append(self.queue.get(timeout=min(left, 0.5)))
            except queue.Empty:
                pass

    def response(self, msg_id: int | None, what: str | None = None) -> dict:
        return self.wait(lambda m: "method" not in m and m.get("id") == msg_id and
                         ("error" in m or "result" in m), what or f"response to {msg_id}")

    def shown(self, text: str) -> dict:
        return self.wait(lambda m: m.get("method") == "window/showMessage" and text in m["params"]["message"],
                         f"a message saying {text!r}")

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.send(message(9999, "shutdown") + message(None, "exit"))
                self.process.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


@pytest.fixture
def raw(tmp_path: Path):
    clients: list[RawClient] = []

    def start(*flags: str) -> RawClient:
        clients.append(RawClient(tmp_path, *flags))
        return clients[-1]

    yield start
    for client in clients:
        client.close()


def initialized(client: RawClient, folders: list[Path] = ()) -> None:
    client.send(initialize(1, folders))
    assert "capabilities" in client.response(1)["result"]
    client.send(message(None, "initialized", {}))


# --- item 2: framing ------------------------------------------------------------------------------------------------


def test_a_huge_content_length_is_refused_and_the_server_reads_on(raw) -> None:
    """pygls read 100 GB at once: a MemoryError that ended the server."""
    client = raw()
    client.send(b"Content-Length: 100000000000\r\n\r\n" + b'{"jsonrpc": "2.0", "method": "x"}' + initialize(1))
    error = client.response(None, "an error for the huge message")["error"]
    assert error["code"] == -32600 and "100,000,000,000 bytes is over the language server's limit" in error["message"]
    assert "capabilities" in client.response(1)["result"]
    assert client.process.poll() is None


@pytest.mark.parametrize("bad", [
    b"Content-Length: -5\r\n\r\n{}",
    b"Content-Length: twelve\r\n\r\n{}",
    b"Content-Type: application/vscode-jsonrpc\r\n\r\n" + b'{"jsonrpc": "2.0", "id": 7, "method": "x"}',
    b"Content-Length: 10\r\n\r\n" + b'{"jsonrpc": "2.0", "id": 7, "method": "shutdown"}',  # short: the rest is junk
    b"Content-Length: 80\r\n\r\n" + b'{"jsonrpc": "2.0", "id": 7, "method": "x"}',  # long: it runs into the next
], ids=["negative", "non-numeric", "missing", "short", "long"])
def test_a_bad_content_length_is_answered_and_the_stream_resynchronised(raw, bad: bytes) -> None:
    client = raw()
    client.send(bad + initialize(1))
    assert "capabilities" in client.response(1, "the initialize after it")["result"]
    error = client.response(None, "an error for the bad message")["error"]
    assert error["code"] == -32700 and error["message"]
    client.send(message(2, "shutdown"))
    assert client.response(2) == {"jsonrpc": "2.0", "id": 2, "result": None}


def test_a_body_that_is_not_json_is_a_parse_error(raw) -> None:
    client = raw()
    client.send(frame(b"{not json at all") + frame(b"[1, 2]") + frame(b'{"id": 3, "method": "x"}') + initialize(1))
    assert client.response(None)["error"]["code"] == -32700
    assert "not JSON" in client.response(None)["error"]["message"]
    assert "capabilities" in client.response(1)["result"]
    errors = [m["error"] for m in client.received if "error" in m]
    assert [e["code"] for e in errors] == [-32700, -32600, -32600]  # not JSON; an array; no "jsonrpc": "2.0"
    assert client.response(3)["error"]["code"] == -32600  # its id could be read: answered under it


def test_a_request_before_initialize_is_server_not_initialized(raw, tmp_path: Path) -> None:
    client = raw()
    document = {"uri": (tmp_path / "a.md").as_uri(), "languageId": "markdown", "version": 1, "text": "Hello."}
    client.send(message(None, "textDocument/didOpen", {"textDocument": document}))  # dropped
    client.send(message(1, "textDocument/codeAction", {
        "textDocument": {"uri": document["uri"]},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
        "context": {"diagnostics": []}}))
    error = client.response(1)["error"]
    assert error["code"] == -32002 and "not initialized" in error["message"]
    client.send(initialize(2))
    assert "capabilities" in client.response(2)["result"]
    client.send(initialize(3))
    assert client.response(3)["error"]["code"] == -32600  # initialize once only


def test_a_request_with_bad_params_is_answered(raw) -> None:
    """pygls could not structure it and answered nothing: the client would wait for ever."""
    client = raw()
    initialized(client)
    client.send(message(5, "textDocument/codeAction", {"textDocument": 42}))
    error = client.response(5)["error"]
    assert error["code"] == -32602 and error["message"].startswith("textDocument/codeAction: ")


class Trickle:
    """A stream that gives a few bytes a read, so headers arrive cut anywhere."""

    def __init__(self, data: bytes, size: int = 7) -> None:
        self.data, self.size = data, size

    def read1(self, _: int) -> bytes:
        chunk, self.data = self.data[:self.size], self.data[self.size:]
        return chunk


def test_the_wire_hands_on_only_framed_messages_whatever_comes_between(tmp_path: Path) -> None:
    from electra_detect.app.lsp.wire import WireInput, WireOutput

    good = [json.dumps({"jsonrpc": "2.0", "id": i, "method": "m", "params": {"n": "Content-Length"}}).encode()
            for i in range(4)]
    stream = (b"\r\n" + frame(good[0]) + b"garbage: no length\r\n\r\nmore garbage" + frame(good[1])
              + b"Content-Length: 5\r\n\r\n" + frame(good[2])  # short: five bytes of the next frame
              + b"Content-Length: 999999999\r\n\r\n{}" + frame(good[3]))
    for size in (1, 7, 1 << 16):
        with (tmp_path / "out").open("wb") as out:
            wire = WireInput(Trickle(stream, size), WireOutput(out), limit=1000)
            bodies = []
            while header := wire.readline():
                assert header.startswith(b"Content-Length: ") and wire.readline() == b"\r\n"
                bodies.append(wire.read(int(header.split()[1])))
        assert bodies == good, size
        answers = (tmp_path / "out").read_bytes()
        assert answers.count(b'"code": -32700') == 2 and answers.count(b'"code": -32600') == 1, answers


# --- item 1: the document size limit ---------------------------------------------------------------------------------


def test_a_document_over_the_size_limit_is_one_diagnostic_saying_so(raw, tmp_path: Path) -> None:
    client = raw("--max-document-kb", "4")
    initialized(client)
    uri = (tmp_path / "big.md").as_uri()
    text = "[a](" * 2600  # 10,400 bytes: the probe's slow Markdown, over the 4 KB limit
    client.send(message(None, "textDocument/didOpen", {
        "textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": text}}))
    published = client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics", "diagnostics")["params"]
    assert published["uri"] == uri and published["version"] == 1
    (diagnostic,) = published["diagnostics"]
    expected = "document is 11 KB, over the language server's limit of 4 KB; not checked"
    assert diagnostic["message"] == expected and diagnostic["severity"] == types.DiagnosticSeverity.Warning
    assert expected in client.shown("over the language server's limit")["params"]["message"]


def test_the_default_size_limit_is_1024_kb(raw, tmp_path: Path) -> None:
    client = raw()
    initialized(client)
    uri = (tmp_path / "big.txt").as_uri()
    text = "word " * (1100 * 1024 // 5) + "tail"  # 1,126,404 bytes: over 1,100 KB
    client.send(message(None, "textDocument/didOpen", {
        "textDocument": {"uri": uri, "languageId": "plaintext", "version": 1, "text": text}}))
    published = client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics", "diagnostics")["params"]
    assert [d["message"] for d in published["diagnostics"]] == [
        "document is 1,101 KB, over the language server's limit of 1,024 KB; not checked"]


def test_a_bad_max_document_kb_is_one_error_line() -> None:
    done = subprocess.run([*SERVER, "--max-document-kb", "0"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == \
        "error: --max-document-kb must be at least 1, got 0"


def test_a_failure_without_a_message_is_shown_with_a_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A MemoryError (the probe's 300 KB of ``<a ``) has no message: the editor was told "could not be checked: "."""
    from pygls.workspace import Workspace

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    def out_of_memory(text: str, language_id: str | None) -> list:
        raise MemoryError()

    monkeypatch.setattr(lsp_server, "document_blocks", out_of_memory)
    server = lsp_handlers.build_server("no-such-model", {}, 0.0, None, 1024)
    server.protocol._workspace = Workspace(None, types.TextDocumentSyncKind.Full)
    uri = "file:///tmp/electra-detect-no-such/doc.md"
    server.workspace.put_text_document(types.TextDocumentItem(uri=uri, language_id="markdown", version=1,
                                                              text="Some text.\n"))
    state = lsp_server.DocumentState("markdown")
    shown: list[str] = []
    monkeypatch.setattr(server, "show", lambda text, kind=None: shown.append(text))
    asyncio.run(server.check_later(uri, state, 0.0, lsp_server.PendingCheck()))
    assert shown == [f"{uri} could not be checked: out of memory"]
    from electra_detect.app.lsp.wire import reason

    assert reason(ValueError()) == "ValueError (no message)" and reason(OSError("no\nmore")) == "no"


# --- item 3: where disable-rule writes -------------------------------------------------------------------------------


def execute(client: RawClient, msg_id: int, *arguments: object) -> None:
    client.send(message(msg_id, "workspace/executeCommand", {"command": "electra-detect.disableRule",
                                                             "arguments": list(arguments)}))
    client.response(msg_id)


def test_disable_rule_writes_only_in_a_workspace_folder_or_the_users_file(raw, tmp_path: Path) -> None:
    workspace, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    (workspace / "link").symlink_to(elsewhere)
    client = raw()
    initialized(client, [workspace])
    execute(client, 2, RULE, f"{workspace.as_uri()}/../outside2/doc.md")  # the probe's ws/../outside2
    execute(client, 3, RULE, (workspace / "link" / "doc.md").as_uri())  # a symbolic link out of the workspace
    execute(client, 4, RULE.lower(), (workspace / "sub" / "doc.md").as_uri())  # inside: its folder's file
    assert not (tmp_path / "outside2").exists() and not (elsewhere / ".electra-detect.json").exists()
    assert not (workspace / "sub").exists()
    assert json.loads((workspace / ".electra-detect.json").read_text()) == {"disabledRules": [RULE]}
    user = tmp_path / "config" / "electra-detect" / "default-workspace.json"  # documents in no workspace folder
    assert json.loads(user.read_text()) == {"disabledRules": [RULE]}


def test_disable_rule_takes_only_the_rule_tables_ids_and_makes_no_folder(raw, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    gone = tmp_path / "gone"  # a workspace folder that is not there
    client = raw()
    initialized(client, [workspace, gone])
    before = sorted(p for p in tmp_path.rglob("*") if p.name != "server.log")
    for msg_id, rule in enumerate(["../../evil", "X" * (1 << 20), "ELECTRA_DETECT_NO_SUCH_RULE"], start=2):
        execute(client, msg_id, rule, (workspace / "doc.md").as_uri())
        assert "is not a rule id" in client.shown("is not a rule id")["params"]["message"]
        client.received.clear()
    execute(client, 9, RULE, (gone / "deep" / "doc.md").as_uri())
    assert "is not a folder" in client.shown("not disabled")["params"]["message"]
    assert sorted(p for p in tmp_path.rglob("*") if p.name != "server.log") == before  # nothing written, no folder


# --- item 4: bounded reads ------------------------------------------------------------------------------------------


class Inflections:
    """A tag model's inflection table, as the dictionary asks it (no lemminflect needed)."""

    def all_forms(self, word: str) -> set[str]:
        return {word}


def test_settings_files_and_dictionaries_are_read_bounded_and_regular_only(tmp_path: Path) -> None:
    from electra_detect.app.lsp.settings import (
        DICTIONARY_BYTES,
        BoundedDictionary,
        SettingsError,
        WorkspaceFile,
        add_to_dictionary,
        read_bounded,
    )

    big = tmp_path / "big.txt"
    with big.open("wb") as handle:
        handle.truncate(DICTIONARY_BYTES + 1)  # sparse: no disk used
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, why in ((Path("/dev/zero"), "is not a regular file"), (fifo, "is not a regular file"),
                      (tmp_path, "is not a regular file"), (big, "over the limit")):
        started = time.monotonic()
        dictionary = BoundedDictionary(path)
        assert not dictionary.vocabulary(Inflections()) and why in dictionary.refused, path
        with pytest.raises(SettingsError, match=why):
            read_bounded(path, DICTIONARY_BYTES, "dictionary")
        with pytest.raises(SettingsError, match=why):
            add_to_dictionary(path, "Zorblatt")
        assert time.monotonic() - started < 5, path  # /dev/zero read whole took all memory
    assert read_bounded(tmp_path / "missing", 10, "dictionary") is None
    (tmp_path / "words.txt").write_text("Zorblatt  # mine\n")
    dictionary = BoundedDictionary(tmp_path / "words.txt")
    assert dictionary.vocabulary(Inflections()).knows("zorblatt") and dictionary.refused is None

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / ".electra-detect.json").symlink_to("/dev/zero")
    with pytest.raises(SettingsError, match="is not a regular file"):
        WorkspaceFile(workspace).rules()
