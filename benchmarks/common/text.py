"""Text for tests and benchmarks: grammatical sentences from a small grammar (a corpus any test or benchmark can
write for itself), and the long windows of real text that throughput benchmarks feed an engine."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from electra_detect.windows import split_windows

SUBJECTS = ["the farmer", "a teacher", "my sister", "the old man", "our neighbour", "the children", "a doctor",
            "the committee", "his brother", "the young woman", "every student", "the government"]
VERBS = ["saw", "likes", "found", "bought", "painted", "visited", "carried", "wanted", "built", "opened",
         "cleaned", "watched", "remembered", "discovered", "described"]
OBJECTS = ["a red house", "the small garden", "an interesting book", "the new bridge", "a heavy box",
           "the river", "three apples", "the quiet village", "a long letter", "the broken window",
           "the market", "a green field", "the morning train", "a wooden table"]
ENDINGS = ["yesterday", "last week", "in the morning", "after dinner", "with great care", "again",
           "before the storm", "near the school", "on sunday", "for the first time"]


def synthetic_text(num_paragraphs: int, seed: int = 0) -> str:
    """Grammatical sentences from a small grammar, paragraphs separated by blank lines."""
    rng = random.Random(seed)
    paragraphs = []
    for _ in range(num_paragraphs):
        sentences = []
        for _ in range(rng.randint(2, 5)):
            sentence = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(ENDINGS)}."
            sentences.append(sentence[0].upper() + sentence[1:])
        paragraphs.append(" ".join(sentences))
    return "\n\n".join(paragraphs) + "\n"


def running_windows(tokenizer: Any, texts: Sequence[str], body: int) -> list[list[int]]:
    """Every model window of each text read as one token stream, not cut at sentences (``split_windows``, as the
    Detector cut texts before it scored sentence by sentence): the long real windows a throughput benchmark feeds an
    engine, where ``Detector.window_ids`` gives the sentence windows ``score`` runs."""
    rows = tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    return [chunk for row in rows for _, chunk in split_windows(row, body)]
