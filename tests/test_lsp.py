"""`electra-detect lsp` end to end: a real stdio client (pytest-lsp) starts the verb and speaks the protocol to it,
with the shipped model. One server for most tests (loading the model once); a second one negotiates UTF-8 and is
shut down.

Every document's error is the same verb: *go* in "Yesterday he go to the store." (the shipped model flags it, its
best suggestion *went*).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Union

import pytest

pytest.importorskip("pygls")
pytest_asyncio = pytest.importorskip("pytest_asyncio")
pytest_lsp = pytest.importorskip("pytest_lsp")

from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

SERVER = [str(Path(sys.executable).parent / "electra-detect"), "lsp"]
SENTENCE = "Yesterday he go to the store."
MARKDOWN = f"""# Notes

😀 {SENTENCE}

```text
{SENTENCE}
```

See [the notes](<notes/{SENTENCE}>).
"""
DEBOUNCE_S = 1.0  # longer than the editor's default: the fast edits below stay within it on a loaded machine
WAIT_S = 240.0  # the first check waits for the model (and a first ONNX export into the session's cache)


def make_client() -> LanguageClient:
    """pytest-lsp's client, keeping every diagnostics notification (with its version) and every log line."""
    from pygls.protocol import default_converter
    from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

    def published(ls: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        ls.diagnostics[params.uri] = params.diagnostics
        ls.published.append(params)

    def converter():
        # lsprotocol 2025.0.0 structures any code action holding a `command` as a Command (losing its kind and
        # diagnostics); a Command's own `command` is a string, a CodeAction's an object
        converter = default_converter()
        union = Union[types.Command, types.CodeAction]  # noqa: UP007 - the very type lsprotocol registers its hook for
        converter.register_structure_hook(union, lambda obj, _: converter.structure(
            obj, types.Command if isinstance(obj.get("command"), str) else types.CodeAction))
        return converter

    client = LanguageClient(converter_factory=converter)
    client.published = []
    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: published})
    return client


async def until(condition, timeout: float = WAIT_S, what: str = "the condition"):
    """Poll ``condition()`` until it returns something true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


async def diagnostics_of(client: LanguageClient, uri: str, version: int) -> list[types.Diagnostic]:
    found = await until(lambda: [p for p in client.published if p.uri == uri and p.version == version],
                        what=f"diagnostics of {uri} version {version}")
    return found[-1].diagnostics


async def start(tmp: Path, capabilities: types.ClientCapabilities, folders: list[Path],
                settings: dict | None = None) -> LanguageClient:
    env = {**os.environ, "ELECTRA_DETECT_DICTIONARY": str(tmp / "dictionary.txt"),
           "XDG_CONFIG_HOME": str(tmp / "config")}  # the user's workspace file (documents in no folder) stays here
    config = ClientServerConfig(server_command=[*SERVER, "--debounce", str(DEBOUNCE_S)], server_env=env,
                                client_factory=make_client)
    client = await config.start()
    if settings is not None:
        client.set_configuration(settings)
    result = await client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=folders[0].as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders]))
    client.server_capabilities = result.capabilities
    return client


async def close(client: LanguageClient) -> None:
    """Shut the server down unless it exited already (pytest-lsp's stop waits for the process to end, and a failed
    test may have left it running); kill it when it does not answer in a minute."""
    server = client._server
    try:
        if server is not None and server.returncode is None:
            await asyncio.wait_for(client.shutdown_session(), 60)
    finally:
        if server is not None and server.returncode is None:
            server.kill()
        await client.stop()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("lsp")
    for folder in ("project", "other"):
        (home / folder).mkdir()
    return home


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(home: Path):
    """A server for the module: VS Code's capabilities (UTF-16, workspace/configuration, documentChanges), two
    workspace folders."""
    client = await start(home, client_capabilities("visual-studio-code"), [home / "project", home / "other"],
                         settings={"electra-detect": {}})
    yield client
    await close(client)


def open_document(client: LanguageClient, path: Path, text: str, language: str = "markdown") -> str:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))
    return uri


def change_document(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


def utf16_position(text: str, offset: int) -> types.Position:
    """What an editor counts: lines split at \\n, columns in UTF-16 code units."""
    line = text.count("\n", 0, offset)
    column = text[text.rfind("\n", 0, offset) + 1:offset]
    return types.Position(line=line, character=len(column.encode("utf-16-le")) // 2)


async def code_actions(client: LanguageClient, uri: str, diagnostic: types.Diagnostic) -> list[types.CodeAction]:
    return await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diagnostic.range,
        context=types.CodeActionContext(diagnostics=[diagnostic])))


async def test_initialize_offers_what_the_server_does(client: LanguageClient) -> None:
    capabilities = client.server_capabilities
    assert capabilities.position_encoding == types.PositionEncodingKind.Utf16  # the client offered no other
    assert capabilities.text_document_sync.change == types.TextDocumentSyncKind.Full
    assert list(capabilities.code_action_provider.code_action_kinds) == [types.CodeActionKind.QuickFix]
    assert set(capabilities.execute_command_provider.commands) == {"electra-detect.addToDictionary",
                                                                  "electra-detect.disableRule"}


async def test_markdown_diagnostics_cover_prose_only_with_exact_utf16_spans(client: LanguageClient,
                                                                             home: Path) -> None:
    uri = open_document(client, home / "project" / "notes.md", MARKDOWN)
    diagnostics = await diagnostics_of(client, uri, 1)
    assert len(diagnostics) == 1, [(d.range, d.message) for d in diagnostics]  # not in the code block nor the link
    (diagnostic,) = diagnostics
    start = MARKDOWN.index(SENTENCE) + SENTENCE.index(" go ") + 1
    assert diagnostic.range == types.Range(start=utf16_position(MARKDOWN, start),
                                           end=utf16_position(MARKDOWN, start + 2))
    assert diagnostic.range.start.character == 16  # 😀 is two UTF-16 units (one code point)
    assert diagnostic.code.startswith("ELECTRA_DETECT_") and diagnostic.source == "electra-detect"
    assert diagnostic.data["category"] == "GRAMMAR" and diagnostic.data["word"] == "go"
    assert "*go*" in diagnostic.message


async def test_plain_text_is_checked_whole(client: LanguageClient, home: Path) -> None:
    """A long plain-text document is checked whole (no character cap): its last paragraph's error is found."""
    filler = "The committee met on Tuesday and agreed on the budget for next year. " * 12
    text = "\n\n".join([filler] * 40 + [SENTENCE])
    assert len(text) > 30_000
    uri = open_document(client, home / "project" / "long.txt", text, language="plaintext")
    diagnostics = await diagnostics_of(client, uri, 1)
    start = text.rindex(SENTENCE) + SENTENCE.index(" go ") + 1
    assert types.Range(start=utf16_position(text, start), end=utf16_position(text, start + 2)) in [
        d.range for d in diagnostics]


