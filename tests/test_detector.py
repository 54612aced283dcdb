"""Detector: loading, batching, long-text windows, word and sentence scores, errors."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from electra_detect.detector import Detector
from electra_detect.errors import DetectorError
from tests.tolerance import assert_close_probs


@pytest.fixture(scope="module")
def detector(micro_run: Path) -> Detector:
    return Detector.load(micro_run)


def test_loads_run_dir_and_discriminator_dir(micro_run: Path, detector: Detector) -> None:
    direct = Detector.load(micro_run / "discriminator")
    text = "The farmer saw a red house yesterday."
    a, b = detector.score(text)[0], direct.score(text)[0]
    assert [t.p_replaced for t in a.tokens] == pytest.approx([t.p_replaced for t in b.tokens])


def test_plain_hf_directory_with_only_vocab_txt_loads(tmp_path: Path, micro_paper_run: Path) -> None:
    """A Google/HF-style ELECTRA discriminator dir (config, safetensors weights, vocab.txt) works as well."""
    from transformers import ElectraForPreTraining

    hf_dir = tmp_path / "hf"
    ElectraForPreTraining.from_pretrained(micro_paper_run / "discriminator").save_pretrained(hf_dir)
    shutil.copy(micro_paper_run / "discriminator" / "vocab.txt", hf_dir / "vocab.txt")
    detector = Detector.load(hf_dir)
    assert type(detector.engine.model).__name__ == "ElectraForPreTraining"
    reference = Detector.load(micro_paper_run)
    text = "The farmer saw a red house."
    assert [t.p_replaced for t in detector.score(text)[0].tokens] == pytest.approx(
        [t.p_replaced for t in reference.score(text)[0].tokens])


def test_batched_equals_one_at_a_time(detector: Detector) -> None:
    texts = ["The farmer saw a red house yesterday.", "A doctor", "Every student painted the river again and again."]
    batched = detector.score(texts, batch_size=8)
    for text, scores in zip(texts, batched, strict=True):
        alone = detector.score(text)[0]
        assert_close_probs([t.p_replaced for t in scores.tokens], [t.p_replaced for t in alone.tokens])


def test_offsets_words_and_sentence_score(detector: Detector) -> None:
    text = "The committee visited   the quietvillage, again!"
    scores = detector.score(text)[0]
    for token in scores.tokens:
        if token.token == "[UNK]":  # the micro corpus has no commas
            continue
        piece = text[token.start:token.end].lower()
        assert piece == token.token.removeprefix("##"), token
        assert 0.0 < token.p_replaced < 1.0
    words = [w.word for w in scores.words]
    assert words == ["The", "committee", "visited", "the", "quietvillage", ",", "again", "!"]
    for word in scores.words:
        assert word.score == max(scores.tokens[i].p_replaced for i in word.tokens)
    terms = [math.log(1 - t.p_replaced) for t in scores.tokens]
    assert scores.sentence_sum == pytest.approx(sum(terms))
    assert scores.sentence_mean == pytest.approx(sum(terms) / len(terms))


def test_long_text_is_windowed_not_truncated(detector: Detector) -> None:
    sentence = "The old man carried a heavy box to the market before the storm. "
    long_text = sentence * 12  # far beyond the micro model's 64 positions
    scores = detector.score(long_text)[0]
    assert len(scores.tokens) > 3 * detector.max_length
    probs = np.array([t.p_replaced for t in scores.tokens])
    assert np.isfinite(probs).all()
    assert scores.tokens[-1].end == len(long_text.rstrip())


def test_window_edges_take_the_window_that_holds_them(micro_run: Path) -> None:
    narrow = Detector.load(micro_run, max_length=16)  # 14 tokens of text per window, stride 7
    text = "The old man carried a heavy box to the market before the storm and " * 3  # one long sentence
    scores = narrow.score(text)[0]
    # The first token lies only in the first window: scoring that window's text alone must agree.
    first_window_text = text[:scores.tokens[13].end]
    alone = narrow.score(first_window_text)[0]
    assert len(alone.tokens) == 14
    assert_close_probs([scores.tokens[0].p_replaced], [alone.tokens[0].p_replaced], len(scores.tokens))
    # The last token lies only in the last window: that window's ids scored alone must agree (re-tokenising
    # the text from a subword's offset would give other ids, and a model that reads context other scores).
    last = narrow.window_ids([text])[-1]
    ids, mask = narrow.pad_batch([last])
    alone_p = 1 / (1 + np.exp(-narrow.raw_logits(ids, mask)[0, len(last)]))
    assert_close_probs([scores.tokens[-1].p_replaced], [float(alone_p)], len(scores.tokens))


def test_a_paragraph_is_scored_as_its_sentences_with_offsets_into_it(detector: Detector) -> None:
    sentences = ["The farmer saw a red house.", "A doctor painted the river again!", "Every student ran."]
    paragraph = "  " + " ".join(sentences[:2]) + "\n" + sentences[2]
    whole = detector.score(paragraph)[0]
    alone = detector.score(sentences)
    assert_close_probs([t.p_replaced for t in whole.tokens], [t.p_replaced for scores in alone for t in scores.tokens])
    assert [w.word for w in whole.words] == [w.word for scores in alone for w in scores.words]
    for word in whole.words:
        assert paragraph[word.start:word.end] == word.word
    windows = detector.window_ids([paragraph])
    assert len(windows) == 3  # one model window a sentence: none crosses a sentence's end
    assert windows == detector.window_ids(sentences)


def test_a_contraction_is_the_word_the_user_wrote(detector: Detector) -> None:
    text = "She don't like the farmer’s house, 'the' river."
    scores = detector.score(text)[0]
    words = [w.word for w in scores.words]
    assert words == ["She", "don't", "like", "the", "farmer’s", "house", ",", "'", "the", "'", "river", "."]
    dont = scores.words[1]
    assert dont.score == max(scores.tokens[i].p_replaced for i in dont.tokens) and len(dont.tokens) >= 3


def test_clear_errors(tmp_path: Path, micro_run: Path, detector: Detector) -> None:
    with pytest.raises(DetectorError, match="not found"):
        Detector.load(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DetectorError, match="not a model directory"):
        Detector.load(tmp_path / "empty")
    no_tok = tmp_path / "no_tokenizer"
    shutil.copytree(micro_run / "discriminator", no_tok)
    for name in ("tokenizer.json", "vocab.txt"):
        (no_tok / name).unlink()
    with pytest.raises(DetectorError, match="no tokenizer"):
        Detector.load(no_tok)
    with pytest.raises(DetectorError, match="string or a list of strings"):
        detector.score([b"bytes"])  # type: ignore[list-item]
    with pytest.raises(DetectorError, match="string or a list of strings"):
        detector.score(42)  # type: ignore[arg-type]


def test_calibration_file_is_applied_by_default_and_rejected_for_other_weights(tmp_path: Path,
                                                                               micro_run: Path) -> None:
    from electra_detect.calibrators import TemperatureScaling, save_calibration

    model = tmp_path / "model"
    shutil.copytree(micro_run / "discriminator", model)
    raw = Detector.load(model)
    assert raw.calibration == "raw"
    save_calibration(model, TemperatureScaling(4.0))
    calibrated = Detector.load(model)
    assert calibrated.calibration == "temperature"
    text = "The farmer saw a red house."
    p_raw = np.array([t.p_replaced for t in raw.score(text)[0].tokens])
    p_cal = np.array([t.p_replaced for t in calibrated.score(text)[0].tokens])
    logits = np.log(p_raw / (1 - p_raw))
    assert np.allclose(p_cal, 1 / (1 + np.exp(-logits / 4.0)), atol=1e-6)
    assert Detector.load(model, calibrated=False).calibration == "raw"
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + b"\x00" * 8)  # other weights, same size
    with pytest.raises(DetectorError, match="fitted for other weights"):
        Detector.load(model)


def test_ged_task_takes_the_model_dirs_fine_tuned_ged_model(tmp_path: Path, micro_run: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(micro_run / "discriminator", model / "discriminator")
    shutil.copytree(micro_run / "generator", model / "generator")
    assert Detector.load(model, task="ged").model_dir == model / "discriminator"  # no ged/ yet: the pre-trained one
    shutil.copytree(micro_run / "discriminator", model / "ged")
    (model / "ged" / "ged.json").write_text('{"threshold": 0.3}')
    assert Detector.load(model, task="ged").model_dir == model / "ged"
    assert Detector.load(model).model_dir == model / "discriminator"  # scoring keeps the pre-trained one
    assert Detector.load(model, task="ged").threshold() == 0.3 and Detector.load(model).threshold() == 0.5
    with pytest.raises(DetectorError, match="unknown task"):
        Detector.load(model, task="spell")


def test_ged_threshold_is_applied_in_the_probability_space_it_was_tuned_in(tmp_path: Path, micro_run: Path) -> None:
    """Regression: a threshold tuned by `ged train` on raw probabilities (ged.json) was applied to calibrated
    probabilities once `calibrate` had run. It is now carried into the scores' space: the same words are flagged."""
    import json

    from electra_detect.calibrators import TemperatureScaling, save_calibration

    model = tmp_path / "model"
    shutil.copytree(micro_run / "discriminator", model)
    text = "The farmer saw a red house yesterday and the the children bought three apple."
    raw_words = Detector.load(model).score(text)[0].words
    threshold = float(np.median([w.score for w in raw_words]))
    (model / "ged.json").write_text(json.dumps({"threshold": threshold}))  # an old file: no "space" = raw
    save_calibration(model, TemperatureScaling(4.0))
    detector = Detector.load(model)
    assert detector.calibration == "temperature"
    assert detector.threshold(calibrated=False) == threshold
    logit = np.log(threshold / (1 - threshold))
    assert detector.threshold() == pytest.approx(1 / (1 + np.exp(-logit / 4.0)), abs=1e-9)
    assert detector.threshold() != pytest.approx(threshold)  # the bug: the raw value on calibrated scores
    flagged_raw = [w["word"] for w in detector.score(text, calibrated=False)[0].flagged(detector.threshold(False))]
    flagged_cal = [w["word"] for w in detector.score(text)[0].flagged(detector.threshold())]
    assert flagged_raw and flagged_raw == flagged_cal
    # A threshold tuned on calibrated probabilities is used as it is there, and carried back for raw scores.
    # ged.json is read once, when the Detector loads: a file changed afterwards takes effect at the next load.
    (model / "ged.json").write_text(json.dumps({"threshold": 0.4, "space": "calibrated"}))
    assert detector.threshold(calibrated=False) == threshold
    detector = Detector.load(model)
    assert detector.threshold() == 0.4
    back = detector.threshold(calibrated=False)
    assert 1 / (1 + np.exp(-np.log(back / (1 - back)) / 4.0)) == pytest.approx(0.4, abs=1e-6)
    (model / "ged.json").write_text(json.dumps({"threshold": 0.4, "space": "logit"}))
    with pytest.raises(DetectorError, match="probability space"):
        Detector.load(model)


def test_calibrated_or_raw_is_a_per_call_option(tmp_path: Path, micro_run: Path) -> None:
    from electra_detect.calibrators import TemperatureScaling, save_calibration

    model = tmp_path / "model"
    shutil.copytree(micro_run / "discriminator", model)
    save_calibration(model, TemperatureScaling(4.0))
    detector = Detector.load(model)
    text = "The farmer saw a red house."
    raw = [t.p_replaced for t in detector.score(text, calibrated=False)[0].tokens]
    assert raw == [t.p_replaced for t in Detector.load(model, calibrated=False).score(text)[0].tokens]
    assert raw != [t.p_replaced for t in detector.score(text)[0].tokens]
