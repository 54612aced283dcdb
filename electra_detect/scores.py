"""What ``Detector.score`` returns: a text's token and word scores.

A ``TextScores`` made by the Detector holds flat arrays (``WordArrays``: one row per word, made by
``electra_detect.assembly`` for a whole job at once and shared by its texts, each reading its own rows); its
``tokens`` and ``words`` become Python objects only when a caller asks for them, so a front that writes only the
flagged words never builds one object per token, and a text whose best word is under the threshold reads no array.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass
class TokenScore:
    token: str
    start: int  # character offsets into the scored text
    end: int
    p_replaced: float


@dataclass
class WordScore:
    """A pre-tokenizer word (whitespace/punctuation split; contractions joined as written); score = max over its
    subwords. A typed GED model also names the error its highest-scoring subword shows: ERRANT operation (M/R/U)
    and main type, with the type's probability; they are None for other models."""

    word: str
    start: int
    end: int
    score: float
    tokens: list[int] = field(default_factory=list)  # indices into TextScores.tokens
    operation: str | None = None
    error_type: str | None = None
    type_score: float | None = None
    tag: str | None = None  # a tag model's edit tag (electra_detect/edit_tags/), None for others
    alternatives: list[tuple[str, float]] | None = None  # a tag model's next best tags and their probabilities

    def typed(self, digits: int | None = None) -> dict[str, Any]:
        """The type fields as JSON (empty for an untyped model); ``digits`` rounds the type's probability."""
        if self.error_type is None or self.type_score is None:
            return {}
        score = self.type_score if digits is None else round(self.type_score, digits)
        return {"operation": self.operation, "type": self.error_type, "type_score": score}

    def to_json(self, digits: int | None = None) -> dict[str, Any]:
        """word, start, end, score (and the type fields): the one shape fronts give a flagged word in."""
        return {"word": self.word, "start": self.start, "end": self.end,
                "score": self.score if digits is None else round(self.score, digits), **self.typed(digits)}


@dataclass
class WordArrays:
    """Words as arrays [words]: character span in their text, score, token range in their text (first, last
    inclusive) and, for a typed model, the operation and main type names and the type's probability (None
    otherwise). The assembly makes one for a whole job; each of its texts reads its own rows."""

    start: np.ndarray
    end: np.ndarray
    score: np.ndarray
    first_token: np.ndarray
    last_token: np.ndarray
    operation: list[str] | None = None
    error_type: list[str] | None = None
    type_score: np.ndarray | None = None
    tag: list[str] | None = None
    alternatives: list[list[tuple[str, float]]] | None = None  # a tag model's next best tags per word

    def word(self, text: str, index: int) -> WordScore:
        start, end = int(self.start[index]), int(self.end[index])
        typed = self.operation is not None and self.error_type is not None and self.type_score is not None
        return WordScore(text[start:end], start, end, float(self.score[index]),
                         list(range(int(self.first_token[index]), int(self.last_token[index]) + 1)),
                         self.operation[index] if typed else None, self.error_type[index] if typed else None,
                         float(self.type_score[index]) if typed else None,
                         self.tag[index] if self.tag is not None else None,
                         self.alternatives[index] if self.alternatives is not None else None)


