"""Realistic synthetic errors: how learners err, typed with ERRANT's names, at learner density.

``RealisticErrorMaker`` corrupts POS-tagged clean sentences. How many edits a sentence gets is drawn from FCE
train's distribution of edits per sentence (36% of its sentences have none, so clean sentences stay in the mix);
each edit's family is drawn by its share of FCE train's error tokens (``FAMILY_SHARES``; counts and shares only,
no FCE text). Every edit is labelled the way the readers label real data: a replaced or inserted token is the error,
a deleted token marks the token after the gap; ``types`` carries ``OP:MAIN`` (ERRANT operation M/R/U, main type).
Corpus sentences drawn, tagged and corrupted in chunks: realistic_corpus.py.

| family | types | how (training/synthetic/word_errors.py for the word sources) |
|---|---|---|
| word_choice | R:VERB R:NOUN R:ADJ R:ADV | an embedding neighbour: same POS, another lemma, same inflection |
| other | R:OTHER | a content word replaced by a neighbour of any POS, as it comes (collocation-like misfits) |
| tense / agreement / verb_form | R:VERB:TENSE / :SVA / :FORM | lemminflect: past <-> present, VBZ <-> VBP, -ing |
| verb_infl / noun_infl | R:VERB:INFL / R:NOUN:INFL | over-regularised forms (buyed, childs, informations) |
| noun_number | R:NOUN:NUM | NN <-> NNS for any noun |
| morph | R:MORPH | adjective <-> adverb, comparatives, a neighbour sharing the stem (economy -> economic) |
| spelling | R:SPELL | codespell's real misspellings, keyboard slips, sound-alike spellings, real-word errors |
| determiner / preposition / pronoun / conjunction | R/M/U:DET, PREP, PRON, CONJ | confusions, drops, insertions |
| auxiliary | M:VERB U:VERB | a dropped or added be/have/do/will |
| punctuation | R/M/U:PUNCT | commas and stops dropped, added, swapped |
| orthography | R:ORTH | case errors, its/it's, merged or split words |
| word_order | R:WO | two adjacent words swapped (both marked) |
| repeat | U:DET, U:PREP, U:VERB, ... | a word written twice; the second copy is the error |
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from electra_detect.tasks.ged.readers import GedSentence
from electra_detect.training.synthetic import word_errors as words
from electra_detect.training.synthetic.error_tables import (
    CONTENT_TAGS,
    MERGES,
    NOMINAL_LEFT,
    NUMBER_WORDS,
    SPLITS,
    UNCOUNTABLE,
)
from electra_detect.training.synthetic.word_errors import EmbeddingNeighbours
from electra_detect.word_classes import (
    AGREEMENT,
    AUXILIARIES,
    CONJUNCTIONS,
    CONTRACTIONS,
    DETERMINERS,
    MODALS_TENSE,
    PREPOSITION_CONFUSIONS,
    PREPOSITIONS,
    PRONOUNS,
    PUNCTUATION,
)

# Share of FCE train's 61,675 typed error tokens per family
# (`python -m benchmarks.studies.synthetic_curve --fce-stats`):
# R:OTHER 0.176 is mostly multi-word rewrites, of which one word swap is a crude stand-in, so it gets 0.10;
# word order spans two tokens an edit, so its edit share is half its token share. Agreement (FCE 0.012) gets 0.025
# and a repeated word 0.01: frequent in other learner text (JFLEG) and what a user tries first.
FAMILY_SHARES = {"word_choice": 0.113, "other": 0.10, "punctuation": 0.133, "word_order": 0.04, "spelling": 0.071,
                 "real_word": 0.02, "tense": 0.061, "preposition": 0.081, "determiner": 0.074, "morph": 0.036,
                 "verb_form": 0.030, "noun_number": 0.026, "pronoun": 0.033, "agreement": 0.025, "auxiliary": 0.019,
                 "verb_infl": 0.005, "noun_infl": 0.004, "conjunction": 0.010, "orthography": 0.01, "repeat": 0.01}
# P(a sentence has k edits), k = 0..8 (8: eight or more), FCE train's 29,017 sentences.
FCE_LENGTH = 15.7  # FCE train's mean sentence length in tokens: a sentence twice as long gets twice the edits
EDITS_PER_SENTENCE = [0.364, 0.259, 0.163, 0.095, 0.054, 0.029, 0.017, 0.008, 0.011]



def _match_case(template: str, word: str) -> str:
    return word.capitalize() if template[:1].isupper() and not template.isupper() else word


@dataclass
class Draft:
    """A sentence being corrupted: tokens with their Penn tags, labels and types kept aligned."""

    tokens: list[str]
    tags: list[str]
    labels: list[int] = field(default_factory=list)
    types: list[list[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.labels = self.labels or [0] * len(self.tokens)
        self.types = self.types or [[] for _ in self.tokens]

    def free(self, predicate) -> list[int]:
        """Positions not yet edited whose (token, tag) satisfy ``predicate``."""
        return [i for i, (t, g) in enumerate(zip(self.tokens, self.tags, strict=True))
                if not self.labels[i] and predicate(t, g)]

    def replace(self, i: int, new: str, kind: str) -> bool:
        if not new or new == self.tokens[i]:
            return False
        parts = new.split(" ")  # a replacement of several words: every one of them is the error
        self.tokens[i:i + 1] = [_match_case(self.tokens[i], parts[0]), *parts[1:]]
        self.tags[i:i + 1] = [self.tags[i]] * len(parts)
        self.labels[i:i + 1] = [1] * len(parts)
        self.types[i:i + 1] = [[*self.types[i], kind]] + [[kind] for _ in parts[1:]]
        return True

    def delete(self, i: int, kind: str) -> bool:
        """A missing word: delete token i; the token after the gap (the last at the end) is the error."""
        if len(self.tokens) < 2:
            return False
        if i == 0 and len(self.tokens) > 1 and self.tokens[0][:1].isupper():
            self.tokens[1] = self.tokens[1][:1].upper() + self.tokens[1][1:]
        for column in (self.tokens, self.tags, self.labels, self.types):
            del column[i]
        j = min(i, len(self.tokens) - 1)
        self.labels[j] = 1
        self.types[j].append(kind)
        return True

    def insert(self, i: int, word: str, kind: str, tag: str = "XX") -> bool:
        """An unnecessary word: the inserted token is the error."""
        self.tokens.insert(i, word)
        self.tags.insert(i, tag)
        self.labels.insert(i, 1)
        self.types.insert(i, [kind])
        return True


class RealisticErrorMaker:
    """Seeded corruption of POS-tagged sentences (Penn tags, one per token) into typed GED examples."""

    def __init__(self, neighbours: EmbeddingNeighbours | None = None, seed: int | str = 0,
                 shares: dict[str, float] | None = None, density: list[float] | None = None,
                 judge: Callable[[list[str], int], float] | None = None, judge_threshold: float = 0.2) -> None:
        self.rng = random.Random(seed)
        self.neighbours = neighbours
        self.judge = judge  # p(token i is wrong here) of a word choice, from a discriminator; None: no filter
        self.judge_threshold = judge_threshold
        self.shares = dict(shares or FAMILY_SHARES)
        if neighbours is None:  # no embedding table: the families that need one are off
            self.shares.pop("word_choice", None)
            self.shares.pop("other", None)
        self.density = density or EDITS_PER_SENTENCE

    def corrupt(self, tokens: list[str], tags: list[str]) -> GedSentence:
        draft = Draft(list(tokens), list(tags))
        edits = self.rng.choices(range(len(self.density)), weights=self.density)[0] * len(tokens) / FCE_LENGTH
        for _ in range(int(edits) + (self.rng.random() < edits % 1)):  # edits scale with length, as in FCE
            self.one_edit(draft)
        return GedSentence(draft.tokens, draft.labels, draft.types)

    def one_edit(self, draft: Draft) -> str | None:
        """One edit of a family drawn by its share (the others, share-weighted, while one cannot apply)."""
        names = list(self.shares)
        weights = [self.shares[n] for n in names]
        while names:
            k = self.rng.choices(range(len(names)), weights=weights)[0]
            name = names.pop(k)
            weights.pop(k)
            if getattr(self, f"_{name}")(draft):
                return name
        return None

    def _pick(self, positions: list[int]) -> int | None:
        return self.rng.choice(positions) if positions else None

    def _first(self, positions: list[int], edit, tries: int = 6) -> bool:
        """``edit(i)`` at up to ``tries`` of the positions in random order, until one applies."""
        return any(edit(i) for i in self.rng.sample(positions, min(tries, len(positions))))

    def _closed_class(self, draft: Draft, table: dict[str, list[str]], main: str, insertions: list[str],
                      shares: tuple[float, float], may_insert) -> bool:
        """R/M/U edits of a closed class: replace with a confusable member, delete one, or insert one."""
        roll = self.rng.random()
        i = self._pick(draft.free(lambda t, g: t.lower() in table))
        if i is not None and roll < shares[0]:
            return draft.replace(i, self.rng.choice(table[draft.tokens[i].lower()]), f"R:{main}")
        if i is not None and roll < shares[1]:
            return draft.delete(i, f"M:{main}")
        j = self._pick([k for k in range(1, len(draft.tokens)) if not draft.labels[k] and may_insert(draft, k)])
        return j is not None and draft.insert(j, self.rng.choice(insertions), f"U:{main}")

    # -- closed classes (FCE shares of R / M / U within each) ----------------------------------------------
    def _determiner(self, draft: Draft) -> bool:  # FCE: R 1,127, M 2,398, U 1,076 tokens
        return self._closed_class(  # "the" before a noun phrase that has no determiner
            draft, DETERMINERS, "DET", ["the", "the", "a", "an"], (0.25, 0.77),
            lambda d, k: d.tags[k] in ("NN", "NNS", "JJ", "NNP") and d.tags[k - 1] not in NOMINAL_LEFT)

    def _preposition(self, draft: Draft) -> bool:  # R 2,952, M 1,186, U 883
        return self._closed_class(draft, PREPOSITION_CONFUSIONS, "PREP",
                                  ["to", "about", "of", "for", "in", "on", "with"], (0.59, 0.82),
                                  # inserted after a verb, before its object: "discuss about the plan"
                                  lambda d, k: d.tags[k - 1].startswith("VB") and d.tags[k][:2] in ("DT", "NN", "PR"))

    def _pronoun(self, draft: Draft) -> bool:  # R 972, M 766, U 315
        return self._closed_class(draft, PRONOUNS, "PRON", ["it", "it", "them", "they", "there"], (0.47, 0.85),
                                  lambda d, k: d.tags[k - 1].startswith("VB") and d.tags[k][:2] in ("DT", "IN"))

    def _conjunction(self, draft: Draft) -> bool:  # R 211, M 293, U 138
        return self._closed_class(draft, CONJUNCTIONS, "CONJ", ["and", "and", "but", "so"], (0.33, 0.79),
                                  lambda d, k: d.tags[k] in ("PRP", "DT", "NNP") and d.tokens[k - 1].isalpha())

    def _auxiliary(self, draft: Draft) -> bool:  # M:VERB 673, U:VERB 485
        if self.rng.random() < 0.58:
            i = self._pick([k for k in draft.free(lambda t, g: t.lower() in AUXILIARIES)
                            if k + 1 < len(draft.tokens) and draft.tags[k + 1][:2] in ("VB", "JJ", "RB")])
            return i is not None and draft.delete(i, "M:VERB")
        j = self._pick([k for k in draft.free(lambda t, g: g in ("VB", "VBP", "JJ")) if k > 0
                        and draft.tags[k - 1] in ("PRP", "NN", "NNS", "NNP")])  # "I am agree", "they are know"
        return j is not None and draft.insert(j, self.rng.choice(["is", "am", "are", "be", "do", "will"]),
                                                        "U:VERB")

    # -- inflection (lemminflect) ---------------------------------------------------------------------------
    def _reinflect(self, draft: Draft, tags: dict[str, list[str]], kind: str, table: dict[str, str],
                   positions: list[int] | None = None) -> bool:
        def edit(i: int) -> bool:
            word, tag = draft.tokens[i], draft.tags[i]
            if word.lower() in table:
                return draft.replace(i, table[word.lower()], kind)
            lemma = words.lemma_of(word, tag)
            for new_tag in self.rng.sample(tags[tag], len(tags[tag])):
                new = words.inflect(lemma, new_tag)
                if new and new.lower() != word.lower():
                    return draft.replace(i, new, kind)
            return False

        if positions is None:
            positions = draft.free(lambda t, g: (g in tags and t.isalpha()) or t.lower() in table)
        return self._first(positions, edit)

    def _tense(self, draft: Draft) -> bool:
        return self._reinflect(draft, {"VBD": ["VBZ", "VBP"], "VBZ": ["VBD"], "VBP": ["VBD"], "VBN": ["VBD"]},
                               "R:VERB:TENSE", MODALS_TENSE)

    def _agreement(self, draft: Draft) -> bool:
        """Present verb number flipped, preferring a verb right after its subject (he goes -> he go)."""
        after_subject = [k for k in draft.free(lambda t, g: g in ("VBZ", "VBP") or t.lower() in AGREEMENT)
                         if k > 0 and draft.tags[k - 1] in ("PRP", "NN", "NNS", "NNP")]
        if after_subject and self.rng.random() < 0.7:
            return self._reinflect(draft, {"VBZ": ["VBP"], "VBP": ["VBZ"]}, "R:VERB:SVA", AGREEMENT,
                                   positions=after_subject)
        return self._reinflect(draft, {"VBZ": ["VBP"], "VBP": ["VBZ"]}, "R:VERB:SVA", AGREEMENT)

    def _verb_form(self, draft: Draft) -> bool:
        return self._reinflect(draft, {"VB": ["VBG", "VBD", "VBZ"], "VBG": ["VB", "VBN"], "VBN": ["VB", "VBG"]},
                               "R:VERB:FORM", {})

    def _noun_number(self, draft: Draft) -> bool:
        """Singular <-> plural, preferring a noun whose number a word before it fixes (three apples -> three apple)."""
        counted = [k for k in draft.free(lambda t, g: g in ("NN", "NNS")) if k > 0 and
                   (draft.tags[k - 1] == "CD" or draft.tokens[k - 1].lower() in NUMBER_WORDS)]
        if counted and self.rng.random() < 0.5:
            return self._reinflect(draft, {"NN": ["NNS"], "NNS": ["NN"]}, "R:NOUN:NUM", {}, positions=counted)
        return self._reinflect(draft, {"NN": ["NNS"], "NNS": ["NN"]}, "R:NOUN:NUM", {})

    def _verb_infl(self, draft: Draft) -> bool:
        def edit(i: int) -> bool:
            wrong = words.inflect(words.lemma_of(draft.tokens[i], draft.tags[i]), draft.tags[i], regularise=True)
            return bool(wrong) and not words.known_word(wrong) and draft.replace(i, wrong, "R:VERB:INFL")

        return self._first(draft.free(lambda t, g: g in ("VBD", "VBN") and t.islower()), edit)

    def _noun_infl(self, draft: Draft) -> bool:
        def edit(i: int) -> bool:
            word = draft.tokens[i]
            lemma = words.lemma_of(word, "NNS")
            wrong = words.inflect(lemma, "NNS", regularise=True) or lemma + "s"
            return wrong.lower() != word.lower() and draft.replace(i, wrong, "R:NOUN:INFL")

        return self._first(draft.free(lambda t, g: t.lower() in UNCOUNTABLE or (g == "NNS" and t.islower())), edit)

    def _morph(self, draft: Draft) -> bool:
        """Adjective <-> adverb, a comparative's form, or a stem-sharing neighbour of another POS."""
        def edit(i: int) -> bool:
            word, tag = draft.tokens[i], draft.tags[i]
            candidates = []
            if tag == "JJ":
                candidates += [word + "ly", word[:-1] + "ily" if word.endswith("y") else ""]
            if tag == "RB" and word.endswith("ly"):
                candidates += [word[:-2], word[:-3] + "y" if word.endswith("ily") else ""]
            if tag in ("JJR", "JJS"):
                candidates += [f"more {word}", words.inflect(words.lemma_of(word, tag), "JJ") or ""]
            if self.neighbours is not None:
                mine = words.all_lemmas(word)
                candidates += [n for n in self.neighbours(word)[:8]
                               if n[:4] == word[:4] and not mine & words.all_lemmas(n)]
            candidates = [c for c in candidates if c and c != word and (" " in c or words.known_word(c))]
            return bool(candidates) and draft.replace(i, self.rng.choice(candidates), "R:MORPH")

        return self._first(draft.free(lambda t, g: g in ("JJ", "RB", "JJR", "JJS", "NN", "VB") and t.islower()), edit)

    # -- word choice (embedding neighbours) ---------------------------------------------------------------
    def _content_words(self, draft: Draft) -> list[int]:
        return draft.free(lambda t, g: g in CONTENT_TAGS and t.isalpha() and t.islower() and t not in AUXILIARIES
                          and t not in MODALS_TENSE)

    def _word_choice(self, draft: Draft) -> bool:
        def edit(i: int) -> bool:
            word, tag = draft.tokens[i], draft.tags[i]
            upos, lemma = words.UPOS[tag], words.lemma_of(word, tag)
            mine = words.all_lemmas(word) | {lemma}
            options = self.neighbours(lemma)[:10]
            for neighbour in self.rng.sample(options, len(options)):
                if upos not in words.parts_of_speech(neighbour) or neighbour[:4] == word[:4]:
                    continue  # another POS, or a relative of the same stem (that is a MORPH error)
                if mine & words.all_lemmas(neighbour):
                    continue  # an inflection of the same word
                new = words.inflect(words.lemma_of(neighbour, tag), tag)
                if new and self._judged_wrong(draft, i, new):
                    return draft.replace(i, new, f"R:{upos}")
            return False

        return self.neighbours is not None and self._first(self._content_words(draft), edit)

    def _other(self, draft: Draft) -> bool:
        def edit(i: int) -> bool:
            options = [n for n in self.neighbours(draft.tokens[i])[:10] if n[:4] != draft.tokens[i][:4]]
            for option in self.rng.sample(options, min(4, len(options))):
                if self._judged_wrong(draft, i, option):
                    return draft.replace(i, option, "R:OTHER")
            return False

        return self.neighbours is not None and self._first(self._content_words(draft), edit)

    def _judged_wrong(self, draft: Draft, i: int, new: str) -> bool:
        """A word choice counts as an error only when the judge finds it wrong in place: half of the raw neighbour
        swaps are fluent paraphrases (say -> state), and labelling those as errors teaches false alarms."""
        if self.judge is None:
            return True
        trial = [*draft.tokens[:i], _match_case(draft.tokens[i], new), *draft.tokens[i + 1:]]
        return self.judge(trial, i) >= self.judge_threshold

    # -- spelling ---------------------------------------------------------------------------------------
    def _spelling(self, draft: Draft) -> bool:
        """A non-word: one of codespell's real misspellings of the word when it has some, else a typing slip."""
        def edit(i: int) -> bool:
            word = draft.tokens[i]
            real = words.codespell_misspellings().get(word.lower())
            new = self.rng.choice(real) if real and self.rng.random() < 0.7 else words.typo(word, self.rng)
            return new.lower() != word.lower() and not words.known_word(new) and draft.replace(i, new, "R:SPELL")

        return self._first(draft.free(lambda t, g: t.isalpha() and len(t) >= 3), edit)

    def _real_word(self, draft: Draft) -> bool:
        """A real word a spellchecker would offer for this one (form -> from), drawn by its usage frequency."""
        def edit(i: int) -> bool:
            options = words.real_word_neighbours(draft.tokens[i], 1e-5)
            mine = words.all_lemmas(draft.tokens[i])
            # not an inflection; sorted, since the spellchecker's candidates come as a set, whose order changes
            # with each process's string hashing (the same seed must make the same text in any process)
            options = sorted((w, f) for w, f in options if not mine & words.all_lemmas(w))
            return bool(options) and draft.replace(
                i, self.rng.choices([w for w, _ in options], weights=[f ** 0.5 for _, f in options])[0], "R:SPELL")

        return self._first(draft.free(lambda t, g: t.isalpha() and len(t) >= 3 and t.islower()), edit)

    # -- punctuation, orthography, order --------------------------------------------------------------
    def _punctuation(self, draft: Draft) -> bool:  # FCE: R 5,383, M 1,958, U 860
        roll = self.rng.random()
        i = self._pick(draft.free(lambda t, g: t in PUNCTUATION))
        if i is not None and roll < 0.55:
            return draft.replace(i, self.rng.choice([p for p in PUNCTUATION if p != draft.tokens[i]]), "R:PUNCT")
        if i is not None and roll < 0.85:
            return draft.delete(i, "M:PUNCT")
        j = self._pick([k for k in draft.free(lambda t, g: t.isalpha()) if k > 1])
        return j is not None and draft.insert(j, ",", "U:PUNCT", ",")

    def _orthography(self, draft: Draft) -> bool:
        roll = self.rng.random()
        if roll < 0.4:  # case: a proper noun or "I" lower-cased, a common word capitalised
            i = self._pick(draft.free(lambda t, g: (g == "NNP" or t == "I") and t.isalpha()) if roll < 0.25 else
                           [k for k in draft.free(lambda t, g: t.islower() and g in ("NN", "NNS")) if k > 0])
            if i is None:
                return False
            word = draft.tokens[i]
            new = word.lower() if word[:1].isupper() else word.capitalize()
            draft.tokens[i] = new  # set directly: replace() would copy the original's case back
            draft.labels[i] = 1
            draft.types[i].append("R:ORTH")
            return True
        if roll < 0.7:
            i = self._pick(draft.free(lambda t, g: t.lower() in CONTRACTIONS or t.lower() in SPLITS))
            if i is None:
                return False
            word = draft.tokens[i].lower()
            return draft.replace(i, CONTRACTIONS.get(word) or SPLITS[word], "R:ORTH")
        pairs = [k for k in range(len(draft.tokens) - 1) if not draft.labels[k] and not draft.labels[k + 1]
                 and (draft.tokens[k].lower(), draft.tokens[k + 1].lower()) in MERGES]
        k = self._pick(pairs)
        if k is None:
            return False
        merged = _match_case(draft.tokens[k], MERGES[(draft.tokens[k].lower(), draft.tokens[k + 1].lower())])
        draft.tokens[k:k + 2], draft.tags[k:k + 2] = [merged], [draft.tags[k]]  # two words written as one
        draft.labels[k:k + 2], draft.types[k:k + 2] = [1], [["R:ORTH"]]
        return True

    def _repeat(self, draft: Draft) -> bool:
        """A word written twice (sat on on the bench): the second copy is unnecessary."""
        k = self._pick(draft.free(lambda t, g: t.isalpha()))
        if k is None:
            return False
        word = draft.tokens[k].lower()
        kind = ("DET" if word in DETERMINERS else "PREP" if word in PREPOSITIONS else "PRON" if word in PRONOUNS
                else "CONJ" if word in CONJUNCTIONS else words.UPOS.get(draft.tags[k], "OTHER"))
        return draft.insert(k + 1, word, f"U:{kind}", draft.tags[k])

    def _word_order(self, draft: Draft) -> bool:
        pairs = [k for k in range(len(draft.tokens) - 1) if not draft.labels[k] and not draft.labels[k + 1]
                 and draft.tokens[k].isalpha() and draft.tokens[k + 1].isalpha()
                 and draft.tokens[k].lower() != draft.tokens[k + 1].lower()]
        k = self._pick(pairs)
        if k is None:
            return False
        first, second = draft.tokens[k], draft.tokens[k + 1]
        if k == 0 and first[:1].isupper() and not first.isupper() and first != "I":
            first, second = first.lower(), second.capitalize()
        draft.tokens[k], draft.tokens[k + 1] = second, first
        draft.tags[k], draft.tags[k + 1] = draft.tags[k + 1], draft.tags[k]
        for j in (k, k + 1):
            draft.labels[j] = 1
            draft.types[j].append("R:WO")
        return True
