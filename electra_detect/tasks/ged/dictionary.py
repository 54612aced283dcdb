"""The personal dictionary: words a writer vouches for, never flagged and never suggested.

The file is ``$ELECTRA_DETECT_DICTIONARY`` when set, else ``$XDG_CONFIG_HOME/electra-detect/dictionary.txt``
(``~/.config/electra-detect/dictionary.txt``): one word a line (a line with spaces is a phrase), ``#`` starts a
comment, UTF-8. It is read again whenever its modification time or size changes, so an editor's server picks up
a word as soon as it is saved. Requests add their own words (``--word``, LanguageTool's dictionary words).

Matching is case-insensitive (the model is uncased) and takes inflections: a dictionary word matches its lemmas and
every form lemminflect gives them (*tokenise*: *tokenises*, *tokenised*, *tokenising*; *apples*: *apple*), a word
lemminflect does not know its regular noun and verb forms (*finetune*: *finetunes*, *finetuned*), and any of them
its possessive (*Kubernetes's*).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from electra_detect.errors import GedDataError

DICTIONARY_ENV = "ELECTRA_DETECT_DICTIONARY"
MAX_REQUEST_WORDS = 1000  # words one request (the server's, the demo's) may add: each is looked up in lemminflect
_POSSESSIVE = re.compile(r"['’]s?$", re.IGNORECASE)


def request_words(text: str) -> tuple[str, ...]:
    """A request's own dictionary words: comma- or newline-separated, blanks dropped (a front refuses more than
    ``MAX_REQUEST_WORDS`` with its own error)."""
    return tuple(word.strip() for word in re.split(r"[,\n]", text) if word.strip())


def default_dictionary_path() -> Path:
    """``$ELECTRA_DETECT_DICTIONARY``, else ``$XDG_CONFIG_HOME/electra-detect/dictionary.txt`` (default
    ``~/.config``)."""
    if os.environ.get(DICTIONARY_ENV):
        return Path(os.environ[DICTIONARY_ENV]).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "electra-detect" / "dictionary.txt"


def regular_forms(word: str) -> set[str]:
    """The regular noun and verb endings of a lower-case word (hand-written: the few English spelling rules, so a tag
    model's dictionary needs neither lemminflect nor the spaCy it imports): plural/3rd person, past, -ing."""
    sibilant = word.endswith(("s", "x", "z", "ch", "sh"))
    consonant_y = len(word) > 1 and word.endswith("y") and word[-2] not in "aeiou"
    plural = word + "es" if sibilant else word[:-1] + "ies" if consonant_y else word + "s"
    past = word + "d" if word.endswith("e") else word[:-1] + "ied" if consonant_y else word + "ed"
    ing = word[:-1] + "ing" if word.endswith("e") and not word.endswith("ee") else word + "ing"
    return {plural, past, ing}


def word_forms(word: str, inflections: Any = None) -> set[str]:
    """The lower-cased forms a dictionary word matches: itself, its lemmas and their inflections (a tag model's
    inflection table when given, ``edit_tags.Inflections``, else lemminflect; a word neither knows takes the regular
    noun and verb forms)."""
    lower = word.strip().lower()
    if not lower:
        return set()
    forms = {lower}
    if not lower.isalpha():
        return forms
    if inflections is not None:
        known = inflections.all_forms(lower)
        return forms | known if len(known) > 1 else forms | regular_forms(lower)
    from electra_detect.tasks.ged.nlp import import_lemminflect

    lemminflect = import_lemminflect()
    lemmas = {lower} | {lemma for found in lemminflect.getAllLemmas(lower).values() for lemma in found}
    known = [lemminflect.getAllInflections(lemma) for lemma in sorted(lemmas)]
    if any(known):
        forms |= lemmas | {form.lower() for table in known for found in table.values() for form in found}
    else:
        for upos in ("NOUN", "VERB"):
            forms |= {form.lower() for found in lemminflect.getAllInflectionsOOV(lower, upos).values()
                      for form in found}
    return forms


@dataclass
class Vocabulary:
    """Dictionary words as matched: single forms and phrases (lower-cased, their spaces as one space)."""

    forms: frozenset[str] = frozenset()
    phrases: tuple[str, ...] = ()

    @classmethod
    def of(cls, entries: Iterable[str], inflections: Any = None) -> Vocabulary:
        """The vocabulary of dictionary ``entries`` (``inflections``: a tag model's table, see :func:`word_forms`)."""
        forms: set[str] = set()
        phrases: list[str] = []
        for entry in entries:
            entry = " ".join(entry.split())
            if " " in entry:
                phrases.append(entry.lower())
            elif entry:
                forms |= word_forms(entry, inflections)
        return cls(frozenset(forms), tuple(dict.fromkeys(phrases)))

    def __or__(self, other: Vocabulary) -> Vocabulary:
        return Vocabulary(self.forms | other.forms, tuple(dict.fromkeys((*self.phrases, *other.phrases))))

    def __bool__(self) -> bool:
        return bool(self.forms or self.phrases)

    def knows(self, word: str) -> bool:
        """Whether ``word`` (a written word; a possessive 's is set aside) is a dictionary form."""
        lower = word.lower()
        return lower in self.forms or _POSSESSIVE.sub("", lower) in self.forms

    def phrase_spans(self, text: str) -> list[tuple[int, int]]:
        """Where the dictionary's phrases occur in ``text`` (whole words, any case, any spacing)."""
        spans = []
        for phrase in self.phrases:
            pattern = r"(?<!\w)" + r"\s+".join(map(re.escape, phrase.split())) + r"(?!\w)"
            spans += [m.span() for m in re.finditer(pattern, text, re.IGNORECASE)]
        return spans


@dataclass
class PersonalDictionary:
    """The dictionary file, read again when its modification time or size changes; a missing file is empty."""

    path: Path = field(default_factory=default_dictionary_path)
    _stamp: tuple[int, int] | None = None
    _vocabulary: Vocabulary = field(default_factory=Vocabulary)

    def vocabulary(self, inflections: Any = None) -> Vocabulary:
        """The file's words now (one ``stat`` a call; read again only when it changed; ``inflections``: see
        :func:`word_forms`)."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._vocabulary = None, Vocabulary()
            return self._vocabulary
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            self._vocabulary = Vocabulary.of(read_entries(self.path), inflections)
            self._stamp = stamp
        return self._vocabulary


def read_entries(path: Path) -> list[str]:
    """A dictionary file's entries: its lines without ``#`` comments and blank lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise GedDataError(f"dictionary {path} is not UTF-8 text") from None
    except OSError as exc:
        raise GedDataError(f"dictionary {path} cannot be read: {exc.strerror or exc}") from None
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]