async def test_quick_fix_replaces_the_word_with_the_suggestion(client: LanguageClient, home: Path) -> None:
    text = f"😀 {SENTENCE}\n"
    uri = open_document(client, home / "project" / "fix.md", text)
    (diagnostic,) = await diagnostics_of(client, uri, 1)
    actions = await code_actions(client, uri, diagnostic)
    fixes = [a for a in actions if a.edit is not None]
    assert fixes and fixes[0].is_preferred and fixes[0].kind == types.CodeActionKind.QuickFix
    assert fixes[0].title == 'Replace "go" with "went"'
    (change,) = fixes[0].edit.document_changes  # VS Code takes versioned edits
    assert change.text_document.uri == uri and change.text_document.version == 1
    (edit,) = change.edits
    assert edit.range == diagnostic.range and edit.new_text == "went"
    titles = [a.title for a in actions]
    assert 'Add "go" to the dictionary' in titles and f"Disable rule {diagnostic.code} in this workspace" in titles


async def test_add_to_dictionary_writes_the_dictionary_and_rechecks(client: LanguageClient, home: Path) -> None:
    text = "Our Zorblatt pipeline ran yesterday and it go fast.\n"
    uri = open_document(client, home / "project" / "words.md", text)
    diagnostics = await diagnostics_of(client, uri, 1)
    flagged = {d.data["word"] for d in diagnostics}
    assert "go" in flagged, flagged
    go = next(d for d in diagnostics if d.data["word"] == "go")
    add = next(a for a in await code_actions(client, uri, go) if a.title == 'Add "go" to the dictionary')
    before = len(client.published)
    await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=add.command.command, arguments=add.command.arguments))
    assert "go" in (home / "dictionary.txt").read_text(encoding="utf-8").split()
    after = await until(lambda: [p for p in client.published[before:] if p.uri == uri], what="a re-check")
    assert "go" not in {d.data["word"] for d in after[-1].diagnostics}
    (home / "dictionary.txt").write_text("", encoding="utf-8")  # the other tests' "go" is flagged again


