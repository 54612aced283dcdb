"""N-best reranking: readers, fusion, WER tuning and the `electra-detect rerank` verb."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from electra_detect.cli import main
from electra_detect.errors import RerankError
from electra_detect.tasks.rerank.fusion import (
    corpus_wer,
    rerank_hypotheses,
    score_utterances,
    tune_weights,
    word_confidence,
)
from electra_detect.tasks.rerank.nbest import Hypothesis, Utterance, detect_format, parse_hypothesis_lines, read_nbest
from electra_detect.tasks.rerank.wer import hypothesis_word_errors, normalise, word_errors

UTTS = {
    "u1": {"hyp_1": {"score": -10.0, "text": "the farmer saw a red house"},
           "hyp_2": {"score": -10.2, "text": "the farmer saw the red house"},
           "hyp_3": {"score": -11.0, "text": "the farmer saw a red house yesterday"},
           "ref": "the farmer saw a red house yesterday"},
    "u2": {"hyp_1": {"score": -7.0, "text": "my sister likes the river"},
           "hyp_2": {"score": -7.5, "text": "my sister liked the river"},
           "ref": "My sister likes the river."},
}


def write_formats(tmp_path: Path) -> dict[str, Path]:
    """The same two utterances in all three formats."""
    mlm = tmp_path / "nbest.json"
    mlm.write_text(json.dumps(UTTS), encoding="utf-8")
    jsonl = tmp_path / "nbest.jsonl"
    jsonl.write_text("".join(json.dumps({"id": k, "ref": v["ref"],
                                         "hyps": [v[h] for h in v if h.startswith("hyp_")]}) + "\n"
                             for k, v in UTTS.items()), encoding="utf-8")
    kaldi, scores, refs = tmp_path / "nbest.txt", tmp_path / "scores.txt", tmp_path / "refs.txt"
    kaldi_lines, score_lines = [], []
    for k, v in UTTS.items():
        for h in (h for h in v if h.startswith("hyp_")):
            kaldi_lines.append(f"{k}-{h[4:]} {v[h]['text']}")
            score_lines.append(f"{k}-{h[4:]} {v[h]['score']}")
    kaldi.write_text("\n".join(kaldi_lines) + "\n", encoding="utf-8")
    scores.write_text("\n".join(score_lines) + "\n", encoding="utf-8")
    refs.write_text("".join(f"{k} {v['ref']}\n" for k, v in UTTS.items()), encoding="utf-8")
    espnet = tmp_path / "decode"  # ESPnet: {n}best_recog/{text,score}, a score as str() of a torch scalar
    for n in (1, 2, 3):
        folder = espnet / f"{n}best_recog"
        folder.mkdir(parents=True)
        rows = [(k, v[f"hyp_{n}"]) for k, v in UTTS.items() if f"hyp_{n}" in v]
        (folder / "text").write_text("".join(f"{k} {h['text']}\n" for k, h in rows), encoding="utf-8")
        (folder / "score").write_text("".join(f"{k} tensor({h['score']})\n" for k, h in rows), encoding="utf-8")
    return {"mlm": mlm, "jsonl": jsonl, "kaldi": kaldi, "scores": scores, "refs": refs, "espnet": espnet}


def test_parse_hypothesis_lines_scores_separators_and_bad_line() -> None:
    text = "the cat sat\t-1.5\n\n  \nthe cat sad ||| -2\nno score here\n"
    assert parse_hypothesis_lines(text) == [("the cat sat", -1.5), ("the cat sad", -2.0),
                                                    ("no score here", None)]
    with pytest.raises(RerankError, match="line 3"):
        parse_hypothesis_lines("a\t1\n\nb\tnot-a-number\n")
    with pytest.raises(RerankError, match="line 1"):
        parse_hypothesis_lines("a\tnan\n")
    assert issubclass(RerankError, ValueError)


def test_four_readers_agree(tmp_path: Path) -> None:
    paths = write_formats(tmp_path)
    got = {
        "mlm": list(read_nbest(paths["mlm"])),
        "jsonl": list(read_nbest(paths["jsonl"])),
        "kaldi": list(read_nbest(paths["kaldi"], "kaldi", paths["scores"], paths["refs"])),
        "espnet": list(read_nbest(paths["espnet"], refs=paths["refs"])),  # a folder: auto = espnet
    }
    for utts in got.values():
        assert [u.id for u in utts] == ["u1", "u2"]
        assert [h.text for h in utts[0].hyps] == [UTTS["u1"][f"hyp_{i}"]["text"] for i in (1, 2, 3)]
        assert [h.asr_score for h in utts[1].hyps] == [-7.0, -7.5]
        assert utts[1].ref == "My sister likes the river."
    assert detect_format(paths["kaldi"]) == "kaldi"


def test_malformed_lists_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "hyps": [{"text": "x", "score": 1}]}\n\n{"id": "b", "hyps": [{"text": "y", '
                   '"score": "high"}]}\n', encoding="utf-8")
    with pytest.raises(RerankError, match=r"bad.jsonl:3"):
        list(read_nbest(bad))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "hyps": []}\n', encoding="utf-8")
    with pytest.raises(RerankError, match="no hypotheses"):
        list(read_nbest(broken))
    kaldi = tmp_path / "k.txt"
    kaldi.write_text("a-1 x\nb-1 y\na-2 z\n", encoding="utf-8")
    with pytest.raises(RerankError, match=r"k.txt:3.*not contiguous"):
        list(read_nbest(kaldi, "kaldi"))
    nokey = tmp_path / "n.txt"
    nokey.write_text("a-1 x\nfoo bar\n", encoding="utf-8")
    with pytest.raises(RerankError, match=r"n.txt:2"):
        list(read_nbest(nokey, "kaldi"))
    mlm = tmp_path / "m.json"
    mlm.write_text('{"u": {"hyp_1": {"text": "x", "score": 1},\n "hyp_2": }}', encoding="utf-8")
    with pytest.raises(RerankError, match=r"m.json:2"):
        list(read_nbest(mlm))
    (tmp_path / "formats").mkdir()
    espnet = write_formats(tmp_path / "formats")["espnet"]
    (espnet / "2best_recog" / "score").write_text("u1 tensor(-2.0, device='cuda:0')\nu2 tensor(high)\n")
    assert [h.asr_score for h in next(iter(read_nbest(espnet))).hyps][1] == -2.0
    with pytest.raises(RerankError, match=r"2best_recog/score: 'u2': score is not a number"):
        list(read_nbest(espnet))
    with pytest.raises(RerankError, match="no 1best_recog/ folder"):
        list(read_nbest(tmp_path, "espnet"))
    with pytest.raises(RerankError, match="reads a decode folder"):
        list(read_nbest(mlm, "espnet"))


def test_word_errors_and_tuning_with_an_oracle_like_scorer() -> None:
    errors, n = word_errors("The cat sat.", ["the cat sat", "a cat sat down", ""])
    assert n == 3 and errors.tolist() == [0.0, 2.0, 3.0]

    # A scorer that knows the reference: the tuned weight must use it and reach the oracle.
    utts = [Utterance(k, [Hypothesis(v[h]["text"], v[h]["score"]) for h in v if h.startswith("hyp_")],
                             v["ref"]) for k, v in UTTS.items()]
    refs = {normalise(v["ref"]) for v in UTTS.values()}
    items = score_utterances(utts, lambda texts: [0.0 if normalise(t) in refs else -1.0
                                                         for t in texts])
    tuned = tune_weights(items)
    assert tuned["dev_wer_before"] == pytest.approx(1 / 12)
    assert tuned["dev_wer_after"] == 0.0 == tuned["dev_wer_oracle"]
    assert tuned["lm_weight"] > 0
    assert corpus_wer(items, tuned["lm_weight"], tuned["length_weight"]) == 0.0
    # An uninformative scorer keeps the recogniser's choice (weight 0 wins ties).
    flat = score_utterances(utts, lambda texts: [0.0] * len(texts))
    assert tune_weights(flat, length_grid=[0.0])["lm_weight"] == 0.0


def test_rerank_hypotheses_rows(micro_run: Path) -> None:
    from electra_detect.detector import Detector

    detector = Detector.load(micro_run)
    hyps = [("the farmer saw a red house", -3.0), ("farmer the a house saw red", None), ("the river", -4.0)]
    rows = rerank_hypotheses(detector, hyps, lm_weight=2.0, length_weight=0.5)
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert [r["total"] for r in rows] == sorted((r["total"] for r in rows), reverse=True)
    direct = {s.text: s.sentence_sum for s in detector.score([h for h, _ in hyps])}
    for row in rows:
        assert row["electra_score"] == pytest.approx(direct[row["text"]])
        assert row["total"] == pytest.approx(row["asr_score"] + 2.0 * row["electra_score"] + 0.5 * row["length"])
    assert next(r for r in rows if r["text"].startswith("farmer"))["asr_score"] == 0.0
    with pytest.raises(RerankError):
        rerank_hypotheses(detector, [])


def test_the_cli_rows_and_the_servers_ranking_are_one_ranker() -> None:
    """The CLI's rows (utterance_row, choose) rank as rank_hypotheses, the server's and demo's ranker, does: the
    totals of the fusion formula, ties in the recogniser's order; the rows stay in the recogniser's order."""
    from electra_detect.tasks.rerank.fusion import choose, rank_hypotheses, utterance_row

    texts = ["a b c", "a b", "a b c d", "x"]
    utt = Utterance("u", [Hypothesis(t, s) for t, s in zip(texts, [-1.0, -2.0, -1.5, -1.0], strict=True)],
                    "a b c")
    [item] = score_utterances([utt], lambda batch: [0.5, 1.0, 0.75, 0.5])
    row = utterance_row(item, 2.0, -0.5, "electra_score")
    expected_totals = [-1.0 + 2 * 0.5 - 0.5 * 3, -2.0 + 2 * 1.0 - 0.5 * 2, -1.5 + 2 * 0.75 - 0.5 * 4, -1.0 + 1 - 0.5]
    assert [h["text"] for h in row["hyps"]] == texts  # the recogniser's order
    assert [h["total"] for h in row["hyps"]] == expected_totals == [-1.5, -1.0, -2.0, -0.5]
    assert [h["rank"] for h in row["hyps"]] == [3, 2, 4, 1] and row["chosen"] == "x" and row["chosen_index"] == 4
    assert [h["word_errors"] for h in row["hyps"]] == [0, 1, 1, 3]
    ranked = rank_hypotheses([(h.text, h.asr_score) for h in utt.hyps], [0.5, 1.0, 0.75, 0.5], 2.0, -0.5)
    assert [{k: r[k] for k in ("text", "asr_score", "electra_score", "length", "total", "rank")} for r in ranked] == \
        sorted(({k: v for k, v in h.items() if k != "word_errors"} for h in row["hyps"]), key=lambda h: h["rank"])
    assert choose(item, 2.0, -0.5) == 3
    tied = score_utterances([Utterance("t", [Hypothesis("a", -1.0), Hypothesis("b", -1.0)])], lambda b: [0.0, 0.0])
    assert choose(tied[0], 1.0, 0.0) == 0 and [h["rank"] for h in utterance_row(tied[0], 1.0, 0.0)["hyps"]] == [1, 2]


def test_the_learned_reranker_is_chosen_by_the_task(tmp_path: Path) -> None:
    from electra_detect.scores import TextScores, TokenScore
    from electra_detect.tasks.rerank.fusion import HypothesisScore
    from electra_detect.tasks.rerank.listwise import Reranker

    plain = HypothesisScore.for_model(tmp_path)
    assert plain.reranker is None and plain.name == "electra_score" and plain.calibrated
    scored = [TextScores("a b", [TokenScore("a", 0, 1, 0.5), TokenScore("b", 2, 3, 0.0)], [], -0.35, -0.69)]
    assert plain.of(scored) == [-0.69] and HypothesisScore.for_model(tmp_path, "mean").of(scored) == [-0.35]
    Reranker({"words": 0.5, "count": -1.0}).save(tmp_path)
    learned = HypothesisScore.for_model(tmp_path)
    assert learned.name == "reranker_score" and not learned.calibrated
    assert learned.of(scored) == pytest.approx([0.5 * 2 - 1.0 * 1])
    with pytest.raises(RerankError, match="unknown sentence score"):
        HypothesisScore.for_model(tmp_path, "max")


def _summary(capsys: pytest.CaptureFixture) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_cli_rerank_all_formats_and_tuning(micro_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    paths = write_formats(tmp_path)
    out = tmp_path / "out.jsonl"
    assert main(["rerank", str(paths["mlm"]), "--model", str(micro_run), "--out", str(out),
                 "--tune-on", str(paths["jsonl"]), "--no-progress", "--chunk", "1"]) == 0
    summary = _summary(capsys)
    assert summary["utterances"] == 2 and summary["hypotheses"] == 5
    assert summary["wer_before"] == pytest.approx(1 / 12)
    assert summary["wer_oracle"] == 0.0
    assert summary["wer_oracle"] <= summary["wer_after"] <= summary["wer_before"]  # tuned on the same lists
    assert summary["tuned_on"]["dev_utterances"] == 2 and summary["seconds"] >= 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == ["u1", "u2"]
    for row in rows:
        best = min(row["hyps"], key=lambda h: h["rank"])
        assert best["text"] == row["chosen"] == row["hyps"][row["chosen_index"] - 1]["text"]
        assert {"asr_score", "electra_score", "length", "total", "word_errors"} <= set(best)

    kaldi_out = tmp_path / "kaldi.jsonl"
    assert main(["rerank", str(paths["kaldi"]), "--format", "kaldi", "--scores", str(paths["scores"]),
                 "--refs", str(paths["refs"]), "--model", str(micro_run), "--out", str(kaldi_out),
                 "--lm-weight", "0", "--no-progress"]) == 0
    kaldi_summary = _summary(capsys)
    assert kaldi_summary["wer_after"] == kaldi_summary["wer_before"]  # lm weight 0 = the recogniser's 1-best
    assert [json.loads(line)["chosen_index"] for line in kaldi_out.read_text().splitlines()] == [1, 1]

    espnet_out = tmp_path / "espnet.jsonl"
    assert main(["rerank", str(paths["espnet"]), "--refs", str(paths["refs"]), "--model", str(micro_run),
                 "--out", str(espnet_out), "--lm-weight", "0", "--no-progress"]) == 0
    assert _summary(capsys)["wer_before"] == kaldi_summary["wer_before"]


def test_cli_pll_baseline(micro_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    paths = write_formats(tmp_path)
    out = tmp_path / "pll.jsonl"
    assert main(["rerank", str(paths["jsonl"]), "--model", str(micro_run), "--scorer", "pll",
                 "--lm-weight", "1", "--out", str(out), "--no-progress"]) == 0
    assert _summary(capsys)["scorer"] == "pll"
    row = json.loads(out.read_text().splitlines()[0])
    assert all(h["pll_score"] < 0 for h in row["hyps"])  # log-probabilities of real tokens


def test_cli_bad_input_leaves_no_output(micro_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    good = "".join(json.dumps({"id": str(i), "hyps": [{"text": "the river", "score": -1}]}) + "\n" for i in range(5))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good + '{"id": "x", "hyps": [{"text": "y", "score": "high"}]}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    code = main(["rerank", str(bad), "--model", str(micro_run), "--out", str(out), "--chunk", "2", "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "bad.jsonl:6" in err
    assert not out.exists() and not list(tmp_path.glob(".out.jsonl*"))  # no partial or temp file
    assert main(["rerank", str(tmp_path / "missing.json"), "--model", str(micro_run), "--out", str(out)]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["rerank", str(bad), "--model", str(micro_run), "--out", str(out),
                 "--lm-weight", "nan"]) == 2
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    assert main(["rerank", str(empty), "--format", "jsonl", "--model", str(micro_run), "--out", str(out),
                 "--no-progress"]) == 0  # an empty list: an empty output, so that a pipeline over many files goes on
    assert out.read_text() == "" and capsys.readouterr().out == ""


def test_tuning_needs_references() -> None:
    utts = [Utterance("a", [Hypothesis("x", 0.0)])]
    items = score_utterances(utts, lambda texts: [0.0] * len(texts))
    assert items[0].errors is None
    with pytest.raises(RerankError, match="no references"):
        tune_weights(items)
    assert np.isfinite(items[0].asr).all()


def test_cli_error_comes_before_any_progress_bar(micro_run: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "hyps": [{"text": "y", "score": "high"}]}\n', encoding="utf-8")
    code = main(["rerank", str(bad), "--model", str(micro_run), "--out", str(tmp_path / "out.jsonl")])  # bar on
    assert code == 2
    err = capsys.readouterr().err
    assert err.lstrip().startswith("error:") and "bad.jsonl:1" in err, err  # nothing (no bar) before the error


def test_hypothesis_word_errors_align_with_the_reference() -> None:
    assert hypothesis_word_errors("she had been forced into prudence",
                                         "she had bean forced in to prudence") == [0, 0, 1, 0, 1, 1, 0]
    assert hypothesis_word_errors("A b c.", "a , b c d") == [0, None, 0, 0, 1]  # ',' normalises away
    assert hypothesis_word_errors("a b c d", "a c d") == [0, 0, 0]  # a deletion has no hypothesis word
    assert hypothesis_word_errors("a b c d", "a c d", mark_deletions=True) == [0, 1, 0]  # ... but the next
    assert hypothesis_word_errors("a b c d", "a b c", mark_deletions=True) == [0, 0, 1]  # ... or the last
    # a word normalisation splits ("well-known") is one word, wrong if either piece is
    assert hypothesis_word_errors("it was well known", "it was well-known") == [0, 0, 0]
    assert hypothesis_word_errors("it was well known", "it was well-knew") == [0, 0, 1]
    with pytest.raises(RerankError):
        hypothesis_word_errors("  ", "a")


def test_word_confidence_takes_the_highest_detector_word_inside_each_recogniser_word() -> None:
    from electra_detect.scores import TextScores, WordScore

    text = "she'll learn  romance"
    words = [WordScore("she", 0, 3, 0.1), WordScore("'", 3, 4, 0.2), WordScore("ll", 4, 6, 0.7),
             WordScore("learn", 7, 12, 0.4), WordScore("romance", 14, 21, 0.05)]
    result = TextScores(text=text, tokens=[], words=words, sentence_mean=0.0, sentence_sum=0.0)
    assert [(r["word"], r["start"], r["end"], r["p_wrong"]) for r in word_confidence(result)] == [
        ("she'll", 0, 6, 0.7), ("learn", 7, 12, 0.4), ("romance", 14, 21, 0.05)]


def test_cli_rerank_confidence(micro_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    paths = write_formats(tmp_path)
    out = tmp_path / "conf.jsonl"
    assert main(["rerank", str(paths["jsonl"]), "--model", str(micro_run), "--out", str(out), "--confidence",
                 "--no-progress"]) == 0
    _summary(capsys)
    for row in map(json.loads, out.read_text().splitlines()):
        assert [w["word"] for w in row["confidence"]] == row["chosen"].split()
        assert all(0.0 <= w["p_wrong"] <= 1.0 for w in row["confidence"])
    assert main(["rerank", str(paths["jsonl"]), "--model", str(micro_run), "--out", str(out), "--confidence",
                 "--scorer", "pll", "--no-progress"]) == 2
    assert "--confidence" in capsys.readouterr().err
