"""How the suggester ranks candidates: its setting (:class:`RankSetting`), the error score of the words around an
edit, and the rule that keeps the candidates which lower it, best first.

The suggester (``suggestions.py``) makes the candidates and scores their sentences; this module decides among them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from electra_detect.scores import TextScores

SOURCES = ("confusion", "inflection", "spelling", "real_word", "case", "delete")


@dataclass(frozen=True)
class RankSetting:
    """How candidates are ranked. ``reduce``: the error score of the words around an edit, ``max`` (their highest
    replaced probability) or ``sum`` (their summed -log(1 - p)); ``window``: words on each side of the edit that
    count; ``closeness``: added to a candidate's score per unit of its normalised edit distance from the word (a
    near form beats a far one the model likes as much: tent over tenting); ``delete``: offer the deletion
    ``always`` or only for a word the model calls ``unnecessary`` (or a repeated word); ``k``: suggestions kept;
    ``sources``: the candidate sources used; ``context_words``: words of the sentence kept on each side of the
    target when scoring."""

    reduce: str = "sum"  # the defaults: the best top-1 on FCE dev's tuning half (docs/suggestions.md)
    window: int = 1
    closeness: float = 0.0
    delete: str = "unnecessary"
    k: int = 3
    sources: tuple[str, ...] = SOURCES
    max_candidates: int = 40
    context_words: int = 24

    def __post_init__(self) -> None:
        if self.reduce not in ("max", "sum"):
            raise ValueError(f"reduce must be max or sum, got {self.reduce!r}")
        if self.delete not in ("always", "unnecessary"):
            raise ValueError(f"delete must be always or unnecessary, got {self.delete!r}")
        unknown = set(self.sources) - set(SOURCES)
        if unknown:
            raise ValueError(f"unknown suggestion sources {sorted(unknown)}; known: {', '.join(SOURCES)}")
        if self.k < 1 or self.window < 0 or self.max_candidates < 1 or self.context_words < 1:
            raise ValueError("k, max_candidates and context_words must be >= 1 and window >= 0")


NOISE = 1e-4  # scores of one sentence batched differently (padding, engine) differ by ~1e-6: not an improvement


def choose(word: str, before: float, scored: Sequence[tuple[str, str, float]], may_delete: bool,
           setting: RankSetting) -> list[tuple[str, str, float]]:
    """The ranking rule: of the (value, source, error score after the edit) candidates for ``word``, those that
    score below ``before`` by more than ``NOISE`` (a case change an uncased model cannot see ties; the deletion
    only when ``may_delete``), ordered by their score plus ``closeness`` times their distance from the word; at
    most ``k``, as (value, source, that sum)."""
    kept = [(value, source, after + setting.closeness * distance(word, value)) for value, source, after in scored
            if after < before - NOISE and (value or may_delete)]
    return sorted(kept, key=lambda c: c[2])[:setting.k]


def unnecessary(scores: TextScores, sentence: str, span: tuple[int, int]) -> bool:
    """Whether the word at ``span`` may go: the typed model names operation U (unnecessary) for its most suspicious
    piece, or it repeats the word before it (*the the*)."""
    inside = [w for w in scores.words if w.start < span[1] and span[0] < w.end]
    if inside and max(inside, key=lambda w: w.score).operation == "U":
        return True
    before = re.findall(r"\S+", sentence[:span[0]])
    return bool(before) and before[-1].lower() == sentence[span[0]:span[1]].lower()


def distance(word: str, other: str) -> float:
    """Levenshtein distance of the lower-cased words over the longer one's length: 0 same letters, 1 nothing
    shared (a deletion is 1)."""
    a, b = word.lower(), other.lower()
    if not a or not b:
        return 1.0
    row = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, other_char in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (char != other_char))
    return row[-1] / max(len(a), len(b))


def local_score(scores: TextScores, span: tuple[int, int], reduce: str, window: int) -> float:
    """The error score of the words of ``scores`` that overlap ``span`` (both words beside it when it is empty)
    and ``window`` words on each side: their highest replaced probability (``max``) or their summed
    -log(1 - p) (``sum``); lower = more fluent."""
    words = scores.words
    if not words:
        return 0.0
    start, end = span
    inside = [i for i, w in enumerate(words) if w.start < end and start < w.end]
    if not inside:  # an empty span: the words on either side of the gap
        after = next((i for i, w in enumerate(words) if w.start >= start), len(words))
        inside = [i for i in (after - 1, after) if 0 <= i < len(words)]
    chosen = [w.score for w in words[max(0, inside[0] - window):inside[-1] + window + 1]]
    if reduce == "max":
        return max(chosen)
    return -sum(math.log1p(-min(p, 1 - 1e-12)) for p in chosen)
