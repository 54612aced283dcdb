"""The prose of a document, with markup taken out: Markdown, LaTeX or plain text as :class:`ProseBlock` s, each
a paragraph-like unit whose every offset maps back to the document exactly.

    for block in prose_blocks(document, "markdown"):
        for word in check(block.text):                       # offsets into block.text
            if block.is_prose(word.start, word.end):           # not on code, math or a URL's stand-in
                start, end = block.span(word.start, word.end)  # offsets into the document

Prose is checked; code blocks and inline code, URLs (link targets, autolinks, bare URLs), math, HTML, commands
and their non-prose arguments, tables' syntax and front matter are not (docs/markup.md lists each markup's
rules). Where dropping a piece would break its sentence (inline code, math, a URL, a citation) a neutral word,
:data:`~electra_detect.markup.writer.STAND_IN`, takes its place; a flag that overlaps a stand-in is the markup's,
not the writer's, and is dropped.
Line breaks inside a paragraph read as spaces (every line break ends a sentence for the checker).

Light imports only: markdown-it-py and pylatexenc load when a document of theirs is first read.
"""

from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass, field

from electra_detect.errors import MarkupError  # defined with the other user errors; importable from here too
from electra_detect.markup.latex import read_latex
from electra_detect.markup.markdown import read_markdown
from electra_detect.markup.writer import Writer

MARKUPS = ("text", "markdown", "latex")
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx", ".mkd", ".mdown"})
LATEX_SUFFIXES = frozenset({".tex", ".latex", ".ltx"})
# LSP languageIds (VS Code's, and those Neovim and Helix send) of each markup; any other id is plain text.
MARKDOWN_LANGUAGE_IDS = frozenset({"markdown", "mdx", "quarto", "rmd", "rmarkdown"})
LATEX_LANGUAGE_IDS = frozenset({"latex", "tex", "plaintex", "context", "bibtex"})
_SURROGATE = re.compile("[\ud800-\udfff]")


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
    writer = Writer(document, find_urls=markup != "text")
    if markup == "text":
        _text(document, writer)
    elif markup == "markdown":
        read_markdown(document, writer)
    else:
        read_latex(document, writer)
    return sorted((ProseBlock(*parts) for parts in writer.blocks), key=lambda b: (b.start, b.end))


# -- plain text --------------------------------------------------------------------------------------------------

_BLANK_LINES = re.compile(r"(?:\r\n|\r|\n)(?:[ \t\f\v]*(?:\r\n|\r|\n))+")


def _text(document: str, writer: Writer) -> None:
    """Paragraphs: runs of lines between blank lines."""
    at = 0
    for match in _BLANK_LINES.finditer(document):
        writer.prose(at, match.start())
        writer.close()
        at = match.end()
    writer.prose(at, len(document))
    writer.close()
