"""The GED check every front calls: scores in, each text's flagged words out, typed, with rule, category, message
and (when asked) suggestions, filtered by the writer's options and dictionary.

    checker = GedChecker(detector)
    words = checker.check_texts(texts, GedOptions(disabled_categories={"STYLE"}, words=("Kubernetes",)))

A front that scores on its own schedule (the server's batcher) runs the three steps apart::

    plan = checker.prepare(scored, options)        # flags, dictionary, which words need candidates
    plan.within(budget, cost)                      # optional: a request's model-token budget for candidates
    words = checker.finish(plan, score(plan.texts))

Types name the edit: a flagged word whose type the :class:`TypingRule` gives to the edit is typed by ERRANT on the
word and its best replacement (the suggester's first), else by the model's type head; so the candidates are ranked
for those words even when suggestions are not shown, and ``ged`` and ``ged --suggest`` give a word the same type.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from electra_detect.detector import Detector
from electra_detect.edit_tags import DELETE, FALLBACK_TAG, KEEP, SPELL, words_of
from electra_detect.edit_tags.messages import tag_message, told
from electra_detect.scores import TextScores
from electra_detect.tasks.ged.dictionary import PersonalDictionary, Vocabulary
from electra_detect.tasks.ged.errant_typing import Edit, EditTyper
from electra_detect.tasks.ged.flags import FlaggedWord
from electra_detect.tasks.ged.options import GedOptions
from electra_detect.tasks.ged.quiet import QuietRule
from electra_detect.tasks.ged.suggestions import (
    Suggester,
    Suggestion,
    SuggestionPlan,
    match_case,
    replace_span,
    target_span,
)

ScoreTexts = Callable[[list[str]], list[TextScores]]


@dataclass(frozen=True)
class TypingRule:
    """When the edit names a flagged word's type instead of the type head: never for a word the head calls missing
    (``M``: the suggester proposes no insertions), always for an untyped model's words, and for a typed model's when
    ``always``, when the head names one of ``edit_types`` or is less sure than ``head_confidence``.

    The defaults were chosen on FCE dev's tuning half at the shipped threshold (main-type accuracy of detected
    errors, ``benchmarks/quality/ged_types.py``): the edit where the head says only OTHER, 0.597 (the head alone
    0.515, the edit wherever the head names no M 0.519, a confidence cut-off 0.2-0.8 no better). The edit is to the
    word's first proposed candidate, not to the model's best (``ranked``): 0.578 against 0.597 on the tuning half,
    for 2-4 ms a sentence against 50-140 (every candidate sentence scored), which the speed of ``ged --file``
    cannot afford; typing is then the same with and without suggestions shown."""

    always: bool = False
    edit_types: frozenset[str] = frozenset({"OTHER"})
    head_confidence: float = 0.0
    ranked: bool = False  # True: the edit to the model's best candidate (every candidate scored: 10x the cost)

    def by_edit(self, word: FlaggedWord) -> bool:
        """Whether ``word`` (typed by the head, or untyped) takes its type from its best edit."""
        if word.type is None:
            return True
        if word.operation == "M":
            return False
        return self.always or word.type in self.edit_types or (word.type_score or 0.0) < self.head_confidence


SUGGESTIONS = 3  # suggestions shown a word at most, best first
ALTERNATIVE_FLOOR = 0.02  # a next best tag's probability below this makes no suggestion (docs/suggestions.md)

@dataclass
class CheckPlan:
    """One call's flagged words per text, and the suggestion plans of the words that need candidates."""

    words: list[list[FlaggedWord]]
    plans: list[SuggestionPlan]
    ranked: list[list[int]]  # per text, the indices of its words that are in its plan (in plan order)
    options: GedOptions
    vocabulary: Vocabulary

    @property
    def texts(self) -> list[str]:
        """The sentences to score for candidates, every text's in turn."""
        return [text for plan in self.plans for text in plan.texts]

    def within(self, budget: int, cost: Callable[[list[str]], int]) -> CheckPlan:
        """Leaves out the candidates of targets that would take the plan over ``budget`` (``cost``: model tokens of
        some sentences), earlier ones first served; their words keep the head's type and get no suggestions."""
        spent = 0
        for plan in self.plans:
            for target in plan.targets:
                if target.texts:
                    need = cost(target.texts)
                    target.left_out = spent + need > budget
                    spent += 0 if target.left_out else need
        return self


