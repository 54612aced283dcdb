"""GED readers, metrics and threshold tuning on hand-made data; the `ged` CLI on a micro model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from electra_detect.detector import Detector
from electra_detect.errors import GedDataError
from electra_detect.tasks.ged.alignment import (
    TypedTokens,
    flags_to_token_labels,
    score_tokens,
    to_token_scores,
    token_spans,
)
from electra_detect.tasks.ged.error_types import bea_edit_type, split_type
from electra_detect.tasks.ged.metrics import f_beta, token_metrics, tune_threshold, type_metrics
from electra_detect.tasks.ged.readers import (
    GedEdit,
    GedSentence,
    read_bea_json,
    read_m2,
    read_parallel,
    read_token_tsv,
    split_sentences,
)

M2 = """S This are a sentence .
A 1 2|||R:VERB:SVA|||is|||REQUIRED|||-NONE-|||0
A 3 3|||M:ADJ|||good|||REQUIRED|||-NONE-|||0
A 0 1|||R:DET|||That|||REQUIRED|||-NONE-|||1

S Nothing wrong here .
A -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||0

S He go home
A 3 3|||M:PUNCT|||.|||REQUIRED|||-NONE-|||0
"""


def test_m2_reader_labels_spans_insertions_and_annotators(tmp_path: Path) -> None:
    path = tmp_path / "a.m2"
    path.write_text(M2)
    first, clean, last = read_m2(path)
    assert first.tokens == ["This", "are", "a", "sentence", "."]
    assert first.labels == [0, 1, 0, 1, 0]  # the insertion before "sentence" labels "sentence"
    assert first.types[1] == ["R:VERB:SVA"] and first.types[3] == ["M:ADJ"]
    assert clean.labels == [0, 0, 0, 0]
    assert last.labels == [0, 0, 1]  # an insertion at the end labels the last token
    other = read_m2(path, annotator=1)[0]
    assert other.labels == [1, 0, 0, 0, 0]
    assert first.edits == [GedEdit(1, 2, "is", "R:VERB:SVA"), GedEdit(3, 3, "good", "M:ADJ")]  # the corrections
    short = tmp_path / "short.m2"
    short.write_text("S a b\nA 0 1|||R:DET|||0\n")  # no correction field: labelled, no correction
    assert read_m2(short)[0].edits == [GedEdit(0, 1, None, "R:DET")]


def test_m2_and_tsv_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.m2"
    bad.write_text("S One two .\nA 2 9|||R:X|||y|||REQUIRED|||-NONE-|||0\n")
    with pytest.raises(GedDataError, match=r"bad.m2:2: edit span 2-9 outside"):
        read_m2(bad)
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("He\tc\ngo\tx\n")
    with pytest.raises(GedDataError, match=r"bad.tsv:2: expected"):
        read_token_tsv(tsv)
    with pytest.raises(GedDataError, match="not found"):
        read_m2(tmp_path / "missing.m2")


def test_tsv_reader(tmp_path: Path) -> None:
    path = tmp_path / "fce.tsv"
    path.write_text("He\tc\ngo\ti\nhome\tc\n\nFine\tc\n.\tc\n")
    sentences = read_token_tsv(path)
    assert [s.tokens for s in sentences] == [["He", "go", "home"], ["Fine", "."]]
    assert [s.labels for s in sentences] == [[0, 1, 0], [0, 0]]


def test_multiged_tsv_na_tokens_count_as_correct_as_the_task_scorer_counts_them(tmp_path: Path) -> None:
    path = tmp_path / "en_fce_test.tsv"
    path.write_text("She\tc\ndon't\ti\nlike\tNA\nit\tc\n.\tc\n")
    [sentence] = read_token_tsv(path)
    assert sentence.labels == [0, 1, 0, 0, 0]
    # the MultiGED scorer: a flagged NA token is a false positive, an unflagged one counts for nothing
    m = token_metrics(np.array(sentence.labels), np.array([0.0, 0.9, 0.9, 0.0, 0.0]), 0.5)
    assert m["precision"] == pytest.approx(0.5) and m["recall"] == pytest.approx(1.0)


def test_metrics_and_tuning_by_hand() -> None:
    labels = np.array([1, 0, 1, 0, 0, 1])
    scores = np.array([0.9, 0.8, 0.4, 0.3, 0.1, 0.05])
    m = token_metrics(labels, scores, 0.35)  # flags 0.9, 0.8, 0.4: tp 2, fp 1, fn 1
    assert m["precision"] == pytest.approx(2 / 3) and m["recall"] == pytest.approx(2 / 3)
    assert m["f05"] == pytest.approx(2 / 3)
    assert f_beta(0.5, 1.0) == pytest.approx(1.25 * 0.5 / (0.25 * 0.5 + 1.0))
    # Thresholds: 0.9 -> P 1, R 1/3, F0.5 = 0.714; 0.4 -> 0.667; the tuner must pick 0.9.
    assert tune_threshold(labels, scores) == pytest.approx(0.9)


def test_split_is_fixed_and_disjoint() -> None:
    sentences = [GedSentence([str(i)], [0], [[]]) for i in range(20)]
    a1, b1 = split_sentences(sentences, 0.5, seed=3)
    a2, b2 = split_sentences(sentences, 0.5, seed=3)
    assert [s.tokens for s in a1] == [s.tokens for s in a2] and len(a1) == len(b1) == 10
    assert not {s.tokens[0] for s in a1} & {s.tokens[0] for s in b1}


def test_scores_map_subwords_onto_whitespace_tokens(micro_run: Path) -> None:
    detector = Detector.load(micro_run)
    sentence = GedSentence(["The", "farmer's", "quietvillage", "."], [0, 0, 1, 0])
    (values,) = score_tokens(detector, [sentence])
    result = detector.score(sentence.text)[0]
    spans = token_spans(sentence.tokens)
    for index, (start, end) in enumerate(spans):
        inside = [t.p_replaced for t in result.tokens if start <= t.start < end]
        assert values[index] == pytest.approx(max(inside))


def test_ged_cli_flags_and_evaluates(tmp_path: Path, micro_run: Path) -> None:
    cli = [sys.executable, "-m", "electra_detect.cli"]
    out = subprocess.run([*cli, "ged", "--output-format", "json", "--model", str(micro_run), "--threshold", "0",
                          "The farmer saw a house."],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)
    assert [f["word"] for f in row["flagged"]] == ["The", "farmer", "saw", "a", "house", "."]
    engine_line = out.stderr.splitlines()[-1]
    data = tmp_path / "a.m2"
    data.write_text(M2)
    out = subprocess.run([*cli, "ged", "eval", "--model", str(micro_run), "--data", str(data), "--format", "m2",
                          "--threshold", "0"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines()[-1] == engine_line and engine_line.startswith("engine: ")  # what `ged` runs
    report = json.loads(out.stdout)
    assert report["recall"] == 1.0 and report["precision"] == pytest.approx(3 / 12)
    assert report["sentences"] == 3 and set(report["per_type"]) == {"R:VERB:SVA", "M:ADJ", "M:PUNCT"}
    bad = subprocess.run([*cli, "ged", "eval", "--model", str(micro_run), "--data", str(tmp_path / "none.m2"),
                          "--format", "m2"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "not found" in bad.stderr


def test_parallel_reader_uses_errant_alignment(tmp_path: Path) -> None:
    pytest.importorskip("errant")
    src = tmp_path / "src.txt"
    ref0 = tmp_path / "ref0.txt"
    ref1 = tmp_path / "ref1.txt"
    src.write_text("He go to school yesterday .\nThe cat sleeps .\n")
    ref0.write_text("He went to school yesterday .\nThe cat sleeps .\n")
    ref1.write_text("He went to the school yesterday .\nThe cats sleep .\n")
    first = read_parallel(src, [ref0, ref1])
    assert first[0].labels == [0, 1, 0, 0, 0, 0] and first[1].labels == [0, 0, 0, 0]
    assert first[0].types[1] == ["R:VERB:TENSE"]
    union = read_parallel(src, [ref0, ref1], combine="any")
    assert union[0].labels == [0, 1, 0, 1, 0, 0]  # the missing "the" labels the token after the gap
    assert union[1].labels == [0, 1, 1, 0]
    majority = read_parallel(src, [ref0, ref1], combine="majority")
    assert majority[0].labels == [0, 1, 0, 0, 0, 0]
    ref1.write_text("only one line\n")
    with pytest.raises(GedDataError, match="has 1 lines but"):
        read_parallel(src, [ref0, ref1], combine="any")


def test_checker_spans_map_onto_tokens() -> None:
    tokens = ["He", "go", "to", "school", "."]  # "He go to school ." spans: 0-2, 3-5, 6-8, 9-15, 16-17
    assert flags_to_token_labels(tokens, [(3, 5)]).tolist() == [0, 1, 0, 0, 0]
    assert flags_to_token_labels(tokens, [(4, 10)]).tolist() == [0, 1, 1, 1, 0]
    assert flags_to_token_labels(tokens, [(9, 9)]).tolist() == [0, 0, 0, 1, 0]  # insertion before "school"
    assert flags_to_token_labels(tokens, [(17, 17)]).tolist() == [0, 0, 0, 0, 1]  # at the very end
    assert to_token_scores(tokens, [(9, 0.2), (12, 0.7), (0, 0.1)]).tolist() == [0.1, 0, 0, 0.7, 0]


def test_token_scores_take_the_max_of_negative_values_too() -> None:
    assert to_token_scores(["ab", "cd"], [(0, -3.0), (1, -1.0), (3, -2.0)]).tolist() == [-1.0, -2.0]


def test_bea_json_reader_splits_sentences_and_labels_char_edits(tmp_path: Path) -> None:
    text = "I has a cat. She like fish\n\nWe goes home ."
    edits = [[0, [[2, 5, "have", "AGV"],  # replacement: "has"
                  [17, 21, "likes", None],  # replacement without a type
                  [26, 26, ".", "MP"],  # insertion at the end of a sentence: its last token
                  [28, 28, "Then ", "M"],  # insertion at a paragraph's start: the next token
                  [31, 36, None]]],  # marked, not corrected: still an error
             [1, [[6, 7, "an", "X"]]]]  # another annotator's edit
    path = tmp_path / "essays.json"
    path.write_text(json.dumps({"id": "e1", "text": text, "edits": edits}) + "\n\n", encoding="utf-8")
    first, second, third = read_bea_json(path)
    assert first.tokens == ["I", "has", "a", "cat", "."] and first.labels == [0, 1, 0, 0, 0]
    assert first.types[1] == ["R:VERB:SVA"]  # FCE's AGV, as ERRANT names it
    assert second.tokens == ["She", "like", "fish"] and second.labels == [0, 1, 1]
    assert second.types[1] == ["R:OTHER"] and second.types[2] == ["M:PUNCT"]
    assert third.tokens == ["We", "goes", "home", "."] and third.labels == [1, 1, 0, 0]
    assert third.types[0] == ["M:OTHER"] and third.types[1] == ["R:OTHER"]
    other = read_bea_json(path, annotator=1)
    assert [s.labels for s in other] == [[0, 0, 1, 0, 0], [0, 0, 0], [0, 0, 0, 0]]
    assert first.edits == [GedEdit(1, 2, "have", "R:VERB:SVA")]  # the corrections, on the sentence's tokens
    assert second.edits == [GedEdit(1, 2, "likes", "R:OTHER"), GedEdit(3, 3, ".", "M:PUNCT")]
    assert third.edits == [GedEdit(0, 0, "Then ", "M:OTHER"), GedEdit(1, 2, None, "R:OTHER")]


@pytest.mark.parametrize("start, end, correction, code, expected", [
    (2, 5, "have", "AGV", "R:VERB:SVA"), (3, 3, "a", "MD", "M:DET"), (3, 6, "", "UT", "U:PREP"),
    (3, 6, "", "RT", "U:PREP"),  # the operation comes from the edit, not from the code's letter
    (0, 4, "beautiful", "DJ", "R:MORPH"), (0, 4, "received", "S", "R:SPELL"), (0, 4, "x", "FV", "R:VERB:FORM"),
    (0, 4, "x", "ID", "R:OTHER"), (0, 4, "x", "ZZ", "R:OTHER"), (0, 4, "x", "R:NOUN:NUM", "R:NOUN:NUM")])
def test_bea_edit_types_follow_errant(start: int, end: int, correction: str, code: str, expected: str) -> None:
    assert bea_edit_type(start, end, correction, code) == expected
    assert split_type(expected)[0] == expected[0]


@pytest.mark.parametrize("line, fragment", [("{not json", "not a BEA-2019 JSON essay"),
                                            ('{"edits": []}', "not a BEA-2019 JSON essay"),
                                            ('{"text": "Hi there.", "edits": [[0, [[3, 99, "x"]]]]}', "outside"),
                                            ('{"text": "Hi there.", "edits": [[0, [["a", 2, "x"]]]]}', "not a BEA")])
def test_bea_json_errors_name_file_and_line(tmp_path: Path, line: str, fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"text": "Fine.", "edits": []}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(GedDataError, match=rf"bad.json:2: .*{fragment}"):
        read_bea_json(path)


def test_type_metrics_score_operations_on_detected_tokens() -> None:
    sentences = [GedSentence(["He", "go", "to", "school"], [0, 1, 1, 0], [[], ["R:VERB:SVA"], ["U:PREP"], []]),
                 GedSentence(["a", "apple"], [1, 0], [["R:DET"], []])]
    predicted = [TypedTokens(np.array([0.1, 0.9, 0.8, 0.2]), ["R"] * 4, ["DET", "VERB:SVA", "PREP", "X"]),
                 TypedTokens(np.array([0.3, 0.1]), ["R", "R"], ["DET", "DET"])]
    result = type_metrics(sentences, predicted, threshold=0.5)
    assert result["detected"] == 2  # "a" is missed at 0.3
    assert result["operation_accuracy"] == 0.5 and result["type_accuracy"] == 1.0  # "to" is U, predicted R
    assert result["per_type"]["DET"] == {"tokens": 1, "recall": 0.0, "type_accuracy": 0.0}
    assert result["per_type"]["PREP"] == {"tokens": 1, "recall": 1.0, "type_accuracy": 1.0}


def test_ged_eval_as_shown_scores_what_ged_shows(tmp_path: Path) -> None:
    """`ged eval --as-shown` counts the words `ged` shows (its checker and filters), not raw scores at a threshold."""
    data = tmp_path / "tiny.tsv"
    data.write_text("He\tc\ngo\ti\nto\tc\nthe\tc\nstore\tc\nyesterday\tc\n.\tc\n\nShe\tc\nlike\ti\nit\tc\n.\tc\n")
    shipped = Path(__file__).resolve().parents[1] / "models" / "electra-minilm"
    base = [sys.executable, "-m", "electra_detect.cli", "ged", "eval", "--model", str(shipped), "--data", str(data),
            "--format", "tsv"]
    shown = subprocess.run([*base, "--as-shown"], capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    listed = subprocess.run([sys.executable, "-m", "electra_detect.cli", "ged", "--model", str(shipped),
                             "--output-format", "json", "He go to the store yesterday .", "She like it ."],
                            capture_output=True, text=True, timeout=300)
    flagged = sum(len(json.loads(line)["flagged"]) for line in listed.stdout.splitlines())
    assert report["threshold_source"] == "as shown" and report["shown"] == flagged >= 1 and report["recall"] > 0
    refused = subprocess.run([*base, "--as-shown", "--split"], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "--as-shown" in refused.stderr
