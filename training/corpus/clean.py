"""Sentence splitting, the English-prose filter, and cross-source de-duplication.

The filter keeps sentences a grammar model should learn from: a capital start, a final ``. ? !``,
mostly letters, enough English function words, and nothing that looks like code, a path or a URL.
De-duplication is exact (a hash of the normalised sentence) and near (MinHash over the sentence's
word set, banded LSH: sentences sharing a band with an earlier one are dropped).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

MIN_WORDS, MAX_WORDS = 5, 100

# Typographic quotes and dashes to their ASCII forms, as in the evaluation data (JFLEG, BEA, CoLA); the
# same characters in Windows-1252 read as Latin-1 (C1 controls, common in 2002 mail) likewise.
_TYPO = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " ",
                       "\u2013": "-", "\u2014": " - ", "\u2026": "...", "\u00ad": "",
                       "\x91": "'", "\x92": "'", "\x93": '"', "\x94": '"', "\x96": "-", "\x97": " - ",
                       "\x85": "..."})
_MOJIBAKE = re.compile("[\x80-\x9f]|\u00c3[\u0080-\u00bf]|\u00e2\u20ac")  # C1 controls, UTF-8 read as Latin-1
_WS = re.compile(r"\s+")

_ABBREVIATIONS = frozenset("""mr mrs ms dr st jr sr prof rev gen col capt lt sgt hon mt vs etc eg ie cf al fig figs
no nos vol vols pp ch sec approx esp ca inc ltd co corp dept univ jan feb mar apr jun jul aug sep sept oct nov dec
e.g i.e a.m p.m u.s u.k""".split())
_BOUNDARY = re.compile(r"""[.!?]+["')\]]*\s+(?=["'(\[]?[A-Z0-9])""")


def normalise(text: str) -> str:
    """Typographic punctuation to ASCII and runs of whitespace to one space."""
    return _WS.sub(" ", text.translate(_TYPO)).strip()


def split_sentences(text: str) -> list[str]:
    """Split at ``. ? !`` before a capital, except after abbreviations and initials (a regex: fast enough
    for tens of millions of words, where rule libraries such as pysbd take an hour)."""
    out: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        if text[match.start()] == ".":
            word = text[start:match.start()].rsplit(None, 1)[-1:] or [""]
            token = word[0].lstrip("\"'([").lower()
            if token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha()):
                continue
        out.append(text[start:match.end()].strip())
        start = match.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


_STOP = frozenset("""a an the and or but if of to in on at by for with from as is are was were be been being it its
this that these those he she they we you i his her their our your my me him them us not no do does did have has had
will would can could should may might must shall there here what which who whom whose when where why how all any
each some than then so such very just also only into about over after before under""".split())
_CODE = re.compile(r"""[{}<>|\\=_#^~`@*]|\$(?!\d)|::|->|\w\(|\w\.\w+\(|\b(?:https?|ftp)://|www\.|\.\w{1,4}/|/\w+/
    |\w/\w+\.\w|\b0x[0-9a-f]""", re.X | re.I)
_START = re.compile(r"""^["'(]?[A-Z]""")
_END = re.compile(r"""[.!?]["')]?$""")
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")


def is_prose(sentence: str) -> bool:
    """True for an English prose sentence: 5-100 words, capital start, final . ? !, no code, enough
    function words, mostly letters, not shouting."""
    words = sentence.split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS:
        return False
    if not _START.match(sentence) or not _END.search(sentence) or "\ufffd" in sentence:
        return False
    if _MOJIBAKE.search(sentence):
        return False
    if _CODE.search(sentence):
        return False
    letters = sum(ch.isalpha() for ch in sentence)
    if letters < 0.75 * sum(not ch.isspace() for ch in sentence):
        return False
    alpha_words = _WORD.findall(sentence)
    if len(alpha_words) < 0.8 * len(words):
        return False
    stops = sum(w.lower() in _STOP for w in alpha_words)
    if stops < max(1, 0.12 * len(words)):
        return False
    shouting = sum(w.isupper() and len(w) > 1 for w in alpha_words)
    return shouting <= max(1, 0.2 * len(words))


def dedupe_key(sentence: str) -> str:
    """Case, punctuation and spacing do not make a sentence new."""
    return " ".join(_WORD.findall(sentence.lower()))


@dataclass
class DedupeStats:
    exact: int = 0
    near: int = 0


class Deduper:
    """Exact and near-duplicate sentence detector across everything seen so far.

    Near duplicates: a 64-permutation MinHash of the sentence's word set (datasketch), cut into 8
    bands of 8; a sentence any of whose bands was seen before is a near duplicate (Jaccard >~ 0.77).
    Only band hashes are kept (one int per band), so memory is ~1 KB per 10 sentences, not the
    signatures or a key index as ``MinHashLSH`` would hold.
    """

    def __init__(self, num_perm: int = 64, bands: int = 8, min_near_words: int = 5) -> None:
        from datasketch import MinHash

        self._template = MinHash(num_perm=num_perm)
        self._minhash = MinHash
        self.num_perm = num_perm
        self.bands = bands
        self.rows = num_perm // bands
        self.min_near_words = min_near_words
        self._exact: set[int] = set()
        self._bands: set[int] = set()

    def _band_keys(self, words: set[str]) -> list[int]:
        mh = self._minhash(num_perm=self.num_perm, permutations=self._template.permutations,
                           scheme=self._template.scheme)
        mh.update_batch([w.encode() for w in words])
        sig = np.asarray(mh.hashvalues, dtype=np.uint64).reshape(self.bands, self.rows)
        return [hash((band, row.tobytes())) for band, row in enumerate(sig)]

    def check(self, sentence: str, add: bool = True) -> str | None:
        """'exact' or 'near' if the sentence repeats an earlier one, else None (and remember it)."""
        key = dedupe_key(sentence)
        exact = hash(key)
        if exact in self._exact:
            return "exact"
        words = set(key.split())
        bands = self._band_keys(words) if len(words) >= self.min_near_words else []
        if any(b in self._bands for b in bands):
            if add:
                self._exact.add(exact)
            return "near"
        if add:
            self._exact.add(exact)
            self._bands.update(bands)
        return None

    def __len__(self) -> int:
        return len(self._exact)


@dataclass
class CleanStats:
    paragraphs: int = 0
    raw_words: int = 0
    sentences_seen: int = 0
    rejected: int = 0
    exact_dups: int = 0
    near_dups: int = 0
    sentences: int = 0
    words: int = 0
    documents: int = 0


def clean_paragraphs(paragraphs: Iterator[str], deduper: Deduper, stats: CleanStats) -> Iterator[str]:
    """Documents of prose: each run of consecutive kept, unseen sentences of a paragraph becomes one
    document, so a dropped sentence never leaves a seam inside a document."""
    for paragraph in paragraphs:
        stats.paragraphs += 1
        stats.raw_words += len(paragraph.split())
        run: list[str] = []
        for sentence in split_sentences(normalise(paragraph)):
            stats.sentences_seen += 1
            verdict = "reject" if not is_prose(sentence) else deduper.check(sentence)
            if verdict is None:
                run.append(sentence)
                stats.sentences += 1
                stats.words += len(sentence.split())
                continue
            if verdict == "reject":
                stats.rejected += 1
            elif verdict == "exact":
                stats.exact_dups += 1
            else:
                stats.near_dups += 1
            if run:
                stats.documents += 1
                yield " ".join(run)
                run = []
        if run:
            stats.documents += 1
            yield " ".join(run)
