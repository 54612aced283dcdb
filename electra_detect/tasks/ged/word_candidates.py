"""Candidates a flagged word gets from word lists alone: the partners of its closed-class confusion sets, its
inflections and adjective/adverb twin, and the learner-weighted edit distance that orders spelling corrections.

The suggester (``suggestions.py``) adds the spellchecker's candidates, cases each candidate like the word, and ranks
them through the GED model.
"""

from __future__ import annotations

import functools

from electra_detect.word_classes import (
    AGREEMENT,
    CONJUNCTIONS,
    CONTRACTIONS,
    DETERMINERS,
    HOMOPHONES,
    MODALS_TENSE,
    POSSESSIVES,
    PREPOSITION_CONFUSIONS,
    PRONOUNS,
    PUNCTUATION,
)


def learner_distance(word: str, candidate: str) -> float:
    """Optimal string alignment distance weighted as learners misspell: a doubled letter written single or a single
    one doubled (*writen*, *choosen*) costs 0.5, a swap 0.75, any other edit 1, and a changed first letter 0.5 more
    (*shoping* is *shopping* before *hoping*). Hand-written: rapidfuzz's OSA has no per-edit weights."""
    n, m = len(word), len(candidate)
    d = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        d[i][0] = float(i)
    for j in range(m + 1):
        d[0][j] = float(j)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            a, b = word[i - 1], candidate[j - 1]
            drop = 0.5 if (i > 1 and word[i - 2] == a) or (i < n and word[i] == a) else 1.0  # undoubling
            add = 0.5 if (j > 1 and candidate[j - 2] == b) or (j < m and candidate[j] == b) else 1.0  # doubling
            d[i][j] = min(d[i - 1][j] + drop, d[i][j - 1] + add, d[i - 1][j - 1] + (a != b))
            if i > 1 and j > 1 and a == candidate[j - 2] and word[i - 2] == b and a != b:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 0.75)
    moved = word[:1] != candidate[:1] and word[:1] != candidate[1:2]  # a first letter dropped is not a change
    return d[n][m] + (0.5 if moved else 0.0)


@functools.cache
def confusion_sets() -> dict[str, tuple[str, ...]]:
    """Word -> the words it is confused with, from every table of ``word_classes``, read both ways."""
    found: dict[str, list[str]] = {}

    def add(word: str, other: str) -> None:
        if other != word and other not in found.setdefault(word, []):
            found[word].append(other)

    tables = [DETERMINERS, PREPOSITION_CONFUSIONS, PRONOUNS, POSSESSIVES, CONJUNCTIONS, MODALS_TENSE, AGREEMENT,
              CONTRACTIONS, HOMOPHONES, {mark: PUNCTUATION for mark in PUNCTUATION}]
    for table in tables:
        for word, others in table.items():
            for other in [others] if isinstance(others, str) else others:
                add(word, other)
                add(other, word)
    return {word: tuple(others) for word, others in found.items()}


def confusions(word: str) -> list[str]:
    """The closed-class words and homophones ``word`` is confused with (the/a, in/on, is/are, its/it's, to/too, ./,)."""
    return list(confusion_sets().get(word.lower(), ()))


def inflections(word: str) -> list[str]:
    """Every inflection of each lemma ``word`` can have (lemminflect), and its adjective/adverb twin. An unknown
    form (*buyed*, *childs*) takes the lemma the regular rules give when that lemma is a word."""
    from electra_detect.tasks.ged.nlp import import_lemminflect

    lemminflect = import_lemminflect()

    lower = word.lower()
    lemmas = {(upos, lemma) for upos, found in lemminflect.getAllLemmas(lower).items() for lemma in found}
    if not lemmas and lower.isalpha():
        for upos in ("VERB", "NOUN"):
            lemmas |= {(upos, lemma) for lemma in lemminflect.getAllLemmasOOV(lower, upos).get(upos, ())
                       if lemma != lower and lemminflect.getAllLemmas(lemma)}
    forms: list[str] = []
    for upos, lemma in sorted(lemmas):
        for tagged in lemminflect.getAllInflections(lemma, upos=upos).values():
            forms += tagged
        forms.append(lemma)
    forms += adverb_twins(lower)
    return [form for form in dict.fromkeys(forms) if form != lower]


def adverb_twins(word: str) -> list[str]:
    """The adverb of an adjective or the adjective of an adverb, by spelling (quick/quickly, easy/easily,
    simple/simply, basic/basically); only words lemminflect knows."""
    from electra_detect.tasks.ged.nlp import import_lemminflect

    lemminflect = import_lemminflect()

    if not word.isalpha() or len(word) < 3:
        return []
    if word.endswith("ly"):
        stem = word[:-2]
        guesses = [stem, stem[:-1] + "y" if stem.endswith("i") else "", stem + "le", stem[:-2] if
                   word.endswith("ically") else ""]
    else:
        guesses = [word + "ly", word[:-1] + "ily" if word.endswith("y") else "",
                   word[:-2] + "ly" if word.endswith("le") else "", word + "ally" if word.endswith("ic") else ""]
    return [g for g in guesses if g and g != word and lemminflect.getAllLemmas(g)]
