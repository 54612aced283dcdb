"""Markdown's prose blocks: markdown-it parses the document's blocks (with this package's linear-time rules), each
paragraph, heading or table cell's content is placed back in the document character by character, and its inline
reading (:mod:`electra_detect.markup.markdown_inline`) is written as prose and stand-ins."""

from __future__ import annotations

import bisect
from array import array
from typing import Any

from electra_detect.errors import MarkupError
from electra_detect.markup.markdown_inline import inline_marks, install_recording_tokenizer, write_inline
from electra_detect.markup.markdown_rules import (
    amsmath_block,
    bracket_math_block,
    bracket_math_inline,
    dollar_math_block,
    linkify_rule,
)
from electra_detect.markup.writer import LINE_BREAK, Writer

_PROSE_PARENTS = frozenset({"paragraph_open", "heading_open", "th_open", "td_open"})
# How deep block quotes and lists may nest: markdown-it's guard against recursion at its default preset's 100
# (CommonMark's preset stops at 20 and skips what lies deeper without a word); deeper is a MarkupError.
MAX_MARKDOWN_NESTING = 100
# Inline, CommonMark's 20 stays: every "[" costs markdown-it work in proportion (each unclosed one reads ahead that
# many nested labels), and an inline mark past it is read as text, not skipped.
_INLINE_NESTING = 20


def _markdown_parser() -> Any:
    """CommonMark with GFM tables and strikethrough, bare-URL links, YAML/TOML front matter, and math ($...$,
    $$...$$, \\(...\\), \\[...\\], amsmath environments); inline parsing is run by :func:`inline_marks`. Where a
    plugin's rule looked for its closing mark to the end of the document at every opening one (bare URLs, \\(...\\),
    \\[...\\], $$ blocks, amsmath environments: the square of the document's length), a rule of
    :mod:`electra_detect.markup.markdown_rules` reads the same syntax in linear time."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.front_matter import front_matter_plugin

    md = MarkdownIt("commonmark", {"linkify": True, "maxNesting": MAX_MARKDOWN_NESTING})
    md.enable(["table", "strikethrough", "linkify"])
    md.use(front_matter_plugin).use(dollarmath_plugin, double_inline=True)  # its inline $...$ rule is linear
    md.block.ruler.at("math_block", dollar_math_block)
    md.block.ruler.before("blockquote", "amsmath", amsmath_block,
                          {"alt": ["paragraph", "reference", "blockquote", "list", "footnote_def"]})
    md.inline.ruler.before("escape", "math_inline_brackets", bracket_math_inline)
    md.block.ruler.before("fence", "math_block_brackets", bracket_math_block)
    md.inline.ruler.at("linkify", linkify_rule)
    md.core.ruler.disable("inline")  # each inline token is parsed by inline_marks, which records positions
    md.inline.ruler2.disable("fragments_join")  # keeps the emphasis delimiters' tokens apart, to read which matched
    _install_nesting_check(md)
    return md


def read_markdown(document: str, writer: Writer) -> None:
    md = _markdown_parser()
    install_recording_tokenizer(md)
    writer.linkify = md.linkify
    lines = _line_ends(document)
    env: dict[str, Any] = {}
    tokens = md.parse(document, env)
    md.options.maxNesting = _INLINE_NESTING  # this parser is this document's: inline parsing comes after the blocks
    cursors: dict[int, int] = {}  # a table row's line: where its next cell is looked for
    finders: dict[int, _CharFinder] = {}  # a table row's line: where each of its characters is
    for index, token in enumerate(tokens):
        if token.type != "inline" or index == 0 or tokens[index - 1].type not in _PROSE_PARENTS:
            continue
        if token.map is None or not token.content.strip():
            continue
        cell = tokens[index - 1].type in ("th_open", "td_open")
        places = _content_places(token.content, document, lines, token.map[0], cursors if cell else None,
                                 finders if cell else {})
        marks, stand_ins = inline_marks(md, token.content, env)
        write_inline(token.content, places, marks, stand_ins, writer)
        writer.close()


def _install_nesting_check(md: Any) -> None:
    """Make ``md``'s block tokenizer refuse, with a MarkupError, the blocks it would skip for nesting too deep."""
    tokenize = md.block.tokenize

    def checked(state: Any, start: int, end: int) -> None:
        if state.level >= MAX_MARKDOWN_NESTING:  # markdown-it would skip the lines from here to `end`
            line = state.skipEmptyLines(start)
            if line < end and state.sCount[line] >= state.blkIndent:
                raise MarkupError(f"the Markdown nests block quotes and lists too deeply at line {line + 1} (at most "
                                  f"{MAX_MARKDOWN_NESTING} levels are read: a quote is one, a list two); nest it less")
        tokenize(state, start, end)

    md.block.tokenize = checked


