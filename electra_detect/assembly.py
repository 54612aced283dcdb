"""The assemble stage: a job's flat per-token probabilities to words, vectorised over all of its texts at once.

A word is a run of tokens with one tokenizer word id; its score is the highest probability among them (the
glossary's *word score*). Words come back as the user wrote them: the pre-tokenizer's ``don`` ``'`` ``t``
(touching, an apostrophe between letters) are one word ``don't``. A typed model's word takes the operation and
type its highest-scoring token names. No Python object is made per token or word here (``scores.TextScores``
makes them when asked): on a GPU this stage was 80% of ``Detector.score``'s time while it did.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np

from electra_detect.edit_tags import TAG_PREFIX
from electra_detect.scores import TextScores, WordArrays
from electra_detect.windows import TextEncoding

APOSTROPHES = ("'", "\u2019")


def flat_tokens(encodings: Sequence[TextEncoding]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every token of the texts in one row: (word key [tokens] (-1 outside any word; unique across texts),
    character offsets [tokens, 2], text index [tokens]). Read from the tokenizer's encodings of every sentence at
    once: one list per field for the whole job, then numpy (a list per text cost more than the engine on a GPU)."""
    parts = [enc for encoding in encodings for enc in encoding.parts]
    if not parts:
        return np.zeros(0, np.int64), np.zeros((0, 2), np.int64), np.zeros(0, np.int64)
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    shifts = np.fromiter(chain.from_iterable(e.starts for e in encodings), dtype=np.int64, count=len(parts))
    text_of_part = np.repeat(np.arange(len(encodings)), [len(e.parts) for e in encodings])
    pairs = chain.from_iterable(chain.from_iterable(enc.offsets for enc in parts))  # ints: np.array of tuples is slow
    offsets = np.fromiter(pairs, dtype=np.int64, count=2 * int(lengths.sum())).reshape(-1, 2)
    offsets += np.repeat(shifts, lengths)[:, None]
    word_ids = list(chain.from_iterable(enc.word_ids for enc in parts))
    keys = np.array([-1 if w is None else w for w in word_ids] if None in word_ids else word_ids, dtype=np.int64)
    # a part's word ids start at 0: shift each by the word count of all parts before it (unique across texts)
    ends = np.cumsum(lengths)
    counts = np.maximum.reduceat(np.r_[keys, -1], np.r_[0, ends[:-1]])[:len(parts)] + 1
    counts[lengths == 0] = 0  # reduceat gives an empty part its next part's first key
    keys = np.where(keys >= 0, keys + np.repeat(np.cumsum(counts) - counts, lengths), -1)
    return keys, offsets, np.repeat(text_of_part, lengths)


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
    quoted = np.fromiter((any(mark in text for mark in APOSTROPHES) for text in texts), dtype=bool, count=len(texts))
    for i in single[quoted[text_of[single]]].tolist():  # only texts holding an apostrophe: most have none
        text = texts[int(text_of[i])]
        if (text[starts[i]] in APOSTROPHES and text_of[i - 1] == text_of[i] == text_of[i + 1]
                and ends[i - 1] == starts[i] and ends[i] == starts[i + 1]
                and text[ends[i - 1] - 1].isalnum() and text[starts[i + 1]].isalpha()):
            joins[i] = True
    return joins


def assemble(texts: Sequence[str], encodings: Sequence[TextEncoding], probs: np.ndarray,
             types: np.ndarray | None, channels: Sequence[str], edit_tags: Any = None) -> list[TextScores]:
    """``TextScores`` of each text from the flat arrays of their tokens: ``probs`` [tokens] and, for a typed
    model, ``types`` [tokens, 3] (operation index, main-type index, the type's probability); for a tag model
    (``edit_tags``: its vocabulary) (tag index, 0, the tag's probability), read at each word's first token."""
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
    operation = error_type = type_score = tag = alternatives = None
    if types is not None and channels and len(firsts) and edit_tags is not None and edit_tags.channels:
        index = types[firsts, 0].astype(np.int64)  # -1: not decoded (no token of the word came near the floor)
        tag = edit_tags.names[index].tolist()  # names[-1] is the fallback tag, kept last for this
        operation = edit_tags.operations[index].tolist()
        error_type = edit_tags.mains[index].tolist()
        type_score = np.where(index >= 0, types[firsts, 2], 0.0)
        if types.shape[1] > 3:  # the next best tags (edit_tags.decoding.decode_tags), -1 where none was decoded
            others = types[firsts, 3:].reshape(len(firsts), -1, 2)
            alternatives = [[(edit_tags.names[int(i)], float(q)) for i, q in row if i >= 0]
                            for row in others.tolist()]
    elif types is not None and channels and len(firsts) and not channels[0].startswith(TAG_PREFIX):
        is_best = (probs[tokens] == maxima[span]) | np.isnan(maxima[span])  # a NaN word: its first token types it
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
    sizes = np.diff(text_start)
    totals = np.add.reduceat(np.r_[fluency, 0.0], text_start[:-1]) if len(texts) else np.zeros(0)
    totals[sizes == 0] = 0.0  # reduceat gives an empty text the next token's value
    means = np.divide(totals, sizes, out=np.zeros(len(texts)), where=sizes > 0)
    # one WordArrays for the job (spans and token ranges relative to each word's text); each text reads its rows
    relative = text_start[text_of]
    words = WordArrays(offsets[firsts, 0], offsets[lasts, 1], maxima, firsts - relative, lasts - relative,
                       operation, error_type, type_score, tag, alternatives)
    tops = np.maximum.reduceat(np.r_[maxima, -np.inf], word_start[:-1]) if len(texts) else np.zeros(0)
    tops[np.diff(word_start) == 0] = -np.inf  # a text without words: nothing reaches any threshold
    ts, ws = text_start.tolist(), word_start.tolist()
    return [TextScores.from_arrays(text, encoding, probs[ts[i]:ts[i + 1]], words, mean, total, (ws[i], ws[i + 1]),
                                   top)
            for i, (text, encoding, total, mean, top) in enumerate(zip(texts, encodings, totals.tolist(),
                                                                       means.tolist(), tops.tolist(), strict=True))]