async def test_disable_rule_writes_the_workspace_file_of_its_folder(client: LanguageClient, home: Path) -> None:
    uri_other = open_document(client, home / "other" / "rule.md", f"{SENTENCE}\n")
    (diagnostic,) = await diagnostics_of(client, uri_other, 1)
    uri_project = open_document(client, home / "project" / "rule.md", f"{SENTENCE}\n")
    assert await diagnostics_of(client, uri_project, 1)
    disable = next(a for a in await code_actions(client, uri_other, diagnostic) if a.title.startswith("Disable"))
    before = len(client.published)
    await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=disable.command.command, arguments=disable.command.arguments))
    written = json.loads((home / "other" / ".electra-detect.json").read_text(encoding="utf-8"))
    assert written == {"disabledRules": [diagnostic.code]}
    assert not (home / "project" / ".electra-detect.json").exists()
    await until(lambda: {p.uri for p in client.published[before:]} >= {uri_other, uri_project}, what="re-checks")
    assert list(client.diagnostics[uri_other]) == []  # its workspace disabled the rule
    assert [d.code for d in client.diagnostics[uri_project]] == [diagnostic.code]  # the other folder did not


async def test_configuration_change_is_pulled_and_applied(client: LanguageClient, home: Path) -> None:
    uri = open_document(client, home / "project" / "settings.md", f"{SENTENCE}\n")
    (diagnostic,) = await diagnostics_of(client, uri, 1)
    before = len(client.published)
    client.set_configuration({"electra-detect": {"disabledCategories": [diagnostic.data["category"]]}})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await until(lambda: [p for p in client.published[before:] if p.uri == uri and not p.diagnostics],
                what="diagnostics without the disabled category")
    before = len(client.published)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(  # pushed, as Neovim sends it
        settings={"electra-detect": {"level": "default"}}))
    await until(lambda: [p for p in client.published[before:] if p.uri == uri and p.diagnostics],
                what="the category flagged again")


async def test_bad_settings_and_model_are_messages_and_checks_go_on(client: LanguageClient, home: Path) -> None:
    uri = open_document(client, home / "project" / "bad-settings.md", f"{SENTENCE}\n")
    assert await diagnostics_of(client, uri, 1)
    shown = len(client.messages)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"electra-detect": {"level": "loud"}}))
    message = await until(lambda: client.messages[shown:], what="a message")
    assert message[0].type == types.MessageType.Error and "level" in message[0].message
    shown = len(client.messages)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"electra-detect": {"model": str(home / "no-such-model")}}))
    message = await until(lambda: client.messages[shown:], what="a message")
    assert "cannot load the model" in message[0].message and "still checking with" in message[0].message
    change_document(client, uri, 2, f"Today {SENTENCE}\n")
    assert await diagnostics_of(client, uri, 2)  # the loaded model still checks
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"electra-detect": {}}))


async def test_a_dictionary_setting_is_read_within_a_bound_and_checks_go_on(client: LanguageClient,
                                                                            home: Path) -> None:
    """A ``dictionary`` setting may name any file (the probe's /dev/zero took 3 GB and the diagnostics came back
    empty): one over the bound is refused with a message, and the document is checked without it."""
    huge = home / "huge-dictionary.txt"
    with huge.open("wb") as handle:
        handle.truncate(50 << 20)  # sparse: 50 MB read whole before, no disk used
    shown = len(client.messages)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"electra-detect": {"dictionary": str(huge)}}))
    try:
        uri = open_document(client, home / "project" / "huge-dictionary.md", f"{SENTENCE}\n")
        assert [d.data["word"] for d in await diagnostics_of(client, uri, 1)] == ["go"]
        message = await until(lambda: [m for m in client.messages[shown:] if str(huge) in m.message], timeout=60,
                              what="a message about the dictionary")
        assert message[0].message.endswith("over the limit of 2,048 KB; not read; checking without it")
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"electra-detect": {}}))


async def test_fast_edits_publish_the_last_version_only(client: LanguageClient, home: Path) -> None:
    uri = open_document(client, home / "project" / "typing.md", "Start.\n")
    await diagnostics_of(client, uri, 1)
    for version in range(2, 8):  # keystrokes 20 ms apart: all within the debounce
        change_document(client, uri, version, f"Start. {SENTENCE[:version * 4]}\n")
        await asyncio.sleep(0.02)
    final = f"Start.\n\n{SENTENCE}\n"
    change_document(client, uri, 8, final)
    (diagnostic,) = await diagnostics_of(client, uri, 8)
    assert diagnostic.range.start.line == 2
    assert {p.version for p in client.published if p.uri == uri} == {1, 8}


