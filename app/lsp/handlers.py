"""The language server's handlers: each LSP method and command registered on a new server (``build_server``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from lsprotocol import types

from electra_detect.app.lsp.server import ADD_TO_DICTIONARY, DISABLE_RULE, DocumentState, ElectraDetectServer
from electra_detect.app.lsp.settings import SECTION, SettingsError
from electra_detect.app.lsp.wire import reason

logger = logging.getLogger(__name__)


def build_server(model: str, engine: dict[str, Any], debounce: float, dictionary: str | None,
                 max_document_kb: int) -> ElectraDetectServer:
    """The server with its handlers registered (``max_document_kb``: the verb's ``--max-document-kb``)."""
    server = ElectraDetectServer(model, engine, debounce, dictionary, max_document_kb)

    @server.feature(types.INITIALIZE)
    def initialize(ls: ElectraDetectServer, params: types.InitializeParams) -> None:
        ls.ready = asyncio.Event()
        if params.initialization_options is not None:
            ls.apply_settings(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: ElectraDetectServer, params: types.InitializedParams) -> None:
        pulled = await ls.fetch_configuration()
        if pulled is not None:
            ls.apply_settings(pulled)
        assert ls.ready is not None
        ls.load_model()
        ls.ready.set()
        ls.schedule_all()  # documents opened before the settings came are checked with them

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: ElectraDetectServer, params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if not (isinstance(settings, dict) and SECTION in settings):
            pulled = await ls.fetch_configuration()  # the spec's newer way: the notification only says "changed"
            settings = pulled if pulled is not None else settings
        if ls.apply_settings(settings):
            ls.load_model()
            ls.schedule_all()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: ElectraDetectServer, params: types.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.documents[uri] = DocumentState(params.text_document.language_id)
        ls.schedule(uri, 0.0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: ElectraDetectServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, ls.debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: ElectraDetectServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        state = ls.documents.pop(uri, None)
        if state is not None:
            if state.pending is not None:
                state.pending.stop(now=True)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]))
    def code_action(ls: ElectraDetectServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return ls.code_actions(params)

    def command(name: str, run: Callable[..., None]) -> None:
        def handler(ls: ElectraDetectServer, *arguments: Any) -> None:
            try:
                run(*arguments)
            except (SettingsError, OSError) as exc:
                ls.show(reason(exc))
            except Exception as exc:  # noqa: BLE001 - any failure is the writer's message; the server stays up
                logger.exception("%s failed", name)
                ls.show(f"{name} failed: {reason(exc)}")

        server.command(name)(handler)

    command(ADD_TO_DICTIONARY, server.add_word)
    command(DISABLE_RULE, server.disable_rule)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: ElectraDetectServer, params: None) -> None:
        for state in ls.documents.values():
            if state.pending is not None:
                state.pending.stop(now=True)

    return server
