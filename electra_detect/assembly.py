"""The assemble stage: a job's flat per-token probabilities to words, vectorised over all of its texts at once.

A word is a run of tokens with one tokenizer word id; its score is the highest probability among them (the
glossary's *word score*). Words come back as the user wrote them: the pre-tokenizer's ``don`` ``'`` ``t``
(touching, an apostrophe between letters) are one word ``don't``. A typed model's word takes the operation and
type its highest-scoring token names. No Python object is made per token or word here (``scores.TextScores``
makes them when asked): on a GPU this stage was 80% of ``Detector.score``'s time while it did.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from electra_detect.scores import TextScores, WordArrays
from electra_detect.windows import TextEncoding

APOSTROPHES = ("'", "\u2019")


def flat_tokens(encodings: Sequence[TextEncoding]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every token of the texts in one row: (word key [tokens] (-1 outside any word; unique across texts),
    character offsets [tokens, 2], text index [tokens])."""
    keys, offsets, owner, shift = [], [], [], 0
    for index, encoding in enumerate(encodings):
        ids = np.array([-1 if w is None else w for w in encoding.word_ids], dtype=np.int64)
        keys.append(np.where(ids >= 0, ids + shift, -1))
        shift += int(ids.max(initial=-1)) + 1
        offsets.append(np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2))
        owner.append(np.full(len(ids), index, dtype=np.int64))
    if not keys:
        return np.zeros(0, np.int64), np.zeros((0, 2), np.int64), np.zeros(0, np.int64)
    return np.concatenate(keys), np.concatenate(offsets), np.concatenate(owner)


def word_runs(keys: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """The first token of every run of one word key within one text [runs] (runs outside words included)."""
    if not len(keys):
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]) | (owner[1:] != owner[:-1])])


def contraction_joins(texts: Sequence[str], starts: np.ndarray, ends: np.ndarray, text_of: np.ndarray) -> np.ndarray:
    """[words] True where a word is an apostrophe that joins its two neighbours into one word: it touches both,
    the one before ends with a letter or digit and the one after starts with a letter."""
    joins = np.zeros(len(starts), dtype=bool)
    single = np.flatnonzero((ends - starts == 1)[1:-1]) + 1  # an apostrophe word is one character, never first/last
    for i in single.tolist():
        text = texts[int(text_of[i])]
        if (text[starts[i]] in APOSTROPHES and text_of[i - 1] == text_of[i] == text_of[i + 1]
                and ends[i - 1] == starts[i] and ends[i] == starts[i + 1]
                and text[ends[i - 1] - 1].isalnum() and text[starts[i + 1]].isalpha()):
            joins[i] = True
    return joins


def assemble(texts: Sequence[str], encodings: Sequence[TextEncoding], probs: np.ndarray,
             types: np.ndarray | None, channels: Sequence[str]) -> list[TextScores]:
    """``TextScores`` of each text from the flat arrays of their tokens: ``probs`` [tokens] and, for a typed
    model, ``types`` [tokens, 3] (operation index, main-type index, the type's probability)."""
    keys, offsets, owner = flat_tokens(encodings)
    runs = word_runs(keys, owner)
    in_word = keys[runs] >= 0
    words = runs[in_word]  # first token of each word, before contractions are joined
    lasts = np.r_[runs[1:], len(keys)][in_word] - 1
    text_of = owner[words]
    joins = contraction_joins(texts, offsets[words, 0], offsets[lasts, 1], text_of)
    # a joining apostrophe and the word after it continue the word before it
    starts_word = ~(joins | np.r_[False, joins[:-1]])
    firsts, lasts = words[starts_word], lasts[np.r_[starts_word[1:], True]] if len(words) else lasts
    text_of = owner[firsts]
    lengths = lasts - firsts + 1
    span = np.repeat(np.arange(len(firsts)), lengths)  # the word of each token in a word, in order
    tokens = firsts[span] + np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    bounds = np.column_stack([firsts, lasts + 1]).ravel()  # reduceat over [first, last + 1) pairs: even entries
    maxima = np.maximum.reduceat(np.r_[probs, 0.0], bounds)[::2] if len(firsts) else np.zeros(0)
    operation = error_type = type_score = None
    if types is not None and channels and len(firsts):
        is_best = probs[tokens] == maxima[span]
        word_of, token = span[is_best], tokens[is_best]
        first_best = np.r_[True, word_of[1:] != word_of[:-1]]  # tokens ascend within a word: the first best wins
        best = np.empty(len(firsts), dtype=np.int64)
        best[word_of[first_best]] = token[first_best]
        ops = np.array([name[3:] for name in channels[:3]], dtype=object)
        mains = np.array([name[5:] for name in channels[3:]], dtype=object)
        operation = ops[types[best, 0].astype(np.int64)].tolist()
        error_type = mains[types[best, 1].astype(np.int64)].tolist()
        type_score = types[best, 2]
    fluency = np.log1p(-np.minimum(probs, 1 - 1e-12))
    text_start = np.searchsorted(owner, np.arange(len(texts) + 1))
    word_start = np.searchsorted(text_of, np.arange(len(texts) + 1))
    results = []
    for index, text in enumerate(texts):
        t0, t1, w0, w1 = int(text_start[index]), int(text_start[index + 1]), int(word_start[index]), \
            int(word_start[index + 1])
        total = float(fluency[t0:t1].sum())
        encoding = encodings[index]
        arrays = WordArrays(offsets[firsts[w0:w1], 0], offsets[lasts[w0:w1], 1], maxima[w0:w1],
                            firsts[w0:w1] - t0, lasts[w0:w1] - t0,
                            None if operation is None else operation[w0:w1],
                            None if error_type is None else error_type[w0:w1],
                            None if type_score is None else type_score[w0:w1])
        results.append(TextScores.from_arrays(text, encoding.tokens, encoding.offsets, probs[t0:t1], arrays,
                                              total / (t1 - t0) if t1 > t0 else 0.0, total))
    return results
