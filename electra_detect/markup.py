"""The prose of a document, with markup taken out: Markdown, LaTeX or plain text as :class:`ProseBlock` s, each
a paragraph-like unit whose every offset maps back to the document exactly.

    for block in prose_blocks(document, "markdown"):
        for word in check(block.text):                       # offsets into block.text
            if block.is_prose(word.start, word.end):           # not on code, math or a URL's stand-in
                start, end = block.span(word.start, word.end)  # offsets into the document

Prose is checked; code blocks and inline code, URLs (link targets, autolinks, bare URLs), math, HTML, commands
and their non-prose arguments, tables' syntax and front matter are not (docs/markup.md lists each markup's
rules). Where dropping a piece would break its sentence (inline code, math, a URL, a citation) a neutral word,
:data:`STAND_IN`, takes its place; a flag that overlaps a stand-in is the markup's, not the writer's, and is dropped.
Line breaks inside a paragraph read as spaces (every line break ends a sentence for the checker).

Light imports only: markdown-it-py and pylatexenc load when a document of theirs is first read.
"""

from __future__ import annotations

import bisect
import functools
import os
import re
import threading
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from electra_detect.errors import MarkupError  # defined with the other user errors; importable from here too

MARKUPS = ("text", "markdown", "latex")
# What code, math, URLs and citations read as: of ten stand-ins tried in 22 sentence frames with the shipped model
# ("X", "1", "Foo", "it", "this", "code", "something", ...), "X" left its neighbours' scores lowest (mean top
# score 0.094 against 0.237 for "it") and no neighbour flagged.
STAND_IN = "X"
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx", ".mkd", ".mdown"})
LATEX_SUFFIXES = frozenset({".tex", ".latex", ".ltx"})
# LSP languageIds (VS Code's, and those Neovim and Helix send) of each markup; any other id is plain text.
MARKDOWN_LANGUAGE_IDS = frozenset({"markdown", "mdx", "quarto", "rmd", "rmarkdown"})
LATEX_LANGUAGE_IDS = frozenset({"latex", "tex", "plaintex", "context", "bibtex"})
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # markdown-it's own line splitting (its normalize step)
# The longest bare URL read as one: linkify-it is given at most this many characters at a time (browsers and the
# sitemap protocol stop at 2,048); a longer run of non-space characters is read in pieces of this size.
URL_SCAN = 2048
_URL_MARKS = ("://", "www.", "@")
_SURROGATE = re.compile("[\ud800-\udfff]")
_NON_SPACE = re.compile(r"\S+")


