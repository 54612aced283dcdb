"""Suggestions for flagged words: the candidates each source proposes, the ranking rule, and the ranking through the
shipped GED model (torch engine: deterministic scores), in the API, the ``ged --suggest`` JSON and the demo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from electra_detect.detector import Detector
from electra_detect.scores import TextScores, WordScore
from electra_detect.tasks.ged.suggestion_ranking import RankSetting, choose, distance, local_score, unnecessary
from electra_detect.tasks.ged.suggestions import (
    Suggester,
    SuggestionPlan,
    TargetPlan,
    context_span,
    match_case,
    replace_span,
    target_span,
)
from electra_detect.tasks.ged.word_candidates import confusions, inflections

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "models" / "electra-minilm"


@pytest.fixture(scope="module")
def suggester() -> Suggester:
    return Suggester()


@pytest.fixture(scope="module")
def shipped() -> Detector:
    """The shipped typed GED model on the torch engine (no export; scores do not move with the batch)."""
    return Detector.load(SHIPPED, task="ged", engine="torch", threads=1)


def values(candidates: list[tuple[str, str]]) -> dict[str, str]:
    return dict(candidates)


@pytest.mark.parametrize("word, expected, source", [
    ("go", "goes", "inflection"), ("go", "went", "inflection"), ("apple", "apples", "inflection"),
    ("buyed", "bought", "inflection"), ("childs", "children", "inflection"), ("good", "better", "inflection"),
    ("quick", "quickly", "inflection"), ("recieve", "receive", "spelling"), ("Septenber", "September", "spelling"),
    ("on", "in", "confusion"), ("its", "it's", "confusion"), ("don't", "doesn't", "confusion"),
    ("to", "too", "confusion"), ("then", "than", "confusion"), ("is", "are", "confusion"), (",", ".", "confusion"),
    ("The", "A", "confusion"), ("english", "English", "case"), ("the", "", "delete")])
def test_each_source_proposes_what_a_learner_meant(suggester: Suggester, word: str, expected: str,
                                                   source: str) -> None:
    found = values(suggester.candidates(word))
    assert found.get(expected) == source, found
    assert word not in found


def test_candidates_respect_the_sources_and_the_cap() -> None:
    only_spelling = Suggester(RankSetting(sources=("spelling",)))
    assert set(values(only_spelling.candidates("recieve")).values()) == {"spelling"}
    assert only_spelling.candidates("go") == []  # a known word has no spelling candidates
    capped = Suggester(RankSetting(max_candidates=3))
    assert len(capped.candidates("in")) == 3
    with pytest.raises(ValueError, match="unknown suggestion sources"):
        RankSetting(sources=("thesaurus",))


def test_word_lists_and_case() -> None:
    assert "goes" in inflections("go") and "go" not in inflections("go")
    assert "quickly" in inflections("quick") and "easily" in inflections("easy")
    assert {"a", "an", "this"} <= set(confusions("the")) and "yours" in confusions("your")
    assert match_case("Septenber", "september") == "September" and match_case("GO", "goes") == "GOES"
    assert match_case("me", "i") == "I" and match_case("its", "it's") == "it's"


def test_spans_targets_and_edits() -> None:
    text = "She don't like it. Then she left."
    assert target_span(text, 4, 7) == (4, 9)  # the Detector's piece "don" -> the written word "don't"
    assert target_span(text, 17, 18) == (17, 18)  # a mark stays itself
    assert context_span(text, 4, 9, 24) == (0, 18)  # the sentence around it
    assert context_span("a b c d e f g", 6, 7, 2) == (2, 11)  # two words each side
    assert replace_span("with the the car", 9, 12, "") == ("with the car", (8, 8))  # a space goes too
    assert replace_span("go home", 0, 2, "goes") == ("goes home", (0, 4))
    assert distance("tents", "tent") == pytest.approx(0.2) and distance("go", "") == 1.0 and distance("A", "a") == 0


def scores_of(text: str, words: list[tuple[str, float, str | None]]) -> TextScores:
    """A TextScores with the given words (word, score, operation), separated by single spaces."""
    out, at = [], 0
    for word, score, operation in words:
        out.append(WordScore(word, at, at + len(word), score, operation=operation,
                             error_type=None if operation is None else "OTHER"))
        at += len(word) + 1
    return TextScores(text, [], out, 0.0, 0.0)


def test_the_local_score_and_the_unnecessary_word() -> None:
    scored = scores_of("a b c d", [("a", 0.1, "R"), ("b", 0.8, "U"), ("c", 0.3, "R"), ("d", 0.05, "R")])
    assert local_score(scored, (2, 3), "max", 0) == 0.8
    assert local_score(scored, (2, 3), "max", 1) == 0.8 and local_score(scored, (6, 7), "max", 1) == 0.3
    assert local_score(scored, (4, 5), "sum", 1) == pytest.approx(-sum(__import__("math").log1p(-p)
                                                                         for p in (0.8, 0.3, 0.05)))
    assert local_score(scored, (4, 4), "max", 0) == 0.8  # an empty span: the words on both sides of the gap
    assert unnecessary(scored, "a b c d", (2, 3))  # the model names operation U
    assert not unnecessary(scored, "a b c d", (4, 5))
    assert unnecessary(scores_of("the the", [("the", 0.1, "R"), ("the", 0.1, "R")]), "the the", (4, 7))  # repeated


def test_the_ranking_rule_keeps_improvements_gates_deletion_and_prefers_near_forms() -> None:
    scored = [("tenting", "inflection", 0.10), ("tent", "inflection", 0.12), ("", "delete", 0.01),
              ("tense", "spelling", 0.9)]
    plain = RankSetting(closeness=0.0, k=3)
    assert [v for v, _, _ in choose("tents", 0.5, scored, False, plain)] == ["tenting", "tent"]  # 0.9 is worse
    assert [v for v, _, _ in choose("tents", 0.5, scored, True, plain)] == ["", "tenting", "tent"]
    near = RankSetting(closeness=0.2, k=1)
    assert [v for v, _, _ in choose("tents", 0.5, scored, False, near)] == ["tent"]
    assert choose("tents", 0.05, scored, False, plain) == []  # nothing improves on the word: no suggestion
    tie = [("Tents", "case", 0.5 - 1e-6)]  # the same tokens (an uncased model), scored in another batch: noise
    assert choose("tents", 0.5, tie, False, plain) == []


def test_a_plan_scores_each_target_once_and_within_a_budget(suggester: Suggester) -> None:
    text = "She don't like it, she don't."
    plan = suggester.plan(text, [(4, 7), (8, 9), (23, 26)])  # "don", "t" (one target) and a second "don"
    assert [t.target for t in plan.targets] == [(4, 9), (23, 28)] and plan.order == [0, 0, 1]
    assert all(t.texts[0] == text for t in plan.targets) and len(plan.texts) == sum(len(t.texts) for t in plan.targets)
    first = len(plan.targets[0].texts)
    plan.within(sum(len(t) for t in plan.targets[0].texts), lambda texts: sum(len(t) for t in texts))
    assert not plan.targets[0].left_out and plan.targets[1].left_out and len(plan.texts) == first
    empty = SuggestionPlan("x", [TargetPlan((0, 1), "x", (0, 1), [])], [0])
    assert empty.texts == [] and suggester.rank(empty, []) == [[]]
    with pytest.raises(ValueError, match="scores for a plan"):
        plan.split([])


def test_the_shipped_model_ranks_the_corrections_first(suggester: Suggester, shipped: Detector) -> None:
    cases = [("I have recieved your letter.", "recieved", "received"),
             ("She don't like the new bridge.", "don", "doesn't"),  # the piece's whole written word is replaced
             ("He is interested on music.", "on", "in"),
             ("Their is a problem with the car.", "Their", "There")]
    for text, word, expected in cases:
        start = text.index(word)
        found = suggester.suggest(shipped.score, text, [(start, start + len(word))])[0]
        assert found and found[0].value == expected, (text, [(s.value, s.score) for s in found])
        target = text[found[0].start:found[0].end]
        assert target == ("don't" if word == "don" else word)
        assert all(s.score <= t.score for s, t in zip(found, found[1:], strict=False))  # best first


def test_flagged_words_get_suggestions_that_improve_the_sentence(suggester: Suggester, shipped: Detector) -> None:
    texts = ["She go to school every day.", "Their is a problem with the the car."]
    scored = shipped.score(texts)
    threshold = shipped.threshold()
    words = suggester.flagged(shipped.score, scored, threshold, 4)
    assert [[w["word"] for w in found] for found in words] == [[w["word"] for w in s.flagged(threshold)]
                                                               for s in scored]
    go = next(w for w in words[0] if w["word"] == "go")
    assert "goes" in [s["value"] for s in go["suggestions"]] and len(go["suggestions"]) <= 3
    assert all((s["start"], s["end"]) == (go["start"], go["end"]) for s in go["suggestions"])
    repeated = [w for w in words[1] if w["word"] == "the"][-1]
    assert repeated["suggestions"][0]["value"] == ""  # "the the": the repeat is deleted
    for found, text in zip(words, texts, strict=True):
        for word in found:
            for s in word["suggestions"]:  # each applies to the text and lowers the error score around it
                if s["value"] and s["value"].lower() == text[s["start"]:s["end"]].lower():
                    continue  # a case change: the uncased model scores both alike (a tie, broken by float noise)
                edited, span = replace_span(text, s["start"], s["end"], s["value"])
                after = local_score(shipped.score(edited)[0], span, suggester.setting.reduce, suggester.setting.window)
                before = local_score(shipped.score(text)[0], (s["start"], s["end"]), suggester.setting.reduce,
                                     suggester.setting.window)
                assert after < before, (text, s)


def test_ged_suggest_writes_suggestions_in_its_json() -> None:
    cli = [sys.executable, "-m", "electra_detect.cli", "ged", "--output-format", "json", "--model", str(SHIPPED),
           "--engine", "torch"]
    text = "She go to school every day."
    plain = subprocess.run([*cli, text], capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    assert all("suggestions" not in w for w in json.loads(plain.stdout)["flagged"])  # off unless asked
    out = subprocess.run([*cli, "--suggest", text], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)
    go = next(w for w in row["flagged"] if w["word"] == "go")
    assert "goes" in [s["value"] for s in go["suggestions"]]
    assert set(go["suggestions"][0]) == {"value", "start", "end"} and go["suggestions"][0]["start"] == 4


def test_the_demo_shows_suggestions_in_the_ged_table(shipped: Detector) -> None:
    from electra_detect.app.demo.page import DemoApp

    app = DemoApp(shipped, threshold=shipped.threshold())
    rows, message = app.ged("She go to school every day.", shipped.threshold(), "raw")
    assert "flagged word" in message
    cell = next(row[5] for row in rows if "go" in row[0].split())  # word, message, category, type, rule, suggestions
    assert cell.startswith("go → ") and "goes" in cell


@pytest.mark.parametrize("word", ["recieved", "tireing", "cigaratte", "alot", "tenes", "wich", "comunication",
                                  "atrophided", "xyzzyq", "acomodation", "recievd", "definatly"])
def test_near_words_are_the_spellcheckers_own_candidates(suggester: Suggester, word: str) -> None:
    """The hand-written search finds what pyspellchecker's ``candidates`` finds, only faster: all the words one edit
    away, and the words two edits away that it has seen ``TWO_EDIT_FREQUENCY`` times or more."""
    from electra_detect.tasks.ged.suggestions import TWO_EDIT_FREQUENCY

    theirs = (suggester.checker.candidates(word) or set()) - {word}
    one_edit = bool(theirs & suggester.checker.edit_distance_1(word))
    counts = suggester.checker.word_frequency.dictionary
    common = {w for w in theirs if one_edit or counts[w] >= TWO_EDIT_FREQUENCY}
    assert suggester.near_words(word) == common
