"""A document as the language server reads it: LSP positions in the negotiated encoding, and the prose blocks the
check sees (``electra_detect.markup``: the same layer as every other front).

Positions are computed here, not by pygls' ``TextDocument``: LSP ends a line only at ``\\n``, ``\\r\\n`` or ``\\r``,
while pygls splits lines with ``str.splitlines``, which also breaks at form feeds, ``\\u2028`` and others, so a
document holding one would get its later flags on the wrong line.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types

if TYPE_CHECKING:
    from electra_detect.markup import ProseBlock

_LINE_END = re.compile(r"\r\n|\r|\n")
ENCODINGS = (types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16, types.PositionEncodingKind.Utf32)


def code_units(text: str, encoding: str) -> int:
    """The length of ``text`` in the encoding's code units (a lone surrogate, as JSON can carry one, counts as one
    UTF-16 unit and three UTF-8 bytes, as the client counted it)."""
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8", "surrogatepass"))
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class LineIndex:
    """Character offsets of ``text`` to LSP positions and back, counting columns in ``encoding``'s code units."""

    def __init__(self, text: str, encoding: str = types.PositionEncodingKind.Utf16) -> None:
        self.text, self.encoding = text, encoding
        self.starts = [0] + [m.end() for m in _LINE_END.finditer(text)]

    def line_end(self, line: int) -> int:
        """The offset where line ``line``'s text ends (before its line break)."""
        if line + 1 < len(self.starts):
            end = self.starts[line + 1]
            return end - (2 if self.text[end - 2:end] == "\r\n" else 1)
        return len(self.text)

    def position(self, offset: int) -> types.Position:
        offset = max(0, min(offset, len(self.text)))
        line = bisect_right(self.starts, offset) - 1
        start = self.starts[line]
        return types.Position(line=line, character=code_units(self.text[start:offset], self.encoding))

    def range(self, start: int, end: int) -> types.Range:
        return types.Range(start=self.position(start), end=self.position(end))

    def offset(self, position: types.Position) -> int:
        """The character offset of a client's position; past the end of a line is its end (as LSP says), past the
        last line the end of the text."""
        if position.line >= len(self.starts):
            return len(self.text)
        start, end = self.starts[position.line], self.line_end(position.line)
        if self.encoding == types.PositionEncodingKind.Utf32 or self.text[start:end].isascii():
            return min(start + position.character, end)
        units = 0
        for at in range(start, end):
            if units >= position.character:
                return at
            units += code_units(self.text[at], self.encoding)
        return end


def document_blocks(text: str, language_id: str | None) -> list[ProseBlock]:
    """The prose blocks of a document, its markup chosen by the editor's ``languageId`` (unknown ids: plain
    text)."""
    from electra_detect.markup import markup_for_language_id, prose_blocks

    return prose_blocks(text, markup_for_language_id(language_id or "plaintext"))


@dataclass(frozen=True)
class Finding:
    """One flagged word of a document: its document span, the flag (``FlaggedWord``), the suggestions as document
    edits (start, end, value) and the diagnostic sent for it."""

    start: int
    end: int
    word: Any
    edits: tuple[tuple[int, int, str], ...]
    diagnostic: types.Diagnostic
