"""Per-POS GED thresholds: tuning recovers per-tag optima, adoption is decided on held-out tuning folds,
tagging keeps whitespace tokens, and `ged eval --per-pos-thresholds` reports both choices."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from electra_detect import cli
from electra_detect.tasks.ged.metrics import flatten, token_metrics
from electra_detect.tasks.ged.pos_thresholds import (
    pos_threshold_metrics,
    select_pos_thresholds,
    tag_pos,
    thresholds_for,
    tune_pos_thresholds,
)
from electra_detect.tasks.ged.readers import GedSentence


def _biased(n_sentences: int, seed: int) -> tuple[list[GedSentence], list[np.ndarray], list[list[str]]]:
    """NOUN errors score ~0.8 against ~0.5 for correct nouns; DET errors ~0.3 against ~0.1.
    One threshold cannot serve both tags; one per tag can."""
    rng = np.random.default_rng(seed)
    sentences, scores, tags = [], [], []
    for _ in range(n_sentences):
        pos = ["DET", "NOUN"] * 5
        labels = (rng.uniform(size=10) < 0.2).astype(int).tolist()
        centre = {("NOUN", 1): 0.8, ("NOUN", 0): 0.5, ("DET", 1): 0.3, ("DET", 0): 0.1}
        values = np.clip([rng.normal(centre[(t, y)], 0.05) for t, y in zip(pos, labels, strict=True)], 0, 1)
        sentences.append(GedSentence(["w"] * 10, labels))
        scores.append(values)
        tags.append(pos)
    return sentences, scores, tags


def _f05(sentences, scores, tags, per_tag: dict[str, float], default: float) -> float:
    labels, values = flatten(sentences, scores)
    flat = [t for ts in tags for t in ts]
    return pos_threshold_metrics(labels, values, flat, per_tag, default)["f05"]


def test_tuning_finds_a_threshold_per_tag_and_beats_one_threshold() -> None:
    sentences, scores, tags = _biased(300, seed=0)
    labels, values = flatten(sentences, scores)
    flat = [t for ts in tags for t in ts]
    base, per_tag = tune_pos_thresholds(labels, values, flat)
    thresholds = {"DET": per_tag.get("DET", base), "NOUN": per_tag.get("NOUN", base)}
    assert 0.15 < thresholds["DET"] < 0.25 and 0.6 < thresholds["NOUN"] < 0.75
    assert _f05(sentences, scores, tags, per_tag, base) > 0.95
    assert _f05(sentences, scores, tags, {}, base) < 0.85  # one threshold must give up one of the tags


def test_adoption_is_decided_on_held_out_folds() -> None:
    sentences, scores, tags = _biased(200, seed=1)
    choice = select_pos_thresholds(sentences, scores, tags)
    assert choice["adopted"] and choice["cv_f05_per_pos"] > choice["cv_f05_global"] + 0.05
    fresh = _biased(200, seed=2)  # the chosen thresholds carry over to new data
    assert _f05(*fresh, choice["thresholds"], choice["global_threshold"]) > _f05(*fresh, {}, choice["global_threshold"])
    # With too few errors per tag to tune on, nothing changes, and a tie is not adopted.
    choice = select_pos_thresholds(sentences, scores, tags, min_errors=10_000)
    assert choice["thresholds"] == {} and not choice["adopted"]


def test_never_flag_is_a_candidate() -> None:
    # PUNCT is never an error but scores high: the best is never to flag it.
    labels = np.array([1, 0, 1, 0] * 50 + [0] * 100)
    values = np.array([0.9, 0.1, 0.8, 0.2] * 50 + [0.95] * 100)
    pos = ["NOUN"] * 200 + ["PUNCT"] * 100
    base, per_tag = tune_pos_thresholds(labels, values, pos, min_errors=0)
    assert per_tag["PUNCT"] > 1.0 and token_metrics(labels, values, thresholds_for(pos, per_tag, base))[
        "f05"] == pytest.approx(1.0)


def test_tag_pos_keeps_whitespace_tokens() -> None:
    sentences = [GedSentence("He go to the store .".split(), [0, 1, 0, 0, 0, 0]),
                 GedSentence("I can't do n't it !".split(), [0] * 6)]
    tags = tag_pos(sentences)
    assert tags[0] == ["PRON", "VERB", "ADP", "DET", "NOUN", "PUNCT"]
    assert [len(t) for t in tags] == [6, 6]  # "can't" stays one token: labels live on these tokens


def test_ged_eval_per_pos_flag(tmp_path: Path, micro_run: Path, capsys: pytest.CaptureFixture) -> None:
    rows = []
    for k in range(40):
        words = ["The", "farmer", "saw", "a", "red", "house", "yesterday", "."]
        wrong = k % len(words)
        rows += [f"{w}\t{'i' if i == wrong else 'c'}" for i, w in enumerate(words)] + [""]
    data = tmp_path / "d.tsv"
    data.write_text("\n".join(rows))
    code = cli.main(["ged", "eval", "--model", str(micro_run), "--data", str(data), "--format", "tsv", "--split",
                     "--per-pos-thresholds"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    choice = report["per_pos"]
    assert set(choice) >= {"adopted", "cv_f05_global", "cv_f05_per_pos", "thresholds", "report_single",
                           "report_per_pos"}
    headline = choice["report_per_pos"] if choice["adopted"] else choice["report_single"]
    assert report["f05"] == pytest.approx(headline["f05"])
    assert report["threshold_source"] == ("tuned per POS" if choice["adopted"] else "tuned")
    code = cli.main(["ged", "eval", "--model", str(micro_run), "--data", str(data), "--format", "tsv",
                     "--per-pos-thresholds"])
    assert code == 2 and "--split or --tune-on" in capsys.readouterr().err