async def test_a_newer_change_cancels_the_check_under_way_and_only_changed_paragraphs_are_rechecked(
        client: LanguageClient, home: Path) -> None:
    paragraphs = [f"Paragraph {i} says the committee met on day {i} and agreed on the plan." for i in range(1000)]
    before = len(client.log_messages)
    uri = open_document(client, home / "project" / "cancel.md", "\n\n".join(paragraphs))
    await until(lambda: [m for m in client.log_messages[before:] if "version 1: checking 1000 blocks" in m.message],
                what="the check of version 1 to start")  # 1,000 blocks: seconds of work, under way now
    paragraphs[500] = "Paragraph 500 says he go to the store."  # a text no other test checks (none cached)
    change_document(client, uri, 2, "\n\n".join(paragraphs))
    diagnostics = await diagnostics_of(client, uri, 2)
    assert any(d.range.start.line == 1000 for d in diagnostics)  # paragraph 500, on line 2 * 500
    assert 1 not in {p.version for p in client.published if p.uri == uri}  # stale: never published
    def count(version: int, what: str) -> int:  # from the server's log line "... N of 1000 blocks checked ..."
        (line,) = [m.message for m in client.log_messages if f"{uri} version {version}: {what}" in m.message
                   and "blocks checked" in m.message]
        return int(line.split(" of 1000 blocks")[0].rsplit(" ", 1)[1])

    for version, what in ((1, "stopped by a newer change"), (2, "")):  # a log line may trail the diagnostics
        await until(lambda v=version, w=what: [m for m in client.log_messages if f"{uri} version {v}: {w}"
                                               in m.message and "blocks checked" in m.message],
                    what=f"version {version}'s log line")
    stopped_after = count(1, "stopped by a newer change")
    assert stopped_after < 1000 and count(2, "") >= 1000 - stopped_after  # version 1 cached no more once stopped
    before = len(client.log_messages)
    paragraphs[10] = "In paragraph ten, he go to the store."  # a text no other test checks
    change_document(client, uri, 3, "\n\n".join(paragraphs))
    await diagnostics_of(client, uri, 3)
    logged = await until(lambda: [m.message for m in client.log_messages[before:] if "version 3: " in m.message
                                  and "blocks checked" in m.message], what="the check's log line")
    assert "1 of 1000 blocks checked" in logged[0]


async def test_many_documents_opened_at_once_are_all_checked(client: LanguageClient, home: Path) -> None:
    """More open documents than the service takes requests from one client at a time (64): all checked, none
    refused."""
    shown = len(client.messages)
    uris = [open_document(client, home / "project" / f"many{i}.md", f"On day {i} he go to the store.\n")
            for i in range(80)]
    for uri in uris:
        assert [d.data["word"] for d in await diagnostics_of(client, uri, 1)] == ["go"]
    assert client.messages[shown:] == []


async def test_a_bad_document_is_a_message_and_the_server_stays_up(client: LanguageClient, home: Path) -> None:
    shown = len(client.messages)
    text = f"A lone surrogate \ud800 here.\n\n{SENTENCE}\n"  # JSON carries it; no text encoding does
    uri = open_document(client, home / "project" / "bad.md", text)
    message = await until(lambda: client.messages[shown:], what="a message")  # refused whole, with its reason
    assert message[0].type == types.MessageType.Error and "could not be checked" in message[0].message
    assert "not valid Unicode" in message[0].message
    shown = len(client.messages)
    await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="electra-detect.disableRule", arguments=[42]))
    message = await until(lambda: client.messages[shown:], what="a message")
    assert "takes a rule id" in message[0].message
    change_document(client, uri, 2, f"{SENTENCE}\n")  # still answering
    assert await diagnostics_of(client, uri, 2)


async def test_utf8_is_negotiated_and_shutdown_exits_cleanly(home: Path) -> None:
    capabilities = types.ClientCapabilities(general=types.GeneralClientCapabilities(
        position_encodings=[types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16]))
    tmp = home / "utf8"
    tmp.mkdir()
    client = await start(tmp, capabilities, [tmp])
    try:
        assert client.server_capabilities.position_encoding == types.PositionEncodingKind.Utf8
        text = f"😀 é {SENTENCE}\n"
        uri = open_document(client, tmp / "utf8.txt", text, language="plaintext")
        (diagnostic,) = await diagnostics_of(client, uri, 1)
        column = len(text[:text.index(" go ") + 1].encode("utf-8"))
        assert diagnostic.range == types.Range(start=types.Position(line=0, character=column),
                                               end=types.Position(line=0, character=column + 2))
        await client.shutdown_session()
        assert client._server.returncode == 0
    finally:
        await close(client)


async def test_a_bad_flag_is_one_error_line() -> None:
    done = await asyncio.to_thread(subprocess.run, [*SERVER, "--debounce", "-1"], capture_output=True, text=True,
                                   timeout=120)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == \
        "error: --debounce must be >= 0 seconds, got -1"
