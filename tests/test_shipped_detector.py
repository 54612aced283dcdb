"""The shipped detector (models/electra-minilm/ged) on the sentences its card promises, as `ged` runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from electra_detect.detector import Detector

SHIPPED = Path(__file__).resolve().parent.parent / "models" / "electra-minilm"
ERRORS = {"She don't like it.": "don't", "He go to the store.": "go", "He bought three apple.": "apple"}
REPEATED = "We sat on on the bench."  # the repeated "on" scores 0.53, under the threshold: flagged with the rules
FLUENT = "We must strengthen our economy and protect our nation."


@pytest.fixture(scope="module")
def shipped() -> Detector:
    return Detector.load(SHIPPED, task="ged", engine="torch", threads=1)


def test_the_cards_errors_are_flagged_and_the_fluent_sentence_is_not(shipped: Detector) -> None:
    threshold = shipped.threshold()
    scored = shipped.score([*ERRORS, FLUENT])
    for (text, word), scores in zip(ERRORS.items(), scored, strict=False):
        assert word in [w["word"] for w in scores.flagged(threshold)], (text, scores.flagged(0.0))
    assert scored[-1].flagged(threshold) == [], scored[-1].flagged(threshold)


def test_the_repeated_word_is_flagged_with_the_rules(shipped: Detector) -> None:
    pytest.importorskip("harper")
    from electra_detect.rules import harper_flagger, rule_setting, with_rules

    setting = rule_setting(shipped.model_dir)
    [scored] = with_rules(shipped.score([REPEATED]), harper_flagger(), setting.weight)
    assert "on" in [w["word"] for w in scored.flagged(setting.threshold)]


def test_a_paragraph_gets_the_flags_of_its_sentences(shipped: Detector) -> None:
    sentences = [*ERRORS, REPEATED, FLUENT]
    paragraph = " ".join(sentences)
    alone = [w["word"] for s in shipped.score(sentences) for w in s.flagged(shipped.threshold())]
    joined = shipped.score(paragraph)[0].flagged(shipped.threshold())
    assert [w["word"] for w in joined] == alone
    assert all(paragraph[w["start"]:w["end"]] == w["word"] for w in joined)


def test_ged_json_names_its_threshold_tags_and_training_data() -> None:
    meta = json.loads((SHIPPED / "ged" / "ged.json").read_text())
    labels = json.loads((SHIPPED / "ged" / "config.json").read_text())["id2label"]
    assert 0 < meta["threshold"] < 1 and labels["0"] == "error" and labels["1"] == "tag:$KEEP"
    tags = json.loads((SHIPPED / "ged" / "edit_tags.json").read_text())
    assert len(tags["tags"]) == len(labels) - 1 and tags["types"]["$FORM_VBZ"] == "R:VERB:SVA"
    assert {"FCE", "W&I+LOCNESS"} <= {part["name"] for part in meta["training_data"]}


def test_the_cli_reports_the_contraction_as_written() -> None:
    out = subprocess.run([sys.executable, "-m", "electra_detect.cli", "ged", "--output-format", "json", "--engine",
                          "torch", "--model", str(SHIPPED), "She don't like it."], capture_output=True, text=True,
                         timeout=300, check=True)
    assert [w["word"] for w in json.loads(out.stdout)["flagged"]] == ["don't"]
