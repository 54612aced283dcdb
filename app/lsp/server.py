"""The language server behind ``electra-detect lsp`` (pygls over stdio): diagnostics, quick fixes, the dictionary and
the workspace's disabled rules, settings from the editor.

Every check goes through ``Service.check`` (client ``lsp``), the one request path of every front: this module
only turns documents into prose blocks (``electra_detect.markup``) and flags into diagnostics.

Typing discipline: a change is checked ``debounce`` seconds after the last keystroke; a newer change cancels the
check under way (``Service.check``'s cancel signal: the model stops at its next step); a document is checked whole,
block by block, and a block whose text, options and dictionary were checked before is not checked again
(``Checks.cache``, in ``lsp.checks``). One model is loaded once. Anything that fails (a model that will not load, a
block the check refuses, a workspace file that is not JSON) is a ``window/showMessage`` with its reason; the server
stays up. The handlers of each LSP method are registered in ``lsp.handlers``.

Hostile input is bounded: a document over ``max_document_kb`` is not checked (one diagnostic says so), the stream's
messages are framed by ``lsp.wire`` (bounded, resynchronised, bad ones answered), the disable-rule action writes only
a workspace folder's file (or the user's) for a rule of the rule table, and settings files and the dictionary are
read only as regular files within a bound (``lsp.settings``).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import FeatureRequestError, JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from electra_detect.app.lsp.checks import Cancelled, Checks
from electra_detect.app.lsp.settings import (
    SECTION,
    LspSettings,
    SettingsError,
    WorkspaceFile,
    WorkspaceRules,
    add_to_dictionary,
    folder_of,
    kilobytes,
    user_folder,
)
from electra_detect.app.lsp.text import Finding, LineIndex, document_blocks
from electra_detect.app.lsp.wire import GuardedProtocol, WireInput, WireOutput, preview, reason

ADD_TO_DICTIONARY = "electra-detect.addToDictionary"
DISABLE_RULE = "electra-detect.disableRule"
SOURCE = "electra-detect"
CONFIGURATION_WAIT_S = 5.0  # a client that never answers workspace/configuration does not stall the first check
DOCUMENTS_AT_ONCE = 8  # documents checked at a time (many open ones re-checked at once wait their turn, well within
# the service's requests per client, 64); their batches share the model a step at a time

logger = logging.getLogger(__name__)


def message_limit(max_document_bytes: int) -> int:
    """The largest message read: a document at the limit with every character escaped in JSON (a control character
    is 6 bytes, ``\\u0001``) and room for the rest; a longer message is skipped unread (``lsp.wire``)."""
    return 8 * max_document_bytes + (1 << 20)


@dataclass
class PendingCheck:
    """A document's next check: waiting out the debounce (cancelled as a task), or under way (stopped through its
    cancel signal, so that the service drops the model's work on it at its next step)."""

    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task | None = None
    underway: bool = False

    def stop(self, now: bool = False) -> None:
        self.cancel.set()
        if self.task is not None and (now or not self.underway):
            self.task.cancel()


@dataclass
class DocumentState:
    """One open document: its language, its pending check and the last published findings."""

    language_id: str
    pending: PendingCheck | None = None
    version: int | None = None  # the version the findings are for
    findings: list[Finding] = field(default_factory=list)
    shown: set[str] = field(default_factory=set)  # error messages shown for it already