class _Built:
    """A ``TextScores`` field (``tokens`` or ``words``) made from the text's arrays on first read; a value given
    to the constructor or assigned later is kept as it is (a dataclass field whose default is a descriptor)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.slot = name, f"_{name}"

    def __get__(self, scores: Any, owner: type | None = None) -> Any:
        if scores is None:
            return None  # the dataclass default: None = build from the arrays
        value = scores.__dict__.get(self.slot)
        if value is None:
            value = scores._build_tokens() if self.name == "tokens" else scores._build_words()
            scores.__dict__[self.slot] = value
        return value

    def __set__(self, scores: Any, value: Any) -> None:
        scores.__dict__[self.slot] = value


@dataclass(eq=True)
class TextScores:
    """One text's scores: ``tokens`` (``TokenScore``), ``words`` (``WordScore``), ``sentence_mean`` (mean
    log(1 - p) over the text's tokens; higher = more fluent) and ``sentence_sum`` (their sum).

    Built from lists (anyone) or lazily from arrays (the Detector: ``TextScores.from_arrays``); once ``words``
    is read, the list is the truth (a caller may change a word's score, as ``--with-rules`` does)."""

    text: str
    tokens: list[TokenScore] = _Built()  # type: ignore[assignment]
    words: list[WordScore] = _Built()  # type: ignore[assignment]
    sentence_mean: float = 0.0
    sentence_sum: float = 0.0
    _token_arrays: tuple[Any, np.ndarray] | None = field(
        default=None, repr=False, compare=False, init=False)
    _word_arrays: WordArrays | None = field(default=None, repr=False, compare=False, init=False)
    _word_rows: tuple[int, int] = field(default=(0, 0), repr=False, compare=False, init=False)
    _top_score: float = field(default=float("inf"), repr=False, compare=False, init=False)

    @classmethod
    def from_arrays(cls, text: str, encoding: Any, probs: np.ndarray, words: WordArrays, sentence_mean: float,
                    sentence_sum: float, rows: tuple[int, int] | None = None,
                    top_score: float = float("inf")) -> TextScores:
        """Scores whose tokens are ``encoding``'s (``windows.TextEncoding``: ``tokens`` and ``offsets``, read when
        the tokens are), with ``probs`` [tokens], and whose words are rows [first, stop) of ``words`` (``rows``;
        default all), the highest scoring ``top_score`` (when known: a text none of whose words reaches a
        threshold then reads no array)."""
        scores = cls.__new__(cls)  # the fields set directly: the dataclass __init__ cost more than the assembly
        scores.__dict__.update(text=text, sentence_mean=sentence_mean, sentence_sum=sentence_sum,
                               _token_arrays=(encoding, probs), _word_arrays=words,
                               _word_rows=(0, len(words.score)) if rows is None else rows, _top_score=top_score)
        return scores

    def _build_tokens(self) -> list[TokenScore]:
        if self._token_arrays is None:
            return []
        encoding, probs = self._token_arrays
        return [TokenScore(t, s, e, p)
                for t, (s, e), p in zip(encoding.tokens, encoding.offsets, probs.tolist(), strict=True)]

    def _build_words(self) -> list[WordScore]:
        arrays = self._word_arrays
        return [] if arrays is None else [arrays.word(self.text, i) for i in range(*self._word_rows)]

    @property
    def token_probs(self) -> np.ndarray:
        """p(replaced) of every token [tokens] (without building ``TokenScore`` objects when it need not)."""
        if self.__dict__.get("_tokens") is None and self._token_arrays is not None:
            return self._token_arrays[1]
        return np.array([t.p_replaced for t in self.tokens], dtype=np.float64)

    def words_at_least(self, threshold: float) -> list[WordScore]:
        """The words scoring >= threshold, in text order; from the arrays (no object per word) while no caller
        has taken the word list."""
        if self.__dict__.get("_words") is None and self._word_arrays is not None:
            if self._top_score < threshold:
                return []
            arrays, (first, stop) = self._word_arrays, self._word_rows
            rows = np.flatnonzero(arrays.score[first:stop] >= threshold) + first
            return [arrays.word(self.text, i) for i in rows.tolist()]
        return [w for w in self.words if w.score >= threshold]

    def flagged(self, threshold: float, digits: int | None = None) -> list[dict[str, Any]]:
        """The words with score >= threshold as JSON objects (``WordScore.to_json``). ``digits`` rounds the
        scores."""
        return [w.to_json(digits) for w in self.words_at_least(threshold)]

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "tokens": [asdict(t) for t in self.tokens],
                "words": [_public(asdict(w)) for w in self.words], "sentence_mean": self.sentence_mean,
                "sentence_sum": self.sentence_sum}


def _public(word: dict[str, Any]) -> dict[str, Any]:
    """A word's JSON without the tag model's alternatives (internal to the GED check's suggestions)."""
    word.pop("alternatives", None)
    return word
