"""The flagged-word record every front writes (CLI, server, demo, spaCy), and its one JSON serialiser."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from electra_detect.scores import WordScore
from electra_detect.tasks.ged.rule_table import Rule, rule_for
from electra_detect.tasks.ged.suggestions import Suggestion

TYPE_SOURCES = ("edit", "model")  # the type names the edit to the best suggestion, or is the model's type head's


@dataclass
class FlaggedWord:
    """A word whose score reached the threshold: where it is (``start``, ``end``: characters of the checked text),
    its ``score``, the error type (ERRANT ``operation`` M/R/U and main ``type``, ``R`` + ``VERB:TENSE``; None for a
    model without a type head), where the type comes from (``type_source``: ``edit``, ERRANT on the word and its best
    replacement; ``model``, the type head, with its probability ``type_score``), the ``rule`` (rule_table) the type
    falls under, and the ``suggestions`` (None: not asked for)."""

    word: str
    start: int
    end: int
    score: float
    operation: str | None = None
    type: str | None = None
    type_score: float | None = None
    type_source: str | None = None
    rule: Rule = field(default_factory=lambda: rule_for(None, None))
    suggestions: list[Suggestion] | None = None
    best: Suggestion | None = None  # the best replacement, named in the message even when suggestions are not shown
    tag: str | None = None  # a tag model's edit tag ($INSERT_a, $FORM_VBZ, ...): the edit the message tells
    explanation: str | None = None  # the message a tag model's edit makes (edit_tags.messages.tag_message)
    alternatives: list[tuple[str, float]] | None = None  # a tag model's next best tags: more suggestions

    @classmethod
    def of_word(cls, word: WordScore) -> FlaggedWord:
        """A Detector word as flagged, typed by the model's type head (when it has one)."""
        source = "model" if word.error_type is not None else None
        return cls(word.word, word.start, word.end, word.score, word.operation, word.error_type, word.type_score,
                   source, rule_for(word.operation, word.error_type), tag=word.tag,
                   alternatives=word.alternatives)

    def retype(self, operation: str, main: str, source: str) -> None:
        """Give the word another type (and so its rule)."""
        self.operation, self.type, self.type_source = operation, main, source
        self.rule = rule_for(operation, main)

    @property
    def message(self) -> str:
        """The tag's message (a tag model), else the rule's with the word and its best suggestion (``best``, else the
        first shown)."""
        if self.explanation is not None:
            return self.explanation
        best = self.best or (self.suggestions[0] if self.suggestions else None)
        return self.rule.explain(self.word, None if best is None else best.value)

    def to_dict(self, digits: int | None = None) -> dict[str, Any]:
        """The JSON object of a flagged word: ``word``, ``start``, ``end``, ``score`` (``digits`` rounds the scores),
        the type fields (``operation``, ``type``, ``type_score``, ``type_source``, for a typed model), ``rule``,
        ``category``, ``message``, and ``suggestions`` when asked for (``{"value", "start", "end"}``)."""
        out: dict[str, Any] = {"word": self.word, "start": self.start, "end": self.end,
                               "score": _round(self.score, digits)}
        if self.type is not None:
            out.update(operation=self.operation, type=self.type,
                       type_score=None if self.type_score is None else _round(self.type_score, digits),
                       type_source=self.type_source)
        if self.tag is not None:
            out["tag"] = self.tag
        out.update(rule=self.rule.id, category=self.rule.category, message=self.message)
        if self.suggestions is not None:
            out["suggestions"] = [s.to_dict() for s in self.suggestions]
        return out


def _round(value: float, digits: int | None) -> float:
    return value if digits is None else round(value, digits)


def flagged_dicts(words: list[FlaggedWord], digits: int | None = None) -> list[dict[str, Any]]:
    """Each word's JSON object (:meth:`FlaggedWord.to_dict`)."""
    return [w.to_dict(digits) for w in words]
