"""Which of a tag model's flags are left out as false alarms on native prose (``docs/fluent_text.md``): names, rare
real words, optional commas; the check (``check.GedChecker``) applies the rule to the words it has told."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from electra_detect.edit_tags import CASE, DELETE, SPELL, words_of
from electra_detect.tasks.ged.flags import FlaggedWord

# Punctuation a writer may leave out or put in (commas): quieted at the default level (docs/fluent_text.md).
OPTIONAL_PUNCTUATION = frozenset({","})
ARTICLES = frozenset({"the", "a", "an"})
SENTENCE_ENDS = ".!?:;\"'“‘(["  # a capital after these (or at the text's start) may start a sentence


def name_like(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` reads as a name: inner capitals (*iPhone*, *McDonald*, *NASA*), or a capital
    inside a sentence (not the text's first word, not after a sentence end, an opening quote or bracket)."""
    word = text[start:end]
    letters = [c for c in word if c.isalpha()]
    if len(letters) < 2:
        return False  # "I", "A": a letter alone is no name
    if any(c.isupper() for c in letters[1:]):
        return True
    if not letters[0].isupper():
        return False
    before = text[:start].rstrip()
    return bool(before) and before[-1] not in SENTENCE_ENDS


@dataclass(frozen=True)
class QuietRule:
    """Which of a tag model's flags are left out as false alarms on native prose (``docs/fluent_text.md``): each
    family of flag is kept only when its tag's probability reaches that family's cut (0.0 keeps every flag of the
    family, above 1.0 none). The cuts were chosen on the tuning sets, read through what ``ged`` shows
    (``benchmarks/quality/ged_shown.py``): the quietest on CWEB-G dev that keeps the F0.5 of each learner tuning half
    (MultiGED FCE dev, JFLEG dev) within 0.005 of the check without the rule.

    - ``known_spelling``: a ``$SPELL`` flag on a word pyspellchecker's English list or the dictionary knows (a rare
      real word: *malpractice*, *prospectus*; but learners' real-word slips, *felling* for *feeling*, are flagged so
      too), at every level;
    - ``name``: a flag on a name-like word (:func:`name_like`), at every level; case tags (*the Summer*) excepted;
    - ``comma``: a comma asked for or struck out, at the default level (picky shows them all);
    - ``article_before_name``: an article asked for before a name-like word, at the default level."""

    # chosen on the tuning sets (ged_shown, 2026-12): a known word's $SPELL costs FCE's tuning half 0.017 even when
    # only the unsure are left out (learners' real-word slips: felling, planing), so it stays off
    known_spelling: float = 0.0
    name: float = 0.9
    comma: float = 0.8
    article_before_name: float = 0.0  # the names' cut covers an article asked for before a name already

    @classmethod
    def off(cls) -> QuietRule:
        """Every flag the threshold lets through (the check without the rule)."""
        return cls(0.0, 0.0, 0.0, 0.0)

    def quiet(self, text: str, word: FlaggedWord, known: Callable[[str], bool], level: str) -> bool:
        """Whether ``word`` (told: its tag decoded) is left out at ``level``; ``known``: the word list's test."""
        tag, p = word.tag or "", word.type_score or 0.0
        if p >= max(self.known_spelling, self.name, self.comma, self.article_before_name):
            return False  # sure enough for every cut: the common case, no test run
        if tag == SPELL and p < self.known_spelling and known(word.word):
            return True
        name = (p < self.name or p < self.article_before_name) and name_like(text, word.start, word.end)
        if name and p < self.name and not tag.startswith(CASE):
            return True
        if level == "picky":
            return False
        if p < self.comma and (words_of(tag) in OPTIONAL_PUNCTUATION and word.operation == "M"
                               or tag == DELETE and word.word in OPTIONAL_PUNCTUATION):
            return True
        return bool(name and p < self.article_before_name and word.operation == "M"
                    and words_of(tag).lower() in ARTICLES)
