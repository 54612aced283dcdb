"""How ``ged`` writes what it found (``--output-format``): ``text`` for a person, ``json`` for a program, ``github``
for a workflow's annotations. Each writer takes the checked units of :mod:`electra_detect.cli.sources` with their
flagged words (JSON objects, offsets into the unit's input) and writes one batch at a time, flushed: a long file
shows results as it goes.

``text``, a line a flagged word (``path:line:col: TYPE message (suggestions)``, 1-based) and the word's sentence
with the word marked under it, coloured on a terminal unless ``NO_COLOR`` is set::

    essay.txt:3:4: R:VERB:TENSE Verb tense: *go* may need to be *went*. (went)
      He go to the store yesterday.
         ^^
"""

from __future__ import annotations

import json
import os
import sys
import unicodedata
from typing import Any, TextIO

from electra_detect.cli.options import OUTPUT_FORMATS as FORMATS  # noqa: F401 - the one list, where the flag is

CONTEXT_CHARS = 100  # a sentence longer than this is shown as a window around the word
_BOLD, _RED, _GREEN, _RESET = "\033[1m", "\033[1;31m", "\033[32m", "\033[0m"


def color_wanted(stream: TextIO) -> bool:
    """Colour on a terminal, unless ``NO_COLOR`` is set to anything (no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


class Writer:
    """A format's writer: :meth:`add` each checked unit's words, :meth:`flush` after a batch; ``flagged`` counts
    the words written (``--exit-code``)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.flagged = 0
        self._pending: list[str] = []

    def add(self, unit: Any, threshold: float, served: dict[str, Any], words: list[dict[str, Any]]) -> None:
        self.flagged += len(words)
        self._pending.extend(self.lines(unit, threshold, served, words))

    def lines(self, unit: Any, threshold: float, served: dict[str, Any], words: list[dict[str, Any]]) -> list[str]:
        raise NotImplementedError

    def flush(self) -> None:
        if self._pending:
            self.stream.write("".join(self._pending))
            self._pending = []
        self.stream.flush()


class JsonWriter(Writer):
    """One JSON line a checked text (line mode) or prose block (a markup document), flagged or not: the text, the
    threshold, the flagged words, what served them, and where it came from when that is not plain
    (``document``, ``file``: :attr:`Source.fields`)."""

    def lines(self, unit: Any, threshold: float, served: dict[str, Any], words: list[dict[str, Any]]) -> list[str]:
        block = unit.block
        row = {"text": unit.text, "threshold": threshold, "flagged": words, **served} if block is None else {
            "block": {"start": block.start, "end": block.end}, "text": unit.text, "threshold": threshold,
            "flagged": words, **served}
        if unit.source.fields:
            row.update(unit.source.fields)
        return [json.dumps(row) + "\n"]


def error_type(word: dict[str, Any]) -> str:
    """What kind of error: the ERRANT type (``R:VERB:TENSE``) when the model names one, else the rule id."""
    return f"{word['operation']}:{word['type']}" if word.get("type") else word["rule"]


def shown_suggestions(word: dict[str, Any]) -> str:
    """The suggestions as a reader sees them: ``went, goes``; one that adds or removes spaces (or deletes the word,
    ``""``) quoted."""
    values = [s["value"] for s in word.get("suggestions") or ()]
    return ", ".join(v if v and v == v.strip() else json.dumps(v) for v in values)


class TextWriter(Writer):
    """A line a flagged word, then its sentence with the word marked under it (see the module's doc)."""

    def __init__(self, stream: TextIO | None = None, color: bool | None = None) -> None:
        super().__init__(stream)
        self.color = color_wanted(self.stream) if color is None else color

    def paint(self, text: str, code: str) -> str:
        return f"{code}{text}{_RESET}" if self.color else text

    def lines(self, unit: Any, threshold: float, served: dict[str, Any], words: list[dict[str, Any]]) -> list[str]:
        out = []
        for word in words:
            line, column, source_line, at = unit.place(word["start"])
            suggestions = shown_suggestions(word)
            head = (f"{self.paint(f'{unit.source.name}:{line}:{column}:', _BOLD)} "
                    f"{self.paint(error_type(word), _RED)} {word['message']}"
                    + (f" ({self.paint(suggestions, _GREEN)})" if suggestions else ""))
            shown, mark = excerpt(source_line, at, at + word["end"] - word["start"])
            before, marked, after = shown[:mark[0]], shown[mark[0]:mark[1]], shown[mark[1]:]
            out.append(f"{head}\n  {before}{self.paint(marked, _RED)}{after}\n"
                       f"  {' ' * width(before)}{self.paint('^' * max(1, width(marked)), _RED)}\n")
        return out


def excerpt(line: str, start: int, end: int) -> tuple[str, tuple[int, int]]:
    """The sentence of ``line`` that holds ``[start, end)`` (tabs as spaces, so the mark lines up), cut to a window of
    about CONTEXT_CHARS around the word when longer, and where the word lies in what is shown."""
    from electra_detect.sentences import sentence_around, sentence_spans

    end = min(max(end, start), len(line))
    lo, hi = sentence_around(sentence_spans(line), start, end)
    lo, hi = min(lo, start), max(hi, end)
    prefix = suffix = ""
    if hi - lo > CONTEXT_CHARS:
        room = max(0, CONTEXT_CHARS - (end - start)) // 2
        if start - room > lo:
            lo, prefix = start - room, "…"
        if end + room < hi:
            hi, suffix = end + room, "…"
    shown = (prefix + line[lo:hi] + suffix).replace("\t", " ")
    at = len(prefix) + start - lo
    return shown, (at, at + end - start)


def width(text: str) -> int:
    """Columns ``text`` takes on a terminal: wide (CJK, most emoji) characters two, combining marks none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


class GithubWriter(Writer):
    """GitHub Actions workflow commands: ``::warning file=…,line=…,col=…,endColumn=…,title=…::message`` a flagged
    word, shown on the pull request's diff (``file`` only for a file; standard input and arguments have none)."""

    def lines(self, unit: Any, threshold: float, served: dict[str, Any], words: list[dict[str, Any]]) -> list[str]:
        out = []
        for word in words:
            line, column, _source_line, _at = unit.place(word["start"])
            where = [f"file={_escape_property(unit.source.file)}"] if unit.source.file not in (None, "-") else []
            where += [f"line={line}", f"col={column}", f"endColumn={column + word['end'] - word['start']}",
                      f"title={_escape_property('electra-detect ' + word['rule'])}"]
            suggestions = shown_suggestions(word)
            message = word["message"] + (f" ({suggestions})" if suggestions else "")
            out.append(f"::warning {','.join(where)}::{_escape_data(message)}\n")
        return out


def writer_for(output_format: str, stream: TextIO | None = None) -> Writer:
    """The writer of an ``--output-format``."""
    return {"text": TextWriter, "json": JsonWriter, "github": GithubWriter}[output_format](stream)
