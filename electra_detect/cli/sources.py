"""What ``ged`` checks: its inputs (text arguments, ``--file`` paths, standard input) as units of text the model
reads, each knowing where it lies, so that every output format can say ``path:line:col``.

An input in line mode (``--markup text``, or ``auto`` on a file whose extension names no markup, standard input and
text arguments) gives each non-empty line as a unit, streamed; a markup document (``--markup markdown`` or
``latex``, or ``auto`` by a file's extension) is read whole, before the model loads, and gives its prose blocks
(``electra_detect.markup``), less those its writer switched off (``electra_detect.ignores``).
"""

from __future__ import annotations

import bisect
import itertools
import re
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from electra_detect.errors import CliError

_BREAK = re.compile(r"\r\n|\r|\n")  # a document's line breaks, as an editor counts lines


class Lines:
    """Where each line of a text starts: offsets to 0-based (line, column)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0, *(match.end() for match in _BREAK.finditer(text))]

    def locate(self, offset: int) -> tuple[int, int]:
        index = bisect.bisect_right(self.starts, offset) - 1
        return index, offset - self.starts[index]

    def line(self, index: int) -> str:
        end = self.starts[index + 1] if index + 1 < len(self.starts) else len(self.text)
        return self.text[self.starts[index]:end].rstrip("\r\n")


@dataclass(eq=False)
class Source:
    """One input: ``name`` is how output names it (the file's path, ``-`` for standard input, a text argument's
    number from 1); ``markup``: ``text`` (line mode) or the document's markup; ``fields``: what its JSON rows add
    to say where they come from (``document``: its index, when a markup document is one of several inputs;
    ``file``: its path, when several files are checked)."""

    name: str
    markup: str
    file: str | None = None
    argument: str | None = None  # a text argument's text
    document: str | None = None  # a markup document, read whole
    fields: dict[str, Any] = field(default_factory=dict)
    ignored: Any = None  # the document's ignored regions (electra_detect.ignores.Ignored)
    _lines: Lines | None = None

    def lines(self) -> Lines:
        if self._lines is None:
            self._lines = Lines(self.document or "")
        return self._lines


@dataclass(eq=False, slots=True)
class Unit:
    """A text the model reads: a line of a line-mode input (``line``: its number there, from 1; a text argument's
    own line breaks counted from it), or a markup document's prose ``block``."""

    text: str
    source: Source
    line: int = 1
    block: Any = None  # electra_detect.markup.ProseBlock

    def place(self, offset: int) -> tuple[int, int, str, int]:
        """A flagged word's 1-based line and column in its input (``offset``: into the document for a block, into
        the text otherwise), the line it is on, and its 0-based column there."""
        if self.block is not None:
            lines = self.source.lines()
        elif "\n" in self.text or "\r" in self.text:
            lines = Lines(self.text)
        else:  # a file's line (most units): the text is the line
            return self.line, offset + 1, self.text, offset
        index, column = lines.locate(offset)
        return self.line + index, column + 1, lines.line(index), column


def plan_sources(texts: list[str], files: list[str] | None, markup: str) -> list[Source]:
    """The inputs in order: each text argument, then each file (standard input for ``-``, and when there are no
    text arguments and no files). Files are checked now (each must exist and be readable), markup documents read
    and parsed now, so a bad input is reported before the model loads. Raises CliError (or MarkupError)."""
    from electra_detect.markup import markup_for_path

    files = list(files or ())
    if not files and not texts:
        files = ["-"]
        if sys.stdin is None or sys.stdin.isatty():  # nothing to wait for: an error rather than a hang
            raise CliError("no text to score: give text arguments, --file, or pipe text on standard input"
                           if markup in ("text", "auto") else
                           "no document to check: give --file, text arguments, or pipe a document on standard input")
    several = len(texts) + len(files) > 1
    sources = [Source(str(number), "text" if markup == "auto" else markup, argument=text)
               for number, text in enumerate(texts, 1)]
    for path in files:
        chosen = markup if markup != "auto" else markup_for_path(path) if path != "-" else "text"
        sources.append(Source(path, chosen, file=path, fields={"file": path} if len(files) > 1 else {}))
    for index, source in enumerate(sources):
        if source.file not in (None, "-"):
            _check_readable(source.file)
        if source.markup != "text":
            _read_document(source)
            if several:
                source.fields = {**source.fields, "document": index}
    return sources


def _check_readable(path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        raise CliError(f"input file not found: {path}") from None
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None


def _read_document(source: Source) -> None:
    """A markup source's document, read whole with its line breaks as they are (offsets count the file's own
    characters, \\r\\n as two), and its ignored regions."""
    from electra_detect.ignores import ignored_regions

    if source.argument is not None:
        source.document = source.argument
    else:
        if source.file == "-":
            if sys.stdin is None or sys.stdin.isatty():
                raise CliError("no document to check: give --file, text arguments, or pipe a document on standard "
                               "input")
            name, data = "standard input", sys.stdin.buffer.read()
        else:
            name = source.file
            try:
                with open(source.file, "rb") as handle:
                    data = handle.read()
            except OSError as exc:
                raise CliError(f"cannot read {source.file}: {exc.strerror}") from None
        try:
            source.document = data.decode("utf-8")
        except UnicodeDecodeError:
            raise CliError(f"input file is not UTF-8 text: {name}") from None
    source.ignored = ignored_regions(source.document, source.markup)


def units(sources: list[Source], label: str = "") -> Iterator[Unit]:
    """Every source's units in order; a line-mode file is read as they are needed."""
    from electra_detect.cli.texts import numbered_lines, open_texts
    from electra_detect.markup import prose_blocks

    blocks = {id(s): prose_blocks(s.document, s.markup) for s in sources if s.markup != "text"}  # parse errors now
    return itertools.chain.from_iterable(_units(source, blocks.get(id(source)), label, open_texts, numbered_lines)
                                         for source in sources)


def _units(source: Source, blocks: list | None, label: str, open_texts: Any, numbered_lines: Any) -> Iterator[Unit]:
    if blocks is not None:
        for block in blocks:
            if not (source.ignored and source.ignored.covers(block.start, block.end)):  # all switched off
                yield Unit(block.text, source, 1, block)
    elif source.argument is not None:
        if source.argument.strip():
            yield Unit(source.argument, source)
    else:
        for number, text in numbered_lines(open_texts(source.file), source.file, label):
            yield Unit(text, source, number)


def unit_batches(sources: list[Source], label: str = "") -> tuple[Iterator[list[str]] | None, deque[list[Unit]]]:
    """The units' texts in batches for the model (:func:`electra_detect.cli.texts.batched`), and the queue each
    batch's units wait in, in order, for its output. No batches (None) when there is no text at all; the first
    batch is read here, so an unreadable first line is reported before a model loads."""
    from electra_detect.cli.texts import STREAM_BIG, batched

    waiting: deque[list[Unit]] = deque()

    def batches() -> Iterator[list[str]]:
        for batch in batched(units(sources, label), STREAM_BIG, text=lambda unit: unit.text):
            waiting.append(batch)
            yield [unit.text for unit in batch]

    stream = batches()
    first = next(stream, None)
    return (None if first is None else itertools.chain([first], stream)), waiting
