"""The GED check writers steer: the rule table and its doc page, the options (rules, categories, enabled-only,
levels), the personal dictionary, the flagged-word record, and types that name the edit on the shipped model as
``ged`` runs it (int8 ONNX), the same with suggestions shown or not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from electra_detect.errors import GedOptionsError
from electra_detect.tasks.ged.dictionary import PersonalDictionary, Vocabulary, default_dictionary_path, word_forms
from electra_detect.tasks.ged.flags import FlaggedWord
from electra_detect.tasks.ged.options import GedOptions
from electra_detect.tasks.ged.rule_table import (
    CATEGORIES,
    MAIN_TYPES,
    OPERATIONS,
    RULES,
    RULES_BY_ID,
    UNTYPED,
    rule_for,
    rules_markdown,
)
from electra_detect.tasks.ged.suggestions import Suggestion

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "models" / "electra-minilm"
QUICKSTART = ["He go to the store yesterday and buyed three apple.",
              "The committee have decided to postpone the the meeting until next week."]
ERRANT_MAIN_TYPES = {"ADJ", "ADJ:FORM", "ADV", "CONJ", "CONTR", "DET", "MORPH", "NOUN", "NOUN:INFL", "NOUN:NUM",
                     "NOUN:POSS", "ORTH", "OTHER", "PART", "PREP", "PRON", "PUNCT", "SPELL", "VERB", "VERB:FORM",
                     "VERB:INFL", "VERB:SVA", "VERB:TENSE", "WO"}  # errant 3.0's classifier, UNK aside


# ------------------------------------------------------------------------------------------- the table
def test_every_errant_type_has_one_stable_rule_with_a_category_and_messages() -> None:
    assert set(MAIN_TYPES) == ERRANT_MAIN_TYPES
    assert set(RULES) == {f"{op}:{main}" for op in OPERATIONS for main in ERRANT_MAIN_TYPES}
    assert len(RULES_BY_ID) == len(RULES) + 1  # ids are unique; the untyped rule beside them
    assert rule_for("R", "VERB:TENSE").id == "ELECTRA_DETECT_R_VERB_TENSE"
    assert rule_for("U", "DET").id == "ELECTRA_DETECT_U_DET" and rule_for(None, None) is UNTYPED
    assert rule_for("R", "SPELL").category == "TYPOS" and rule_for("M", "PUNCT").category == "PUNCTUATION"
    assert rule_for("R", "ORTH").category == "CASING" and rule_for("R", "OTHER").category == "STYLE"
    assert rule_for("M", "VERB").category == "GRAMMAR" and rule_for("R", "NOUN:NUM").category == "GRAMMAR"
    assert rule_for("R", "UNKNOWN:THING") is rule_for("R", "OTHER")
    assert all(rule.category in CATEGORIES for rule in RULES_BY_ID.values())
    assert rule_for("R", "VERB:TENSE").explain("go", "went") == "Verb tense: *go* may need to be *went*."
    assert rule_for("R", "NOUN:NUM").explain("apple") == "Noun number: *apple* may be in the wrong number " \
                                                         "(singular or plural)."
    assert rule_for("U", "DET").explain("the", "") == "Determiner: *the* may be unnecessary."


def test_the_doc_page_is_the_table() -> None:
    assert (ROOT / "docs" / "ged_rules.md").read_text(encoding="utf-8") == rules_markdown(), \
        "regenerate: python -m electra_detect.tasks.ged.rule_table docs/ged_rules.md"


# ------------------------------------------------------------------------------------------- the options
def test_options_switch_rules_and_categories_as_languagetool_does() -> None:
    tense, spell = rule_for("R", "VERB:TENSE"), rule_for("R", "SPELL")
    assert GedOptions().allows(tense) and GedOptions().allows(spell)
    assert not GedOptions(disabled_rules={"electra_detect_r_verb_tense"}).allows(tense)  # any case
    assert GedOptions(disabled_rules={"NO_SUCH_RULE"}).allows(tense)  # unknown ids are ignored
    assert not GedOptions(disabled_categories={"TYPOS"}).allows(spell)
    assert GedOptions(disabled_categories={"TYPOS"}).allows(tense)
    only = GedOptions(enabled_rules={"ELECTRA_DETECT_R_SPELL, ELECTRA_DETECT_U_DET"}, enabled_only=True)
    assert only.allows(spell) and only.allows(rule_for("U", "DET")) and not only.allows(tense)
    assert GedOptions(enabled_categories={"GRAMMAR"}, enabled_only=True).allows(tense)
    assert not GedOptions(enabled_categories={"GRAMMAR"}, enabled_only=True).allows(spell)
    assert GedOptions(enabled_rules={"ELECTRA_DETECT_R_SPELL"}).allows(tense)  # without enabled_only: no effect
    with pytest.raises(GedOptionsError, match="enabledOnly needs"):
        GedOptions(enabled_only=True)
    with pytest.raises(GedOptionsError, match="unknown level"):
        GedOptions(level="pedantic")


# ------------------------------------------------------------------------------------------- the dictionary
def test_dictionary_words_match_in_any_case_with_their_inflections() -> None:
    assert {"tokenise", "tokenises", "tokenised", "tokenising"} <= word_forms("Tokenise")
    assert {"go", "goes", "went", "gone"} <= word_forms("go")
    assert "finetunes" in word_forms("finetune")  # a word lemminflect does not know: its regular forms
    vocabulary = Vocabulary.of(["Kubernetes", "New  York"])
    assert vocabulary.knows("KUBERNETES") and vocabulary.knows("Kubernetes's") and not vocabulary.knows("Kuber")
    assert vocabulary.phrase_spans("I love new york, not York.") == [(7, 15)]


def test_the_dictionary_file_is_read_again_when_it_changes(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "dictionary.txt"
    dictionary = PersonalDictionary(path)
    assert not dictionary.vocabulary()  # no file yet: empty
    path.write_text("# my words\nKubernetes\n\nELECTRA  # the model\n", encoding="utf-8")
    assert dictionary.vocabulary().knows("electra") and dictionary.vocabulary().knows("kubernetes")
    path.write_text("Kubernetes\n", encoding="utf-8")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))  # a later modification time, whatever the clock
    assert not dictionary.vocabulary().knows("electra")
    monkeypatch.setenv("ELECTRA_DETECT_DICTIONARY", str(path))
    assert default_dictionary_path() == path
    monkeypatch.delenv("ELECTRA_DETECT_DICTIONARY")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert default_dictionary_path() == tmp_path / "electra-detect" / "dictionary.txt"


# ------------------------------------------------------------------------------------------- the record
def test_the_record_keeps_the_old_keys_and_adds_rule_category_and_message() -> None:
    word = FlaggedWord("go", 3, 5, 0.96861, "R", "OTHER", 0.37721, "model", rule_for("R", "OTHER"))
    word.retype("R", "VERB:TENSE", "edit")
    word.suggestions = [Suggestion("went", 3, 5, 0.1, "inflection")]
    assert word.to_dict(4) == {"word": "go", "start": 3, "end": 5, "score": 0.9686, "operation": "R",
                               "type": "VERB:TENSE", "type_score": 0.3772, "type_source": "edit",
                               "rule": "ELECTRA_DETECT_R_VERB_TENSE", "category": "GRAMMAR",
                               "message": "Verb tense: *go* may need to be *went*.",
                               "suggestions": [{"value": "went", "start": 3, "end": 5}]}
    untyped = FlaggedWord("go", 3, 5, 0.9).to_dict()
    assert untyped == {"word": "go", "start": 3, "end": 5, "score": 0.9, "rule": "ELECTRA_DETECT_ERROR",
                       "category": "GRAMMAR", "message": "*go* may be an error."}


# ------------------------------------------------------------------------------------------- the shipped model
@pytest.fixture(scope="module")
def checker():
    """The shipped model as `ged` runs it (engine auto: its int8 ONNX export, made once into the session's cache)."""
    from electra_detect.detector import Detector
    from electra_detect.tasks.ged.check import GedChecker

    return GedChecker(Detector.load(SHIPPED, task="ged", engine="auto", threads=1))


def _typed(words: list[FlaggedWord]) -> dict[tuple[str, int], tuple[str | None, str | None, str]]:
    return {(w.word, w.start): (w.operation, w.type, w.rule.id) for w in words}


def test_the_quickstart_errors_are_named_by_their_edits(checker) -> None:
    options = GedOptions(use_dictionary_file=False)
    plain = checker.check_texts(QUICKSTART, options)
    shown = checker.check_texts(QUICKSTART, GedOptions(suggest=True, use_dictionary_file=False))
    assert [_typed(w) for w in plain] == [_typed(w) for w in shown]  # the same with suggestions shown or not
    first, second = ({w.word: w for w in found} for found in shown)
    assert first["go"].type in ("VERB:TENSE", "VERB:SVA")
    assert first["buyed"].type in ("VERB:INFL", "VERB:FORM", "SPELL")  # the tag model reads *buyed* as a misspelling
    assert (first["apple"].operation, first["apple"].type) == ("R", "NOUN:NUM")
    doubled = [w for w in shown[1] if w.word == "the" and w.start == 43]
    assert [(w.operation, w.type, w.rule.id) for w in doubled] == [("U", "DET", "ELECTRA_DETECT_U_DET")]
    assert all(w.type != "OTHER" for found in shown for w in found)
    assert first["go"].message == f"Verb tense: *go* may need to be *{first['go'].suggestions[0].value}*." \
        if first["go"].type == "VERB:TENSE" else "Subject-verb agreement" in first["go"].message
    assert first["apple"].message == "Noun number: *apple* may need to be *apples*."
    assert "*buyed*" in first["buyed"].message and first["buyed"].tag
    assert second and all(w.message for w in second.values())
    # a tag model names its edit whether the suggestions are shown or not
    assert {w.word: w.message for w in plain[0]}["apple"] == "Noun number: *apple* may need to be *apples*."
    assert all(w.suggestions is None for w in plain[0]) and all(w.suggestions for w in shown[0])


def test_ranked_re_ranks_a_tag_models_one_word_replacements_only(checker) -> None:
    options = GedOptions(use_dictionary_file=False, suggest=True)
    tagged = {w.word: w for w in checker.check_texts(QUICKSTART, options)[0]}
    ranked = {w.word: w for w in checker.check_texts(QUICKSTART, GedOptions(use_dictionary_file=False, suggest=True,
                                                                           ranked=True))[0]}
    assert tagged.keys() == ranked.keys() and all(w.suggestions[0].source == "tag" for w in tagged.values())
    replaced = [w for w in ranked.values() if w.operation == "R"]
    assert replaced and all(w.suggestions[0].source != "tag" for w in replaced if len(w.suggestions) > 1)
    assert any(len(w.suggestions) > 1 for w in replaced)  # the candidates, scored: the best first
    for word in replaced:  # the message names the first suggestion; the type stays the tag's
        assert (word.operation, word.type) == (tagged[word.word].operation, tagged[word.word].type)
        assert f"*{word.suggestions[0].value}*" in word.message


def test_options_filter_the_flags_and_dictionary_words_are_never_flagged_nor_suggested(checker) -> None:
    base = GedOptions(use_dictionary_file=False, suggest=True)
    every = checker.check_texts(QUICKSTART, base)[0]
    assert {"go", "buyed", "apple"} <= {w.word for w in every}
    no_tense = checker.check_texts(QUICKSTART, GedOptions(use_dictionary_file=False, disabled_rules={
        every[0].rule.id}))[0]
    assert every[0].rule.id not in {w.rule.id for w in no_tense} and len(no_tense) < len(every)
    grammar_off = checker.check_texts(QUICKSTART, GedOptions(use_dictionary_file=False,
                                                             disabled_categories={"GRAMMAR"}))
    assert all(w.rule.category != "GRAMMAR" for found in grammar_off for w in found)
    only_nouns = checker.check_texts(QUICKSTART, GedOptions(use_dictionary_file=False, enabled_only=True,
                                                            enabled_rules={"ELECTRA_DETECT_R_NOUN_NUM"}))
    assert [[w.word for w in found] for found in only_nouns] == [["apple"], []]
    have = next(w for w in checker.check_texts(QUICKSTART, base)[1] if w.word == "have")
    assert "has" in [s.value for s in have.suggestions]  # (the tag's, which the dictionary will take away)
    taught = checker.check_texts(QUICKSTART, GedOptions(use_dictionary_file=False, suggest=True,
                                                        words=("Buyed", "apples", "has")))
    assert {"buyed", "apple"}.isdisjoint({w.word for w in taught[0]}) and "go" in {w.word for w in taught[0]}
    # a dictionary word is never suggested: nor flagged, and "have" is a form of the dictionary's "has"
    assert "have" not in {w.word for w in taught[1]}
    spared = checker.check_texts(QUICKSTART, GedOptions(use_dictionary_file=False, suggest=True, words=("apples",)))
    assert all(s.value != "apples" for found in spared for w in found for s in w.suggestions)

def test_the_personal_dictionary_file_reaches_the_check(checker, tmp_path: Path) -> None:
    from electra_detect.tasks.ged.check import GedChecker

    path = tmp_path / "dictionary.txt"
    path.write_text("apples\n", encoding="utf-8")  # a form of the word: its lemma's forms match too
    own = GedChecker(checker.detector, checker.suggester, checker.typer, PersonalDictionary(path))
    assert "apple" not in {w.word for w in own.check_texts(QUICKSTART[:1], GedOptions())[0]}
    path.write_text("", encoding="utf-8")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert "apple" in {w.word for w in own.check_texts(QUICKSTART[:1], GedOptions())[0]}


def test_ged_writes_the_record_and_takes_the_options(tmp_path: Path) -> None:
    dictionary = tmp_path / "words.txt"
    dictionary.write_text("apple\n", encoding="utf-8")
    env = {**os.environ, "ELECTRA_DETECT_DICTIONARY": str(tmp_path / "none.txt")}
    cli = [sys.executable, "-m", "electra_detect.cli", "ged", "--output-format", "json", "--model", str(SHIPPED),
           QUICKSTART[0]]
    out = subprocess.run(cli, capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr
    [row] = [json.loads(line) for line in out.stdout.splitlines()]
    words = {w["word"]: w for w in row["flagged"]}
    assert {"rule", "category", "message", "type_source"} <= set(words["apple"])
    assert words["apple"]["rule"] == "ELECTRA_DETECT_R_NOUN_NUM" and words["apple"]["category"] == "GRAMMAR"
    out = subprocess.run([*cli, "--dictionary", str(dictionary), "--word", "go", "--disable",
                          words["buyed"]["rule"].lower()], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr
    [row] = [json.loads(line) for line in out.stdout.splitlines()]
    assert {"go", "buyed", "apple"}.isdisjoint({w["word"] for w in row["flagged"]})
    bad = subprocess.run([*cli, "--enabled-only"], capture_output=True, text=True, timeout=600, env=env)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: enabledOnly needs")
    missing = subprocess.run([*cli, "--dictionary", str(tmp_path / "nope.txt")], capture_output=True, text=True,
                             timeout=600, env=env)
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_picky_flags_more_at_the_threshold_tuned_for_it(checker) -> None:
    default, picky = checker.threshold(GedOptions()), checker.threshold(GedOptions(level="picky"))
    assert picky == json.loads((SHIPPED / "ged" / "ged.json").read_text())["levels"]["picky"] < default
    text = ["The committee have decided to postpone the the meeting until next week, as they was busy."]
    scored = checker.detector.score(text)
    some = checker.check(scored, GedOptions(use_dictionary_file=False))[0]
    more = checker.check(scored, GedOptions(level="picky", use_dictionary_file=False))[0]
    assert {w.start for w in some} <= {w.start for w in more}
    reaching = [w.start for w in scored[0].words if w.score >= picky]
    told = [w.start for w in more]
    # every word reaching the picky threshold is told, but the first half of a doubled word whose halves the tags
    # both delete (the check tells the second)
    assert told == [start for start in reaching if start in told] and set(reaching) - set(told) <= {39}


def test_a_preload_and_a_check_load_the_typing_stack_once_between_them(monkeypatch) -> None:
    """``GedChecker.preload`` loads spaCy and ERRANT in a thread; a check that needs them meanwhile waits for that
    load rather than starting a second one, and gets the same annotator."""
    import threading

    from electra_detect.tasks.ged import errant_typing
    from electra_detect.tasks.ged.check import GedChecker

    loads, release = [], threading.Event()

    def slow_load() -> object:
        loads.append(threading.current_thread().name)
        release.wait(5)
        return object()

    monkeypatch.setattr(errant_typing, "_load_annotator", slow_load)
    typer = errant_typing.EditTyper()
    monkeypatch.setattr(errant_typing.EditTyper, "available", True)
    thread = GedChecker(detector=None, typer=typer).preload()  # type: ignore[arg-type]
    got: list[object] = []
    asker = threading.Thread(target=lambda: got.append(typer.annotator))
    time.sleep(0.05)
    asker.start()
    time.sleep(0.05)
    release.set()
    thread.join(5)
    asker.join(5)
    assert loads == ["electra-detect-preload"] and got == [typer.annotator]


def test_ged_on_onnx_types_by_tags_without_importing_torch_or_spacy(checker) -> None:
    """spaCy's thinc, and lemminflect through it, import torch whenever it is installed: seconds of every ``ged``
    run that the ONNX engine does not need. The shipped tag model's check, suggestions and the dictionary forms run
    without either (the export, which needs torch, is already in the cache: the ``checker`` fixture made it)."""
    code = ("import sys\nfrom electra_detect.detector import Detector\n"
            "from electra_detect.tasks.ged.check import GedChecker\nfrom electra_detect.tasks.ged.options import "
            "GedOptions\nfrom electra_detect.tasks.ged.dictionary import word_forms\n"
            f"checker = GedChecker(Detector.load({str(SHIPPED)!r}, task='ged', engine='onnx', threads=1))\n"
            f"found = checker.check_texts({QUICKSTART!r}, GedOptions(suggest=True, use_dictionary_file=False, "
            "words=('finetune',)))\n"
            "print(sum(w.tag is not None for words in found for w in words), 'torch' in sys.modules, "
            "'spacy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    typed, torch_loaded, spacy_loaded = out.stdout.split()
    assert int(typed) >= 3 and torch_loaded == spacy_loaded == "False"


# ------------------------------------------------------------------------------------------- native prose (issue 67)
def _flag(text: str, word: str, tag: str, p: float, operation: str = "R") -> FlaggedWord:
    start = text.index(word)
    return FlaggedWord(word, start, start + len(word), 0.9, operation, "OTHER", p, "model", tag=tag)


def test_names_are_capitals_inside_a_sentence_or_inner_capitals() -> None:
    from electra_detect.tasks.ged.quiet import name_like

    text = 'Yesterday I met Tilney at the iPhone shop. "Where" said NASA. The end'
    spans = {w: (text.index(w), text.index(w) + len(w)) for w in ("Yesterday", "I", "Tilney", "iPhone", "Where",
                                                                    "NASA", "The", "shop")}
    assert {w for w, (s, e) in spans.items() if name_like(text, s, e)} == {"Tilney", "iPhone", "NASA"}


def test_the_quiet_rule_leaves_out_native_prose_false_alarms_by_family() -> None:
    from electra_detect.tasks.ged.quiet import QuietRule

    text = "We saw the malpractice of Tilney in London, and we left."
    rule = QuietRule(known_spelling=0.9, name=0.8, comma=0.7, article_before_name=0.6)
    known = lambda w: w.lower() in {"malpractice", "we", "saw", "the", "of", "in", "and", "left"}  # noqa: E731
    assert rule.quiet(text, _flag(text, "malpractice", "$SPELL", 0.5), known, "picky")  # a real word: at every level
    assert not rule.quiet(text, _flag(text, "malpractice", "$SPELL", 0.95), known, "default")  # sure enough: kept
    assert not rule.quiet(text, _flag(text, "saw", "$FORM_VBZ", 0.1), known, "default")  # not a spelling flag
    assert rule.quiet(text, _flag(text, "Tilney", "$SPELL", 0.7), known, "picky")  # a name, not a misspelling
    assert not rule.quiet(text, _flag(text, "Tilney", "$SPELL", 0.85), known, "default")
    assert not rule.quiet(text, _flag(text, "London", "$CASE_LOWER", 0.1), known, "default")  # case: never a name's
    comma = _flag(text, "and", "$DELETE", 0.5, "U")
    comma.start, comma.end, comma.word = text.index(","), text.index(",") + 1, ","
    assert rule.quiet(text, comma, known, "default") and not rule.quiet(text, comma, known, "picky")
    article, articles = _flag(text, "London", "$INSERT_the", 0.5, "M"), QuietRule(0.0, 0.0, 0.0, 0.6)
    assert articles.quiet(text, article, known, "default") and not articles.quiet(text, article, known, "picky")
    assert rule.quiet(text, article, known, "picky")  # under the names' cut: left out at every level
    off = QuietRule.off()
    assert not any(off.quiet(text, w, known, "default") for w in (_flag(text, "malpractice", "$SPELL", 0.0), article))


def test_a_tag_model_check_drops_what_the_quiet_rule_leaves_out_at_its_level() -> None:
    from types import SimpleNamespace

    from electra_detect.tasks.ged.check import GedChecker
    from electra_detect.tasks.ged.quiet import QuietRule

    checker = GedChecker(SimpleNamespace(edit_tags=object()), quiet=QuietRule(known_spelling=1.01))
    text = "The prospectus was recieved."
    words = [_flag(text, "prospectus", "$SPELL", 0.9), _flag(text, "recieved", "$SPELL", 0.9)]
    kept = checker.kept_loud(text, words, Vocabulary(), "default")
    assert [w.word for w in kept] == ["recieved"]  # the known word's spelling flag is gone, the misspelling stays
    assert [w.word for w in checker.kept_loud(text, words, Vocabulary.of(["recieved"]), "default")] == []


def test_up_to_three_suggestions_the_tags_first_then_next_tags_then_spellings() -> None:
    from types import SimpleNamespace

    from electra_detect.edit_tags import EditTags, Inflections
    from electra_detect.tasks.ged.check import GedChecker

    types = {"$REPLACE_in": "R:PREP", "$REPLACE_at": "R:PREP", "$DELETE": "U:PREP", "$SPELL": "R:SPELL",
             "$REPLACE_on": "R:PREP"}
    tags = EditTags(["$KEEP", *types], types, Inflections({}, {}))
    checker = GedChecker(SimpleNamespace(edit_tags=tags))
    text = "I live on London."
    on = _flag(text, "on", "$REPLACE_in", 0.6)
    on.alternatives = [("$REPLACE_at", 0.2), ("$DELETE", 0.01)]  # the deletion is under the floor
    checker.tell(text, [on], Vocabulary(), suggest=True)
    assert [s.value for s in on.suggestions] == ["in", "at"] and on.best.value == "in"
    text = "I wil come."
    wil = _flag(text, "wil", "$SPELL", 0.6)
    wil.alternatives = [("$REPLACE_on", 0.1), ("$REPLACE_in", 0.05)]
    checker.tell(text, [wil], Vocabulary(), suggest=True)
    assert len(wil.suggestions) == 3 and wil.suggestions[0].value == "will"  # the tag's: the spelling suggester's
    assert [s.value for s in wil.suggestions[1:]] == ["on", "in"]
    plain = _flag(text, "wil", "$SPELL", 0.6)
    plain.alternatives = [("$REPLACE_on", 0.1), ("$REPLACE_in", 0.05)]
    checker.tell(text, [plain], Vocabulary(), suggest=False)
    assert [s.value for s in plain.suggestions] == ["will"]  # one when suggestions are not shown (the message's)
    lone = _flag(text, "wil", "$SPELL", 0.6)
    checker.tell(text, [lone], Vocabulary(), suggest=True)
    assert lone.suggestions[0].value == "will" and 1 < len(lone.suggestions) <= 3  # the spellings fill the rest
    assert len({s.value for s in lone.suggestions}) == len(lone.suggestions)


def test_eval_as_shown_counts_the_tokens_the_shown_words_cover() -> None:
    from electra_detect.tasks.ged.evaluation import shown_metrics
    from electra_detect.tasks.ged.readers import GedSentence

    sentence = GedSentence(["He", "go", "to", "school", "."], [0, 1, 0, 0, 1], [[], ["R:VERB"], [], [], []])
    text = sentence.text
    shown = [[FlaggedWord("go", 3, 5, 0.9), FlaggedWord("school", text.index("school"), text.index("school") + 6,
                                                          0.8)]]
    report = shown_metrics([sentence], shown)
    assert (report["precision"], report["recall"], report["shown"]) == (0.5, 0.5, 2)
    assert report["flags_per_1000"] == 400.0