class ElectraDetectServer(LanguageServer):
    """The language server: settings, documents and the checks."""

    def __init__(self, model: str, engine: dict[str, Any], debounce: float, dictionary: str | None,
                 max_document_kb: int) -> None:
        from importlib.metadata import version

        super().__init__(SOURCE, version("electra-detect"), text_document_sync_kind=types.TextDocumentSyncKind.Full,
                         protocol_cls=GuardedProtocol)
        self.default_model, self.debounce, self.default_dictionary = model, debounce, dictionary
        self.max_document_kb = max_document_kb
        self.wire: WireInput | None = None  # the stream pygls reads (start_io)
        self.settings = LspSettings()
        self.checks = Checks(engine)
        self.loading: asyncio.Task | None = None  # the model's load; checks wait for it
        self.turns: asyncio.Semaphore | None = None  # DOCUMENTS_AT_ONCE (made in the loop)
        self.documents: dict[str, DocumentState] = {}
        self.workspace_files: dict[Path, WorkspaceFile] = {}
        self.ready: asyncio.Event | None = None  # set once the first settings are applied (made in the loop)

    # --- the wire ----------------------------------------------------------------------------------------------

    def start_io(self, stdin: Any = None, stdout: Any = None) -> None:
        """pygls' stdio loop, reading through ``lsp.wire``'s bounded, resynchronising reader instead of the raw
        stream (pygls reads whatever a Content-Length header says)."""
        output = WireOutput(stdout or sys.stdout.buffer)
        self.wire = WireInput(stdin or sys.stdin.buffer, output, message_limit(self.max_document_kb * 1024), SOURCE)
        super().start_io(self.wire, output)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """A failure outside a handler's own answer: a request pygls could not read (its params not what the spec
        says) is answered with the error, anything else is a message with its reason."""
        if source is FeatureRequestError:
            return  # pygls answered the request with the error
        if source is JsonRpcException and self.wire is not None:
            msg_id, method = self.wire.current
            detail = params_problem(error)
            if msg_id is not None and method is not None:
                code = error.code if isinstance(error, JsonRpcException) else -32603
                self.wire.output.send_error(msg_id, code, f"{method}: {detail}")
            else:
                self.show(f"a {method or 'message'} from the editor could not be read: {detail}")
            return
        self.show(f"the server failed: {reason(error)}")

    # --- settings and the model -------------------------------------------------------------------------------

    def model_path(self) -> str:
        return str(Path(self.settings.model).expanduser()) if self.settings.model else self.default_model

    def dictionary_path(self) -> Path | None:
        path = self.settings.dictionary_path()
        return path if path is not None else Path(self.default_dictionary) if self.default_dictionary else None

    def apply_settings(self, raw: Any) -> bool:
        """Take the editor's settings (a bad value: a message, the old settings kept); True when they changed."""
        try:
            settings = LspSettings.read(raw)
        except (SettingsError, ValueError) as exc:
            self.show(f"settings not applied: {reason(exc)}")
            return False
        if settings.ignored:
            self.log(f"unknown {SECTION} settings ignored: {', '.join(settings.ignored)}", types.MessageType.Warning)
        changed = settings != self.settings
        self.settings = settings
        return changed

    def load_model(self) -> asyncio.Task:
        """Load the settings' model (a no-op when it is loaded) in a task that checks wait for; a failure is a
        message."""
        model, dictionary = self.model_path(), self.dictionary_path()
        previous = self.loading

        async def load() -> None:
            if previous is not None:
                await previous  # one load at a time, in the order the settings came
            try:
                described = await self.checks.load(model, dictionary)
            except Exception as exc:  # noqa: BLE001 - shown to the writer; the model loaded before keeps checking
                kept = self.checks.model if self.checks.service is not None else None
                self.show(f"cannot load the model {model}: {reason(exc)}" + (f"; still checking with {kept}" if kept
                                                                                             else ""))
                return
            if described:
                self.log(f"model loaded: {described}")

        self.loading = asyncio.ensure_future(load())
        return self.loading

    async def fetch_configuration(self) -> Any:
        """The ``electra-detect`` section through ``workspace/configuration``, when the client offers it."""
        if not self.client_capabilities.workspace or not self.client_capabilities.workspace.configuration:
            return None
        try:
            answer = await asyncio.wait_for(self.workspace_configuration_async(types.ConfigurationParams(
                items=[types.ConfigurationItem(section=SECTION)])), CONFIGURATION_WAIT_S)
        except Exception as exc:  # noqa: BLE001 - a client's failure to answer leaves the settings as they are
            self.log(f"workspace/configuration failed: {reason(exc)}", types.MessageType.Warning)
            return None
        return answer[0] if answer else None

    # --- messages ------------------------------------------------------------------------------------------------

    def show(self, message: str, kind: types.MessageType = types.MessageType.Error) -> None:
        logger.warning("%s", message)
        self.window_show_message(types.ShowMessageParams(type=kind, message=f"{SOURCE}: {message}"))

    def log(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=f"{SOURCE}: {message}"))

    # --- checking ------------------------------------------------------------------------------------------------

    def schedule(self, uri: str, delay: float) -> None:
        """Check ``uri`` after ``delay`` seconds, cancelling the check that was pending or under way."""
        state = self.documents.get(uri)
        if state is None:
            return
        if state.pending is not None:
            state.pending.stop()
        state.pending = pending = PendingCheck()
        pending.task = asyncio.ensure_future(self.check_later(uri, state, delay, pending))

    def schedule_all(self) -> None:
        for uri in list(self.documents):
            self.schedule(uri, 0.0)

    async def check_later(self, uri: str, state: DocumentState, delay: float, pending: PendingCheck) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            if self.ready is not None:
                await self.ready.wait()
            if self.over_limit(uri, state):
                return  # told at once, without waiting for the model
            if self.loading is not None:
                await asyncio.shield(self.loading)  # a newer change cancels this check, not the model's load
            if pending.cancel.is_set():
                return
            if self.turns is None:
                self.turns = asyncio.Semaphore(DOCUMENTS_AT_ONCE)
            async with self.turns:
                if pending.cancel.is_set():
                    return
                pending.underway = True
                await self.check_document(uri, state, pending.cancel)
        except (asyncio.CancelledError, Cancelled):
            pass
        except Exception as exc:  # noqa: BLE001 - a bad document is a message; the server stays up
            logger.exception("check of %s failed", uri)
            self.show_once(state, f"{uri} could not be checked: {reason(exc)}")

    async def check_document(self, uri: str, state: DocumentState, cancel: asyncio.Event) -> None:
        document = self.workspace.get_text_document(uri)
        text, version = document.source, document.version
        options = self.options_for(uri, state)
        encoding = self.workspace.position_encoding or types.PositionEncodingKind.Utf16
        blocks = await asyncio.to_thread(document_blocks, text, state.language_id)  # a long document takes a while
        if cancel.is_set():
            return
        self.log(f"{uri} version {version}: checking {len(blocks)} blocks", types.MessageType.Log)
        try:
            flagged, errors, checked = await self.checks.check([block.text for block in blocks], options, cancel)
        except Cancelled as stopped:
            self.log(f"{uri} version {version}: stopped by a newer change after {stopped.checked} of {len(blocks)} "
                     f"blocks checked", types.MessageType.Log)
            raise
        findings = await asyncio.to_thread(self.findings, text, blocks, flagged, encoding)
        if cancel.is_set() or self.documents.get(uri) is not state:
            return
        state.version, state.findings = version, findings
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=[f.diagnostic for f in findings]))
        self.log(f"{uri} version {version}: {checked} of {len(blocks)} blocks checked, the others from the cache; "
                 f"{len(findings)} flags", types.MessageType.Log)
        for error in errors:
            self.show_once(state, error)

    def show_once(self, state: DocumentState, message: str, key: str | None = None,
                  kind: types.MessageType = types.MessageType.Error) -> None:
        """A document's error, shown the first time only (a bad paragraph stays bad while the writer types); ``key``
        in place of the message when its words change with the text (a size)."""
        if (key or message) not in state.shown:
            state.shown.add(key or message)
            self.show(message, kind)

    def over_limit(self, uri: str, state: DocumentState) -> bool:
        """Whether the document is over ``max_document_kb``; if so its one diagnostic says so (the flags of an
        earlier, shorter version cleared) and the editor is told once."""
        document = self.workspace.get_text_document(uri)
        text = document.source
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        if size <= self.max_document_kb * 1024:
            return False
        message = (f"document is {kilobytes(size):,} KB, over the language server's limit of "
                   f"{self.max_document_kb:,} KB; not checked")
        state.version, state.findings = document.version, []
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, version=document.version, diagnostics=[types.Diagnostic(
                range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
                message=message, severity=types.DiagnosticSeverity.Warning, source=SOURCE)]))
        self.show_once(state, f"{uri}: {message} (--max-document-kb raises the limit)", key="over the limit",
                       kind=types.MessageType.Warning)
        return True

    def options_for(self, uri: str, state: DocumentState) -> Any:
        """The GED options for a document: the settings and its workspace file's rules."""
        rules = WorkspaceRules()
        workspace_file = self.workspace_file(uri)
        if workspace_file is not None:
            try:
                rules = workspace_file.rules()
            except SettingsError as exc:
                self.show_once(state, f"{exc}; checking without it")
        return self.settings.options(rules)

    def workspace_file(self, uri: str) -> WorkspaceFile | None:
        """The workspace file of a document: its workspace folder's (paths resolved), else the user's (in no
        workspace folder); None for one that is not a file path (an untitled buffer)."""
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path is None:
            return None
        folders = [to_fs_path(f.uri) or "" for f in self.workspace.folders.values()]
        if self.workspace.root_path:
            folders.append(self.workspace.root_path)
        try:
            folder = folder_of(path, folders)
        except (OSError, ValueError):  # ValueError: a NUL in the path
            return None
        if folder is None:
            folder = user_folder()
            return self.workspace_files.setdefault(folder, WorkspaceFile(folder, user=True))
        return self.workspace_files.setdefault(folder, WorkspaceFile(folder))

    def findings(self, text: str, blocks: list, flagged: list[list], encoding: str) -> list[Finding]:
        """Each flag mapped back to the document (flags on markup's stand-ins dropped) with its diagnostic."""
        severity = self.settings.diagnostic_severity
        index = LineIndex(text, encoding)
        findings = []
        for block, words in zip(blocks, flagged, strict=True):
            for word in words:
                if not block.is_prose(word.start, word.end):
                    continue
                start, end = block.span(word.start, word.end)
                edits = tuple((*block.span(s.start, s.end), s.value) for s in word.suggestions or ()
                              if block.is_prose(s.start, s.end))
                diagnostic = types.Diagnostic(
                    range=index.range(start, end), message=word.message, severity=severity, code=word.rule.id,
                    source=SOURCE, data={"category": word.rule.category, "word": word.word,
                                         "score": round(float(word.score), 4)})
                findings.append(Finding(start, end, word, edits, diagnostic))
        return findings

    # --- code actions and commands -------------------------------------------------------------------------------

    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        state = self.documents.get(uri)
        if state is None or state.version is None:
            return []
        document = self.workspace.get_text_document(uri)
        if document.version != state.version:
            return []  # findings of an older text: their spans may have moved; the next check answers
        index = LineIndex(document.source, self.workspace.position_encoding or types.PositionEncodingKind.Utf16)
        start, end = index.offset(params.range.start), index.offset(params.range.end)
        actions: list[types.CodeAction] = []
        words: set[str] = set()
        rules: set[str] = set()
        for finding in state.findings:
            if not (finding.start <= end and start <= finding.end):
                continue
            word, diagnostic = finding.word, finding.diagnostic
            for number, (lo, hi, value) in enumerate(finding.edits):
                written = document.source[lo:hi]
                title = f'Replace "{written}" with "{value}"' if value else f'Delete "{written}"'
                edit = types.TextEdit(range=index.range(lo, hi), new_text=value)
                actions.append(types.CodeAction(title=title, kind=types.CodeActionKind.QuickFix,
                                                diagnostics=[diagnostic], is_preferred=number == 0,
                                                edit=self.workspace_edit(uri, state.version, edit)))
            if word.word.lower() not in words:
                words.add(word.word.lower())
                title = f'Add "{word.word}" to the dictionary'
                add = types.Command(title, ADD_TO_DICTIONARY, arguments=[word.word])
                actions.append(types.CodeAction(title=title, kind=types.CodeActionKind.QuickFix,
                                                diagnostics=[diagnostic], command=add))
            if word.rule.id not in rules:
                rules.add(word.rule.id)
                workspace_file = self.workspace_file(uri)
                where = ("for documents in no workspace folder" if workspace_file is not None and workspace_file.user
                         else "in this workspace")
                title = f"Disable rule {word.rule.id} {where}"
                disable = types.Command(title, DISABLE_RULE, arguments=[word.rule.id, uri])
                actions.append(types.CodeAction(title=title, kind=types.CodeActionKind.QuickFix,
                                                diagnostics=[diagnostic], command=disable))
        return actions

    def workspace_edit(self, uri: str, version: int, edit: types.TextEdit) -> types.WorkspaceEdit:
        """One edit of one document: versioned (a stale fix is refused by the client) when the client takes
        ``documentChanges``."""
        workspace = self.client_capabilities.workspace
        if workspace and workspace.workspace_edit and workspace.workspace_edit.document_changes:
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=[edit])])
        return types.WorkspaceEdit(changes={uri: [edit]})

    def add_word(self, *arguments: Any) -> None:
        """The add-to-dictionary command: ``[word]``."""
        from electra_detect.tasks.ged.dictionary import default_dictionary_path

        if len(arguments) != 1 or not isinstance(arguments[0], str) or not arguments[0].strip():
            raise SettingsError(f"{ADD_TO_DICTIONARY} takes one word, got {preview(repr(list(arguments)), 80)}")
        word = arguments[0]
        path = self.dictionary_path() or default_dictionary_path()
        if add_to_dictionary(path, word):
            self.log(f'added "{word}" to {path}')
        self.schedule_all()

    def disable_rule(self, *arguments: Any) -> None:
        """The disable-rule command: ``[rule id, document URI]``: a rule of the rule table, written to the document's
        workspace file (``workspace_file``: a workspace folder's, else the user's; never beside the document)."""
        from electra_detect.tasks.ged.rule_table import RULES_BY_ID

        if len(arguments) != 2 or not all(isinstance(a, str) and a.strip() for a in arguments):
            raise SettingsError(f"{DISABLE_RULE} takes a rule id and a document URI, got "
                                f"{preview(repr(list(arguments)), 80)}")
        rule, uri = arguments[0].strip().upper(), arguments[1]
        if rule not in RULES_BY_ID:
            raise SettingsError(f"{DISABLE_RULE}: {preview(arguments[0])} is not a rule id (docs/ged_rules.md lists "
                                f"them)")
        workspace_file = self.workspace_file(uri)
        if workspace_file is None:
            raise SettingsError(f"{preview(uri, 80)} is not a file, so it has no workspace to write {rule} to")
        if workspace_file.disable_rule(rule):
            self.log(f"disabled {rule} in {workspace_file.path}")
        self.schedule_all()


def params_problem(error: Exception) -> str:
    """What was wrong with a message pygls could not structure, in one line (cattrs' paths: ``$.textDocument.uri``)."""
    cause = error.__cause__ or error
    try:
        from cattrs import transform_error

        found = transform_error(cause) if hasattr(cause, "exceptions") else []
    except Exception:  # noqa: BLE001 - the plain reason is enough
        found = []
    text = "; ".join(found)
    return (text if len(text) <= 300 else text[:300] + "...") if found else reason(cause)