@dataclass(frozen=True)
class ProseBlock:
    """One paragraph-like unit of prose: ``text`` as the checker reads it, ``start`` and ``end`` its extent in the
    document, and how each piece of ``text`` maps back (``segments``: (text start, text end, document start,
    document end, whether the piece is the document's own characters))."""

    text: str
    start: int
    end: int
    segments: tuple[tuple[int, int, int, int, bool], ...] = field(repr=False, compare=False)
    _starts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_starts", tuple(s[0] for s in self.segments))

    def _segment(self, offset: int) -> tuple[int, int, int, int, bool]:
        return self.segments[max(0, bisect.bisect_right(self._starts, offset) - 1)]

    def to_original(self, offset: int) -> int:
        """The document offset of ``text`` offset ``offset`` (0 to ``len(text)``); inside a stand-in, where the
        markup it stands for begins; at the end of ``text``, the end of the block's last piece."""
        if not 0 <= offset <= len(self.text):
            raise ValueError(f"offset {offset} is outside the block's text (0..{len(self.text)})")
        if offset == len(self.text):
            return self.segments[-1][3]
        text_start, _text_end, doc_start, _doc_end, own = self._segment(offset)
        return doc_start + (offset - text_start) if own else doc_start

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The document's [start, end) of ``text[start:end]``; a span that touches a stand-in covers all of what it
        stands for."""
        if not 0 <= start <= end <= len(self.text):
            raise ValueError(f"span [{start}, {end}) is outside the block's text (0..{len(self.text)})")
        first = self.to_original(start)
        if end == start:
            return first, first
        text_start, _text_end, doc_start, doc_end, own = self._segment(end - 1)
        return first, doc_start + (end - text_start) if own else doc_end

    def place(self, word: dict) -> dict | None:
        """A flagged word's JSON object with its offsets (and its suggestions') moved from ``text`` into the document;
        None when it lies on a stand-in (code, math, a URL: not the writer's prose). Every front places flags so."""
        if not self.is_prose(word["start"], word["end"]):
            return None
        word["start"], word["end"] = self.span(word["start"], word["end"])
        for suggestion in word.get("suggestions") or ():
            suggestion["start"], suggestion["end"] = self.span(suggestion["start"], suggestion["end"])
        return word

    def is_prose(self, start: int, end: int) -> bool:
        """False when ``text[start:end]`` overlaps a stand-in (code, math, a URL, a line break read as a space):
        a flag there is the markup's, not the writer's. An empty span is prose unless it lies inside a stand-in."""
        if end <= start:
            text_start, text_end, _doc_start, _doc_end, own = self._segment(start)
            return own or not text_start < start < text_end
        at = max(0, bisect.bisect_right(self._starts, start) - 1)
        for text_start, text_end, _doc_start, _doc_end, own in self.segments[at:]:
            if text_start >= end:
                break
            if not own and text_end > start:
                return False
        return True


def markup_for_path(path: str | os.PathLike[str]) -> str:
    """The markup a file's extension names: Markdown (.md, .markdown, .mdx, ...), LaTeX (.tex, .latex, .ltx),
    else plain text."""
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    return "markdown" if suffix in MARKDOWN_SUFFIXES else "latex" if suffix in LATEX_SUFFIXES else "text"


def markup_for_language_id(language_id: str) -> str:
    """The markup of an LSP ``languageId``: markdown, latex (also tex, plaintex, ...), else plain text."""
    name = (language_id or "").strip().lower()
    return "markdown" if name in MARKDOWN_LANGUAGE_IDS else "latex" if name in LATEX_LANGUAGE_IDS else "text"


def check_markup(markup: str) -> str:
    """``markup`` when it is one of :data:`MARKUPS`, else a :class:`MarkupError`."""
    if markup not in MARKUPS:
        raise MarkupError(f"unknown markup {markup!r}; expected one of {', '.join(MARKUPS)}")
    return markup


def prose_blocks(document: str, markup: str) -> list[ProseBlock]:
    """The prose blocks of ``document`` read as ``markup`` (one of :data:`MARKUPS`), in document order. ``text``:
    paragraphs split at blank lines; ``markdown``: paragraphs, headings, list items' paragraphs and table cells;
    ``latex``: paragraphs, headings, captions, footnotes, list items and table cells."""
    check_markup(markup)
    if not isinstance(document, str):
        raise MarkupError(f"a document is text, not {type(document).__name__}")
    surrogate = None if document.isascii() else _SURROGATE.search(document)
    if surrogate:  # bytes that were not UTF-8, carried as surrogates (a command line's argument, a JSON escape)
        raise MarkupError(f"the document is not valid Unicode: a lone surrogate at character {surrogate.start()} "
                          f"(bytes that are not UTF-8?)")
    writer = _Writer(document, find_urls=markup != "text")
    if markup == "text":
        _text(document, writer)
    elif markup == "markdown":
        _markdown(document, writer)
    else:
        _latex(document, writer)
    return sorted(writer.blocks, key=lambda b: (b.start, b.end))


# -- building blocks ---------------------------------------------------------------------------------------------

@dataclass
class _Piece:
    text: str
    start: int  # document offsets
    end: int
    own: bool  # text is document[start:end]


class _Writer:
    """Collects a block's pieces (the document's own characters, or a stand-in for a span of it) and closes
    blocks at breaks; a block holding no letter or digit of its own (only stand-ins, punctuation) is dropped."""

    def __init__(self, document: str, find_urls: bool) -> None:
        self.document, self.find_urls = document, find_urls
        self.linkify: Any = None  # linkify-it's matcher, made when a block first holds something like a URL
        self.blocks: list[ProseBlock] = []
        self.pieces: list[_Piece] = []

    def prose(self, start: int, end: int) -> None:
        """``document[start:end]`` as prose; its line breaks read as spaces."""
        at = start
        for match in _LINE_BREAK.finditer(self.document, start, end):
            if match.start() > at:
                self.pieces.append(_Piece(self.document[at:match.start()], at, match.start(), True))
            self.stand_in(" ", match.start(), match.end())
            at = match.end()
        if end > at:
            self.pieces.append(_Piece(self.document[at:end], at, end, True))

    def stand_in(self, text: str, start: int, end: int) -> None:
        """``text`` read in place of ``document[start:end]`` (markup the checker must not see)."""
        self.pieces.append(_Piece(text, start, end, False))

    def side(self, fill: Any) -> None:
        """A block of its own inside the current one (a footnote, a caption): ``fill()`` writes it."""
        pieces, self.pieces = self.pieces, []
        fill()
        self.close()
        self.pieces = pieces

    def close(self) -> None:
        """End the current block here."""
        pieces, self.pieces = self.pieces, []
        if self.find_urls:
            pieces = _urls_stood_in(pieces, self)
        pieces = _trimmed(pieces)
        if not any(p.own and any(ch.isalnum() for ch in p.text) for p in pieces):
            return
        texts: list[str] = []
        segments: list[tuple[int, int, int, int, bool]] = []
        at = 0
        for piece in pieces:  # the document's own pieces that touch are one segment; the text is joined once
            size = len(piece.text)
            last = segments[-1] if segments else None
            if last is not None and last[4] and piece.own and last[3] == piece.start:
                segments[-1] = (last[0], last[1] + size, last[2], piece.end, True)
            else:
                segments.append((at, at + size, piece.start, piece.end, piece.own))
            texts.append(piece.text)
            at += size
        self.blocks.append(ProseBlock("".join(texts), segments[0][2], segments[-1][3], tuple(segments)))


def _trimmed(pieces: list[_Piece]) -> list[_Piece]:
    """The pieces without the whitespace at either end of the block, and without empty pieces."""
    pieces = [p for p in pieces if p.text]
    first = next((i for i, p in enumerate(pieces) if p.text.strip()), len(pieces))
    last = next((i for i in range(len(pieces) - 1, first - 1, -1) if pieces[i].text.strip()), first - 1)
    pieces = pieces[first:last + 1]
    if pieces and pieces[0].own:
        first_piece = pieces[0]
        cut = len(first_piece.text) - len(first_piece.text.lstrip())
        pieces[0] = _Piece(first_piece.text[cut:], first_piece.start + cut, first_piece.end, True)
    if pieces and pieces[-1].own:
        last_piece = pieces[-1]
        cut = len(last_piece.text) - len(last_piece.text.rstrip())
        pieces[-1] = _Piece(last_piece.text[:len(last_piece.text) - cut], last_piece.start, last_piece.end - cut, True)
    return pieces


def _urls_stood_in(pieces: list[_Piece], writer: _Writer) -> list[_Piece]:
    """Bare URLs (with a scheme, or starting www.) and e-mail addresses in the prose replaced by a stand-in; a
    name with a dot alone (config.py, left.so) stays prose. linkify-it reads each run of non-space characters that
    could hold one (no URL holds a space), :data:`URL_SCAN` characters at a time: it rescans the rest of its text
    after every match, so one long text cost the square of its length."""
    text = "".join(p.text for p in pieces)
    if not any(mark in text for mark in _URL_MARKS):
        return pieces
    if writer.linkify is None:  # one per document: a LinkifyIt keeps state between calls, so no two threads share one
        from linkify_it import LinkifyIt

        writer.linkify = LinkifyIt()
    found: list[tuple[int, int]] = []
    for run in _NON_SPACE.finditer(text):
        for low in range(run.start(), run.end(), URL_SCAN):
            high = min(low + URL_SCAN, run.end())
            chunk = text[low:high]
            if any(mark in chunk for mark in _URL_MARKS):
                found += [(low + m.index, low + m.last_index) for m in writer.linkify.match(chunk) or ()
                          if m.schema or m.raw.lower().startswith("www.")]
    if not found:
        return pieces
    cuts = sorted({at for match in found for at in match})
    parts: list[tuple[int, int, _Piece]] = []  # pieces of one's own text cut where a URL starts or ends
    at = 0
    for piece in pieces:
        start, end = at, at + len(piece.text)
        at = end
        if not piece.own:
            parts.append((start, end, piece))
            continue
        base = start  # text offset of the piece's first character
        inside = cuts[bisect.bisect_right(cuts, start):bisect.bisect_left(cuts, end)]
        for cut in [*inside, end]:
            low, high = start - base, cut - base
            parts.append((start, cut, _Piece(piece.text[low:high], piece.start + low, piece.start + high, True)))
            start = cut
    out: list[_Piece] = []
    current: list[int] | None = None  # [URL number, document start, document end] of the stand-in being made
    url = 0  # the first URL that ends after the part before: parts and URLs both run in text order
    for start, end, piece in parts:
        while url < len(found) and found[url][1] <= start:
            url += 1
        hit = url if url < len(found) and found[url][0] < end and start < found[url][1] else None
        if current is not None and hit != current[0]:
            out.append(_Piece(STAND_IN, current[1], current[2], False))
            current = None
        if hit is None:
            out.append(piece)
        elif current is None:
            current = [hit, piece.start, piece.end]
        else:
            current[2] = piece.end
    if current is not None:
        out.append(_Piece(STAND_IN, current[1], current[2], False))
    return out


# -- plain text --------------------------------------------------------------------------------------------------

_BLANK_LINES = re.compile(r"(?:\r\n|\r|\n)(?:[ \t\f\v]*(?:\r\n|\r|\n))+")


def _text(document: str, writer: _Writer) -> None:
    """Paragraphs: runs of lines between blank lines."""
    at = 0
    for match in _BLANK_LINES.finditer(document):
        writer.prose(at, match.start())
        writer.close()
        at = match.end()
    writer.prose(at, len(document))
    writer.close()


# -- Markdown ----------------------------------------------------------------------------------------------------

_PROSE_PARENTS = frozenset({"paragraph_open", "heading_open", "th_open", "td_open"})
_PROSE, _DROPPED, _STOOD_IN = 0, 1, 2
# How deep block quotes and lists may nest: markdown-it's guard against recursion at its default preset's 100
# (CommonMark's preset stops at 20 and skips what lies deeper without a word); deeper is a MarkupError.
MAX_MARKDOWN_NESTING = 100
# Inline, CommonMark's 20 stays: every "[" costs markdown-it work in proportion (each unclosed one reads ahead that
# many nested labels), and an inline mark past it is read as text, not skipped.
_INLINE_NESTING = 20
_SCHEME_CHAR = re.compile(r"[a-z0-9.+-]", re.IGNORECASE)  # markdown-it's linkify rule: a URL scheme's characters
_SPACE = re.compile(r"\s")
_EQUATION_LABEL = re.compile(r"\s*?\(([^)$\r\n]+?)\)")  # texmath's "\[...\] (label)"


def _markdown_parser() -> Any:
    """CommonMark with GFM tables and strikethrough, bare-URL links, YAML/TOML front matter, and math ($...$,
    $$...$$, \\(...\\), \\[...\\], amsmath environments); inline parsing is run by :func:`_inline_marks`. Where a
    plugin's rule looked for its closing mark to the end of the document at every opening one (bare URLs, \\(...\\),
    \\[...\\], $$ blocks, amsmath environments: the square of the document's length), a rule of this module reads
    the same syntax in linear time."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.front_matter import front_matter_plugin

    md = MarkdownIt("commonmark", {"linkify": True, "maxNesting": MAX_MARKDOWN_NESTING})
    md.enable(["table", "strikethrough", "linkify"])
    md.use(front_matter_plugin).use(dollarmath_plugin, double_inline=True)  # its inline $...$ rule is linear
    md.block.ruler.at("math_block", _dollar_math_block)
    md.block.ruler.before("blockquote", "amsmath", _amsmath_block,
                          {"alt": ["paragraph", "reference", "blockquote", "list", "footnote_def"]})
    md.inline.ruler.before("escape", "math_inline_brackets", _bracket_math_inline)
    md.block.ruler.before("fence", "math_block_brackets", _bracket_math_block)
    md.inline.ruler.at("linkify", _linkify)
    md.core.ruler.disable("inline")  # each inline token is parsed by _inline_marks, which records positions
    md.inline.ruler2.disable("fragments_join")  # keeps the emphasis delimiters' tokens apart, to read which matched
    _install_nesting_check(md)
    return md


def _markdown(document: str, writer: _Writer) -> None:
    md = _markdown_parser()
    _install_recording_tokenizer(md)
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
        marks, stand_ins = _inline_marks(md, token.content, env)
        _write_inline(token.content, places, marks, stand_ins, writer)
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
    for match in _LINE_BREAK.finditer(document):
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


def _install_recording_tokenizer(md: Any) -> None:
    """Make ``md``'s inline tokenizer record, on a recording state (:func:`_recording_state`), where each rule
    matched. It is markdown-it-py's ``ParserInline.tokenize`` loop (the same rules in the same order) plus the
    records: the library gives inline tokens no source positions."""
    def tokenize(state: Any) -> None:
        recording = getattr(state, "recording", False)
        rules = md.inline.ruler.getRules("")
        end = state.posMax
        max_nesting = md.options["maxNesting"]
        if recording:
            state.calls.append((state.pos, end))
        while state.pos < end:
            pos, ok = state.pos, False
            if state.level < max_nesting:
                for rule in rules:
                    count = len(state.tokens)
                    pending = len(state.pending) if recording else 0  # its length: a reference would copy it
                    calls = len(state.calls) if recording else 0
                    ok = rule(state, False)
                    if ok:
                        if state.pos <= pos:
                            raise RuntimeError("inline rule didn't increment state.pos")
                        if recording:
                            state.record(pos, pending, count, calls)
                        break
            if ok:
                if state.pos >= end:
                    break
                continue
            state.append_pending(state.src[state.pos])  # amortised O(1); `pending +=` copies all of it
            state.pos += 1
        if state.pending:
            state.pushPending()

    md.inline.tokenize = tokenize


@dataclass
class _Match:
    """Where one inline rule matched and made tokens: [start, end) of the content, the length of the text pending
    before it, the tokens it made (each with its type and content then: post-processing changes them), the flushed
    pending text's token, and the span of a link's label (its nested tokenize call)."""

    start: int
    end: int
    pending: int
    made: list[tuple[Any, str, str]]
    flushed: Any
    label: tuple[int, int] | None


@functools.cache
def _recording_state() -> type:
    from markdown_it.rules_inline import StateInline

    class RecordingState(StateInline):
        """An inline state that keeps where each rule matched and which tokens were flushed pending text."""

        recording = True

        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.flushed: set[int] = set()
            self.calls: list[tuple[int, int]] = []  # tokenize calls: (pos, posMax); a link's label is one
            self.matches: list[_Match] = []
            self.closings: dict[str, tuple[int, int]] = {}  # :func:`_find_closing`'s memory

        def pushPending(self) -> Any:  # noqa: N802 - markdown-it's name
            token = super().pushPending()
            self.flushed.add(id(token))
            return token

        def record(self, start: int, pending: int, count: int, calls: int) -> None:
            made = [(t, t.type, t.content) for t in self.tokens[count:] if id(t) not in self.flushed]
            if not made:
                return  # plain text (the text rule, a backtick run that closed nothing): prose, nothing to keep
            flushed = next((t for t in self.tokens[count:] if id(t) in self.flushed), None)
            label = self.calls[calls] if len(self.calls) > calls else None
            self.matches.append(_Match(start, self.pos, pending, made, flushed, label))

    return RecordingState


def _find_closing(memory: dict[str, tuple[int, int]], text: str, closing: str, start: int) -> int:
    """``text.find(closing, start)``, remembering the last answer: a search from a later start that the answer
    still covers (no ``closing`` between the two starts) is not made again, so openers that are never closed cost
    one scan of the text between them, not one scan each to the end."""
    known = memory.get(closing)
    if known is not None and known[0] <= start and (known[1] < 0 or known[1] >= start):
        return known[1]
    found = text.find(closing, start)
    memory[closing] = (start, found)
    return found


def _closings(state: Any) -> dict[str, tuple[int, int]]:
    memory = getattr(state, "closings", None)
    if memory is None:  # a block state, or another tokenizer's inline state
        memory = state.closings = {}
    return memory


def _linkify(state: Any, silent: bool) -> bool:
    """markdown-it's ``linkify`` rule (a bare URL with a scheme, at its ``://``), reading only the scheme's run of
    the pending text and the URL's run of non-space characters (at most :data:`URL_SCAN`): the library's rule
    searched all the pending text and copied all the rest of the paragraph at every ``://``."""
    from markdown_it.rules_inline.linkify import SCHEME_RE

    if not state.md.options.linkify or state.linkLevel > 0:
        return False
    if not state.md.linkify:
        raise ModuleNotFoundError("Linkify enabled but not installed.")
    pos, src = state.pos, state.src
    if pos + 3 > state.posMax or src[pos] != ":" or src[pos + 1] != "/" or src[pos + 2] != "/":
        return False
    pending = state.pending
    run = len(pending)
    while run and _SCHEME_CHAR.match(pending, run - 1):
        run -= 1
    match = SCHEME_RE.search(pending, max(0, run - 1))  # the library's pattern, on the one run it can end with
    if not match:
        return False
    proto = match.group(1)
    space = _SPACE.search(src, pos, pos + URL_SCAN)
    link = state.md.linkify.match_at_start(src[pos - len(proto):space.start() if space else pos + URL_SCAN])
    if not link:
        return False
    url: str = link.url.rstrip("*")  # disallow '*' at the end of the link (conflicts with emphasis)
    full_url = state.md.normalizeLink(url)
    if not state.md.validateLink(full_url):
        return False
    if not silent:
        state.pending = state.pending[:-len(proto)]
        token = state.push("link_open", "a", 1)
        token.attrs = {"href": full_url}
        token.markup = "linkify"
        token.info = "auto"
        token = state.push("text", "", 0)
        token.content = state.md.normalizeLinkText(url)
        token = state.push("link_close", "a", -1)
        token.markup = "linkify"
        token.info = "auto"
    state.pos += len(url) - len(proto)
    return True


def _bracket_math_inline(state: Any, silent: bool) -> bool:
    """mdit-py-plugins' texmath ``\\(...\\)`` (at least one character inside, the first ``\\)`` closes), with the
    closing looked for once between openers (:func:`_find_closing`); the plugin's regex read the rest of the
    paragraph from every unclosed ``\\(``."""
    src, pos = state.src, state.pos
    if not src.startswith("\\(", pos):
        return False
    close = _find_closing(_closings(state), src, "\\)", pos + 3)
    if close < 0:
        return False
    if not silent:
        token = state.push("math_inline", "math", 0)
        token.content = src[pos + 2:close]
        token.markup = "\\("
    state.pos = close + 2
    return True


def _bracket_math_block(state: Any, start: int, end: int, silent: bool) -> bool:
    """mdit-py-plugins' texmath ``\\[...\\]`` display math (with an optional ``(label)`` after it), in linear time:
    the closing ``\\]`` is looked for once between openers (:func:`_find_closing`) and its line found by bisection
    (the plugin read the rest of the document from every opening line)."""
    src = state.src
    begin = state.bMarks[start] + state.tShift[start]
    if not src.startswith("\\[", begin):
        return False
    close = _find_closing(_closings(state), src, "\\]", begin + 3)  # at least one character inside
    if close < 0:
        return False
    name, content, info, stop = "math_block", src[begin + 2:close], None, close + 2
    # the labelled form: nothing inside opens or closes another, and "(label)" follows
    if src.find("\\]", begin + 2, begin + 4) != begin + 2 and src.find("\\[", begin + 2, close) < 0:
        label = _EQUATION_LABEL.match(src, close + 2)
        if label:
            name, info, stop = "math_block_eqno", label.group(1), label.end()
    last = stop - 1  # the match's last character: the block ends on its line, within this container
    line = bisect.bisect_left(state.eMarks, last, start, end)
    if line >= end or last < state.bMarks[line]:
        return False
    if not silent:
        token = state.push(name, "math", 0)
        token.block = True
        token.content = content
        token.info = content if info is None else info
        token.markup = "\\["
    state.line = line + 1
    return True


def _amsmath_block(state: Any, start: int, end: int, silent: bool) -> bool:
    """mdit-py-plugins' amsmath block (``\\begin{equation}`` ... a line ending ``\\end{equation}``), remembering
    where a search for a closing line failed: each line that opens an environment is also a paragraph's end, so the
    plugin read every following line at each such line when none closed it."""
    from mdit_py_plugins.amsmath import RE_OPEN
    from mdit_py_plugins.utils import is_code_block

    if is_code_block(state, start):
        return False
    first_start = state.bMarks[start] + state.tShift[start]
    first_end = state.eMarks[start]
    opening = re.match(RE_OPEN, state.src[first_start:first_end])
    if not opening:
        return False
    environment, numbered = opening.group(1), opening.group(2)
    closing = rf"\end{{{environment}{numbered}}}"
    failed = _closings(state)
    key = f"amsmath {closing} {end}"
    if failed.get(key, (end, -1))[0] <= start:  # no line from an earlier start to `end` closes it
        return False
    line = start - 1
    while True:
        line += 1
        if line >= end:
            failed[key] = (start, -1)
            return False
        line_start = state.bMarks[line] + state.tShift[line]
        if line_start < first_end and state.sCount[line] < state.blkIndent:
            return False
        if state.src[line_start:state.eMarks[line]].rstrip().endswith(closing):
            break
    state.line = line + 1
    if not silent:
        token = state.push("amsmath", "math", 0)
        token.block = True
        token.content = state.getLines(start, state.line, state.sCount[start], False)
        token.meta = {"environment": environment, "numbered": numbered}
        token.map = [start, line]
    return True


def _dollar_math_block(state: Any, start: int, end: int, silent: bool) -> bool:
    """mdit-py-plugins' dollarmath ``$$`` block (labels and blank lines allowed inside), remembering where a search
    for its closing line reached the end of its container without one: a later ``$$`` line would too, and the
    plugin read those lines again for each (a ``$$`` line after every heading cost the square of the document)."""
    from mdit_py_plugins.dollarmath.index import DOLLAR_EQNO_REV, _math_block_content
    from mdit_py_plugins.utils import is_code_block

    if is_code_block(state, start):
        return False
    src = state.src
    first, stop = state.bMarks[start] + state.tShift[start], state.eMarks[start]
    if first + 2 > stop or not src.startswith("$$", first):
        return False
    line, label, closed = start, None, False
    text = src[first:stop]
    if len(text.strip()) > 3:  # closed on its own line, or not at all
        if text.strip().endswith("$$"):
            closed, stop = True, stop - 2 - (len(text) - len(text.strip()))
        elif equation := DOLLAR_EQNO_REV.match(text[::-1]):
            closed, label, stop = True, equation.group(1)[::-1], stop - equation.end()
        elif "$$" in text[2:]:
            return False
    if not closed:
        memory, key = _closings(state), f"$$ {end}"
        searched = memory.get(key)
        if searched is not None and searched[0] < start < searched[1]:
            return False  # an earlier search went past this line to the end without a closing line
        while True:
            line += 1
            if line >= end:
                break
            line_start, stop = state.bMarks[line] + state.tShift[line], state.eMarks[line]
            text = src[line_start:stop]
            if text.strip().endswith("$$"):
                closed, stop = True, stop - 2 - (len(text) - len(text.strip()))
                break
            if equation := DOLLAR_EQNO_REV.match(text[::-1]):
                closed, label, stop = True, equation.group(1)[::-1], stop - equation.end()
                break
        if not closed:
            memory[key] = (start, line)
            return False
    state.line = line + 1
    token = state.push("math_block_label" if label else "math_block", "math", 0)
    token.block = True
    token.content = _math_block_content(state, start, first, line, stop)
    token.markup = "$$"
    token.map = [start, state.line]
    if label:
        token.info = re.sub(r"\s+", "-", label)
    return True


def _inline_marks(md: Any, content: str, env: dict[str, Any]) -> tuple[list[int], dict[int, str]]:
    """Parse ``content`` inline and say what each character is: prose, dropped syntax (emphasis marks, a link's
    brackets and target, HTML, an escape's backslash) or part of a stand-in (inline code, math, an autolink or
    bare URL, an image, an entity). Returns (marks, stand_ins): ``marks[i]`` is ``_PROSE``, ``_DROPPED`` or
    ``_STOOD_IN + n`` for the n-th stand-in, whose text is ``stand_ins[n]``."""
    state = _recording_state()(content, md, env, [])
    md.inline.tokenize(state)
    for rule in md.inline.ruler2.getRules(""):  # emphasis and strikethrough pair their marks (fragments_join is off)
        rule(state)
    marks = [_PROSE] * len(content)
    stand_ins: dict[int, str] = {}

    def mark(start: int, end: int, value: int) -> None:
        marks[start:end] = [value] * (end - start)

    def stand_in(start: int, end: int, text: str) -> None:
        stand_ins[len(stand_ins)] = text
        mark(start, end, _STOOD_IN + len(stand_ins) - 1)

    for match in state.matches:
        start, end = match.start, match.end
        first, first_type, _content = match.made[0]
        types = {made_type for _token, made_type, _content in match.made}
        if types <= {"softbreak", "hardbreak"}:
            if content[start] == "\\":  # a backslash hard break: the backslash is syntax, the break reads as a space
                marks[start] = _DROPPED
        elif first_type == "text_special" and first.info == "escape":
            if first.content != first.markup:
                marks[start] = _DROPPED
        elif first_type == "text_special":  # an entity: its character, not the checker's to judge
            stand_in(start, end, first.content if first.content.strip() else " ")
        elif first_type == "link_open" and first.markup in ("linkify", "autolink"):
            if first.markup == "linkify":  # its scheme was read as pending text before the rule saw "://"
                start -= match.pending - (len(match.flushed.content) if match.flushed is not None else 0)
            stand_in(start, end, STAND_IN)
        elif first_type == "link_open":  # [label](target): the label is prose, the rest syntax
            low, high = match.label or (end, end)
            mark(start, low, _DROPPED)
            mark(high, end, _DROPPED)
        elif types == {"html_inline"}:
            mark(start, end, _DROPPED)
        elif types == {"text"}:  # emphasis or strikethrough marks: syntax where they paired, text where not
            at = start
            for token, _type, made_content in match.made:
                width = min(len(made_content), end - at)
                if token.type != "text" or not token.content:
                    mark(at, at + width, _DROPPED)
                at += width
        else:  # code, math, an image, whatever a plugin made
            stand_in(start, end, STAND_IN)
    return marks, stand_ins


def _write_inline(content: str, places: tuple[array, array], marks: list[int], stand_ins: dict[int, str],
                  writer: _Writer) -> None:
    """Hand ``content``'s pieces to ``writer``: prose runs as the document's characters (a line break as a space),
    each stand-in once, over the document span its characters cover."""
    starts, ends = places
    index, size, last = 0, len(content), 0
    while index < size:
        mark, place = marks[index], starts[index]
        if mark == _DROPPED:
            index += 1
            continue
        if mark >= _STOOD_IN:
            stop = index
            while stop < size and marks[stop] == mark:
                stop += 1
            first = next((i for i in range(index, stop) if starts[i] >= 0), -1)
            if first < 0:
                start = end = last
            else:
                start, end = starts[first], ends[next(i for i in range(stop - 1, first - 1, -1) if starts[i] >= 0)]
            writer.stand_in(stand_ins[mark - _STOOD_IN], start, end)
            last, index = end, stop
            continue
        if place < 0 or content[index] == "\n":
            start, end = (place, ends[index]) if place >= 0 else (last, last)
            writer.stand_in(" " if content[index] == "\n" else content[index], start, end)
            last, index = end, index + 1
            continue
        stop = index + 1  # a run of prose characters in a row in the document
        while (stop < size and marks[stop] == _PROSE and starts[stop] >= 0 and content[stop] != "\n"
               and starts[stop] == ends[stop - 1]):
            stop += 1
        writer.prose(place, ends[stop - 1])
        last, index = ends[stop - 1], stop


# -- LaTeX -------------------------------------------------------------------------------------------------------

# Commands whose last braced argument is prose in the sentence around them.
_INLINE_PROSE = frozenset("""text emph textbf textit textsl textsc textrm textsf textup textmd textnormal underline
    uline mbox makebox fbox enquote foreignlanguage href hyperref textcolor colorbox""".split())
# Commands whose last braced argument is prose of its own: a block apart (headings also end the paragraph).
_HEADINGS = frozenset("part chapter section subsection subsubsection paragraph subparagraph".split())
_SIDE_PROSE = frozenset("footnote footnotetext caption captionof thanks marginpar title subtitle".split()) | _HEADINGS
# Commands that stand for a word in the sentence (a citation, a reference, a URL, code).
_STOOD_IN_MACROS = frozenset("""cite citep citet citealp citealt citeauthor citeyear citeyearpar citenum Citet Citep
    Citealt Citealp Citeauthor parencite textcite autocite footcite smartcite ref eqref autoref cref Cref pageref
    nameref vref Vref labelcref url nolinkurl path verb lstinline mintinline texttt code SI si num ang qty""".split())
# Commands that end the paragraph (a list item, a line break, a new paragraph).
_BREAK_MACROS = frozenset("item par \\ newline linebreak bibitem".split())
# Commands with no text of their own: dropped with their arguments.
_DROPPED_MACROS = frozenset("""label index vspace hspace noindent indent centering raggedright raggedleft maketitle
    tableofcontents listoffigures listoftables newpage clearpage cleardoublepage pagebreak nopagebreak bigskip medskip
    smallskip hline cline toprule midrule bottomrule cmidrule addlinespace documentclass usepackage RequirePackage
    newcommand renewcommand providecommand newenvironment renewenvironment def let gdef edef setlength addtolength
    setcounter addtocounter stepcounter addbibresource bibliography bibliographystyle printbibliography input include
    includegraphics author date affiliation address email keywords pagestyle thispagestyle appendix frontmatter
    mainmatter backmatter newtheorem DeclareMathOperator graphicspath hypersetup geometry small footnotesize large
    Large LARGE normalsize tiny scriptsize huge Huge bfseries itshape mdseries upshape slshape scshape rmfamily sffamily
    ttfamily normalfont em bf it sl sc tt rm sf phantom hphantom vphantom vfill hfill protect nocite FloatBarrier
    selectlanguage linespread onehalfspacing doublespacing singlespacing setcitestyle urlstyle definecolor color
    captionsetup lstset setminted newline nolinebreak""".split())
_MATH_ENVIRONMENTS = frozenset("""equation align gather multline flalign alignat eqnarray displaymath math split
    dmath dgroup subequations""".split())
_SKIPPED_ENVIRONMENTS = frozenset("""verbatim Verbatim BVerbatim lstlisting minted comment tikzpicture pgfpicture
    picture filecontents algorithmic algorithm thebibliography alltt code forest""".split())
_TABLE_ENVIRONMENTS = frozenset("tabular tabularx tabulary longtable supertabular array tblr".split())
# Verbatim-like bodies are blanked (same length) before parsing: pylatexenc would read their code as LaTeX.
_VERBATIM_BEGIN = re.compile(r"\\begin\{(verbatim|Verbatim|BVerbatim|lstlisting|minted|comment|alltt|filecontents)"
                             r"\*?\}")
_VERBATIM_ARGUMENT = re.compile(r"\{[^}\n]*\}|\[[^\]\n]*\]")
_NOT_LINE_BREAK = re.compile(r"[^\r\n]")
_VERB = re.compile(r"\\(?:verb|lstinline)(?![a-zA-Z])")
# How deep braces, environments, optional arguments and \(...\) may nest: pylatexenc's parser recurses about six
# Python frames a level, and Python stops at 1,000 (TeX itself allows 255 groups); deeper is a MarkupError.
MAX_LATEX_DEPTH = 100
_NESTING = re.compile(r"%[^\r\n]*|\\(?:verb|lstinline)(?![a-zA-Z])\s*(.).*?\1"  # a comment, a \verb: skipped
                      r"|\\(begin|end)(?![a-zA-Z@])(?:\s*\{[^{}]*\})?|\\[a-zA-Z@]+\*?\s*(\[)|\\([(\[])|\\([)\]])"
                      r"|\\[a-zA-Z@]+|\\.|([{}\]])", re.DOTALL)
_SPACES = re.compile(r"\s*")
_ENVIRONMENT_NAME = re.compile(r"\s*\{([\w* ._-]+)\}")  # pylatexenc's reading of \begin{name}
# Characters pylatexenc reads as a 'char' token wherever they are
_PLAIN_CHARS = re.compile(r"[^\s\\%{}$&~!'\-?`\[\]]+")
_BLANK_LINE = re.compile(r"(?:\r\n|\r|\n)[ \t]*(?:\r\n|\r|\n)\s*")
_SPECIAL_TEXT = {"~": " ", "``": "\u201c", "''": "\u201d", "--": "\u2013", "---": "\u2014", "!`": "\u00a1",
                 "?`": "\u00bf"}


@functools.cache
def _latex_context() -> Any:
    """pylatexenc's default commands, with the arguments of those it does not know that this layer reads."""
    from pylatexenc.latexwalker import get_default_latex_context_db
    from pylatexenc.macrospec import MacroSpec, VerbatimArgsParser

    specs = {"href": "{{", "hyperref": "[{", "caption": "[{", "captionof": "*{[{", "enquote": "*{",
             "foreignlanguage": "[{{", "paragraph": "*[{", "footnotetext": "[{", "subtitle": "{", "thanks": "{",
             "marginpar": "[{", "uline": "{", "fbox": "{", "makebox": "[[{", "textcolor": "[{{", "colorbox": "[{{",
             "parencite": "*[[{", "textcite": "*[[{", "autocite": "*[[{", "footcite": "*[[{", "smartcite": "*[[{",
             "pageref": "{", "nameref": "{", "vref": "{", "Vref": "{", "labelcref": "{", "nolinkurl": "{",
             "path": "{", "code": "{", "SI": "[{{", "si": "[{", "num": "[{", "ang": "[{", "qty": "[{{",
             "mintinline": "[{{", "index": "{", "addbibresource": "[{", "printbibliography": "[",
             "newtheorem": "*{[{[", "graphicspath": "{", "hypersetup": "{", "geometry": "{", "affiliation": "[{",
             "address": "{", "email": "{", "keywords": "{", "pagestyle": "{", "thispagestyle": "{",
             "addtocounter": "{{", "stepcounter": "{", "bibitem": "[{", "cmidrule": "[{", "cline": "{",
             "addlinespace": "[", "linespread": "{", "setcitestyle": "{", "urlstyle": "{", "definecolor": "{{{",
             "color": "[{", "captionsetup": "[{", "lstset": "{", "setminted": "[{", "phantom": "{", "hphantom": "{",
             "vphantom": "{", "nocite": "{", "bibliographystyle": "{", "let": "", "newpage": "", "gdef": ""}
    db = get_default_latex_context_db()
    db.add_context_category("electra-detect", prepend=True,
                            macros=[MacroSpec(name, spec) for name, spec in specs.items()]
                            + [MacroSpec("lstinline", args_parser=VerbatimArgsParser(verbatim_arg_type="verb-macro"))])
    return db


def _latex(document: str, writer: _Writer) -> None:
    parsed = _unclosed_verbs_renamed(_verbatim_blanked(document))
    _check_latex_depth(parsed)
    try:
        _in_a_thread_of_its_own(lambda: _read_latex(document, parsed, writer))
    except RecursionError:
        raise MarkupError("cannot read the LaTeX: it nests deeper than Python's recursion allows (braces, "
                          "environments or arguments inside one another); nest it less deeply") from None
    writer.close()


def _read_latex(document: str, parsed: str, writer: _Writer) -> None:
    from pylatexenc.latex2text import LatexNodes2Text

    try:
        nodes, _pos, _len = _walker()(parsed, latex_context=_latex_context(), tolerant_parsing=True).get_latex_nodes()
    except RecursionError:
        raise
    except Exception as exc:  # noqa: BLE001 - tolerant parsing forgives nearly all; what it cannot is a bad document
        raise MarkupError(f"cannot read the LaTeX: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") \
            from None
    _LatexReader(document, writer, LatexNodes2Text(strict_latex_spaces=True)).nodes(nodes)


def _in_a_thread_of_its_own(work: Callable[[], None]) -> None:
    """``work()`` on a new thread, its exception raised here: pylatexenc's reading recurses about eight Python frames
    a level of nesting, and a thread's recursion count starts at zero, so :data:`MAX_LATEX_DEPTH` levels are read
    however deep the caller's own stack is (a server's, a test runner's)."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - carried to the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="electra-detect-latex")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def _verbatim_blanked(document: str) -> str:
    """Each verbatim-like environment's body (after its arguments, to the first ``\\end`` of its name) blanked to
    spaces, line breaks kept. The closing is looked for once between openers (:func:`_find_closing`): the regex this
    replaces read to the end of the document from every ``\\begin{verbatim}`` that nothing closed."""
    out: list[str] = []
    memory: dict[str, tuple[int, int]] = {}
    at = search = 0
    while opening := _VERBATIM_BEGIN.search(document, search):
        name = opening.group(1)
        arguments = [opening.end()]  # as many as follow; fewer only when the last ones hold the only \end
        while argument := _VERBATIM_ARGUMENT.match(document, arguments[-1]):
            arguments.append(argument.end())
        close = body = -1
        for body in reversed(arguments):
            ends = [found for found in (_find_closing(memory, document, f"\\end{{{name}}}", body),
                                        _find_closing(memory, document, f"\\end{{{name}*}}", body)) if found >= 0]
            if ends:
                close = min(ends)
                break
        if close < 0:
            search = opening.end()
            continue
        starred = document.startswith(f"\\end{{{name}*}}", close)
        out += [document[at:body], _NOT_LINE_BREAK.sub(" ", document[body:close])]
        at, search = close, close + len(name) + (7 if starred else 6)  # the \end{...} is kept, and read past
    return "".join(out) + document[at:] if out else document


def _unclosed_verbs_renamed(text: str) -> str:
    """Each \\verb (\\lstinline) with no closing delimiter renamed to an unknown command of the same length (a
    stand-in): pylatexenc's verbatim reader runs past the end of a document that ends in one (an editor's half-typed
    line). Whether its delimiter comes again is read from each character's last place, found once."""
    last: dict[str, int] = {}

    def renamed(match: re.Match[str]) -> str:
        delimiter = _SPACES.match(text, match.end()).end()  # pylatexenc's reading: the first character after spaces
        if delimiter < len(text):
            if not last:
                last.update((char, at) for at, char in enumerate(text))
            if last[text[delimiter]] > delimiter:
                return match.group(0)
        return "\\" + "q" * (len(match.group(0)) - 1)

    return _VERB.sub(renamed, text)


