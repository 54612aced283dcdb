"""POS bias: spaCy tokens aligned to subword scores on tricky text; the table, its tests and the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from electra_detect import cli
from electra_detect.calibration import pos_bias
from electra_detect.calibration.data import corrupt_texts
from electra_detect.calibration.pos_bias import (
    TaggedScore,
    align,
    analyse,
    corrupt_rows,
    pos_table,
    recalibrate,
)
from electra_detect.calibrators import TemperatureScaling, save_calibration, sigmoid
from electra_detect.detector import Detector
from electra_detect.scores import TextScores, TokenScore
from electra_detect.tasks.ged.nlp import load_tagger

TEXTS = ["The farmer saw a red house yesterday.", "A doctor opened the broken window again.",
         "My sister can't find the small garden, naïvely.", "The children visited the quiet village on sunday."]


def test_alignment_on_contractions_punctuation_and_accents() -> None:
    nlp = load_tagger()
    text = "I can't believe it's café-time, naïve!"
    # Subwords as an uncased WordPiece tokenizer would cut them, with offsets into the original text.
    pieces = [("i", 0, 1, 0.1), ("can", 2, 5, 0.2), ("'", 5, 6, 0.9), ("t", 6, 7, 0.3), ("believe", 8, 15, 0.15),
              ("it", 16, 18, 0.05), ("'", 18, 19, 0.4), ("s", 19, 20, 0.35), ("cafe", 21, 25, 0.6),
              ("-", 25, 26, 0.1), ("time", 26, 30, 0.2), (",", 30, 31, 0.01), ("naive", 32, 37, 0.7),
              ("!", 37, 38, 0.02)]
    scores = TextScores(text, [TokenScore(t, s, e, p) for t, s, e, p in pieces], [], 0.0, 0.0)
    aligned = {(row.text, row.pos): row.score for row in align(nlp(text), scores)}
    words = [row.text for row in align(nlp(text), scores)]
    assert words == ["I", "ca", "n't", "believe", "it", "'s", "café", "-", "time", ",", "naïve", "!"]
    assert aligned[("ca", "AUX")] == 0.2  # spaCy's "ca" overlaps only "can"
    assert max(v for (w, _), v in aligned.items() if w == "n't") == 0.9  # "n't" overlaps "can", "'", "t"
    assert max(v for (w, _), v in aligned.items() if w == "café") == 0.6
    assert max(v for (w, _), v in aligned.items() if w == "naïve") == 0.7


def test_table_flags_a_tag_with_a_different_false_positive_rate() -> None:
    rows = [TaggedScore("x", "NOUN", 0.9 if i % 2 else 0.1) for i in range(400)]
    rows += [TaggedScore("y", "VERB", 0.1) for _ in range(400)]
    table = pos_table(rows, threshold=0.5, n_boot=300)
    assert table["overall_fpr"] == pytest.approx(0.25)
    assert table["tags"]["NOUN"]["fpr"] == pytest.approx(0.5) and table["tags"]["NOUN"]["differs_from_overall"]
    assert table["tags"]["VERB"]["fpr"] == 0.0 and table["tags"]["VERB"]["differs_from_overall"]
    low, high = table["tags"]["NOUN"]["fpr_ci"]
    assert low < 0.5 < high


def test_equal_rates_are_not_flagged_and_sentences_are_the_bootstrap_unit() -> None:
    rng = np.random.default_rng(0)
    rows = [TaggedScore("w", tag, float(rng.uniform()), sentence=i // 10) for i, tag in
            enumerate(["NOUN", "VERB"] * 1000)]
    table = pos_table(rows, threshold=0.7, n_boot=400)
    assert table["sentences"] == 200
    assert not table["tags"]["NOUN"]["differs_from_overall"] and not table["tags"]["VERB"]["differs_from_overall"]
    # Whole sentences of flags: resampling sentences must give a wider interval than resampling tokens.
    clustered = [TaggedScore("w", "NOUN", 0.9 if (i // 20) % 3 == 0 else 0.1, sentence=i // 20) for i in range(600)]
    independent = [TaggedScore("w", "NOUN", r.score) for r in clustered]
    width = [np.diff(pos_table(rs, 0.5, n_boot=400)["tags"]["NOUN"]["fpr_ci"])[0] for rs in (clustered, independent)]
    assert width[0] > 2 * width[1]


def test_holm_adjustment_by_hand() -> None:
    adjusted = pos_bias._holm({"A": 0.01, "B": 0.04, "C": 0.03})
    assert adjusted == pytest.approx({"A": 0.03, "C": 0.06, "B": 0.06})  # 3*0.01, max(2*0.03, .03), max(1*0.04, .06)


def test_labelled_rows_give_recall_replaced_share_and_calibrated_table() -> None:
    rows = []
    for s in range(100):  # NOUN: 20% replaced, all caught; DET: 10% replaced, none caught
        rows += [TaggedScore("n", "NOUN", 0.8 if k == 0 else 0.2, int(k == 0), s, masked=k < 2) for k in range(5)]
        rows += [TaggedScore("d", "DET", 0.3, int(k == 0), s, masked=k == 0) for k in range(10)]
    report = analyse(rows, "corrupt", 0.5, TemperatureScaling(0.5), n_boot=200)
    noun, det = report["tags"]["NOUN"], report["tags"]["DET"]
    assert noun["recall"] == 1.0 and det["recall"] == 0.0
    assert noun["positive_rate"] == pytest.approx(0.2) and det["positive_rate"] == pytest.approx(0.1)
    assert noun["masked_rate"] == pytest.approx(0.4) and noun["replaced_given_masked"] == pytest.approx(0.5)
    assert noun["recall_differs"] and det["recall_differs"]
    assert noun["calibration_gap"] == pytest.approx(0.8 * 0.2 + 0.2 * 0.8 - 0.2)
    # T = 0.5 sharpens: 0.3 -> sigmoid(2 logit(0.3)) = 0.155, and the calibrated table says so.
    assert report["calibration"] == "temperature"
    assert report["calibrated"]["tags"]["DET"]["mean_p"] == pytest.approx(float(sigmoid(2 * np.log(0.3 / 0.7))))
    assert "| DET | 1,000 |" in pos_bias.markdown(report, "t")


def test_recalibrate_is_the_calibrator_on_the_logit() -> None:
    rows = [TaggedScore("a", "NOUN", 0.2), TaggedScore("b", "VERB", 0.9)]
    out = recalibrate(rows, TemperatureScaling(2.0))
    assert [r.score for r in out] == pytest.approx([float(sigmoid(np.log(0.25) / 2)), float(sigmoid(np.log(9) / 2))])
    assert rows[0].score == 0.2  # the input rows are left alone


def test_corrupted_rows_follow_the_generator_labels(micro_run: Path) -> None:
    detector = Detector.load(micro_run, calibrated=False)
    items = corrupt_texts(detector, micro_run / "generator", TEXTS, seed=3)
    for item in items:
        assert item.special[0] and item.special[-1] and not item.masked[item.special].any()
        assert (item.replaced <= item.masked).all()  # only predicted positions can be replaced
        candidates = ~np.isin(item.ids, detector.tokenizer.all_special_ids)  # [UNK] is never masked either
        assert item.masked.sum() == max(1, round(0.15 * candidates.sum()))
        for (start, end), special in zip(item.offsets, item.special, strict=True):
            assert special or item.text[start:end].strip()  # offsets point into the original text
    rows = corrupt_rows(detector, micro_run / "generator", TEXTS, seed=3, rounds=2)
    assert {r.sentence for r in rows} == set(range(len(TEXTS)))
    first_round = rows[: len(rows) // 2]
    replaced_words = sum(r.label for r in first_round)
    assert replaced_words >= 1 and all(r.masked for r in rows if r.label)
    assert sum(item.replaced.sum() for item in items) >= replaced_words  # a word may hold several replaced pieces
    texts = {r.text for r in first_round}
    assert {"ca", "n't", "naïvely", ","} <= texts  # spaCy words of the original text, not of the samples


def _cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    """The CLI in-process (one torch/spaCy import for all calls keeps the test fast)."""
    code = cli.main(["pos-bias", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_pos_bias_cli_clean_corrupt_ged_and_errors(tmp_path: Path, micro_run: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "run"
    shutil.copytree(micro_run, run, ignore=shutil.ignore_patterns("checkpoints"))
    text = tmp_path / "clean.txt"
    text.write_text("The farmer saw a red house yesterday.\nA doctor opened the broken window again.\n")
    save_calibration(run / "discriminator", TemperatureScaling(1.5))
    code, out, err = _cli(capsys, "--model", str(run), "--text", str(text), "--out-dir", str(tmp_path / "out"),
                          "--bootstrap", "100")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["tokens"] == 16 and summary["mode"] == "clean"
    table = json.loads((tmp_path / "out" / "pos_bias.json").read_text())
    assert {"NOUN", "VERB", "DET"} <= set(table["tags"]) and table["calibration"] == "temperature"
    assert table["calibrated"]["overall_mean_p"] != pytest.approx(table["overall_mean_p"])
    assert (tmp_path / "out" / "pos_bias.png").stat().st_size > 5000
    assert "| NOUN |" in (tmp_path / "out" / "pos_bias.md").read_text()

    code, out, err = _cli(capsys, "--model", str(run), "--text", str(text), "--corrupt", "--rounds", "3", "--raw",
                          "--out-dir", str(tmp_path / "c"), "--bootstrap", "50")
    assert code == 0, err
    table = json.loads((tmp_path / "c" / "pos_bias.json").read_text())
    assert table["mode"] == "corrupt" and table["calibrated"] is None and table["tokens"] == 48
    assert 0 < table["overall_positive_rate"] < 0.5 and "replaced / predicted" in (tmp_path / "c" / "pos_bias.md"
                                                                                 ).read_text()

    tsv = tmp_path / "g.tsv"
    tsv.write_text("He\tc\ngo\ti\nto\tc\nthe\tc\nstore\tc\n.\tc\n\nThey\tc\nwalks\ti\nto\tc\nschool\tc\n.\tc\n")
    code, out, err = _cli(capsys, "--model", str(run), "--ged", str(tsv), "--format", "tsv", "--out-dir",
                          str(tmp_path / "g"), "--bootstrap", "50")
    assert code == 0, err
    table = json.loads((tmp_path / "g" / "pos_bias.json").read_text())
    assert table["mode"] == "ged" and table["tags"]["VERB"]["positives"] == 2 and table["tokens"] == 11

    for bad, message in ((["--text", str(text), "--ged", str(tsv)], "exactly one source"),
                         (["--ged", str(tsv), "--format", "tsv", "--corrupt"], "--corrupt corrupts --text"),
                         (["--text", str(tmp_path / "missing.txt")], "cannot read text file")):
        code, out, err = _cli(capsys, "--model", str(run), *bad)
        assert code == 2 and message in err, err
    shutil.rmtree(run / "generator")
    code, out, err = _cli(capsys, "--model", str(run), "--text", str(text), "--corrupt")
    assert code == 2 and "generator/" in err
    # A calibration file fitted for other weights is refused with one clear line.
    (run / "discriminator" / "calibration.json").write_text(json.dumps({"method": "temperature", "temperature": 2.0,
                                                                        "weights_sha256": "0" * 64}))
    code, out, err = _cli(capsys, "--model", str(run), "--text", str(text))
    assert code == 2 and "other weights" in err
