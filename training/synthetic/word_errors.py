"""Word-level error sources for the realistic error mix: inflection, misspelling and confusable words.

Each function is pure given its tables; the tables come from installable libraries, built once and cached:

- inflection: ``lemminflect`` (lemmas and inflections for any English word; its out-of-vocabulary rules give the
  over-regularised forms learners write: buyed, childs, gooder);
- misspellings: ``codespell``'s dictionary of real people's misspellings (inverted: correct word -> misspellings),
  keyboard neighbours, doubled/dropped letters and sound-alike spellings;
- real-word errors: the words a spellchecker (``pyspellchecker``) would offer for a word, the inverted-spellchecker
  idea of Grundkiewicz et al. 2019 ("form" -> "from", "then" -> "than");
- word choice: nearest neighbours of a word in an encoder's input-embedding table (say -> tell, borrow -> lend),
  kept only when they have another lemma and are inflected to the original's tag.
"""

from __future__ import annotations

import functools
import random
from collections import defaultdict
from pathlib import Path

import numpy as np

# Penn tag -> lemminflect's universal POS
UPOS = {"NN": "NOUN", "NNS": "NOUN", "VB": "VERB", "VBD": "VERB", "VBG": "VERB", "VBN": "VERB", "VBP": "VERB",
        "VBZ": "VERB", "JJ": "ADJ", "JJR": "ADJ", "JJS": "ADJ", "RB": "ADV", "RBR": "ADV", "RBS": "ADV"}
KEYBOARD = ["qwertyuiop", "asdfghjkl", "zxcvbnm"]
# Spellings that sound alike, both ways (learners spell by ear): (written, misspelt)
SOUND_SPELLINGS = [("ph", "f"), ("ck", "k"), ("c", "s"), ("c", "k"), ("ie", "ei"), ("ei", "ie"), ("ible", "able"),
                   ("able", "ible"), ("ance", "ence"), ("ence", "ance"), ("ant", "ent"), ("ent", "ant"), ("ou", "o"),
                   ("y", "i"), ("ai", "ei"), ("ee", "ea"), ("ea", "ee"), ("tion", "sion"), ("sion", "tion"),
                   ("er", "ar"), ("or", "er"), ("wh", "w"), ("gh", ""), ("ll", "l"), ("ss", "s"), ("mm", "m"),
                   ("rr", "r"), ("cc", "c"), ("tt", "t"), ("pp", "p"), ("s", "ss"), ("l", "ll"), ("e", "")]


def keyboard_neighbours() -> dict[str, str]:
    """Letter -> the letters next to it on a QWERTY keyboard (same row and the rows above and below)."""
    out: dict[str, str] = defaultdict(str)
    for r, row in enumerate(KEYBOARD):
        for c, letter in enumerate(row):
            for rr in (r - 1, r, r + 1):
                if 0 <= rr < len(KEYBOARD):
                    for cc in (c - 1, c, c + 1):
                        if 0 <= cc < len(KEYBOARD[rr]) and (rr, cc) != (r, c):
                            out[letter] += KEYBOARD[rr][cc]
    return dict(out)


def typo(word: str, rng: random.Random) -> str:
    """A non-word a writer could type for ``word``: a keyboard slip, a transposition, a doubled or dropped letter,
    or a sound-alike spelling; returns ``word`` unchanged when none applies."""
    lower = word.lower()
    how = rng.choice(["keyboard", "swap", "double", "drop", "sound", "sound"])
    if how == "sound":
        rules = [(a, b) for a, b in SOUND_SPELLINGS if a in lower[1:]]
        if rules:
            a, b = rng.choice(rules)
            at = lower.index(a, 1)
            return word[:at] + b + word[at + len(a):]
        how = "keyboard"
    k = rng.randrange(1, len(word) - 1) if len(word) > 2 else 0
    if how == "keyboard":
        near = keyboard_neighbours().get(lower[k], "")
        return word[:k] + rng.choice(near) + word[k + 1:] if near else word
    if how == "swap":
        return word[:k] + word[k + 1] + word[k] + word[k + 2:] if k + 1 < len(word) else word
    if how == "double":
        return word[:k] + word[k] + word[k:]
    return word[:k] + word[k + 1:]


