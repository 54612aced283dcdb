"""Realistic synthetic errors on corpus text: sentences drawn, Penn-tagged by spaCy and corrupted in seeded chunks.

The errors themselves are ``RealisticErrorMaker``'s (realistic_errors.py); this module feeds it: ``clean_sentences``
draws the corpus sentences, ``tag_tokens`` tags them, ``corrupt_chunk`` corrupts one chunk (the distillation text
sets, made by several processes) and ``realistic_examples`` a whole draw (``ged train --error-mix realistic``), with
an optional discriminator as the judge of word choices (``discriminator_judge``).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from electra_detect.tasks.ged.readers import GedSentence
from electra_detect.training.synthetic.realistic_errors import RealisticErrorMaker
from electra_detect.training.synthetic.word_errors import EmbeddingNeighbours

# Penn tags are the tagger's alone: the parser and the attribute ruler (POS, morphology, lemmas; its one TAG rule
# is for whitespace tokens, which whitespace-split text never has) only cost time, ~40% of tagging (cProfile)
NOT_FOR_TAGS = ("parser", "attribute_ruler", "ner", "lemmatizer")


def tag_tokens(sentences: list[list[str]], nlp=None) -> list[list[str]]:
    """Penn tags of pre-tokenised sentences, tagged in context with the tokens kept as they are."""
    from spacy.tokens import Doc

    from electra_detect.tasks.ged.nlp import load_tagger

    nlp = nlp or load_tagger()
    docs = (Doc(nlp.vocab, words=list(tokens)) for tokens in sentences)
    return [[token.tag_ for token in doc] for doc in nlp.pipe(docs, batch_size=256, disable=list(NOT_FOR_TAGS))]


_LOADED: dict[str, object] = {}  # per process: the tagger and the neighbour table, loaded once for every chunk


def corrupt_chunk(sentences: list[list[str]], seed: str, neighbours_from: str | None) -> list[GedSentence]:
    """One chunk of clean sentences, tagged and corrupted by a maker seeded with ``seed`` (e.g. ``"0:17"``, the
    run's seed and the chunk's index): a chunk's errors depend on its sentences and seed alone, so chunks give the
    same text in any process, in any order, and a stopped run resumes after the chunks it wrote."""
    if _LOADED.get("neighbours_from", "?") != neighbours_from:
        from electra_detect.tasks.ged.nlp import load_tagger

        _LOADED.update(neighbours_from=neighbours_from, nlp=_LOADED.get("nlp") or load_tagger(),
                       neighbours=EmbeddingNeighbours.from_model(neighbours_from) if neighbours_from else None)
    maker = RealisticErrorMaker(_LOADED["neighbours"], seed)  # type: ignore[arg-type]
    return [maker.corrupt(tokens, tags)
            for tokens, tags in zip(sentences, tag_tokens(sentences, _LOADED["nlp"]), strict=True)]


def clean_sentences(corpus: list[str], count: int, seed: int) -> list[list[str]]:
    """``count`` distinct corpus sentences drawn at random (seeded) from all of the corpus (4-60 tokens each);
    when the corpus has fewer, every one of them, then again in a new order (each copy gets errors of its own)."""
    from electra_detect.training.pretraining.data import corpus_sentences

    pool = list({" ".join(tokens): tokens for tokens in corpus_sentences(corpus, 10_000_000)}.values())
    rng = random.Random(seed)
    out: list[list[str]] = []
    while len(out) < count and pool:
        rng.shuffle(pool)
        out += pool[:count - len(out)]
    return out


def discriminator_judge(model_dir: str) -> Callable[[list[str], int], float]:
    """p(replaced) of token i of a tokenised sentence, from the discriminator in ``model_dir`` (the word's subwords'
    maximum, as GED scores words)."""
    from electra_detect.detector import Detector
    from electra_detect.tasks.ged.alignment import to_token_scores

    detector = Detector.load(model_dir, engine="torch")

    def judge(tokens: list[str], i: int) -> float:
        result = detector.score([" ".join(tokens)])[0]
        return float(to_token_scores(tokens, ((t.start, t.p_replaced) for t in result.tokens))[i])

    return judge


def realistic_examples(corpus: list[str], count: int, seed: int, neighbours_from: str | None,
                       judge_threshold: float = 0.0) -> list[GedSentence]:
    """``count`` corpus sentences with realistic errors (``corrupt``), Penn-tagged by spaCy first; the word-choice
    families use the input embeddings of the model in ``neighbours_from`` (off when it is None) and, with a
    ``judge_threshold`` above 0, keep a word choice only where that model's discriminator finds it wrong."""
    clean = clean_sentences(corpus, count, seed)
    neighbours = EmbeddingNeighbours.from_model(neighbours_from) if neighbours_from else None
    judge = discriminator_judge(neighbours_from) if neighbours_from and judge_threshold > 0 else None
    maker = RealisticErrorMaker(neighbours, seed, judge=judge, judge_threshold=judge_threshold)
    return [maker.corrupt(tokens, tags) for tokens, tags in zip(clean, tag_tokens(clean), strict=True)]
