"""spaCy pipeline component ``electra_detect``: the detector's scores on spaCy tokens, its flags as error spans.

    nlp = spacy.load("en_core_web_sm")
    nlp.add_pipe("electra_detect")                      # the CLI's default model; config={"model": ...} for another
    doc = nlp("He go to the store yesterday.")
    [(t.text, t._.p_replaced) for t in doc]             # max subword probability of "replaced" over the token
    [(e.text, e.label_, e._.score, e._.message) for e in doc._.errors]  # label "R:VERB:TENSE": the error type
    [e._.flag for e in doc._.errors]                    # the record `ged` writes: rule, category, message, ...
    nlp.add_pipe("electra_detect", config={"suggest": True})  # and e._.suggestions: replacements, best first
    nlp.add_pipe("electra_detect", config={"disabled_categories": ["STYLE"], "words": ["Kubernetes"]})

Registered through the ``spacy_factories`` entry point, so ``add_pipe`` finds it without an import. The model is
loaded as ``electra-detect ged`` loads it (a model dir's fine-tuned ``ged/`` when it has one, its tuned threshold),
and the flags come from the GED task as ``ged`` gives them (``tasks.ged.check``: types, rules, messages, the
writer's options and personal dictionary); ``nlp.pipe`` scores each batch of docs with one ``Detector.score`` call
(and one more for the candidates of its flagged words).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from spacy.language import Language
from spacy.tokens import Doc, Span, Token

from electra_detect.detector import Detector
from electra_detect.scores import TextScores
from electra_detect.tasks.ged.check import GedChecker
from electra_detect.tasks.ged.flags import FlaggedWord
from electra_detect.tasks.ged.options import GedOptions, build_ged_options

FACTORY = "electra_detect"
UNTYPED_LABEL = "ERROR"  # the span label when the model names no operation or type
SPAN_EXTENSIONS = ("score", "suggestions", "flag", "rule", "category", "message")


def register_extensions() -> None:
    """``Token._.p_replaced`` (None for a token no subword covers, e.g. whitespace), ``Doc._.errors``, and on each
    error span ``_.score``, ``_.suggestions`` (None unless the component suggests), ``_.flag`` (the flagged word's
    record as ``ged`` writes it), ``_.rule``, ``_.category`` and ``_.message``; an extension some other package
    already registered under that name is left as it is."""
    for cls, name in ((Token, "p_replaced"), (Doc, "errors"), *((Span, name) for name in SPAN_EXTENSIONS)):
        if not cls.has_extension(name):
            cls.set_extension(name, default=None)


class ElectraDetectComponent:
    """Scores each doc's text with a ``Detector``; sets token probabilities and the flagged words as spans."""

    def __init__(self, checker: GedChecker, options: GedOptions, batch_size: int) -> None:
        self.checker = checker
        self.options = options  # the GED task's options (threshold, rules, categories, words, suggest)
        self.batch_size = batch_size
        register_extensions()

    @property
    def detector(self) -> Detector:
        return self.checker.detector

    @property
    def threshold(self) -> float:
        return self.checker.threshold(self.options)

    def __call__(self, doc: Doc) -> Doc:
        return next(self.pipe([doc]))

    def pipe(self, docs: Iterable[Doc], batch_size: int | None = None) -> Iterator[Doc]:
        size = batch_size or self.batch_size
        stream = iter(docs)
        while batch := list(islice(stream, size)):
            scored = self.detector.score([doc.text for doc in batch], batch_size=self.batch_size)
            flagged = self.checker.check(scored, self.options)
            yield from (annotate(doc, scores, words) for doc, scores, words in zip(batch, scored, flagged, strict=True))


def annotate(doc: Doc, scores: TextScores, flagged: Sequence[FlaggedWord]) -> Doc:
    """Set ``doc``'s extensions from the detector's scores of ``doc.text`` (offsets are characters of that text)
    and its flagged words (``GedChecker.check``)."""
    token_at = token_index_by_char(doc)
    best: dict[int, float] = {}
    for subword in scores.tokens:
        for index in {token_at[c] for c in range(subword.start, subword.end) if token_at[c] is not None}:
            best[index] = max(best.get(index, 0.0), subword.p_replaced)
    for token in doc:
        token._.p_replaced = best.get(token.i)
    doc._.errors = error_spans(doc, flagged)
    return doc


