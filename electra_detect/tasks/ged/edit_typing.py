"""Error types that name the edit: ERRANT's classifier on a flagged word and its best replacement.

*go* -> *went* is ``R:VERB:TENSE``, *apple* -> *apples* ``R:NOUN:NUM``, a doubled *the* deleted ``U:DET``. Each
sentence is parsed once by spaCy (the packaged pipeline, without its entity recogniser, which ERRANT does not read),
each edited sentence once, all of them in one ``nlp.pipe`` call; the token spans come from character offsets, so no
alignment is needed.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from electra_detect.tasks.ged.edit_types import split_type


@dataclass(frozen=True)
class Edit:
    """``sentence[start:end]`` replaced by ``value`` gives ``edited``, where the value spans ``edited_span``."""

    sentence: str
    start: int
    end: int
    edited: str
    edited_span: tuple[int, int]


class EditTyper:
    """ERRANT over the packaged spaCy pipeline, loaded on first use (``available`` says whether it can be), by
    whichever thread asks first: a background preload or the first check; the other waits for it."""

    def __init__(self) -> None:
        self._annotator: Any = None
        self._loading = threading.Lock()
        self._classifying = threading.Lock()  # one spaCy pipeline, not documented as safe to share between threads

    @property
    def annotator(self) -> Any:
        if self._annotator is None:
            with self._loading:
                if self._annotator is None:
                    self._annotator = _load_annotator()
        return self._annotator

    @functools.cached_property
    def available(self) -> bool:
        """Whether errant and the spaCy model are installed (the analysis extra), found without loading them (a
        run that flags nothing loads neither); without them the type head types."""
        from importlib.util import find_spec

        from electra_detect.tasks.ged.nlp import SPACY_MODEL

        return all(find_spec(name) is not None for name in ("errant", "spacy", SPACY_MODEL))

    def classify(self, edits: Sequence[Edit]) -> list[tuple[str, str] | None]:
        """(operation, main type) of each edit, as ERRANT classifies it (``R``, ``VERB:TENSE``); None where the edit
        changes no token or ERRANT gives no type."""
        if not edits:
            return []
        annotator = self.annotator
        texts = list(dict.fromkeys(t for e in edits for t in (e.sentence, e.edited)))
        with self._classifying:  # a server finishes requests' checks in several threads
            docs = dict(zip(texts, annotator.nlp.pipe(texts), strict=True))
            return [_classify(annotator, docs[e.sentence], docs[e.edited], e) for e in edits]


def _load_annotator() -> Any:
    from electra_detect.tasks.ged.nlp import import_spacy, load_spacy

    import_spacy()  # before errant imports it: spaCy without torch
    import errant

    return errant.load("en", load_spacy("typing edits needs spaCy", disable=("ner",)))


def _classify(annotator: Any, orig: Any, cor: Any, edit: Edit) -> tuple[str, str] | None:
    o_span = token_span(orig, edit.start, edit.end)
    c_span = token_span(cor, *edit.edited_span)
    if o_span is None or c_span is None:
        return None
    typed = annotator.import_edit(orig, cor, [*o_span, *c_span])  # minimised to the tokens that differ
    if typed.o_start == typed.o_end and typed.c_start == typed.c_end:
        return None
    op, main = split_type(typed.type)
    return op, main


def token_span(doc: Any, start: int, end: int) -> tuple[int, int] | None:
    """[first, last + 1) of the spaCy tokens overlapping characters [start, end); an empty span: the empty token
    span before the first token at or after ``start``."""
    if end <= start:
        at = next((t.i for t in doc if t.idx >= start), len(doc))
        return at, at
    inside = [t.i for t in doc if t.idx < end and start < t.idx + len(t.text)]
    return (inside[0], inside[-1] + 1) if inside else None
