"""The suggester: replacements for flagged words, their candidates gathered and ranked with the GED model itself.

No generator ships (its own embeddings alone would overrun the model's weight budget), so the suggester needs no
new weights: for a flagged word it proposes

- ``confusion``: the other members of its closed-class confusion sets (``electra_detect.word_classes``, read both
  ways: determiners, prepositions, pronouns, conjunctions, auxiliaries and modals, its/it's, homophones such as
  to/too and then/than, punctuation marks; ``word_candidates.py``);
- ``inflection``: every form of each lemma the word can have (lemminflect: tense, number, verb form, comparatives;
  an unknown form such as *buyed* by the regular rules' lemma) and its adjective/adverb twin (``word_candidates.py``);
- ``spelling``: a spellchecker's corrections (pyspellchecker) for a word not in its dictionary;
- ``real_word``: the commonest known words one edit away from a known word (then/than, form/from);
- ``case``: the word lower-cased or capitalised;
- ``delete``: nothing, for a word the typed GED model calls unnecessary (operation U) or a repeated word;

puts each candidate into the word's sentence and scores the edited sentences through the ``Detector`` (one batch
for all), keeps the candidates that lower the model's error score around the edit and offers at most ``k`` of them,
best first (the rule and its setting, ``RankSetting``, in ``suggestion_ranking.py``; the setting's defaults chosen on
FCE dev's tuning half by ``benchmarks/quality/suggestions.py``).

This module holds the spellchecker's candidates, a text's plan of sentences to score and the ranking of their scores.

A suggestion replaces its flagged word's *target*: the written word the flagged piece belongs to (the Detector
splits *don't* into don / ' / t; the target is *don't*), so that contractions get whole-word replacements.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from electra_detect.scores import TextScores
from electra_detect.sentences import sentence_around, sentence_spans
from electra_detect.tasks.ged.suggestion_ranking import SOURCES, RankSetting, choose, local_score, unnecessary
from electra_detect.tasks.ged.word_candidates import confusions, inflections, learner_distance

TARGET = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")  # a written word, apostrophes inside it, or one mark
ScoreTexts = Callable[[list[str]], list[TextScores]]


@dataclass
class Suggestion:
    """A replacement of ``text[start:end]`` (the flagged word's target; ``value`` "" deletes it), with the error
    score around the edit once it is made (``score``, lower = better) and the source that proposed it."""

    value: str
    start: int
    end: int
    score: float
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "start": self.start, "end": self.end}


# ------------------------------------------------------------------------------------------ candidates

def match_case(template: str, word: str) -> str:
    """``word`` written with ``template``'s case: ALL CAPS, Capitalised or as it is; the pronoun *i* is *I*."""
    if word == "i" or word.startswith("i'"):
        word = "I" + word[1:]
    if len(template) > 1 and template.isupper() and template.isalpha():
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word



EDIT_WEIGHT = 2.0  # a misspelling's correction: an edit (learner_distance 1) outweighs 100x a word's frequency
TWO_EDIT_FREQUENCY = 100  # pyspellchecker's counts start at 50: 47k of its 161k words are seen 100 times or more


class Suggester:
    """Candidates for flagged words and their ranking; holds the spellchecker's dictionary (loaded on first use)."""

    def __init__(self, setting: RankSetting | None = None) -> None:
        self.setting = setting or RankSetting()
        self.near_words = functools.lru_cache(maxsize=4096)(self._near_words)  # a text repeats its misspellings

    @functools.cached_property
    def checker(self) -> Any:
        from spellchecker import SpellChecker

        return SpellChecker()

    def spellings(self, word: str, limit: int = 5, two_edits: bool = True) -> list[str]:
        """A spellchecker's corrections of ``word`` when it is not a known word, commonest first; ``two_edits=False``
        looks one edit away only (the two-edit search is most of a typed word's time)."""
        lower = word.lower()
        if not lower.isalpha() or self.checker.known([lower]):
            return []
        found = self.near_words(lower, two_edits)
        usage = self.checker.word_usage_frequency
        return sorted((c for c in found if c != lower and "'" not in c),  # a noisy channel: an edit is worth 100x
                      key=lambda c: (EDIT_WEIGHT * learner_distance(lower, c) - math.log10(usage(c)), c))[:limit]

    def _near_words(self, word: str, two_edits: bool = True) -> frozenset[str]:
        """pyspellchecker's ``candidates`` of an unknown lower-case ``word``: the known words one edit away, else
        two (when ``two_edits``). Hand-written because its own search builds every string two edits away (0.8 s for
        a long word) and checks each through a function call; here one set intersection, and the two-edit words by
        a C++ distance over the words of a near length."""
        checker = self.checker
        known = checker.word_frequency.dictionary
        first = checker.edit_distance_1(word)
        found = known.keys() & first
        if not found and two_edits:  # the known words two edits away (rapidfuzz's optimal string alignment, in C++)
            from rapidfuzz import process
            from rapidfuzz.distance import OSA

            found = {w for w, _, _ in process.extract(word, self.words_near_length(len(word)), scorer=OSA.distance,
                                                      score_cutoff=2, limit=None)}
        return frozenset(w for w in found if any(c.isalpha() for c in w))  # as known(): no numbers

    @functools.cached_property
    def words_by_length(self) -> dict[int, list[str]]:
        """The spellchecker's words seen at least ``TWO_EDIT_FREQUENCY`` times, by their length (the commonest
        correction is the one shown; the rarest third of its words cost two thirds of the search)."""
        found: dict[int, list[str]] = {}
        for w, count in self.checker.word_frequency.dictionary.items():
            if count >= TWO_EDIT_FREQUENCY:
                found.setdefault(len(w), []).append(w)
        return found

    @functools.lru_cache(maxsize=64)  # noqa: B019 - one Suggester a checker, a few dozen lengths
    def words_near_length(self, length: int) -> list[str]:
        """The words two edits from a word of ``length`` may be: at most two letters longer or shorter."""
        return [w for n in range(length - 2, length + 3) for w in self.words_by_length.get(n, ())]

    def real_words(self, word: str, limit: int = 3) -> list[str]:
        """The commonest known words one edit from a known ``word`` (then -> than, form -> from)."""
        lower = word.lower()
        if not lower.isalpha() or len(lower) < 3 or not self.checker.known([lower]):
            return []
        found = self.near_words(lower, False) - {lower}  # the known words one edit away
        return sorted((c for c in found if c.isalpha()), key=lambda c: (-self.checker.word_usage_frequency(c), c))[
            :limit]

    def first_candidate(self, word: str) -> list[tuple[str, str]]:
        """The first of :meth:`candidates` (at most one), found without the later sources' work and with
        spellings one edit away: what typing a word by its edit needs when no candidate is scored."""
        sources = self.setting.sources
        proposals = {"confusion": lambda: confusions(word), "inflection": lambda: inflections(word),
                     "spelling": lambda: self.spellings(word, two_edits=False),
                     "real_word": lambda: self.real_words(word)}
        for source in SOURCES:
            if source not in sources:
                continue
            if source in proposals:
                values = [match_case(word, value) for value in proposals[source]()]
            elif source == "case" and word[:1].isalpha():
                values = sorted({word.lower(), word[:1].upper() + word[1:]})
            elif source == "delete":
                values = [""]
            else:
                values = []
            values = [v for v in values if v != word]
            if values:
                return [(values[0], source)]
        return []

    def candidates(self, word: str) -> list[tuple[str, str]]:
        """(replacement, source) for ``word``, in ``SOURCES`` order, cased like ``word``, without ``word`` itself
        and at most ``max_candidates`` of them."""
        sources = self.setting.sources
        found: dict[str, str] = {}
        proposals = {"confusion": lambda: confusions(word), "inflection": lambda: inflections(word),
                     "spelling": lambda: self.spellings(word), "real_word": lambda: self.real_words(word)}
        for source in SOURCES:
            if source not in sources:
                continue
            if source in proposals:
                for value in proposals[source]():
                    found.setdefault(match_case(word, value), source)
            elif source == "case" and word[:1].isalpha():
                for value in {word.lower(), word[:1].upper() + word[1:]} - {word}:
                    found.setdefault(value, source)
            elif source == "delete":
                found.setdefault("", source)
        found.pop(word, None)
        return list(found.items())[:self.setting.max_candidates]

    # -------------------------------------------------------------------------------------------- ranking
    def plan(self, text: str, spans: Sequence[tuple[int, int]], first_only: bool = False) -> SuggestionPlan:
        """The sentences to score for suggestions for the words at ``spans`` of ``text``: each span's target in
        its sentence (``context_words`` words each side at most), unedited and with each candidate in place
        (``first_only``: the first candidate alone, :meth:`first_candidate`)."""
        plan = SuggestionPlan(text)
        if not spans:  # most texts of a long file: no sentence to cut
            return plan
        index: dict[tuple[int, int], int] = {}
        sentences = sentence_spans(text)
        for start, end in spans:
            target = target_span(text, start, end)
            if target not in index:
                index[target] = len(plan.targets)
                lo, hi = context_span(text, *target, self.setting.context_words, sentences)
                sentence = text[lo:hi]
                span = (target[0] - lo, target[1] - lo)
                edits = [(value, source, *replace_span(sentence, *span, value))
                         for value, source in (self.first_candidate if first_only else self.candidates)(
                             text[target[0]:target[1]])]
                plan.targets.append(TargetPlan(target, sentence, span, edits))
            plan.order.append(index[target])
        return plan

    def rank(self, plan: SuggestionPlan, scores: Sequence[TextScores]) -> list[list[Suggestion]]:
        """For each span given to :meth:`plan`: at most ``k`` candidates that lower the error score around the
        edit, lowest score first; ``scores`` are those of ``plan.texts``, in order."""
        setting = self.setting
        ranked = []
        for target, group in zip(plan.targets, plan.split(scores), strict=True):
            if not group:  # left out of the plan (SuggestionPlan.within)
                ranked.append([])
                continue
            before = local_score(group[0], target.span, setting.reduce, setting.window)
            word = target.sentence[target.span[0]:target.span[1]]
            scored = [(value, source, local_score(after, span, setting.reduce, setting.window))
                      for (value, source, _edited, span), after in zip(target.edits, group[1:], strict=True)]
            may_delete = setting.delete == "always" or unnecessary(group[0], target.sentence, target.span)
            ranked.append([Suggestion(value, *target.target, score, source)
                           for value, source, score in choose(word, before, scored, may_delete, setting)])
        return [ranked[i] for i in plan.order]

    def suggest(self, score: ScoreTexts, text: str, spans: Sequence[tuple[int, int]]) -> list[list[Suggestion]]:
        """:meth:`plan`, ``score`` (e.g. ``Detector.score``) on its sentences, :meth:`rank`."""
        plan = self.plan(text, spans)
        return self.rank(plan, score(plan.texts) if plan.texts else [])

    def flagged(self, score: ScoreTexts, scored: Sequence[TextScores], threshold: float,
                digits: int | None = None) -> list[list[dict[str, Any]]]:
        """Each text's flagged words (``TextScores.flagged``), each with its ``suggestions`` (``{"value", "start",
        "end"}``: the value replaces ``text[start:end]``); every text's sentences are scored in one call."""
        words = [s.flagged(threshold, digits) for s in scored]
        plans = [self.plan(s.text, [(w["start"], w["end"]) for w in found])
                 for s, found in zip(scored, words, strict=True)]
        texts = [t for plan in plans for t in plan.texts]
        results = score(texts) if texts else []
        at = 0
        for found, plan in zip(words, plans, strict=True):
            count = len(plan.texts)
            for word, suggestions in zip(found, self.rank(plan, results[at:at + count]), strict=True):
                word["suggestions"] = [s.to_dict() for s in suggestions]
            at += count
        return words


@dataclass
class TargetPlan:
    """One target (start, end) of the text: its sentence, the target's span in it, and per candidate (value,
    source, edited sentence, the value's span in it)."""

    target: tuple[int, int]
    sentence: str
    span: tuple[int, int]
    edits: list[tuple[str, str, str, tuple[int, int]]]
    left_out: bool = False  # over the plan's budget: nothing to score, no suggestions

    @property
    def texts(self) -> list[str]:
        """The sentences to score: unedited first, then each candidate's (none when left out or no candidates)."""
        return [] if self.left_out or not self.edits else [self.sentence, *(edit[2] for edit in self.edits)]


@dataclass
class SuggestionPlan:
    """What :meth:`Suggester.rank` needs: each distinct target's :class:`TargetPlan`, and for each span asked for
    the index of its target."""

    text: str
    targets: list[TargetPlan] = field(default_factory=list)
    order: list[int] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        """Every target's sentences, target after target."""
        return [text for target in self.targets for text in target.texts]

    def split(self, scores: Sequence[TextScores]) -> list[list[TextScores]]:
        """``scores`` of :attr:`texts`, cut into one list per target."""
        groups, at = [], 0
        for target in self.targets:
            count = len(target.texts)
            groups.append(list(scores[at:at + count]))
            at += count
        if at != len(scores):
            raise ValueError(f"{len(scores)} scores for a plan of {at} sentences")
        return groups

    def within(self, budget: int, cost: Callable[[list[str]], int]) -> SuggestionPlan:
        """Leaves out each target whose sentences would take the plan's ``cost`` over ``budget`` (a server's
        model tokens per request), earlier targets first served; returns the plan."""
        spent = 0
        for target in self.targets:
            if not target.texts:
                continue
            need = cost(target.texts)
            target.left_out = spent + need > budget
            spent += 0 if target.left_out else need
        return self


def target_span(text: str, start: int, end: int) -> tuple[int, int]:
    """The written word (letters, digits and apostrophes inside them) or mark that holds ``text[start:end]``."""
    for match in TARGET.finditer(text, max(0, start - 64), min(len(text), end + 64)):
        if match.start() <= start and end <= match.end():
            return match.span()
    return start, end


def context_span(text: str, start: int, end: int, words: int,
                 sentences: Sequence[tuple[int, int]] | None = None) -> tuple[int, int]:
    """The sentence of ``text`` around [start, end) (``sentences``: the text's ``sentence_spans``, the sentence the
    Detector scored the word in), cut to ``words`` whitespace-separated words on each side."""
    lo, hi = sentence_around(list(sentences or sentence_spans(text)), start, end)
    left = [m.start() for m in re.finditer(r"\S+", text[lo:start])]
    right = [m.end() for m in re.finditer(r"\S+", text[end:hi])]
    if len(left) > words:
        lo += left[-words]
    if len(right) > words:
        hi = end + right[words - 1]
    return lo, hi


def replace_span(text: str, start: int, end: int, value: str) -> tuple[str, tuple[int, int]]:
    """``text`` with [start, end) replaced by ``value``, and the value's span in the result; deleting (``value``
    "") also takes one space beside the word, so that the edited text reads as written."""
    if value == "":
        if start > 0 and text[start - 1] == " ":
            start -= 1
        elif end < len(text) and text[end] == " ":
            end += 1
    edited = text[:start] + value + text[end:]
    return edited, (start, start + len(value))

