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
from collections.abc import Iterable
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
        merged: list[_Piece] = []
        for piece in pieces:
            last = merged[-1] if merged else None
            if last is not None and last.own and piece.own and last.end == piece.start:
                last.text, last.end = last.text + piece.text, piece.end
            else:
                merged.append(_Piece(piece.text, piece.start, piece.end, piece.own))
        segments, at = [], 0
        for piece in merged:
            segments.append((at, at + len(piece.text), piece.start, piece.end, piece.own))
            at += len(piece.text)
        self.blocks.append(ProseBlock("".join(p.text for p in merged), merged[0].start, merged[-1].end,
                                      tuple(segments)))


def _trimmed(pieces: list[_Piece]) -> list[_Piece]:
    """The pieces without the whitespace at either end of the block, and without empty pieces."""
    pieces = [p for p in pieces if p.text]
    while pieces and not pieces[0].text.strip():
        pieces.pop(0)
    while pieces and not pieces[-1].text.strip():
        pieces.pop()
    if pieces and pieces[0].own:
        first = pieces[0]
        cut = len(first.text) - len(first.text.lstrip())
        pieces[0] = _Piece(first.text[cut:], first.start + cut, first.end, True)
    if pieces and pieces[-1].own:
        last = pieces[-1]
        cut = len(last.text) - len(last.text.rstrip())
        pieces[-1] = _Piece(last.text[:len(last.text) - cut], last.start, last.end - cut, True)
    return pieces