def _check_latex_depth(text: str) -> None:
    """A MarkupError when braces, environments, optional arguments or \\(...\\) nest deeper than
    :data:`MAX_LATEX_DEPTH`, counted in one pass before pylatexenc's recursive reading."""
    depth = brackets = 0
    for token in _NESTING.finditer(text):
        _verb, environment, bracket, math_open, math_close, brace = token.groups()
        if brace == "}" or math_close or environment == "end" or (brace == "]" and brackets):
            brackets -= brace == "]"
            depth = max(0, depth - 1)
        elif brace == "{" or math_open or environment == "begin" or bracket:
            brackets += bool(bracket)
            depth += 1
            if depth > MAX_LATEX_DEPTH:
                line = text.count("\n", 0, token.start()) + 1
                raise MarkupError(f"cannot read the LaTeX: it nests braces, environments or arguments more than "
                                  f"{MAX_LATEX_DEPTH} levels deep (line {line}); nest it less deeply")


@functools.cache
def _walker() -> type:
    from pylatexenc.latexwalker import LatexToken, LatexWalker

    class Walker(LatexWalker):
        """pylatexenc's walker with three of its costs made linear, its nodes unchanged:

        - a braced group read once at a place is not read again there: where a command's arguments run past the end
          of the document, tolerant parsing reads on from its name without them, so the groups it had read as
          arguments are read again, and each unclosed ``\\href{``, ``\\cite[`` or ``\\section[`` inside another
          doubled the work (18 of them, 162 bytes, took 22 s); comments before an argument are skipped in a loop
          (the library recursed once per comment);
        - a run of plain characters is one 'char' token, not one a character: the node loop appends each token's
          text to a string attribute, a copy of all of it each time, so a paragraph of plain prose cost its square;
        - ``\\begin``'s and ``\\end``'s name is matched where it is, not on a copy of the rest of the document."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._groups: dict[tuple[Any, ...], Any] = {}

        def get_latex_braced_group(self, pos: int, brace_type: Any = "{", parsing_state: Any = None) -> Any:
            if parsing_state is None:
                parsing_state = self.make_parsing_state()
            key = (pos, brace_type, parsing_state.in_math_mode, parsing_state.math_mode_delimiter,
                   id(parsing_state.latex_context))
            if key not in self._groups:
                self._groups[key] = super().get_latex_braced_group(pos, brace_type, parsing_state)
            return self._groups[key]

        def get_latex_expression(self, pos: int, strict_braces: Any = None, parsing_state: Any = None) -> Any:
            if parsing_state is None:
                parsing_state = self.make_parsing_state()
            while (token := self.get_token(pos, environments=False, parsing_state=parsing_state)).tok == "comment":
                pos = token.pos + token.len
            return super().get_latex_expression(pos, strict_braces=strict_braces, parsing_state=parsing_state)

        def get_token(self, pos: int, include_brace_chars: Any = None, environments: bool = True,
                      keep_inline_math: Any = None, parsing_state: Any = None, **kwargs: Any) -> Any:
            token = super().get_token(pos, include_brace_chars=include_brace_chars, environments=False,
                                      keep_inline_math=keep_inline_math, parsing_state=parsing_state, **kwargs)
            if token.tok == "macro" and environments and token.arg in ("begin", "end"):
                after = token.pos + 1 + len(token.arg)
                name = _ENVIRONMENT_NAME.match(self.s, after)
                if name is None:  # the library's tolerant reading: the command as text
                    return LatexToken(tok="char", arg="\\" + token.arg, pos=token.pos, len=after - token.pos,
                                      pre_space=token.pre_space)
                return LatexToken(tok=f"{token.arg}_environment", arg=name.group(1), pos=token.pos,
                                  len=name.end() - token.pos, pre_space=token.pre_space)
            # a run only where the node loop reads (an argument, read with environments=False, is one character)
            if (token.tok == "char" and token.arg in (token.arg[:1], "\n\n") and token.arg != "*" and environments
                    and not kwargs):
                brackets = {char for pair in include_brace_chars or () for char in pair}
                start = token.pos + len(token.arg)
                end = self._plain_run(start, brackets, parsing_state or self.make_parsing_state())
                if end > start:
                    return LatexToken(tok="char", arg=self.s[token.pos:end], pos=token.pos, len=end - token.pos,
                                      pre_space=token.pre_space)
            return token

        def _plain_run(self, end: int, brackets: set[str], parsing_state: Any) -> int:
            """Where the run from ``end`` stops of characters that the library reads one 'char' token at a time
            and the spaces and paragraph breaks between them (which it reads as 'char' tokens or their pre_space):
            after such a character, or after a paragraph break."""
            text, size = self.s, len(self.s)
            while end < size:
                at = _SPACES.match(text, end).end()
                if at < size and (plain := _PLAIN_CHARS.match(text, at)):
                    end = plain.end()
                elif at < size and (text[at] in "[]" and text[at] not in brackets or text[at] in "!'-?`"
                                    and parsing_state.latex_context.test_for_specials(text, at, parsing_state)
                                    is None):
                    end = at + 1
                else:
                    paragraph = text.rfind("\n\n", end, at)  # the spaces up to it are the run's; the rest the next
                    end = paragraph + 2 if paragraph >= 0 else end  # token's pre_space, as the library reads them
                    break
            return end

    return Walker


class _LatexReader:
    """Walks pylatexenc's nodes (each with its position in the document) into the writer."""

    def __init__(self, document: str, writer: _Writer, to_text: Any) -> None:
        self.document, self.writer, self.to_text = document, writer, to_text

    def nodes(self, nodes: Iterable[Any], in_table: bool = False) -> None:
        from pylatexenc import latexwalker as lw

        nodes = [n for n in nodes if n is not None]
        index = 0
        while index < len(nodes):
            node = nodes[index]
            index += 1
            end = node.pos + node.len
            if isinstance(node, lw.LatexCharsNode):
                at = node.pos
                for match in _BLANK_LINE.finditer(self.document, node.pos, end):
                    self.writer.prose(at, match.start())
                    self.writer.close()
                    at = match.end()
                self.writer.prose(at, end)
            elif isinstance(node, lw.LatexCommentNode):
                continue
            elif isinstance(node, lw.LatexGroupNode):
                self.nodes(node.nodelist, in_table)
            elif isinstance(node, lw.LatexMathNode):
                self.writer.stand_in(STAND_IN, node.pos, end)
            elif isinstance(node, lw.LatexSpecialsNode):
                if node.specials_chars == "&":
                    self.writer.close()
                else:
                    text = _SPECIAL_TEXT.get(node.specials_chars)
                    self.writer.stand_in(self.to_text.nodelist_to_text([node]) if text is None else text,
                                         node.pos, end)
            elif isinstance(node, lw.LatexEnvironmentNode):
                self.environment(node, end)
            elif isinstance(node, lw.LatexMacroNode):
                index = self.macro(node, nodes, index, in_table)
            else:
                self.writer.stand_in(STAND_IN, node.pos, end)

    def environment(self, node: Any, end: int) -> None:
        name = node.environmentname.rstrip("*")
        if name in _MATH_ENVIRONMENTS:
            self.writer.stand_in(STAND_IN, node.pos, end)
            return
        self.writer.close()
        if name not in _SKIPPED_ENVIRONMENTS:
            self.nodes(node.nodelist, in_table=name in _TABLE_ENVIRONMENTS)
        self.writer.close()

    def macro(self, node: Any, nodes: list[Any], index: int, in_table: bool) -> int:
        """Write one command; returns the index of the next node (an unknown command takes the braced groups that
        follow it as its arguments). The space after a command's name is the node's: it is written back as prose,
        since the writer meant a space (``\\LaTeX is``)."""
        name, end = node.macroname, node.pos + node.len
        core = node.pos + len(self.document[node.pos:end].rstrip())
        args = node.nodeargd.argnlist if node.nodeargd is not None else []
        spec = getattr(node.nodeargd, "argspec", "") or ""
        if name in _INLINE_PROSE or name in _SIDE_PROSE:
            text = _last_braced(spec, args)
            if name in _HEADINGS:
                self.writer.close()
            if text is not None:
                if name in _SIDE_PROSE:
                    self.writer.side(lambda: self.nodes(_children(text), in_table))
                else:
                    self.nodes(_children(text), in_table)
        elif name in _STOOD_IN_MACROS:
            self.writer.stand_in(STAND_IN, node.pos, core)
        elif name in _BREAK_MACROS:
            self.writer.close()
        elif name in _DROPPED_MACROS:
            pass
        elif self.to_text.latex_context.get_macro_spec(name) is not None:  # a symbol, an accent: its character
            text = self.to_text.nodelist_to_text([node]).strip()
            if text:
                self.writer.stand_in(text, node.pos, core)
        elif any(a is not None for a in args):
            pass  # a command pylatexenc knows the arguments of, with no text (usepackage, newcommand, ...)
        else:  # a command unknown to both: it stands for a word; braced groups right after it are its arguments
            from pylatexenc.latexwalker import LatexGroupNode

            stop = core
            while index < len(nodes) and isinstance(nodes[index], LatexGroupNode) and nodes[index].pos == end:
                stop = end = core = nodes[index].pos + nodes[index].len
                index += 1
            self.writer.stand_in(STAND_IN, node.pos, stop)
        if core < end:
            self.writer.prose(core, end)
        return index


def _last_braced(spec: str, args: list[Any]) -> Any:
    """The last {...} argument of a command, or None."""
    for kind, arg in reversed(list(zip(spec, args, strict=False))):
        if kind == "{" and arg is not None:
            return arg
    return None


def _children(node: Any) -> list[Any]:
    from pylatexenc.latexwalker import LatexGroupNode

    return list(node.nodelist) if isinstance(node, LatexGroupNode) else [node]