class GedChecker:
    """The GED task for one Detector: holds the suggester, the ERRANT typer and the personal dictionary (each loaded
    on first use) and the harper-py flagger of ``with_rules``."""

    def __init__(self, detector: Detector, suggester: Suggester | None = None, typer: EditTyper | None = None,
                 dictionary: PersonalDictionary | None = None, typing: TypingRule | None = None,
                 quiet: QuietRule | None = None, fixed_threshold: float | None = None) -> None:
        self.detector = detector
        self.fixed_threshold = fixed_threshold  # a front's own default (the server's --ged-threshold), range-checked
        self.suggester = suggester or Suggester()
        self.typer = typer or EditTyper()
        self.dictionary = dictionary or PersonalDictionary()
        self.typing = typing or TypingRule()
        self.quiet = quiet or QuietRule()

    @property
    def tagged(self) -> bool:
        """Whether the model names each flagged word's edit (a tag model): its types, messages and suggestions come
        from the tags, and neither the candidate search nor ERRANT runs."""
        return getattr(self.detector, "edit_tags", None) is not None

    def preload(self) -> threading.Thread | None:
        """Load what typing by edits needs (spaCy, ERRANT, lemminflect's tables: seconds) in a background thread,
        while the engine scores the first batches on the other cores; a check that needs them first waits for them,
        one that does not (the first line of a file, often) goes out at once. None when typing by edits is not
        installed, or not used (a tag model)."""
        if self.tagged or not self.typer.available:
            return None

        def load() -> None:
            from electra_detect.tasks.ged.nlp import import_lemminflect

            try:
                _ = self.typer.annotator  # loads it
                import_lemminflect()
            except Exception:  # noqa: BLE001 - the check that needs them loads again and reports the error
                pass

        thread = threading.Thread(target=load, name="electra-detect-preload", daemon=True)
        thread.start()
        return thread

    def threshold(self, options: GedOptions) -> float:
        """The flag threshold, decided here for every front: the options' own, else the front's fixed one (at the
        picky level the model's picky one when lower), else the rules' tuned one (``with_rules``), else the model's
        at the options' level (the Detector's record of ged.json: no file is read)."""
        if options.threshold is not None:
            return options.threshold
        if self.fixed_threshold is not None:
            if options.level == "default":
                return self.fixed_threshold
            return min(self.fixed_threshold, self.detector.threshold(calibrated=options.calibrated,
                                                                     level=options.level))
        if options.with_rules:
            return self.rules[0].threshold
        return self.detector.threshold(calibrated=options.calibrated, level=options.level)

    @functools.cached_property
    def rules(self) -> tuple[Any, Callable]:
        """(the model's tuned rule setting, harper-py's flagger): ``with_rules``' pieces, loaded once."""
        from electra_detect.rules import harper_flagger, rule_setting

        return rule_setting(self.detector.model_dir, self.detector.files.ged), harper_flagger()

    def score(self, texts: list[str], options: GedOptions) -> list[TextScores]:
        return self.detector.score(texts, calibrated=options.calibrated)

    def lifted(self, scored: Sequence[TextScores], options: GedOptions) -> list[TextScores]:
        """The scores as the options flag them: lifted where harper-py flags a word (``with_rules``), else as given."""
        if not options.with_rules:
            return list(scored)
        from electra_detect.rules import with_rules

        setting, flag = self.rules
        return with_rules(scored, flag, setting.weight)

    def vocabulary(self, options: GedOptions) -> Vocabulary:
        """The personal dictionary file's words (read again when it changed) and the options' own."""
        tags = getattr(self.detector, "edit_tags", None)  # a tag model's table: no lemminflect, so no spaCy
        inflections = tags.inflections if tags is not None else None
        own = Vocabulary.of(options.words, inflections)
        return self.dictionary.vocabulary(inflections) | own if options.use_dictionary_file else own

    def prepare(self, scored: Sequence[TextScores], options: GedOptions) -> CheckPlan:
        """Each text's flagged words (dictionary words left out) and the candidates to score: every word's when
        suggestions are asked for, else those the typing rule types by their edit."""
        threshold = self.threshold(options)
        vocabulary = self.vocabulary(options)
        by_ranking = self.typer.available and self.typing.ranked
        tagged = self.tagged
        words, plans, ranked = [], [], []
        for text in self.lifted(scored, options):
            found = [FlaggedWord.of_word(w) for w in text.words_at_least(threshold)]  # no object per word
            found = [w for w in found if not in_dictionary(text.text, w, vocabulary)]
            if tagged:  # a tag names the edit; ranked: its one-word replacements' candidates scored as well
                chosen = [i for i, w in enumerate(found) if options.ranked and w.operation == "R"
                          and " " not in words_of(w.tag or "")]
            else:
                chosen = [i for i, w in enumerate(found) if options.suggest or (by_ranking and self.typing.by_edit(w))]
            words.append(found)
            ranked.append(chosen)
            plans.append(self.suggester.plan(text.text, [(found[i].start, found[i].end) for i in chosen]))
        return CheckPlan(words, plans, ranked, options, vocabulary)

    def finish(self, plan: CheckPlan, scores: Sequence[TextScores]) -> list[list[FlaggedWord]]:
        """The words of ``plan`` with suggestions (``scores``: those of ``plan.texts``), typed, kept as the options
        say."""
        options, at = plan.options, 0
        to_type: list[tuple[FlaggedWord, Edit]] = []
        for words, suggestion_plan, chosen in zip(plan.words, plan.plans, plan.ranked, strict=True):
            count = len(suggestion_plan.texts)
            ranked = self.suggester.rank(suggestion_plan, scores[at:at + count])
            at += count
            searched: dict[int, list[Suggestion]] = {}  # a tag model's ranked replacements, by word
            for index, found in zip(chosen, ranked, strict=True):
                word = words[index]
                kept = [s for s in found if not (s.value and plan.vocabulary.knows(s.value))]
                if self.tagged:
                    searched[id(word)] = kept
                    continue
                word.best = kept[0] if kept else None
                if options.suggest:
                    word.suggestions = kept
                if kept and self.typer.available and self.typing.ranked and self.typing.by_edit(word):
                    to_type.append((word, edit_of(suggestion_plan, kept[0])))
            if self.tagged:
                self.tell(suggestion_plan.text, words, plan.vocabulary, options.suggest, searched)
                words[:] = self.kept_loud(suggestion_plan.text, words, plan.vocabulary, options.level)
            elif self.typer.available and not self.typing.ranked:
                to_type += self.first_edits(suggestion_plan.text, words, plan.vocabulary)
        if at != len(scores):
            raise ValueError(f"{len(scores)} scores for a plan of {at} sentences")
        for (word, _edit), typed in zip(to_type, self.typer.classify([e for _w, e in to_type]), strict=True):
            if typed is not None:
                word.retype(*typed, "edit")
        out = []
        for words in plan.words:
            kept = [w for w in words if options.allows(w.rule)]
            for word in kept:
                if self.tagged:  # the tag's edit is named in the message; the list only when asked for
                    if not options.suggest:
                        word.suggestions = None
                elif not options.suggest:
                    word.best = None  # the message names a suggestion only where suggestions are shown
                elif word.suggestions is None:
                    word.suggestions = []  # its candidates were left out (a request's budget)
            out.append(kept)
        return out

    def tell(self, text: str, words: list[FlaggedWord], vocabulary: Vocabulary | None = None,
             suggest: bool = True, searched: dict[int, list[Suggestion]] | None = None) -> None:
        """A tag model's words: each one's suggestion and message from its edit tag (edit_tags.messages), or for a
        replacement in ``searched`` (``id(word)``: the ranked candidates, ``GedOptions.ranked``) from the best of
        them when there is one. Of a doubled word (*the the*) both halves tagged for deletion, only the second is
        told: deleting both would lose the word."""
        tags = self.detector.edit_tags
        # a misspelling's correction: two edits away when suggestions are shown, one otherwise (two edits double the
        # check's time, 0.26 -> 0.60 s per 1,000 FCE sentences, which ged's 90%-of-the-engine goal cannot afford)
        spellings = self.suggester.spellings if suggest else functools.partial(self.suggester.spellings,
                                                                                two_edits=False)
        doubled = [i for i in range(len(words) - 1) if words[i].tag == words[i + 1].tag == DELETE
                   and words[i].word.lower() == words[i + 1].word.lower()
                   and not text[words[i].end:words[i + 1].start].strip()]
        for i in reversed(doubled):
            del words[i]
        for word in words:
            if word.tag is None:
                continue
            edit, suggestion, word.explanation = told(text, word.start, word.end, word.tag, tags, spellings)
            if suggestion is not None and vocabulary and vocabulary.knows(suggestion.value.strip() or "\0"):
                suggestion = None  # a dictionary word is never suggested (as for the ranked candidates)
                word.explanation = tag_message(text, word.start, word.end, edit, None)
            found = (searched or {}).get(id(word)) if edit.operation == "R" else None
            if found:
                suggestion = found[0]
                word.explanation = tag_message(text, word.start, word.end, edit, suggestion)
            op, main = edit.type.split(":", 1)
            if (op, main) != (word.operation, word.type):  # a deletion's type is the deleted word's
                word.retype(op, main, "model")
            word.best = suggestion
            word.suggestions = found or ([suggestion] if suggestion is not None else [])
            if suggest:
                word.suggestions = self.more_suggestions(text, word, word.suggestions, spellings, vocabulary)

    def more_suggestions(self, text: str, word: FlaggedWord, first: list[Suggestion],
                         spellings: Callable[[str], list[str]], vocabulary: Vocabulary | None = None,
                         limit: int = SUGGESTIONS) -> list[Suggestion]:
        """``first`` (the tag's suggestion, or the ranked ones), then the edits of the word's next best tags (their
        probability at least ``ALTERNATIVE_FLOOR``), then a misspelled word's spelling candidates: at most ``limit``,
        each making another text, none a dictionary word, none leaving the text as it was."""
        tags = self.detector.edit_tags
        out: list[Suggestion] = []
        made = {text}

        def add(suggestion: Suggestion | None) -> None:
            if suggestion is None or len(out) >= limit:
                return
            if suggestion.value.strip() and vocabulary and vocabulary.knows(suggestion.value.strip()):
                return
            edited = " ".join((text[:suggestion.start] + suggestion.value + text[suggestion.end:]).split())
            if edited not in made:
                made.add(edited)
                out.append(suggestion)

        made.add(" ".join(text.split()))
        for suggestion in first:
            add(suggestion)
        for tag, p in word.alternatives or ():
            if p >= ALTERNATIVE_FLOOR and tag not in (KEEP, FALLBACK_TAG):
                add(told(text, word.start, word.end, tag, tags, spellings)[1])
        if word.operation == "R" and len(out) < limit:
            values = spellings(word.word)  # empty for a known word: a $SPELL there is a real-word slip (felling)
            if not values and word.tag == SPELL:
                values = self.suggester.real_words(word.word)
            for value in values:
                add(Suggestion(match_case(word.word, value), word.start, word.end, 0.0, "spelling"))
        return out

    def known_word(self, vocabulary: Vocabulary) -> Callable[[str], bool]:
        """Whether a written word is a real word: the dictionary's, or pyspellchecker's English list's (its
        possessive 's set aside; the list holds no apostrophes)."""
        words = self.suggester.checker.word_frequency.dictionary

        def known(word: str) -> bool:
            lower = word.lower()
            bare = lower[:-2] if lower.endswith(("'s", "’s")) else lower
            return vocabulary.knows(word) or lower in words or bare in words

        return known

    def kept_loud(self, text: str, words: list[FlaggedWord], vocabulary: Vocabulary,
                  level: str) -> list[FlaggedWord]:
        """A tag model's told words less those the quiet rule leaves out at ``level``."""
        if not words:
            return words
        known = self.known_word(vocabulary)
        return [w for w in words if not self.quiet.quiet(text, w, known, level)]

    def first_edits(self, text: str, words: Sequence[FlaggedWord],
                    vocabulary: Vocabulary) -> list[tuple[FlaggedWord, Edit]]:
        """The words the rule types by their edit, each with the edit to its first proposed candidate (no
        candidate scored: typing then costs ERRANT alone, with or without suggestions shown)."""
        typed = [w for w in words if self.typing.by_edit(w)]
        if not typed:
            return []
        plan = self.suggester.plan(text, [(w.start, w.end) for w in typed], first_only=True)
        found = []
        for word, index in zip(typed, plan.order, strict=True):
            target = plan.targets[index]
            edits = [e for e in target.edits if not (e[0] and vocabulary.knows(e[0]))]
            if repeats_the_word_before(target.sentence, *target.span):  # "the the": its deletion, whatever comes first
                edits = [("", "delete", *replace_span(target.sentence, *target.span, ""))]
            if edits:
                _value, _source, edited, span = edits[0]
                found.append((word, Edit(target.sentence, *target.span, edited, span)))
        return found

    def check(self, scored: Sequence[TextScores], options: GedOptions,
              score: ScoreTexts | None = None) -> list[list[FlaggedWord]]:
        """:meth:`prepare`, the candidates scored (``score``, default the Detector's), :meth:`finish`."""
        plan = self.prepare(scored, options)
        texts = plan.texts
        return self.finish(plan, (score or (lambda t: self.score(t, options)))(texts) if texts else [])

    def check_texts(self, texts: Sequence[str], options: GedOptions) -> list[list[FlaggedWord]]:
        """Score ``texts`` and :meth:`check` them."""
        return self.check(self.score(list(texts), options), options)


