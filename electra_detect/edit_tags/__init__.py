"""Edit tags (GECToR-style): what a typed model's tag head says to do at a token, and the edit that follows.

A tag names one edit at one source token, so its operation, its ERRANT type, the message and the suggestion follow
from it with no parse at check time:

- ``$KEEP``: no edit.  ``$DELETE``: the token is unnecessary (operation U).
- ``$INSERT_w``: *w* (one or more words, joined by ``_``) is missing before the token (M). A missing word's tag
  sits on the token the detection labels mark: the word after the gap (GECToR's ``$APPEND`` sits on the one before).
- ``$APPEND_w``: *w* is missing after the token: only where the gap ends the sentence (a missing full stop).
- ``$REPLACE_w``: the token should be *w* (R). ``$SPELL``: a misspelling, corrected by the spelling suggester.
- g-transformations (R), read from the model dir's ``inflections.json``, written when the vocabulary is built:
  ``$CASE_LOWER|CAPITAL|UPPER`` (case), ``$FORM_<PTB tag>`` (the same lemma in that form: ``$FORM_VBZ`` on *go* is
  *goes*, ``$FORM_NNS`` on *cat* is *cats*).

Each tag's ERRANT type is fixed in the vocabulary (``edit_tags.json``: the majority type of its training edits).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

KEEP, DELETE, SPELL = "$KEEP", "$DELETE", "$SPELL"
# the prefixes of the tags that carry a word or a form: nobody else spells them
INSERT, APPEND, REPLACE, CASE, FORM = "$INSERT_", "$APPEND_", "$REPLACE_", "$CASE_", "$FORM_"
TAG_PREFIX = "tag:"  # a tag channel's name in a model config: ``tag:$REPLACE_the``
TAGS_FILE, INFLECTIONS_FILE = "edit_tags.json", "inflections.json"
INFLECTION_TYPES = {"VBD": "R:VERB:INFL", "NNS": "R:NOUN:INFL"}  # an over-regular form's type, by its fix's form
FORMS = ("VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "NN", "NNS", "JJR", "JJS")  # what ``$FORM_`` may name


def operation(tag: str) -> str:
    """ERRANT's operation of a tag: M (missing), U (unnecessary), R (replace); "" for ``$KEEP``."""
    if tag == KEEP:
        return ""
    if tag.startswith((INSERT, APPEND)):
        return "M"
    return "U" if tag == DELETE else "R"


def words_of(tag: str) -> str:
    """The words an ``$INSERT_``, ``$APPEND_`` or ``$REPLACE_`` tag names, space-separated ("" for others)."""
    for prefix in (INSERT, APPEND, REPLACE):
        if tag.startswith(prefix):
            return tag[len(prefix):].replace("_", " ")
    return ""


def change_case(word: str, how: str) -> str:
    """``word`` in the case ``$CASE_<how>`` names (LOWER, CAPITAL, UPPER)."""
    if how == "LOWER":
        return word.lower()
    if how == "UPPER":
        return word.upper()
    return word[:1].upper() + word[1:].lower() if how == "CAPITAL" else word


@dataclass
class Inflections:
    """Word forms by lemma (lemminflect's, written into the model dir when the vocabulary is built, so checking
    imports neither lemminflect nor spaCy): ``lemmas[word]`` its lemmas, ``forms[lemma][PTB tag]`` its forms."""

    lemmas: dict[str, list[str]]
    forms: dict[str, dict[str, str]]

    @classmethod
    def load(cls, model_dir: str | Path) -> Inflections:
        path = Path(model_dir) / INFLECTIONS_FILE
        if not path.exists():
            return cls({}, {})
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(data["lemmas"], data["forms"])

    def form(self, word: str, tag: str) -> str | None:
        """``word`` in the form ``tag`` (VBZ, NNS, ...): the first of its lemmas that has that form, in the word's
        own case (capitalised or upper as the word was); None when the table knows no such form."""
        lower = word.lower()
        for lemma in self.lemmas.get(lower, ()):
            target = self.forms.get(lemma, {}).get(tag)
            if lemma == "be" and tag in ("VBD", "VBP"):  # be has two such forms: the one agreeing with the word
                target = "are" if tag == "VBP" else "were" if lower in ("are", "were", "'re") else "was"
            if target and target != lower:
                if word.isupper() and len(word) > 1:
                    return target.upper()
                return target[:1].upper() + target[1:] if word[:1].isupper() else target
        return None

    def irregular(self, word: str) -> str | None:
        """The irregular form an unknown ``word`` regularises (*buyed*: *bought*, *runned*: *ran*, *childs*:
        *children*), in its case; None when ``word`` is known or no lemma's form is spelled otherwise."""
        found = self.irregular_form(word)
        return None if found is None else found[0]

    def irregular_form(self, word: str) -> tuple[str, str] | None:
        """(:meth:`irregular`'s form, its PTB tag: VBD or NNS), or None."""
        lower = word.lower()
        if lower in self.lemmas or not lower.isalpha():
            return None
        for ending, tag in (("ed", "VBD"), ("s", "NNS")):
            if not lower.endswith(ending) or len(lower) <= len(ending) + 1:
                continue
            stem = lower[:-len(ending)]
            stems = [stem, stem + "e", stem[:-1] + "y" if stem.endswith("i") else "",
                     stem[:-1] if len(stem) > 2 and stem[-1] == stem[-2] else "", stem[:-1] if ending == "s" else ""]
            for lemma in filter(None, stems):
                target = self.forms.get(lemma, {}).get(tag)
                if lemma in self.lemmas.get(lemma, ()) and target and target.isalpha() and target != lower:
                    return (target.upper() if word.isupper() and len(word) > 1 else
                            target[:1].upper() + target[1:] if word[:1].isupper() else target), tag
        return None

    def all_forms(self, word: str) -> set[str]:
        """Every form of every lemma of ``word`` (the personal dictionary's inflections), lower case."""
        lower = word.lower()
        return {form for lemma in self.lemmas.get(lower, [lower]) for form in self.forms.get(lemma, {}).values()}


