"""What the language server's checks read besides the text: the editor's settings (section ``electra-detect``), the
workspace file ``.electra-detect.json`` (the rules a writer disabled from the editor) and the personal dictionary
the "add to dictionary" action appends to.

Settings, in the editor's configuration (``workspace/configuration`` or ``workspace/didChangeConfiguration``, or
the client's ``initializationOptions``), each optional::

    {"electra-detect": {"disabledRules": ["ELECTRA_DETECT_R_OTHER"], "disabledCategories": ["STYLE"],
                        "enabledRules": [], "enabledCategories": [], "enabledOnly": false, "level": "default",
                        "words": ["Kubernetes"], "dictionary": "~/notes/words.txt", "model": "models/electra-minilm",
                        "diagnosticSeverity": "information"}}

The workspace file, at the root of the workspace folder holding the document (else beside the document), adds to
them: ``{"disabledRules": [...], "disabledCategories": [...], "words": [...]}``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types

from electra_detect.errors import UserError
from electra_detect.fileio import atomic_write_json, atomic_write_text
from electra_detect.tasks.ged.options import GedOptions, build_ged_options

SECTION = "electra-detect"
WORKSPACE_FILE = ".electra-detect.json"
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
    level: str = "default"
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
        values["level"] = values.get("level") or "default"
        settings = cls(**values)
        settings.options(WorkspaceRules())  # a bad level or enabledOnly without rules: refused now, not per check
        return settings

    def options(self, workspace: WorkspaceRules) -> GedOptions:
        """The GED options of a check in a workspace: these settings and the workspace file's rules and words;
        suggestions always (the quick fixes)."""
        return build_ged_options(level=self.level, disabled_rules=(*self.disabled_rules, *workspace.disabled_rules),
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
    """What a workspace file adds to the settings."""

    disabled_rules: tuple[str, ...] = ()
    disabled_categories: tuple[str, ...] = ()
    words: tuple[str, ...] = ()


class WorkspaceFile:
    """``.electra-detect.json`` in one folder: read again when its modification time or size changes; a missing
    file adds nothing."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / WORKSPACE_FILE
        self._stamp: tuple[int, int] | None = None
        self._rules = WorkspaceRules()

    def rules(self) -> WorkspaceRules:
        """The file's rules now; SettingsError (one line naming the file) when it is not what the docs say."""
        try:
            stat = self.path.stat()
        except (FileNotFoundError, NotADirectoryError):
            self._stamp, self._rules = None, WorkspaceRules()
            return self._rules
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            raw = self._read()
            self._rules = WorkspaceRules(**{name: _strings(raw.get(key, []), key) for key, name in
                                            (("disabledRules", "disabled_rules"),
                                             ("disabledCategories", "disabled_categories"), ("words", "words"))})
            self._stamp = stamp
        return self._rules

    def _read(self) -> dict[str, Any]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SettingsError(f"{self.path} cannot be read as JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise SettingsError(f"{self.path} must hold a JSON object, e.g. {{\"disabledRules\": [...]}}")
        return raw

    def disable_rule(self, rule: str) -> bool:
        """Add ``rule`` to the file's ``disabledRules`` (other keys kept; written atomically); False when it was
        there already."""
        raw = self._read() if self.path.exists() else {}
        rules = list(_strings(raw.get("disabledRules", []), "disabledRules"))
        if rule.upper() in {r.upper() for r in rules}:
            return False
        raw["disabledRules"] = sorted({*rules, rule})
        atomic_write_json(self.path, raw)
        return True


def add_to_dictionary(path: Path, word: str) -> bool:
    """Append ``word`` to the dictionary file at ``path`` (made with its folder when missing; written atomically);
    False when a line holds it already."""
    word = " ".join(word.split())
    if not word or "#" in word:
        raise SettingsError(f"{word!r} cannot be a dictionary entry")
    text = ""
    if path.exists():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"dictionary {path} cannot be read: {exc}") from None
    entries = {line.split("#", 1)[0].strip().lower() for line in text.splitlines()}
    if word.lower() in entries:
        return False
    if text and not text.endswith("\n"):
        text += "\n"
    atomic_write_text(path, f"{text}{word}\n")
    return True


def folder_of(path: str, folders: list[str]) -> Path:
    """The workspace folder holding the file ``path`` (the deepest, when folders nest), else the file's folder."""
    holding = [Path(f) for f in folders if f and os.path.commonpath([os.path.abspath(f), os.path.abspath(path)])
               == os.path.abspath(f)]
    return max(holding, key=lambda p: len(p.parts)) if holding else Path(path).parent