def _urls_stood_in(pieces: list[_Piece], writer: _Writer) -> list[_Piece]:
    """Bare URLs (with a scheme, or starting www.) and e-mail addresses in the prose replaced by a stand-in; a
    name with a dot alone (config.py, left.so) stays prose."""
    text = "".join(p.text for p in pieces)
    if not any(mark in text for mark in ("://", "www.", "@")):
        return pieces
    if writer.linkify is None:  # one per document: a LinkifyIt keeps state between calls, so no two threads share one
        from linkify_it import LinkifyIt

        writer.linkify = LinkifyIt()
    found = [(m.index, m.last_index) for m in writer.linkify.match(text) or ()
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
        for cut in [c for c in cuts if start < c < end] + [end]:
            low, high = start - base, cut - base
            parts.append((start, cut, _Piece(piece.text[low:high], piece.start + low, piece.start + high, True)))
            start = cut
    out: list[_Piece] = []
    current: list[int] | None = None  # [URL number, document start, document end] of the stand-in being made
    for start, end, piece in parts:
        hit = next((n for n, (low, high) in enumerate(found) if start < high and low < end), None)
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


def _markdown_parser() -> Any:
    """CommonMark with GFM tables and strikethrough, bare-URL links, YAML/TOML front matter, and math ($...$,
    $$...$$, \\(...\\), \\[...\\], amsmath environments); inline parsing is run by :func:`_inline_marks`."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.amsmath import amsmath_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.front_matter import front_matter_plugin
    from mdit_py_plugins.texmath import texmath_plugin

    md = MarkdownIt("commonmark", {"linkify": True}).enable(["table", "strikethrough", "linkify"])
    md.use(front_matter_plugin).use(dollarmath_plugin, double_inline=True).use(amsmath_plugin)
    md.use(texmath_plugin, delimiters="brackets")
    md.core.ruler.disable("inline")  # each inline token is parsed by _inline_marks, which records positions
    md.inline.ruler2.disable("fragments_join")  # keeps the emphasis delimiters' tokens apart, to read which matched
    return md


def _markdown(document: str, writer: _Writer) -> None:
    md = _markdown_parser()
    _install_recording_tokenizer(md)
    writer.linkify = md.linkify
    lines = _line_ends(document)
    env: dict[str, Any] = {}
    tokens = md.parse(document, env)
    cursors: dict[int, int] = {}  # a table row's line: where its next cell is looked for
    for index, token in enumerate(tokens):
        if token.type != "inline" or index == 0 or tokens[index - 1].type not in _PROSE_PARENTS:
            continue
        if token.map is None or not token.content.strip():
            continue
        cell = tokens[index - 1].type in ("th_open", "td_open")
        places = _content_places(token.content, document, lines, token.map[0], cursors if cell else None)
        marks, stand_ins = _inline_marks(md, token.content, env)
        _write_inline(token.content, places, marks, stand_ins, writer)
        writer.close()


def _line_ends(document: str) -> list[tuple[int, int]]:
    """Each line's [start, end) without its break, as markdown-it counts lines (\\r\\n, \\r and \\n end one)."""
    starts, ends = [0], []
    for match in _LINE_BREAK.finditer(document):
        ends.append(match.start())
        starts.append(match.end())
    ends.append(len(document))
    return list(zip(starts, ends, strict=True))


def _content_places(content: str, document: str, lines: list[tuple[int, int]], first_line: int,
                    cursors: dict[int, int] | None) -> list[tuple[int, int] | None]:
    """Where each character of an inline token's ``content`` lies in the document: markdown-it gives block tokens
    line ranges but no character offsets, and takes the block prefixes (``> ``, a list item's indent) and the
    paragraph's outer whitespace off each line. A line break maps to the line's break; a character markdown-it
    made (a tab's spaces, U+FFFD for NUL) maps nowhere (None). ``cursors``: for table cells, several on a line,
    each found after the one before."""
    places: list[tuple[int, int] | None] = []
    for number, part in enumerate(content.split("\n")):
        line = first_line + number
        if number:  # the break before this part
            before = lines[line - 1] if 0 < line <= len(lines) else None
            after = lines[line][0] if line < len(lines) else None
            places.append((before[1], after) if before is not None and after is not None else None)
        if line >= len(lines):
            places.extend([None] * len(part))
            continue
        line_start, line_end = lines[line]
        text = document[line_start:line_end]
        at = -1
        if cursors is None:  # a paragraph's line: its content is the line's end, less trailing whitespace
            guess = len(text.rstrip()) - len(part.rstrip())
            if guess >= 0 and text.startswith(part, guess):
                at = guess
        cursor = cursors.get(line, 0) if cursors is not None else 0
        if at < 0:
            at = text.find(part, cursor)
        if at >= 0:
            places.extend((line_start + at + i, line_start + at + i + 1) for i in range(len(part)))
            cursor = at + len(part)
        else:  # characters markdown-it changed (an escaped pipe in a cell, a tab): each found in order, or not
            for char in part:
                found = text.find(char, cursor)
                places.append(None if found < 0 else (line_start + found, line_start + found + 1))
                cursor = cursor if found < 0 else found + 1
        if cursors is not None:
            cursors[line] = cursor
    return places


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
                    pending, count = state.pending, len(state.tokens)
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
            state.pending += state.src[state.pos]
            state.pos += 1
        if state.pending:
            state.pushPending()

    md.inline.tokenize = tokenize


@dataclass
class _Match:
    """Where one inline rule matched: [start, end) of the content, the text pending before it, the tokens it made
    (each with its type and content then: post-processing changes them), the flushed pending text's token, and the
    span of a link's label (its nested tokenize call)."""

    start: int
    end: int
    pending: str
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

        def pushPending(self) -> Any:  # noqa: N802 - markdown-it's name
            token = super().pushPending()
            self.flushed.add(id(token))
            return token

        def record(self, start: int, pending: str, count: int, calls: int) -> None:
            made = [(t, t.type, t.content) for t in self.tokens[count:] if id(t) not in self.flushed]
            flushed = next((t for t in self.tokens[count:] if id(t) in self.flushed), None)
            label = self.calls[calls] if len(self.calls) > calls else None
            self.matches.append(_Match(start, self.pos, pending, made, flushed, label))

    return RecordingState


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
        if not match.made:
            continue  # plain text: prose
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
                start -= len(match.pending) - (len(match.flushed.content) if match.flushed is not None else 0)
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


def _write_inline(content: str, places: list[tuple[int, int] | None], marks: list[int], stand_ins: dict[int, str],
                  writer: _Writer) -> None:
    """Hand ``content``'s pieces to ``writer``: prose runs as the document's characters (a line break as a space),
    each stand-in once, over the document span its characters cover."""
    index, size, last = 0, len(content), 0
    while index < size:
        mark, place = marks[index], places[index]
        if mark == _DROPPED:
            index += 1
            continue
        if mark >= _STOOD_IN:
            stop = index
            while stop < size and marks[stop] == mark:
                stop += 1
            spans = [p for p in places[index:stop] if p is not None]
            start, end = (spans[0][0], spans[-1][1]) if spans else (last, last)
            writer.stand_in(stand_ins[mark - _STOOD_IN], start, end)
            last, index = end, stop
            continue
        if place is None or content[index] == "\n":
            start, end = place if place is not None else (last, last)
            writer.stand_in(" " if content[index] == "\n" else content[index], start, end)
            last, index = end, index + 1
            continue
        stop = index + 1  # a run of prose characters in a row in the document
        while (stop < size and marks[stop] == _PROSE and places[stop] is not None and content[stop] != "\n"
               and places[stop][0] == places[stop - 1][1]):
            stop += 1
        writer.prose(place[0], places[stop - 1][1])
        last, index = places[stop - 1][1], stop


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
_VERBATIM = re.compile(r"(\\begin\{(verbatim|Verbatim|BVerbatim|lstlisting|minted|comment|alltt|filecontents)\*?\}"
                       r"(?:\{[^}\n]*\}|\[[^\]\n]*\])*)(.*?)(\\end\{\2\*?\})", re.DOTALL)
_VERB = re.compile(r"\\(?:verb|lstinline)(?![a-zA-Z])")
_SPACES = re.compile(r"\s*")
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
    from pylatexenc.latex2text import LatexNodes2Text
    from pylatexenc.latexwalker import LatexWalker

    parsed = _VERBATIM.sub(lambda m: m.group(1) + re.sub(r"[^\r\n]", " ", m.group(3)) + m.group(4), document)
    parsed = _VERB.sub(_unclosed_verb, parsed)
    try:
        nodes, _pos, _len = LatexWalker(parsed, latex_context=_latex_context(), tolerant_parsing=True).get_latex_nodes()
    except Exception as exc:  # noqa: BLE001 - tolerant parsing forgives nearly all; what it cannot is a bad document
        raise MarkupError(f"cannot read the LaTeX: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") \
            from None
    _LatexReader(document, writer, LatexNodes2Text(strict_latex_spaces=True)).nodes(nodes)
    writer.close()


def _unclosed_verb(match: re.Match[str]) -> str:
    """A \\verb (\\lstinline) with no closing delimiter renamed to an unknown command of the same length (a stand-in):
    pylatexenc's verbatim reader runs past the end of a document that ends in one (an editor's half-typed line)."""
    text = match.string
    delimiter = _SPACES.match(text, match.end()).end()  # pylatexenc's reading: the first character after spaces
    if delimiter < len(text) and text.find(text[delimiter], delimiter + 1) >= 0:
        return match.group(0)
    return "\\" + "q" * (len(match.group(0)) - 1)


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
