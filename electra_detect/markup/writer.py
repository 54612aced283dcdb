"""The writer every markup's reader hands a document's pieces to: the document's own characters as prose, or a
stand-in for a span of it, gathered into blocks (their text and how each piece maps back), with bare URLs stood in.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

# What code, math, URLs and citations read as: of ten stand-ins tried in 22 sentence frames with the shipped model
# ("X", "1", "Foo", "it", "this", "code", "something", ...), "X" left its neighbours' scores lowest (mean top
# score 0.094 against 0.237 for "it") and no neighbour flagged.
STAND_IN = "X"
LINE_BREAK = re.compile(r"\r\n|\r|\n")  # markdown-it's own line splitting (its normalize step)
# The longest bare URL read as one: linkify-it is given at most this many characters at a time (browsers and the
# sitemap protocol stop at 2,048); a longer run of non-space characters is read in pieces of this size.
URL_SCAN = 2048
_URL_MARKS = ("://", "www.", "@")
_NON_SPACE = re.compile(r"\S+")


@dataclass
class _Piece:
    text: str
    start: int  # document offsets
    end: int
    own: bool  # text is document[start:end]


class Writer:
    """Collects a block's pieces (the document's own characters, or a stand-in for a span of it) and closes
    blocks at breaks; a block holding no letter or digit of its own (only stand-ins, punctuation) is dropped."""

    def __init__(self, document: str, find_urls: bool) -> None:
        self.document, self.find_urls = document, find_urls
        self.linkify: Any = None  # linkify-it's matcher, made when a block first holds something like a URL
        # each block's text, start, end and segments: the front makes them ProseBlocks
        self.blocks: list[tuple[str, int, int, tuple[tuple[int, int, int, int, bool], ...]]] = []
        self.pieces: list[_Piece] = []

    def prose(self, start: int, end: int) -> None:
        """``document[start:end]`` as prose; its line breaks read as spaces."""
        at = start
        for match in LINE_BREAK.finditer(self.document, start, end):
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
        self.blocks.append(("".join(texts), segments[0][2], segments[-1][3], tuple(segments)))


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


def _urls_stood_in(pieces: list[_Piece], writer: Writer) -> list[_Piece]:
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
