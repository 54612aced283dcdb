"""What the language server's checks read besides the text: the editor's settings (section ``electra-detect``), the
workspace file ``.electra-detect.json`` (the rules a writer disabled from the editor) and the personal dictionary
the "add to dictionary" action appends to.

Settings, in the editor's configuration (``workspace/configuration`` or ``workspace/didChangeConfiguration``, or
the client's ``initializationOptions``), each optional::

    {"electra-detect": {"disabledRules": ["ELECTRA_DETECT_R_OTHER"], "disabledCategories": ["STYLE"],
                        "enabledRules": [], "enabledCategories": [], "enabledOnly": false, "level": "default",
                        "words": ["Kubernetes"], "dictionary": "~/notes/words.txt", "model": "models/electra-minilm",
                        "diagnosticSeverity": "information"}}

The workspace file, at the root of the workspace folder holding the document, adds to them: ``{"disabledRules": [...],
"disabledCategories": [...], "words": [...]}``. A document in no workspace folder has the user's file instead
(``$XDG_CONFIG_HOME/electra-detect/default-workspace.json``): the disable-rule action writes only these files, never
beside a document a client names. The project's ``.electra-detect.toml`` (found upward from the workspace folder,
as the CLI finds it: ``electra_detect.project_settings``) lies under both: its level applies when the editor sets
none, and its rules, categories and words join the others.

Every file here is read only when it is a regular file within a size bound (``read_bounded``): a setting or a
workspace may name ``/dev/zero``, a FIFO or a log of gigabytes.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types

from electra_detect.errors import UserError
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.tasks.ged.dictionary import PersonalDictionary, Vocabulary
from electra_detect.tasks.ged.options import GedOptions, build_ged_options

SECTION = "electra-detect"
WORKSPACE_FILE = ".electra-detect.json"
USER_WORKSPACE_FILE = "default-workspace.json"  # in the user's config folder: the rules of documents in no workspace
WORKSPACE_FILE_BYTES = 1 << 20  # rule ids, categories and words: a megabyte is tens of thousands of them
DICTIONARY_BYTES = 2 << 20  # a word a line: a hundred thousand words and more (each is looked up in lemminflect)
SEVERITIES = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning,
              "information": types.DiagnosticSeverity.Information, "hint": types.DiagnosticSeverity.Hint}
_LISTS = {"disabledRules": "disabled_rules", "enabledRules": "enabled_rules",
          "disabledCategories": "disabled_categories", "enabledCategories": "enabled_categories", "words": "words"}
_STRINGS = {"level": "level", "dictionary": "dictionary", "model": "model", "diagnosticSeverity": "severity"}


class SettingsError(UserError, ValueError):
    """Settings or a workspace file the server cannot use; the message is one line for the editor to show."""


def _strings(value: Any, name: str) -> tuple[str, ...]:
    """A list setting: a list of strings, or one comma-separated string (as LanguageTool's fields are)."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise SettingsError(f"{SECTION}.{name} must be a list of strings, got {value!r}")
    return tuple(v.strip() for v in value if v.strip())


@dataclass(frozen=True)
class LspSettings:
    """The editor's settings for every check (see the module's docstring for their names in the editor)."""

    disabled_rules: tuple[str, ...] = ()
    enabled_rules: tuple[str, ...] = ()
    disabled_categories: tuple[str, ...] = ()
    enabled_categories: tuple[str, ...] = ()
    enabled_only: bool = False
    level: str | None = None  # None: the project's (.electra-detect.toml), else default
    words: tuple[str, ...] = ()
    dictionary: str | None = None
    model: str | None = None
    severity: str = "information"
    ignored: tuple[str, ...] = field(default=(), compare=False)  # keys not known here, for the log

    @classmethod
    def read(cls, raw: Any) -> LspSettings:
        """Settings from the editor's object: ``{"electra-detect": {...}}`` or the section itself; None or ``{}``
        give the defaults. Raises SettingsError (one line) on a value of the wrong kind."""
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise SettingsError(f"{SECTION} settings must be an object, got {type(raw).__name__}")
        section = raw.get(SECTION, raw)
        if section is None:
            return cls()
        if not isinstance(section, dict):
            raise SettingsError(f"{SECTION} settings must be an object, got {type(section).__name__}")
        values: dict[str, Any] = {}
        for key, value in section.items():
            if value is None:
                continue
            if key in _LISTS:
                values[_LISTS[key]] = _strings(value, key)
            elif key in _STRINGS:
                if not isinstance(value, str):
                    raise SettingsError(f"{SECTION}.{key} must be a string, got {value!r}")
                values[_STRINGS[key]] = value.strip() or None
            elif key == "enabledOnly":
                if not isinstance(value, bool):
                    raise SettingsError(f"{SECTION}.enabledOnly must be true or false, got {value!r}")
                values["enabled_only"] = value
        values["ignored"] = tuple(sorted(k for k in section if k not in (*_LISTS, *_STRINGS, "enabledOnly")))
        if values.get("severity") is not None and values["severity"].lower() not in SEVERITIES:
            raise SettingsError(f"{SECTION}.diagnosticSeverity must be one of {', '.join(SEVERITIES)}, "
                                f"got {values['severity']!r}")
        values["severity"] = (values.get("severity") or "information").lower()
        settings = cls(**values)
        settings.options(WorkspaceRules())  # a bad level or enabledOnly without rules: refused now, not per check
        return settings

    def options(self, workspace: WorkspaceRules) -> GedOptions:
        """The GED options of a check in a workspace: these settings and the workspace file's rules and words;
        suggestions always (the quick fixes)."""
        return build_ged_options(level=self.level or workspace.level or "default",
                                 disabled_rules=(*self.disabled_rules, *workspace.disabled_rules),
                                 enabled_rules=self.enabled_rules,
                                 disabled_categories=(*self.disabled_categories, *workspace.disabled_categories),
                                 enabled_categories=self.enabled_categories, enabled_only=self.enabled_only,
                                 words=(*self.words, *workspace.words), suggest=True)

    @property
    def diagnostic_severity(self) -> types.DiagnosticSeverity:
        return SEVERITIES[self.severity]

    def dictionary_path(self) -> Path | None:
        """The dictionary file the settings name (``~`` expanded), else None (the default one)."""
        return Path(self.dictionary).expanduser() if self.dictionary else None


@dataclass(frozen=True)
class WorkspaceRules:
    """What a workspace file (and the project's ``.electra-detect.toml``) adds to the settings."""

    level: str | None = None  # the project's level, when the editor sets none
    disabled_rules: tuple[str, ...] = ()
    disabled_categories: tuple[str, ...] = ()
    words: tuple[str, ...] = ()


def read_bounded(path: Path, limit: int, what: str) -> bytes | None:
    """The bytes of the regular file at ``path`` (links followed), None when there is none; SettingsError (one line)
    for anything else or for more than ``limit`` bytes, checked on the open file (no window to swap it)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))  # a FIFO: no wait
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise SettingsError(f"{what} {path} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise SettingsError(f"{what} {path} is not a regular file; not read")
        if status.st_size > limit:
            raise SettingsError(f"{what} {path} is {kilobytes(status.st_size):,} KB, over the limit of "
                                f"{limit // 1024:,} KB; not read")
        chunks, size = [], 0
        while size <= limit:  # a file that grows after the stat is still read no further than the bound
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise SettingsError(f"{what} {path} is over the limit of {limit // 1024:,} KB; not read")
    return data


def kilobytes(size: int) -> int:
    """``size`` bytes in KB, rounded up (a file one byte over a limit is not shown as at it)."""
    return -(-size // 1024)


def user_folder() -> Path:
    """The user's config folder: ``$XDG_CONFIG_HOME/electra-detect`` (default ``~/.config``)."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "electra-detect"


class WorkspaceFile:
    """``.electra-detect.json`` in one workspace folder (or the user's file in their config folder, ``user``): read
    again when its modification time or size changes; a missing file adds nothing."""

    def __init__(self, folder: Path, user: bool = False) -> None:
        self.folder, self.user = folder, user
        self.path = folder / (USER_WORKSPACE_FILE if user else WORKSPACE_FILE)
        self._stamp: tuple[int, int] | None = None
        self._rules = WorkspaceRules()
        self._project: Any = None
        self._project_stamp: tuple[str, int, int] | None = None

    def rules(self) -> WorkspaceRules:
        """The file's rules now; SettingsError (one line naming the file) when it is not what the docs say."""
        try:
            status = self.path.stat()
        except (FileNotFoundError, NotADirectoryError):
            self._stamp, self._rules = None, WorkspaceRules()
            return self._rules
        except (OSError, ValueError) as exc:
            raise SettingsError(f"{self.path} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
        stamp = (status.st_mtime_ns, status.st_size)
        if stamp != self._stamp:
            raw = self._read()
            self._rules = WorkspaceRules(**{name: _strings(raw.get(key, []), key) for key, name in
                                            (("disabledRules", "disabled_rules"),
                                             ("disabledCategories", "disabled_categories"), ("words", "words"))})
            self._stamp = stamp
        return self._with_project(self._rules)

    def _with_project(self, rules: WorkspaceRules) -> WorkspaceRules:
        """The rules with the project's ``.electra-detect.toml`` (found upward from the folder, read with a bound, as
        the CLI reads it) under them: its level, rules, categories and words."""
        if self.user:
            return rules
        from electra_detect.project_settings import ProjectSettingsError, find_settings_file, read_project_settings

        try:
            path = find_settings_file(self.folder)
            if path is None:
                return rules
            status = path.stat()
            stamp = (str(path), status.st_mtime_ns, status.st_size)
            if stamp != self._project_stamp:  # read again only when it changed, as the workspace file is
                self._project, self._project_stamp = read_project_settings(path), stamp
        except (ProjectSettingsError, OSError) as exc:
            raise SettingsError(str(exc)) from None
        project = self._project
        return WorkspaceRules(level=project.level, disabled_rules=(*project.disabled_rules, *rules.disabled_rules),
                              disabled_categories=(*project.disabled_categories, *rules.disabled_categories),
                              words=(*project.words, *rules.words))

    def _read(self) -> dict[str, Any]:
        data = read_bounded(self.path, WORKSPACE_FILE_BYTES, "workspace file")
        if data is None:
            return {}
        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise SettingsError(f"{self.path} cannot be read as JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise SettingsError(f"{self.path} must hold a JSON object, e.g. {{\"disabledRules\": [...]}}")
        return raw

    def disable_rule(self, rule: str) -> bool:
        """Add ``rule`` to the file's ``disabledRules`` (other keys kept; written atomically); False when it was
        there already. A workspace folder that is not there is not made (the user's config folder is)."""
        if not self.user and not self.folder.is_dir():
            raise SettingsError(f"workspace folder {self.folder} is not a folder; {rule} not disabled")
        raw = self._read()
        rules = list(_strings(raw.get("disabledRules", []), "disabledRules"))
        if rule.upper() in {r.upper() for r in rules}:
            return False
        raw["disabledRules"] = sorted({*rules, rule})
        atomic_write_json(self.path, raw)
        return True


@dataclass
class BoundedDictionary(PersonalDictionary):
    """The personal dictionary as the core reads it (again when it changes), but only a regular file of at most
    ``DICTIONARY_BYTES``: the ``dictionary`` setting may name any path. A file refused is an empty dictionary, and
    ``refused`` says why (for the server to show)."""

    refused: str | None = None

    def vocabulary(self, inflections: Any = None) -> Vocabulary:
        try:
            status = self.path.stat()
        except (FileNotFoundError, NotADirectoryError):
            self._stamp, self._vocabulary, self.refused = None, Vocabulary(), None
            return self._vocabulary
        except (OSError, ValueError) as exc:
            self._stamp, self._vocabulary = None, Vocabulary()
            self.refused = f"dictionary {self.path} cannot be read: {getattr(exc, 'strerror', None) or exc}"
            return self._vocabulary
        stamp = (status.st_mtime_ns, status.st_size)
        if stamp != self._stamp:
            try:
                text = (read_bounded(self.path, DICTIONARY_BYTES, "dictionary") or b"").decode("utf-8")
            except SettingsError as exc:
                text, self.refused = "", str(exc)
            except UnicodeDecodeError:
                text, self.refused = "", f"dictionary {self.path} is not UTF-8 text; not read"
            else:
                self.refused = None
            entries = [line.split("#", 1)[0].strip() for line in text.splitlines()]  # as the core's read_entries
            self._vocabulary = Vocabulary.of([e for e in entries if e], inflections)
            self._stamp = stamp
        return self._vocabulary


def add_to_dictionary(path: Path, word: str) -> bool:
    """Append ``word`` to the dictionary file at ``path`` (made with its folder when missing; written atomically);
    False when a line holds it already. A file that is not a regular one within the bound is neither read nor
    written."""
    word = " ".join(word.split())
    if not word or "#" in word or len(word) > 200:
        raise SettingsError(f"{word[:40]!r}{'...' if len(word) > 40 else ''} cannot be a dictionary entry")
    data = read_bounded(path, DICTIONARY_BYTES, "dictionary")
    try:
        text = data.decode("utf-8") if data else ""
    except UnicodeDecodeError:
        raise SettingsError(f"dictionary {path} is not UTF-8 text; not written") from None
    entries = {line.split("#", 1)[0].strip().lower() for line in text.splitlines()}
    if word.lower() in entries:
        return False
    if text and not text.endswith("\n"):
        text += "\n"
    atomic_write_text(path, f"{text}{word}\n")
    return True


def folder_of(path: str, folders: list[str]) -> Path | None:
    """The workspace folder holding the file ``path``, both resolved first (``..`` and symbolic links), the deepest
    when folders nest; None when none holds it."""
    real = Path(os.path.realpath(path))
    holding = []
    for folder in folders:
        if folder:
            root = Path(os.path.realpath(folder))
            if root == real or root in real.parents:
                holding.append(root)
    return max(holding, key=lambda p: len(p.parts), default=None)
