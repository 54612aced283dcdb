"""The realistic error mix: every family makes the edit it names, typed with ERRANT's names, at learner density."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from electra_detect.training.synthetic import word_errors
from electra_detect.training.synthetic.realistic_corpus import tag_tokens
from electra_detect.training.synthetic.realistic_errors import (
    EDITS_PER_SENTENCE,
    FAMILY_SHARES,
    Draft,
    RealisticErrorMaker,
)
from electra_detect.training.synthetic.word_errors import EmbeddingNeighbours

TYPE = re.compile(r"^[MRU]:[A-Z]+(:[A-Z]+)?$")
SENTENCES = ["She does not like it when people talk loudly in the library .",
             "He went to the store yesterday and bought three apples .",
             "My brother borrowed my car because his own car was broken , so he walked .",
             "They have been living in this house for ten years and they love every day of it .",
             "I think that the new teacher explained the lesson very clearly to the children .",
             "We must strengthen our economy and protect our nation every day ."]


@pytest.fixture(scope="module")
def tagged() -> list[tuple[list[str], list[str]]]:
    sentences = [s.split() for s in SENTENCES]
    return list(zip(sentences, tag_tokens(sentences), strict=True))


def toy_neighbours() -> EmbeddingNeighbours:
    """say ~ tell ~ speak, borrow ~ lend, big ~ large: a hand-made embedding table."""
    vocab = ["[PAD]", "say", "tell", "speak", "borrow", "lend", "big", "large", "car", "truck", "##s"]
    vectors = np.eye(len(vocab), dtype=np.float32)
    for group in (("say", "tell", "speak"), ("borrow", "lend"), ("big", "large"), ("car", "truck")):
        for word in group:
            vectors[vocab.index(word), vocab.index(group[0])] += 2.0
    return EmbeddingNeighbours(vocab, vectors, top=3)


def aligned(draft: Draft) -> bool:
    return len(draft.tokens) == len(draft.tags) == len(draft.labels) == len(draft.types)


@pytest.mark.parametrize("family", sorted(FAMILY_SHARES))
def test_each_family_makes_a_typed_edit_with_aligned_labels(family: str, tagged) -> None:
    maker = RealisticErrorMaker(toy_neighbours(), seed=3)
    made = 0
    for seed in range(12):
        maker.rng.seed(seed)
        for tokens, tags in tagged:
            draft = Draft(list(tokens), list(tags))
            if getattr(maker, f"_{family}")(draft):
                made += 1
                assert aligned(draft) and sum(draft.labels) >= 1
                assert draft.tokens != tokens  # the text changed
                edited = {t for types in draft.types for t in types}
                assert edited and all(TYPE.match(t) for t in edited), edited
    assert made, f"{family} never applied to the test sentences"


def test_inflection_comes_from_lemminflect_for_any_word(tagged) -> None:
    maker = RealisticErrorMaker(seed=0)
    tokens, tags = tagged[0]  # "She does not like it ..."
    draft = Draft(["She", "likes", "it", "."], ["PRP", "VBZ", "PRP", "."])
    assert maker._agreement(draft) and draft.tokens[1] == "like" and draft.types[1] == ["R:VERB:SVA"]
    draft = Draft(["He", "bought", "apples", "."], ["PRP", "VBD", "NNS", "."])
    assert maker._verb_infl(draft) and draft.tokens[1] == "buyed" and draft.types[1] == ["R:VERB:INFL"]
    draft = Draft(["three", "children"], ["CD", "NNS"])
    assert maker._noun_number(draft) and draft.tokens[1] == "child"


def test_missing_words_mark_the_next_token_and_insertions_themselves() -> None:
    maker = RealisticErrorMaker(seed=1)
    draft = Draft("He sat in the garden .".split(), ["PRP", "VBD", "IN", "DT", "NN", "."])
    assert draft.delete(3, "M:DET") and draft.tokens == "He sat in garden .".split()
    assert draft.labels == [0, 0, 0, 1, 0] and draft.types[3] == ["M:DET"]
    assert draft.insert(1, "is", "U:VERB") and draft.labels[1] == 1 and aligned(draft)
    assert maker is not None


def test_word_choice_takes_a_neighbour_of_another_lemma_in_the_same_inflection() -> None:
    maker = RealisticErrorMaker(toy_neighbours(), seed=0, shares={"word_choice": 1.0})
    draft = Draft("He said it .".split(), ["PRP", "VBD", "PRP", "."])
    assert maker._word_choice(draft)
    assert draft.tokens[1] in ("told", "spoke") and draft.types[1] == ["R:VERB"]


def test_the_judge_keeps_only_word_choices_it_finds_wrong() -> None:
    fluent = RealisticErrorMaker(toy_neighbours(), seed=0, judge=lambda tokens, i: 0.0, judge_threshold=0.2)
    wrong = RealisticErrorMaker(toy_neighbours(), seed=0, judge=lambda tokens, i: 0.9, judge_threshold=0.2)
    assert not fluent._word_choice(Draft("He said it .".split(), ["PRP", "VBD", "PRP", "."]))
    assert wrong._word_choice(Draft("He said it .".split(), ["PRP", "VBD", "PRP", "."]))


def test_density_follows_fce_and_clean_sentences_stay(tagged) -> None:
    maker = RealisticErrorMaker(toy_neighbours(), seed=4)
    results = [maker.corrupt(tokens, tags) for _ in range(150) for tokens, tags in tagged]
    clean = sum(1 for r in results if not any(r.labels)) / len(results)
    assert abs(clean - EDITS_PER_SENTENCE[0]) < 0.08, clean
    rate = sum(sum(r.labels) for r in results) / sum(len(r.tokens) for r in results)
    assert 0.05 < rate < 0.2, rate
    kinds = Counter(t.split(":")[0] for r in results for types in r.types for t in types)
    assert set(kinds) == {"M", "R", "U"}


def test_misspellings_are_non_words_and_real_word_errors_are_words() -> None:
    assert "recieve" in word_errors.codespell_misspellings()["receive"]
    assert not word_errors.known_word("recieve") and word_errors.known_word("receive")
    assert "from" in {w for w, _ in word_errors.real_word_neighbours("form")}
