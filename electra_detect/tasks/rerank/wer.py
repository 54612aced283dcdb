"""Word errors against a reference (jiwer, on normalised words): per hypothesis, and per word of one."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from electra_detect.errors import RerankError


def normalise(text: str) -> str:
    """Lower case, letters/digits/apostrophes only: references and recogniser output differ in casing
    and punctuation, which is not what WER should count here."""
    return " ".join(re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split())


def word_errors(ref: str, hyps: Sequence[str]) -> tuple[np.ndarray, int]:
    """Word errors (S + D + I, jiwer) of each hypothesis against the reference, and the reference length."""
    import jiwer

    ref_n = normalise(ref)
    if not ref_n:
        raise RerankError("empty reference: WER is undefined")
    errors = np.zeros(len(hyps))
    for i, hyp in enumerate(hyps):
        out = jiwer.process_words(ref_n, normalise(hyp))
        errors[i] = out.substitutions + out.deletions + out.insertions
    return errors, len(ref_n.split())


def hypothesis_word_errors(ref: str, hyp: str, mark_deletions: bool = False) -> list[int | None]:
    """For each whitespace word of ``hyp``: 1 when the minimum-edit alignment with ``ref`` (jiwer, on normalised
    words) substitutes or inserts it, 0 when it matches; None for a word normalisation empties (punctuation).
    ``mark_deletions`` also marks the word after a deleted reference word (the last at the end), GED's convention
    for training labels; confidence is judged without it."""
    import jiwer

    ref_n = normalise(ref)
    if not ref_n:
        raise RerankError("empty reference: word errors are undefined")
    words = [normalise(w) for w in hyp.split()]
    # one entry per normalised piece: "well-known" is two pieces of one word, and the word is wrong if either is
    kept = [i for i, w in enumerate(words) for _ in w.split()]
    labels: list[int | None] = [None] * len(words)
    if not kept:
        return labels
    out = jiwer.process_words(ref_n, " ".join(w for w in words if w))
    for chunk in out.alignments[0]:
        for position in range(chunk.hyp_start_idx, chunk.hyp_end_idx):
            labels[kept[position]] = max(labels[kept[position]] or 0, 0 if chunk.type == "equal" else 1)
    if mark_deletions:
        for chunk in out.alignments[0]:
            if chunk.type == "delete":
                labels[kept[min(chunk.hyp_start_idx, len(kept) - 1)]] = 1
    return labels
