"""Sentence spans of a text: a paragraph is scored sentence by sentence, as the GED model was trained.

Hand-written (one regex and a short abbreviation list) because inference must not need spaCy; it follows what
the training data saw (spaCy's punctuation sentencizer on BEA essays): a sentence ends after ``.``, ``!``, ``?``
or ``…`` (with any closing quotes or brackets) before whitespace, unless the word before a full stop is an
abbreviation or an initial, and every line break ends one.
"""

from __future__ import annotations

import re

__all__ = ["sentence_around", "sentence_spans"]

# a run of sentence-final punctuation, its closing quotes/brackets, then the whitespace after it
_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s)")
_WORD_BEFORE = re.compile(r"(\w[\w.]*)\.$")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st sr jr vs etc e.g i.e eg ie no nos vol fig approx dept est inc ltd co corp jan feb mar "
    "apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun p pp cf al gen gov sgt capt lt col rev".split())


def _ends_sentence(text: str, stop: int) -> bool:
    """Whether the punctuation run ending at ``stop`` closes a sentence (not ``Mr.``, ``e.g.``, ``J.``, ``3.5``)."""
    run = text[:stop].rstrip("\"'”’)]")
    if not run.endswith(".") or run.endswith(".."):
        return True
    word = _WORD_BEFORE.search(run[-24:])
    if word is None:
        return True
    token = word.group(1).lower()
    return not (token in _ABBREVIATIONS or len(token) == 1 and token.isalpha() or "." in token.strip("."))


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """[(start, end)] character spans of the text's sentences, in order, without surrounding whitespace; a text
    with no words is one span (itself), so every text is scored as at least one piece."""
    if "\n" not in text and _END.search(text) is None:  # one sentence (most lines): its stripped span
        lead = len(text) - len(text.lstrip())
        return [(lead, len(text.rstrip()))] if lead < len(text) else [(0, len(text))]
    spans: list[tuple[int, int]] = []
    line_start = 0
    for line in text.split("\n"):
        start = line_start
        for match in _END.finditer(line):
            if _ends_sentence(line, match.end()):
                spans.append((start, line_start + match.end()))
                start = line_start + match.end()
        spans.append((start, line_start + len(line)))
        line_start += len(line) + 1
    trimmed = []
    for start, end in spans:
        piece = text[start:end]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            trimmed.append((start + lead, start + len(piece.rstrip())))
    return trimmed or [(0, len(text))]


def sentence_around(spans: list[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """The character span of the sentence (of a text's ``sentence_spans``) that holds [start, end), or of the
    sentences it runs across; [start, end) itself when it touches none (it is whitespace)."""
    inside = [(lo, hi) for lo, hi in spans if lo < end and start < hi] or [(start, end)]
    return inside[0][0], inside[-1][1]
