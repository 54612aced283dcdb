"""POS bias: spaCy tokens aligned to subword scores on tricky text; the table and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from calibration.pos_bias import TaggedScore, align, load_tagger, pos_table
from electra_detect.detector import TextScores, TokenScore


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


def test_pos_bias_cli_writes_json_markdown_and_chart(tmp_path: Path, micro_run: Path) -> None:
    text = tmp_path / "clean.txt"
    text.write_text("The farmer saw a red house yesterday.\nA doctor opened the broken window again.\n")
    result = subprocess.run([sys.executable, "-m", "electra_detect.cli", "pos-bias", "--model", str(micro_run),
                             "--text", str(text), "--out-dir", str(tmp_path / "out"), "--bootstrap", "100"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["tokens"] == 16
    table = json.loads((tmp_path / "out" / "pos_bias.json").read_text())
    assert {"NOUN", "VERB", "DET"} <= set(table["tags"]) and table["calibration"] == "raw"
    assert (tmp_path / "out" / "pos_bias.png").stat().st_size > 5000
    assert "| NOUN |" in (tmp_path / "out" / "pos_bias.md").read_text()
