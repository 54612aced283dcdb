"""A word 5-gram language model with interpolated modified Kneser-Ney smoothing (Chen & Goodman 1999).

The BLiMP baseline "5-gram trained on the same corpus as our model". Hand-written because nothing
in the registries here trains one fast enough: PyPI ``kenlm`` can query but not train (no
``lmplz``), and NLTK's ``KneserNeyInterpolated`` recomputes continuation counts per query
(seconds per word). This follows KenLM's estimate: adjusted (continuation) counts for lower orders,
three discounts per order from counts-of-counts, interpolation down to a uniform distribution.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

_TOKEN = re.compile(r"\w+|[^\w\s]")
# Sentence boundaries in running text; a regex is enough for a count-based baseline.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
BOS, EOS = "<s>", "</s>"


def tokenize(sentence: str) -> list[str]:
    """Lower-cased words and punctuation marks (the same rule for training text and test sentences)."""
    return _TOKEN.findall(sentence.lower())


def text_sentences(lines: Iterable[str]) -> Iterator[list[str]]:
    """Token lists of the sentences in lines of running text (split at sentence ends)."""
    for line in lines:
        for sentence in _SENTENCE_END.split(line.strip()):
            tokens = tokenize(sentence)
            if tokens:
                yield tokens


def corpus_sentences(paths: Iterable[str | Path]) -> Iterator[list[str]]:
    """Token lists of the sentences in text files (one line or paragraph per line)."""
    for path in paths:
        with Path(path).open(encoding="utf-8", errors="replace") as handle:
            yield from text_sentences(handle)


class KneserNeyLM:
    def __init__(self, order: int = 5) -> None:
        if order < 1:
            raise ValueError("order must be >= 1")
        self.order = order
        self.vocab: dict[str, int] = {BOS: 0, EOS: 1}
        # per order n (1-based): adjusted count of each n-gram (tuple of ids)
        self.counts: list[dict[tuple[int, ...], int]] = []
        # per order: history -> (sum of adjusted counts, gamma numerator D1*N1 + D2*N2 + D3*N3+)
        self.contexts: list[dict[tuple[int, ...], tuple[int, float]]] = []
        self.discounts: list[tuple[float, float, float]] = []
        self.tokens = 0

    def _id(self, word: str) -> int:
        return self.vocab.setdefault(word, len(self.vocab))

    def fit(self, sentences: Iterable[list[str]]) -> KneserNeyLM:
        raw: list[Counter] = [Counter() for _ in range(self.order)]
        for words in sentences:
            seq = [0, *(self._id(w) for w in words), 1]
            self.tokens += len(seq) - 1
            for end in range(1, len(seq)):
                for n in range(1, min(self.order, end + 1) + 1):
                    raw[n - 1][tuple(seq[end - n + 1:end + 1])] += 1
        if not raw[0]:
            raise ValueError("no training text")
        # Adjusted counts: highest order (and n-grams starting with <s>) raw; lower orders = distinct left words.
        adjusted: list[dict[tuple[int, ...], int]] = [dict() for _ in range(self.order)]
        adjusted[-1] = dict(raw[-1])
        for n in range(self.order - 1, 0, -1):
            left: Counter = Counter()
            for gram in raw[n]:
                left[gram[1:]] += 1
            table = adjusted[n - 1]
            for gram, count in raw[n - 1].items():
                table[gram] = count if gram[0] == 0 else left.get(gram, count)
        del raw
        for table in adjusted:
            coc = Counter(min(c, 4) for c in table.values())
            n1, n2, n3, n4 = (coc.get(i, 0) for i in (1, 2, 3, 4))
            y = n1 / (n1 + 2 * n2) if n1 + 2 * n2 else 0.5
            d = (1 - 2 * y * n2 / n1 if n1 else 0.5, 2 - 3 * y * n3 / n2 if n2 else 1.0,
                 3 - 4 * y * n4 / n3 if n3 else 1.5)
            if not all(0 < x < c for x, c in zip(d, (1, 2, 3), strict=True)):  # too little data: KenLM would fail
                d = (y, y, y) if 0 < y < 1 else (0.5, 0.5, 0.5)
            self.discounts.append(d)
        for n, table in enumerate(adjusted, start=1):
            d1, d2, d3 = self.discounts[n - 1]
            total: dict[tuple[int, ...], int] = defaultdict(int)
            gamma: dict[tuple[int, ...], float] = defaultdict(float)
            for gram, count in table.items():
                total[gram[:-1]] += count
                gamma[gram[:-1]] += d1 if count == 1 else (d2 if count == 2 else d3)
            self.contexts.append({h: (total[h], gamma[h]) for h in total})
        self.counts = adjusted
        return self

    def _discount(self, n: int, count: int) -> float:
        d1, d2, d3 = self.discounts[n - 1]
        return 0.0 if count == 0 else (d1 if count == 1 else (d2 if count == 2 else d3))

    def word_logprob(self, history: tuple[int, ...], word: int | None) -> float:
        """ln p(word | history); word None = out of vocabulary (gets the uniform share)."""
        p = 1.0 / len(self.vocab)  # predictable words (not <s>) plus the unknown word
        for n in range(1, self.order + 1):
            if n - 1 > len(history):
                break
            h = history[len(history) - (n - 1):] if n > 1 else ()
            context = self.contexts[n - 1].get(h)
            if context is None:
                break  # a longer history is unseen too
            total, gamma = context
            count = self.counts[n - 1].get((*h, word), 0) if word is not None else 0
            p = max(count - self._discount(n, count), 0.0) / total + gamma / total * p
        return math.log(p)

    def sentence_logprob(self, sentence: str) -> float:
        """ln p(sentence) with <s> and </s>, summed over words."""
        seq = [0, *(self.vocab.get(w) for w in tokenize(sentence)), 1]
        total = 0.0
        for i in range(1, len(seq)):
            start = max(0, i - self.order + 1)
            history = tuple(seq[start:i])
            if None in history:  # condition only on the words after the last unknown one
                history = history[len(history) - history[::-1].index(None):]
            total += self.word_logprob(history, seq[i])  # type: ignore[arg-type]
        return total
