"""Sentence spans: a paragraph is cut where the GED training data's sentences end, and nowhere else."""

from __future__ import annotations

import pytest

from electra_detect.sentences import sentence_around, sentence_spans


def pieces(text: str) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text)]


@pytest.mark.parametrize(("text", "expected"), [
    ("She don't like it. He go to the store.", ["She don't like it.", "He go to the store."]),
    ("Really?\" she asked! Yes.", ['Really?"', "she asked!", "Yes."]),
    ("Mr. Smith met Dr. Jones, e.g. at noon.", ["Mr. Smith met Dr. Jones, e.g. at noon."]),
    ("J. K. Rowling lives in the U.S. now.", ["J. K. Rowling lives in the U.S. now."]),
    ("It costs 3.5 pounds... Then we left.", ["It costs 3.5 pounds...", "Then we left."]),
    ("First line\nsecond line", ["First line", "second line"]),
    ("  padded.   Next one  ", ["padded.", "Next one"]),
    ("no end punctuation", ["no end punctuation"]),
])
def test_sentences(text: str, expected: list[str]) -> None:
    assert pieces(text) == expected


def test_a_text_without_words_is_one_span() -> None:
    assert sentence_spans("") == [(0, 0)]
    assert sentence_spans(" \n ") == [(0, 3)]


def test_sentence_around_finds_the_sentence_that_holds_a_span() -> None:
    text = "Mr. Smith came. He go home.\nThen sleep"
    spans = sentence_spans(text)
    assert sentence_around(spans, 19, 21) == (16, 27)  # "go" in "He go home."
    assert sentence_around(spans, 4, 9) == (0, 15)  # not cut after "Mr."
    assert sentence_around(spans, 10, 18) == (0, 27)  # across two sentences: both
    assert sentence_around(spans, 15, 16) == (15, 16)  # whitespace: itself