def token_index_by_char(doc: Doc) -> list[int | None]:
    """For each character of ``doc.text``, the index of the token it belongs to (None for whitespace between)."""
    owner: list[int | None] = [None] * len(doc.text)
    for token in doc:
        owner[token.idx:token.idx + len(token.text)] = [token.i] * len(token.text)
    return owner


def error_spans(doc: Doc, flagged: Sequence[FlaggedWord]) -> list[Span]:
    """One span per flagged word, widened to whole spaCy tokens; words that widen to the same span give one
    span, with the highest score (and that word's record: type, rule, message, suggestions' values best first)."""
    spans: dict[tuple[int, int], Span] = {}
    for word in flagged:
        record = word.to_dict()
        span = doc.char_span(word.start, word.end, label=error_label(record), alignment_mode="expand")
        if span is None:
            continue  # the word lies in whitespace spaCy kept as no token
        key = (span.start, span.end)
        if key not in spans or word.score > spans[key]._.score:
            span._.score = word.score
            span._.flag = record
            span._.rule, span._.category, span._.message = record["rule"], record["category"], record["message"]
            if word.suggestions is not None:
                span._.suggestions = [s.value for s in word.suggestions]
            spans[key] = span
    return sorted(spans.values(), key=lambda s: s.start)


def error_label(word: dict[str, Any]) -> str:
    """ERRANT-style "R:VERB" (operation:type) from a typed word's record, else ``UNTYPED_LABEL``."""
    if word.get("type") is None:
        return UNTYPED_LABEL
    return f"{word['operation']}:{word['type']}" if word.get("operation") else str(word["type"])


@Language.factory(FACTORY, default_config={
    "model": None, "threshold": None, "engine": "auto", "batch_size": 32, "suggest": False, "level": "default",
    "disabled_rules": [], "enabled_rules": [], "disabled_categories": [], "enabled_categories": [],
    "enabled_only": False, "words": [], "dictionary": None})
def make_component(nlp: Language, name: str, model: str | None, threshold: float | None, engine: str,
                   batch_size: int, suggest: bool, level: str, disabled_rules: list[str], enabled_rules: list[str],
                   disabled_categories: list[str], enabled_categories: list[str], enabled_only: bool,
                   words: list[str], dictionary: str | None) -> ElectraDetectComponent:
    """``model``: a run, model or discriminator dir (default: the CLI's default model); ``threshold``: flag words
    scoring at least this (default: the model's tuned one at ``level``, ``default`` or ``picky``); ``engine``: auto,
    onnx or torch, as the CLI's flag; ``suggest``: also rank replacements for each flagged word
    (``Span._.suggestions``); ``disabled_rules`` ... ``enabled_only``: the rule and category switches of ``ged``
    (docs/ged_rules.md); ``words``: words never flagged, beside the personal dictionary (``dictionary``: its file,
    default as ``ged``'s, docs/writers.md)."""
    from pathlib import Path

    from electra_detect.cli import DEFAULT_MODEL
    from electra_detect.tasks.ged.dictionary import PersonalDictionary

    if batch_size < 1:
        raise ValueError(f"{FACTORY}: batch_size must be >= 1, got {batch_size}")
    options = build_ged_options(threshold=threshold, level=level, disabled_rules=disabled_rules,
                                enabled_rules=enabled_rules, disabled_categories=disabled_categories,
                                enabled_categories=enabled_categories, enabled_only=enabled_only, words=words,
                                suggest=suggest, threshold_name=f"{FACTORY} threshold")
    detector = Detector.load(model or DEFAULT_MODEL, task="ged", engine=engine)
    checker = GedChecker(detector, dictionary=PersonalDictionary(Path(dictionary)) if dictionary else None)
    return ElectraDetectComponent(checker, options, batch_size)
