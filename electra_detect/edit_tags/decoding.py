"""A tag model's tag head read at scoring time: the best tags (and the next best) at the tokens likely to be errors,
as rows of numbers the assembly turns into each flagged word's tag (``electra_detect.assembly``)."""

from __future__ import annotations

import numpy as np

# Tags are decoded only near tokens at least this likely to be errors: no front flags below it (the picky level is
# 0.3), and an argmax over thousands of tag channels at every position would cost more than the rest of the stage.
TAG_FLOOR = 0.05


def near_errors(raw: np.ndarray, floor: float = TAG_FLOOR) -> np.ndarray:
    """[batch, seq] True at tokens whose raw p(error) reaches ``floor`` and at the two tokens before each in its
    window (a word's tag is read at its first subword, and a word's later subword may be the likely one)."""
    near = raw >= floor
    near[..., :-1] |= near[..., 1:]
    near[..., :-1] |= near[..., 1:]  # twice: up to two positions back
    return near


ALTERNATIVES = 2  # a tag model's next best tags kept per position beside the best (up to three suggestions)
TAG_COLUMNS = 3 + 2 * ALTERNATIVES  # best, 0, its probability, then (tag, probability) per alternative


def decode_tags(near: np.ndarray, tag_logits: np.ndarray, alternatives: int = ALTERNATIVES) -> np.ndarray:
    """[..., 3 + 2 * alternatives]: the best tag other than ``$KEEP`` (channel 0) at each position ``near`` marks
    (:func:`near_errors`), -1 elsewhere; 0; that tag's softmax probability over all tags; then the next best tags
    other than ``$KEEP`` and their probabilities, best first (-1 and 0 where there are fewer)."""
    flat = near.reshape(-1)
    logits = tag_logits.reshape(len(flat), -1)
    rows = np.flatnonzero(flat)
    out = np.zeros((len(flat), 3 + 2 * alternatives))
    out[:, 0] = -1
    out[:, 3::2] = -1
    if len(rows):
        chosen = logits[rows].astype(np.float64)
        # the top tags: a partition then a sort of the few (a full sort of thousands of channels costs 10x)
        top = min(alternatives + 1, chosen.shape[1] - 1)
        part = np.argpartition(-chosen[:, 1:], top - 1, axis=1)[:, :top] + 1 if top else np.zeros((len(rows), 0),
                                                                                                     np.int64)
        order = np.argsort(-np.take_along_axis(chosen, part, 1), axis=1, kind="stable")
        best = np.take_along_axis(part, order, 1)
        chosen -= chosen.max(1, keepdims=True)
        np.exp(chosen, out=chosen)
        p = np.take_along_axis(chosen, best, 1) / chosen.sum(1, keepdims=True)
        out[rows, 0] = best[:, 0]
        out[rows, 2] = p[:, 0]
        for k in range(1, top):
            out[rows, 1 + 2 * k] = best[:, k]
            out[rows, 2 + 2 * k] = p[:, k]
    return out.reshape(*near.shape, out.shape[1])
