"""Error types that name the edit: ERRANT's classifier on a flagged word and its best replacement.

*go* -> *went* is ``R:VERB:TENSE``, *apple* -> *apples* ``R:NOUN:NUM``, a doubled *the* deleted ``U:DET``. Each
sentence is parsed once by spaCy (the packaged pipeline, without its entity recogniser, which ERRANT does not read),
each edited sentence once, all of them in one ``nlp.pipe`` call; the token spans come from character offsets, so no
alignment is needed.

The pipe runs the statistical components (tok2vec, tagger, parser) on whole sentences; the attribute ruler and the
lemmatizer, which look at a token and its neighbours only, run on the tokens ERRANT reads (each edit's tokens, their
heads and those heads' children) with enough neighbours for the ruler's longest pattern: the same annotations there
as on the whole sentence (``tests/test_errant_typing.py``), for about half of spaCy's time (docs/inference.md).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from electra_detect.tasks.ged.error_types import split_type


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
            docs = dict(zip(texts, annotator.nlp.pipe(texts, disable=TOKEN_LOCAL), strict=True))
            spans = [(token_span(docs[e.sentence], e.start, e.end), token_span(docs[e.edited], *e.edited_span))
                     for e in edits]
            read: dict[str, set[int]] = {}  # per text, the token indices ERRANT may read in its doc
            for edit, (o_span, c_span) in zip(edits, spans, strict=True):
                if o_span is not None and c_span is not None:
                    read.setdefault(edit.sentence, set()).update(tokens_read(docs[edit.sentence], o_span))
                    read.setdefault(edit.edited, set()).update(tokens_read(docs[edit.edited], c_span))
            for text, tokens in read.items():  # each doc once: a second pass would match the ruler's own output
                annotate_tokens(annotator.nlp, docs[text], tokens)
            return [_classify(annotator, docs[e.sentence], docs[e.edited], o_span, c_span)
                    for e, (o_span, c_span) in zip(edits, spans, strict=True)]


def _load_annotator() -> Any:
    from electra_detect.tasks.ged.nlp import import_spacy, load_spacy

    import_spacy()  # before errant imports it: spaCy without torch
    import errant

    return errant.load("en", load_spacy("typing edits needs spaCy", disable=("ner",)))


TOKEN_LOCAL = ("attribute_ruler", "lemmatizer")  # run by annotate_tokens on the tokens ERRANT reads only


def tokens_read(doc: Any, span: tuple[int, int]) -> set[int]:
    """The tokens of ``doc`` ERRANT may read for an edit over ``span`` ([first, last + 1)): the span's tokens (its
    minimised edit is within them), their heads and the heads' and the tokens' children (``preceded_by_aux``)."""
    found: set[int] = set()
    for token in doc[span[0]:span[1]]:
        found.add(token.i)
        found.add(token.head.i)
        found.update(child.i for child in token.head.children)
        found.update(child.i for child in token.children)
    return found


@functools.cache
def _ruler_width(ruler: Any) -> int | None:
    """The attribute ruler's longest pattern, in tokens (2 in ``en_core_web_sm`` 3.8); None when a pattern has an
    operator (``*``, ``+``, ...) and so no bound. Cached per ruler: one pipeline lives as long as its process."""
    patterns = [pattern for entry in ruler.patterns for pattern in entry["patterns"]]
    if any("OP" in spec for pattern in patterns for spec in pattern):
        return None
    return max(map(len, patterns), default=1)


def annotate_tokens(nlp: Any, doc: Any, tokens: set[int]) -> None:
    """The attribute ruler and the lemmatizer of ``nlp`` on ``tokens`` of ``doc`` (which the pipe annotated without
    them), as each would set them running on the whole doc: every ruler match that sets a token's attributes lies
    within the ruler's longest pattern of it, and a lemma depends on its own token."""
    ruler, lemmatizer = nlp.get_pipe("attribute_ruler"), nlp.get_pipe("lemmatizer")
    width = _ruler_width(ruler)
    reach = len(doc) if width is None else width - 1  # a pattern of unbounded length: the whole doc
    ordered = sorted(tokens)
    windows: list[list[int]] = []  # merged [start, end) windows: a match is found once
    for i in ordered:
        start, end = max(0, i - reach), min(len(doc), i + reach + 1)
        if windows and start <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], end)
        else:
            windows.append([start, end])
    matches = [(m_id, start + s, start + e) for start, end in windows  # a Span's matches count from its start
               for m_id, s, e in ruler.matcher(doc[start:end], allow_missing=True, as_spans=False)]
    # AttributeRuler.match's order, so that later rules take precedence
    ruler.set_annotations(doc, sorted((int(ruler.vocab.strings[m_id]), m_id, s, e) for m_id, s, e in matches))
    for i in ordered:  # Lemmatizer.__call__'s rule, on these tokens
        token = doc[i]
        if lemmatizer.overwrite or token.lemma == 0:
            token.lemma_ = lemmatizer.lemmatize(token)[0]


def _classify(annotator: Any, orig: Any, cor: Any, o_span: tuple[int, int] | None,
              c_span: tuple[int, int] | None) -> tuple[str, str] | None:
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