def _line_ends(document: str) -> tuple[array, array]:
    """Each line's start and end without its break, as markdown-it counts lines (\\r\\n, \\r and \\n end one)."""
    starts, ends = array("q", [0]), array("q")
    for match in LINE_BREAK.finditer(document):
        ends.append(match.start())
        starts.append(match.end())
    ends.append(len(document))
    return starts, ends


class _CharFinder:
    """``line.find(char, start)`` by bisection in the positions of each of the line's characters: the places of a
    line that markdown-it changed are looked for one character at a time, and a character it made (U+FFFD for NUL)
    is nowhere in the line, so a plain search read the rest of the line for each one."""

    def __init__(self, document: str, start: int, end: int) -> None:
        self.positions: dict[str, list[int]] = {}
        for offset, char in enumerate(document[start:end]):
            self.positions.setdefault(char, []).append(offset)

    def find(self, char: str, start: int) -> int:
        positions = self.positions.get(char, ())
        at = bisect.bisect_left(positions, start)
        return positions[at] if at < len(positions) else -1


def _content_places(content: str, document: str, lines: tuple[array, array], first_line: int,
                    cursors: dict[int, int] | None, finders: dict[int, _CharFinder]) -> tuple[array, array]:
    """Where each character of an inline token's ``content`` lies in the document, as (starts, ends), -1 for
    nowhere: markdown-it gives block tokens line ranges but no character offsets, and takes the block prefixes
    (``> ``, a list item's indent) and the paragraph's outer whitespace off each line. A line break maps to the
    line's break; a character markdown-it made (a tab's spaces, U+FFFD for NUL) maps nowhere. ``cursors``: for
    table cells, several on a line, each found after the one before (``finders``: their lines' characters)."""
    line_starts, line_ends = lines
    count = len(line_starts)
    starts, ends = array("q"), array("q")
    for number, part in enumerate(content.split("\n")):
        line = first_line + number
        if number:  # the break before this part
            known = 0 < line < count
            starts.append(line_ends[line - 1] if known else -1)
            ends.append(line_starts[line] if known else -1)
        if line >= count:
            starts.extend(array("q", [-1]) * len(part))
            ends.extend(array("q", [-1]) * len(part))
            continue
        line_start, line_end = line_starts[line], line_ends[line]
        at = -1
        if cursors is None:  # a paragraph's line: its content is the line's end, less trailing whitespace
            text = document[line_start:line_end]
            guess = len(text.rstrip()) - len(part.rstrip())
            if guess >= 0 and text.startswith(part, guess):
                at = guess
        cursor = cursors.get(line, 0) if cursors is not None else 0
        if at < 0:
            found = document.find(part, line_start + cursor, line_end)
            at = found - line_start if found >= 0 else -1
        if at >= 0:
            starts.extend(range(line_start + at, line_start + at + len(part)))
            ends.extend(range(line_start + at + 1, line_start + at + len(part) + 1))
            cursor = at + len(part)
        else:  # characters markdown-it changed (an escaped pipe in a cell, a tab): each found in order, or not
            finder = finders.get(line)
            if finder is None:
                finder = finders[line] = _CharFinder(document, line_start, line_end)
            for char in part:
                found = finder.find(char, cursor)
                starts.append(-1 if found < 0 else line_start + found)
                ends.append(-1 if found < 0 else line_start + found + 1)
                cursor = cursor if found < 0 else found + 1
        if cursors is not None:
            cursors[line] = cursor
    return starts, ends
