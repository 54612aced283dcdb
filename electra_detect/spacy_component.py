"""spaCy pipeline component ``electra_detect``: the detector's scores on spaCy tokens, its flags as error spans.

    nlp = spacy.load("en_core_web_sm")
    nlp.add_pipe("electra_detect")                      # the CLI's default model; config={"model": ...} for another
    doc = nlp("He go to the store yesterday.")
    [(t.text, t._.p_replaced) for t in doc]             # max subword probability of "replaced" over the token
    [(e.text, e.label_, e._.score) for e in doc._.errors]   # flagged words; label "R:VERB" from a typed GED model
    nlp.add_pipe("electra_detect", config={"suggest": True})  # and e._.suggestions: replacements, best first

Registered through the ``spacy_factories`` entry point, so ``add_pipe`` finds it without an import. The model is
loaded as ``electra-detect ged`` loads it (a model dir's fine-tuned ``ged/`` when it has one, its tuned threshold);
``nlp.pipe`` scores each batch of docs with one ``Detector.score`` call.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from spacy.language import Language
from spacy.tokens import Doc, Span, Token

from electra_detect.detector import Detector, TextScores
from electra_detect.model_dir import check_threshold

FACTORY = "electra_detect"
UNTYPED_LABEL = "ERROR"  # the span label when the model names no operation or type


def register_extensions() -> None:
    """``Token._.p_replaced`` (None for a token no subword covers, e.g. whitespace), ``Doc._.errors``,
    ``Span._.score`` and ``Span._.suggestions`` (None unless the component suggests); an extension some other
    package already registered under that name is left as it is."""
    for cls, name in ((Token, "p_replaced"), (Doc, "errors"), (Span, "score"), (Span, "suggestions")):
        if not cls.has_extension(name):
            cls.set_extension(name, default=None)


class ElectraDetectComponent:
    """Scores each doc's text with a ``Detector``; sets token probabilities and the flagged words as spans."""

    def __init__(self, detector: Detector, threshold: float, batch_size: int, suggester: Any = None) -> None:
        self.detector = detector
        self.threshold = threshold
        self.batch_size = batch_size
        self.suggester = suggester  # a tasks.ged.suggestions.Suggester, or None: no suggestions
        register_extensions()

    def __call__(self, doc: Doc) -> Doc:
        return next(self.pipe([doc]))

    def pipe(self, docs: Iterable[Doc], batch_size: int | None = None) -> Iterator[Doc]:
        size = batch_size or self.batch_size
        stream = iter(docs)
        while batch := list(islice(stream, size)):
            scored = self.detector.score([doc.text for doc in batch], batch_size=self.batch_size)
            flagged = (self.suggester.flagged(self.detector.score, scored, self.threshold) if self.suggester
                       else [None] * len(batch))
            yield from (annotate(doc, scores, self.threshold, words)
                        for doc, scores, words in zip(batch, scored, flagged, strict=True))


def annotate(doc: Doc, scores: TextScores, threshold: float, flagged: list[dict[str, Any]] | None = None) -> Doc:
    """Set ``doc``'s extensions from the detector's scores of ``doc.text`` (offsets are characters of that text);
    ``flagged``: the flagged words with their suggestions (``Suggester.flagged``), when the component suggests."""
    token_at = token_index_by_char(doc)
    best: dict[int, float] = {}
    for subword in scores.tokens:
        for index in {token_at[c] for c in range(subword.start, subword.end) if token_at[c] is not None}:
            best[index] = max(best.get(index, 0.0), subword.p_replaced)
    for token in doc:
        token._.p_replaced = best.get(token.i)
    doc._.errors = error_spans(doc, scores, threshold, flagged)
    return doc


def token_index_by_char(doc: Doc) -> list[int | None]:
    """For each character of ``doc.text``, the index of the token it belongs to (None for whitespace between)."""
    owner: list[int | None] = [None] * len(doc.text)
    for token in doc:
        owner[token.idx:token.idx + len(token.text)] = [token.i] * len(token.text)
    return owner


def error_spans(doc: Doc, scores: TextScores, threshold: float,
                flagged: list[dict[str, Any]] | None = None) -> list[Span]:
    """One span per flagged word, widened to whole spaCy tokens; words that widen to the same span give one
    span, with the highest score (and that word's type and suggestions: their values, best first)."""
    spans: dict[tuple[int, int], Span] = {}
    for word in scores.flagged(threshold) if flagged is None else flagged:
        span = doc.char_span(word["start"], word["end"], label=error_label(word), alignment_mode="expand")
        if span is None:
            continue  # the word lies in whitespace spaCy kept as no token
        key = (span.start, span.end)
        if key not in spans or word["score"] > spans[key]._.score:
            span._.score = word["score"]
            if "suggestions" in word:
                span._.suggestions = [s["value"] for s in word["suggestions"]]
            spans[key] = span
    return sorted(spans.values(), key=lambda s: s.start)


def error_label(word: dict[str, Any]) -> str:
    """ERRANT-style "R:VERB" (operation:type) from a typed GED model, else ``UNTYPED_LABEL``."""
    if word.get("type") is None:
        return UNTYPED_LABEL
    return f"{word['operation']}:{word['type']}" if word.get("operation") else str(word["type"])


@Language.factory(FACTORY, default_config={"model": None, "threshold": None, "engine": "auto", "batch_size": 32,
                                           "suggest": False})
def make_component(nlp: Language, name: str, model: str | None, threshold: float | None, engine: str,
                   batch_size: int, suggest: bool) -> ElectraDetectComponent:
    """``model``: a run, model or discriminator dir (default: the CLI's default model); ``threshold``: flag words
    scoring at least this (default: the model's tuned one); ``engine``: auto, onnx or torch, as the CLI's flag;
    ``suggest``: also rank replacements for each flagged word (``Span._.suggestions``; costs a scoring pass)."""
    from electra_detect.cli import DEFAULT_MODEL

    if batch_size < 1:
        raise ValueError(f"{FACTORY}: batch_size must be >= 1, got {batch_size}")
    detector = Detector.load(model or DEFAULT_MODEL, task="ged", engine=engine)
    chosen = detector.threshold() if threshold is None else check_threshold(threshold, f"{FACTORY} threshold")
    suggester = None
    if suggest:
        from electra_detect.tasks.ged.suggestions import Suggester

        suggester = Suggester()
    return ElectraDetectComponent(detector, chosen, batch_size, suggester)