def in_dictionary(text: str, word: FlaggedWord, vocabulary: Vocabulary) -> bool:
    """Whether the flagged word, or the written word it belongs to (*Kubernetes's*), is a dictionary word or lies
    in a dictionary phrase."""
    if not vocabulary:
        return False
    start, end = target_span(text, word.start, word.end)
    if vocabulary.knows(word.word) or vocabulary.knows(text[start:end]):
        return True
    return any(lo < word.end and word.start < hi for lo, hi in vocabulary.phrase_spans(text))


def repeats_the_word_before(sentence: str, start: int, end: int) -> bool:
    """Whether ``sentence[start:end]`` is the word just before it again (case aside): *the the*, *on on*."""
    before = sentence[:start].rstrip().rsplit(None, 1)
    return bool(before) and start > len(sentence[:start].rstrip()) and before[-1].lower() == sentence[start:end].lower()


def edit_of(plan: SuggestionPlan, suggestion: Suggestion) -> Edit:
    """The edit ``suggestion`` makes, in the sentence its candidates were scored in."""
    target = next(t for t in plan.targets if t.target == (suggestion.start, suggestion.end))
    for value, _source, edited, span in target.edits:
        if value == suggestion.value:
            return Edit(target.sentence, *target.span, edited, span)
    raise ValueError(f"{suggestion.value!r} is not a candidate of {target.target}")