@functools.cache
def codespell_misspellings() -> dict[str, list[str]]:
    """Correct word -> misspellings people wrote for it, from codespell's main dictionary (single words only)."""
    import codespell_lib

    path = Path(codespell_lib.__file__).parent / "data" / "dictionary.txt"
    out: dict[str, list[str]] = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines():
        wrong, _, rights = line.partition("->")
        fixes = [r.strip() for r in rights.split(",") if r.strip()]
        if len(fixes) == 1 and wrong.isalpha() and fixes[0].isalpha():  # one sure correction: a misspelling of it
            out[fixes[0].lower()].append(wrong.lower())
    return dict(out)


@functools.cache
def spellchecker():
    from spellchecker import SpellChecker

    return SpellChecker()


def known_word(word: str) -> bool:
    """In the spellchecker's dictionary (a real English word)."""
    return bool(spellchecker().known([word.lower()]))


def real_word_neighbours(word: str, min_frequency: float = 1e-6) -> list[tuple[str, float]]:
    """Real words one edit from ``word`` that a spellchecker would offer for it, with their usage frequency."""
    checker = spellchecker()
    lower = word.lower()
    out = []
    for candidate in checker.known(checker.edit_distance_1(lower)):
        frequency = checker.word_usage_frequency(candidate)
        if candidate != lower and frequency >= min_frequency and candidate.isalpha():
            out.append((candidate, frequency))
    return out


def inflect(lemma: str, tag: str, regularise: bool = False) -> str | None:
    """``lemma`` in Penn ``tag``; ``regularise`` applies the regular rules even to irregular words (buy -> buyed)."""
    import lemminflect

    upos = UPOS.get(tag)
    if upos is None:
        return None
    forms = (lemminflect.getAllInflectionsOOV(lemma, upos) if regularise else
             lemminflect.getAllInflections(lemma, upos) or lemminflect.getAllInflectionsOOV(lemma, upos))
    found = forms.get(tag) or (forms.get("VB") if tag == "VBP" else None)
    return found[0] if found else None


def lemma_of(word: str, tag: str) -> str:
    import lemminflect

    upos = UPOS.get(tag, "NOUN")
    lemmas = lemminflect.getLemma(word.lower(), upos)
    return lemmas[0] if lemmas else word.lower()


def parts_of_speech(word: str) -> set[str]:
    """The universal POS a word can have, per lemminflect's lexicon (empty for an unknown word)."""
    import lemminflect

    return set(lemminflect.getAllLemmas(word.lower()))


class EmbeddingNeighbours:
    """Nearest whole words of a word in an encoder's input-embedding table (cosine), computed on demand and cached.

    Static input embeddings put words used in the same places together (say/tell, borrow/lend, big/large), the
    confusions learners make; neighbours that share the word's lemma are only inflections and are dropped."""

    def __init__(self, vocab: list[str], embeddings: np.ndarray, top: int = 12) -> None:
        self.rows = [i for i, token in enumerate(vocab) if token.isalpha() and token.islower() and len(token) > 1]
        self.words = [vocab[i] for i in self.rows]
        self.index = {w: j for j, w in enumerate(self.words)}
        table = embeddings[self.rows].astype(np.float32)
        self.table = table / np.linalg.norm(table, axis=1, keepdims=True).clip(1e-6)
        self.top = top
        self.cache: dict[str, list[str]] = {}

    @classmethod
    def from_model(cls, model_dir: str | Path) -> EmbeddingNeighbours:
        """From a model directory's vocab.txt and the word-embedding tensor of its model.safetensors."""
        from safetensors.numpy import load_file

        model_dir = Path(model_dir)
        weights = load_file(str(model_dir / "model.safetensors"))
        name = next(k for k in weights if k.endswith("word_embeddings.weight"))
        vocab = (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
        return cls(vocab, weights[name])

    def __call__(self, word: str) -> list[str]:
        word = word.lower()
        if word not in self.cache:
            j = self.index.get(word)
            if j is None:
                self.cache[word] = []
            else:
                similarity = self.table @ self.table[j]
                best = np.argpartition(-similarity, self.top + 1)[:self.top + 1]
                self.cache[word] = [self.words[k] for k in best[np.argsort(-similarity[best])] if k != j]
        return self.cache[word]


def all_lemmas(word: str) -> set[str]:
    """Every lemma of ``word`` under any POS (lemminflect), itself when it has none: two words that share one are
    forms of one word."""
    import lemminflect

    found = {lemma for lemmas in lemminflect.getAllLemmas(word.lower()).values() for lemma in lemmas}
    return found or {word.lower()}