def split_negation(word: str) -> tuple[str, str]:
    """(the word, "n't") for a written negative contraction (*don't*: *do*, *n't*), else (the word, "")."""
    for mark in ("n't", "n\u2019t"):
        if word.lower().endswith(mark) and len(word) > len(mark):
            return word[:-len(mark)], word[-len(mark):]
    return word, ""


@dataclass(frozen=True)
class TagEdit:
    """What a tag does at a word: ``operation`` (M/R/U), ``type`` (ERRANT's, e.g. ``R:VERB:SVA``), ``replacement``
    (the text that takes the word's place; for M the words inserted; None when the tag cannot say: a ``$SPELL``
    or a form the table lacks) and where an insertion goes: ``before`` the word (True) or after it."""

    tag: str
    operation: str
    type: str
    replacement: str | None
    before: bool = True


FALLBACK_TAG = "$UNKNOWN"  # a flagged word whose tag was not decoded: R:OTHER, no suggestion


class EditTags:
    """A model's tag vocabulary (its ``edit_tags.json``: tag -> ERRANT type), in the order of its ``tag:`` channels,
    and its inflection table. ``names``, ``operations`` and ``mains`` are arrays by channel index, one longer than
    the channels: index -1 is the fallback for a word whose tag was not decoded."""

    def __init__(self, channels: list[str], types: dict[str, str], inflections: Inflections,
                 deleted_types: dict[str, str] | None = None) -> None:
        import numpy as np

        self.channels = channels
        self.types = types
        self.inflections = inflections
        self.deleted_types = deleted_types or {}  # a deleted word's type (U:DET for *the*), else $DELETE's
        names = [*channels, FALLBACK_TAG]
        full = [types.get(t) or f"{operation(t) or 'R'}:OTHER" for t in names]
        self.names = np.array(names, dtype=object)
        self.operations = np.array([t.split(":", 1)[0] for t in full], dtype=object)
        self.mains = np.array([t.split(":", 1)[1] for t in full], dtype=object)

    @classmethod
    def load(cls, model_dir: str | Path, channels: list[str]) -> EditTags:
        """The vocabulary of a model whose channels after ``error`` are ``channels`` (``tag:$KEEP``, ...)."""
        path = Path(model_dir) / TAGS_FILE
        data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        return cls([c[len(TAG_PREFIX):] for c in channels], data.get("types", {}), Inflections.load(model_dir),
                   data.get("deleted_types", {}))

    def edit(self, tag: str, word: str) -> TagEdit:
        """The edit ``tag`` makes at ``word``."""
        op = operation(tag) or "R"
        full = self.types.get(tag) or f"{op}:OTHER"
        if tag == DELETE:
            full = self.deleted_types.get(word.lower(), full)
        replacement: str | None = None
        if tag == DELETE:
            replacement = ""
        elif op == "M":
            replacement = words_of(tag)
        elif tag.startswith(REPLACE):
            replacement = words_of(tag)
            if word[:1].isupper() and replacement[:1].islower():  # the sentence's first word keeps its capital
                replacement = replacement[:1].upper() + replacement[1:]
        elif tag.startswith(CASE):
            replacement = change_case(word, tag[len(CASE):])
        elif tag == SPELL:  # an over-regular form (*buyed*) is the table's; other misspellings the spellchecker's
            found = self.inflections.irregular_form(word)
            if found is not None:  # ERRANT 3.0 types buyed -> bought R:VERB:INFL, childs -> children R:NOUN:INFL
                replacement, form = found
                full = INFLECTION_TYPES[form]
        elif tag.startswith(FORM):
            base, clitic = split_negation(word)  # don't -> do + n't: the verb's form, the clitic kept
            form = self.inflections.form(base, tag[len(FORM):])
            replacement = None if form is None else form + clitic
        return TagEdit(tag, op, full, replacement, before=not tag.startswith(APPEND))
