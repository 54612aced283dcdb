"""A project's own settings: ``.electra-detect.toml``, found upward from a directory, read by every front that checks
a project's files (the CLI now; the language server through the same function).

    level = "picky"                          # default or picky
    disabled-rules = ["ELECTRA_DETECT_R_OTHER"]
    disabled-categories = ["STYLE"]
    words = ["Kubernetes", "tokenise"]       # the project's dictionary: never flagged nor suggested
    dictionary = "docs/words.txt"            # and/or a dictionary file, relative to this file (one word a line)

The search starts at a directory and walks up; it stops at the first directory holding the file, at a directory
holding ``.git`` (the project's root: a settings file above it belongs to someone else) or at the filesystem's root.
Every key is optional; an unknown key, a value of the wrong kind or a file too large is a one-line
:class:`ProjectSettingsError` naming the file. Light imports only (tomllib, pathlib): a verb reads it before a model
loads.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from electra_detect.errors import UserError

SETTINGS_NAME = ".electra-detect.toml"
MAX_SETTINGS_BYTES = 64 * 1024  # a settings file is a few lines: more is a wrong file, not settings
MAX_DICTIONARY_BYTES = 4 * 1024 * 1024  # a project dictionary of ~300,000 words; more is a mistake
KEYS = ("level", "disabled-rules", "disabled-categories", "words", "dictionary")


class ProjectSettingsError(UserError, ValueError):
    """A settings file that cannot be used; the message names the file and the fault."""


@dataclass(frozen=True)
class ProjectSettings:
    """What a project's settings file says (None / empty: not set), with ``dictionary`` resolved against the file's
    folder and its entries already read into ``words`` (after the file's own ``words``)."""

    path: Path
    level: str | None = None
    disabled_rules: tuple[str, ...] = ()
    disabled_categories: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    dictionary: Path | None = None

    def ged_fields(self, *, level: str | None = None, disabled_rules: list[str] | tuple[str, ...] = (),
                   disabled_categories: list[str] | tuple[str, ...] = (),
                   words: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
        """``build_ged_options`` keywords: a front's own values (a flag given, a client's setting) override these
        settings' (``level``, and each list when it is not empty); ``words`` add to the project's dictionary."""
        return {"level": level or self.level or "default",
                "disabled_rules": list(disabled_rules or self.disabled_rules),
                "disabled_categories": list(disabled_categories or self.disabled_categories),
                "words": [*self.words, *words]}


def find_settings_file(start: str | os.PathLike[str]) -> Path | None:
    """The settings file that governs directory ``start``: the nearest ``.electra-detect.toml`` upward, not past a
    directory holding ``.git`` nor the filesystem's root; None when there is none."""
    folder = Path(start).resolve()
    for candidate in (folder, *folder.parents):
        path = candidate / SETTINGS_NAME
        if path.is_file():
            return path
        if (candidate / ".git").exists():  # the project's root: what lies above is not this project's
            return None
    return None


def find_project_settings(start: str | os.PathLike[str]) -> ProjectSettings | None:
    """The settings of the project ``start`` (a directory) lies in (:func:`find_settings_file`), read; None when there
    is no settings file. Raises :class:`ProjectSettingsError`."""
    path = find_settings_file(start)
    return None if path is None else read_project_settings(path)


def read_project_settings(path: str | os.PathLike[str]) -> ProjectSettings:
    """One settings file, checked key by key (its dictionary file read too). Raises :class:`ProjectSettingsError`."""
    path = Path(path)
    try:
        table = tomllib.loads(_read_bounded(path, MAX_SETTINGS_BYTES, "settings file", path))
    except tomllib.TOMLDecodeError as exc:  # its message names the line and column
        raise ProjectSettingsError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ProjectSettingsError(f"{path}: unknown key {unknown[0]!r}; expected one of {', '.join(KEYS)}")
    level = table.get("level")
    if level is not None:
        from electra_detect.model_dir import LEVELS  # numpy: only when a level is set

        if level not in LEVELS:
            raise ProjectSettingsError(f"{path}: level must be one of {', '.join(LEVELS)}, got {level!r}")
    dictionary = table.get("dictionary")
    if dictionary is not None and (not isinstance(dictionary, str) or not dictionary.strip()):
        raise ProjectSettingsError(f"{path}: dictionary must be a path (a string), got {dictionary!r}")
    words = _strings(table, "words", path)
    file = None
    if dictionary is not None:
        file = (path.parent / dictionary).resolve()
        words += _dictionary_entries(file, path)
    return ProjectSettings(path=path, level=level, disabled_rules=_strings(table, "disabled-rules", path),
                           disabled_categories=_strings(table, "disabled-categories", path),
                           words=tuple(dict.fromkeys(words)), dictionary=file)


def _strings(table: dict[str, Any], key: str, path: Path) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ProjectSettingsError(f"{path}: {key} must be a list of strings, got {value!r}")
    return tuple(item.strip() for item in value if item.strip())


def _dictionary_entries(file: Path, settings: Path) -> tuple[str, ...]:
    """A dictionary file's entries, as the personal dictionary reads them: one a line, ``#`` starts a comment."""
    text = _read_bounded(file, MAX_DICTIONARY_BYTES, "dictionary", settings)
    return tuple(kept for line in text.splitlines() if (kept := line.split("#", 1)[0].strip()))


def _read_bounded(file: Path, limit: int, what: str, settings: Path) -> str:
    """``file`` as UTF-8 text, refusing more than ``limit`` bytes without reading them all."""
    where = f"{settings}: {what} {file}" if file != settings else f"{what} {file}"
    try:
        with open(file, "rb") as handle:
            data = handle.read(limit + 1)
    except FileNotFoundError:
        raise ProjectSettingsError(f"{where} not found") from None
    except OSError as exc:  # a directory, no permission
        raise ProjectSettingsError(f"{where} cannot be read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ProjectSettingsError(f"{where} is larger than {limit:,} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProjectSettingsError(f"{where} is not UTF-8 text") from None
    return text
