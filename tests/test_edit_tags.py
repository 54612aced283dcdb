"""Edit tags: from corrections to tags (training), from tags to edits, suggestions and messages (checking)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from electra_detect.edit_tags import FALLBACK_TAG, KEEP, EditTags, Inflections, operation
from electra_detect.edit_tags.decoding import decode_tags, near_errors
from electra_detect.edit_tags.messages import over_word, told
from electra_detect.tasks.ged.readers import GedEdit, GedSentence
from electra_detect.training.finetune.edit_tag_data import (
    TaggedSentence,
    align_tsv_to_bea,
    corrected_sentence,
    essay_halves,
    read_tagged,
    write_tagged,
)
from electra_detect.training.finetune.ged_finetune import encode, tag_targets, unpack_tags
from electra_detect.training.finetune.tag_vocabulary import (
    build_vocabulary,
    inflection_table,
    read_vocabulary,
    write_tag_files,
)
from electra_detect.training.finetune.tags_from_edits import case_tag, form_tag, tags_of

# ------------------------------------------------------------------------------------------- corrections -> tags


def test_tags_of_each_kind_of_edit():
    source = "However I has a the cat , he go home yesterday".split()
    edits = [GedEdit(1, 1, ",", "M:PUNCT"), GedEdit(2, 3, "have", "R:VERB:SVA"), GedEdit(4, 5, "", "U:DET"),
             GedEdit(8, 9, "went", "R:VERB:TENSE"), GedEdit(11, 11, ".", "M:PUNCT")]
    tags = tags_of(source, edits)
    assert tags[1] == "$INSERT_,"  # a missing word's tag sits on the word after the gap
    assert tags[2] in ("$FORM_VB", "$FORM_VBP")  # have: the base form and the present plural are one
    assert tags[4] == "$DELETE"
    assert tags[8] == "$FORM_VBD"
    assert tags[10] == "$APPEND_."  # the gap ends the sentence: after its last word
    assert tags[0] == tags[3] == tags[5] == "$KEEP"


def test_tags_of_strips_shared_words_and_leaves_out_conflicts():
    source = "I live because my family".split()
    # FCE's coarse edit "because" -> "because of": an insertion of "of" before "my"
    assert tags_of(source, [GedEdit(2, 3, "because of", "M:PREP")])[3] == "$INSERT_of"
    # two edits claim one token: out of the tag loss, as is an edit without a correction
    tags = tags_of(source, [GedEdit(3, 3, "of", "M:PREP"), GedEdit(3, 4, "their", "R:PRON")], unknown={0})
    assert tags[3] is None and tags[0] is None and tags[1] == "$KEEP"


def test_tags_of_multiword_and_merges():
    source = "I like alot every one".split()
    tags = tags_of(source, [GedEdit(2, 3, "a lot", "R:OTHER"), GedEdit(3, 5, "everyone", "R:ORTH")])
    assert tags[2] == "$REPLACE_a_lot"
    assert tags[3] == "$REPLACE_everyone" and tags[4] == "$DELETE"


def test_case_form_and_spelling_tags():
    assert case_tag("london", "London") == "$CASE_CAPITAL"
    assert case_tag("High", "high") == "$CASE_LOWER"
    assert case_tag("cat", "dog") is None
    assert form_tag("go", "goes") == "$FORM_VBZ"
    assert form_tag("cat", "cats") == "$FORM_NNS"
    assert form_tag("cat", "dog") is None
    assert tags_of(["recieved"], [GedEdit(0, 1, "received", "R:SPELL")]) == ["$SPELL"]


def test_align_tsv_to_bea_finds_sentences_and_token_offsets():
    essays = [{"text": 'He said "go" .\nThen he went.'}, {"text": "A second essay."}]
    sentences = [GedSentence(["He", "said", '\\"', "go", '\\"', "."], [0] * 6),
                 GedSentence(["Then", "he", "went", "."], [0] * 4),
                 GedSentence(["Not", "in", "any", "essay", "at", "all", "anywhere", "here", "."], [0] * 9),
                 GedSentence(["A", "second", "essay", "."], [0] * 4)]
    aligned = align_tsv_to_bea(sentences, essays)
    assert aligned[0][0] == 0 and aligned[0][1][2] == (8, 9)  # the TSV's \" is the essay's "
    assert aligned[1] == (0, [(15, 19), (20, 22), (23, 27), (27, 28)])
    assert aligned[2] is None
    assert aligned[3][0] == 1


def test_corrected_sentence_applies_edits_inside_and_leaves_out_the_rest():
    text = "I has a cat. It run."
    spans = [(0, 1), (2, 5), (6, 7), (8, 11), (11, 12)]
    fixed, unknown = corrected_sentence(text, spans, [[2, 5, "have"], [6, 7, None], [16, 19, "runs"]])
    assert fixed == "I have a cat."  # the uncorrected edit stays as written, its token out of the tag loss
    assert unknown == {2}


def test_a_deletion_in_the_essays_text_is_a_deletion_to_errant():
    """Deleting a word from the BEA text leaves two spaces; spaCy made a token of them and ERRANT a replacement
    (R:OTHER by " "): 119 of FCE dev's tuning half's gold edits were so mistyped before the text was re-spaced."""
    from electra_detect.tasks.ged.nlp import load_errant
    from electra_detect.training.finetune.edit_tag_data import errant_edits

    text = "I saw the the film."
    spans = [(0, 1), (2, 5), (6, 9), (10, 13), (14, 18), (18, 19)]
    fixed, _ = corrected_sentence(text, spans, [[10, 13, ""]])
    assert fixed == "I saw the  film."
    edits = errant_edits(load_errant(), ["I", "saw", "the", "the", "film", "."], fixed)
    assert [(e.end - e.start, e.correction, e.type) for e in edits] == [(1, "", "U:DET")]  # either "the" goes


def test_vocabulary_types_and_round_trip(tmp_path):
    sentences = [TaggedSentence(["a", "cat"], [1, 0], ["$DELETE", "$KEEP"], [GedEdit(0, 1, "", "U:DET")])] * 3
    merged = TaggedSentence(["every", "one"], [1, 1], ["$REPLACE_everyone", "$DELETE"],
                            [GedEdit(0, 2, "everyone", "R:ORTH")])  # a merge's deleted half is not a deletion
    tags, types, counts, deleted = build_vocabulary([*sentences, merged, merged, merged, merged], min_count=3)
    assert tags[:3] == ["$KEEP", "$DELETE", "$SPELL"] and types["$DELETE"] == "U:DET" and counts["$DELETE"] == 7
    assert deleted == {"a": "U:DET"}
    write_tagged(tmp_path / "t.jsonl", sentences)
    again = read_tagged(tmp_path / "t.jsonl")
    assert again[0].tags == sentences[0].tags and again[0].edits[0].type == "U:DET"
    (tmp_path / "bad.jsonl").write_text('{"tokens": ["a"], "labels": [0]}\n')
    from electra_detect.errors import GedDataError

    with pytest.raises(GedDataError, match="bad.jsonl:1"):
        read_tagged(tmp_path / "bad.jsonl")
    write_tag_files(tmp_path / "model", tags, types, counts, deleted, {"a", "cat"}, source="test")
    assert read_vocabulary(tmp_path / "model") == (tags, types, {t: counts.get(t, 0) for t in tags}, deleted)
    with pytest.raises(GedDataError, match="no readable tag vocabulary"):  # `ged train --tags-from` a plain model
        read_vocabulary(tmp_path)


def test_essay_halves_are_disjoint_and_fixed():
    tune, report = essay_halves(159)
    assert not tune & report and len(tune | report) == 159 and (tune, report) == essay_halves(159)


# ---------------------------------------------------------------------------------------- tags -> what is told

@pytest.fixture(scope="module")
def tags() -> EditTags:
    table = inflection_table(["go", "goes", "went", "cat", "cats", "is", "are", "do"])
    types = {"$INSERT_,": "M:PUNCT", "$INSERT_a": "M:DET", "$DELETE": "U:PUNCT", "$FORM_VBZ": "R:VERB:SVA",
             "$FORM_VBD": "R:VERB:TENSE", "$SPELL": "R:SPELL", "$REPLACE_in": "R:PREP"}
    return EditTags(["$KEEP", *types], types, Inflections(table["lemmas"], table["forms"]), {"the": "U:DET"})


def apply(text: str, suggestion) -> str:
    return text[:suggestion.start] + suggestion.value + text[suggestion.end:]


@pytest.mark.parametrize("text, word, tag, message, fixed", [
    ("However I think that he is right.", "I", "$INSERT_,",
     "Punctuation: a comma may be missing after *However*.", "However, I think that he is right."),
    ("I have cat at home.", "cat", "$INSERT_a",
     "Determiner: *a* may be missing before *cat*.", "I have a cat at home."),
    ("I saw the the film.", "the", "$DELETE",
     "Determiner: the second *the* may be unnecessary.", "I saw the film."),
    ("He go to the store.", "go", "$FORM_VBZ",
     "Subject-verb agreement: *go* may need to be *goes*.", "He goes to the store."),
    ("Yesterday he go to the store.", "go", "$FORM_VBD",
     "Verb tense: *go* may need to be *went*.", "Yesterday he went to the store."),
])
def test_the_messages_name_the_word_the_place_and_the_edit(tags, text, word, tag, message, fixed):
    start = text.rindex(word) if tag == "$DELETE" else text.index(" " + word + " ") + 1
    edit, suggestion, said = told(text, start, start + len(word), tag, tags)
    assert said == message
    assert apply(text, suggestion) == fixed
    assert edit.operation == operation(tag)


def test_a_form_tag_on_a_negative_contraction_inflects_its_verb(tags):
    edit, suggestion, said = told("She don't like it.", 4, 9, "$FORM_VBZ", tags)
    assert suggestion.value == "doesn't" and said == "Subject-verb agreement: *don't* may need to be *doesn't*."


def test_insertions_are_zero_width_and_over_the_word_for_languagetool(tags):
    text = "I have cat at home."
    _, suggestion, _ = told(text, 7, 10, "$INSERT_a", tags)
    assert (suggestion.start, suggestion.end, suggestion.value) == (7, 7, "a ")
    over = over_word(text, 7, 10, suggestion)
    assert (over.start, over.end, over.value) == (7, 10, "a cat") and apply(text, over) == apply(text, suggestion)


def test_spelling_tag_asks_the_spelling_suggester_and_unknown_tag_names_no_edit(tags):
    _, suggestion, said = told("I recieved it.", 2, 10, "$SPELL", tags, lambda w: ["received"])
    assert suggestion.value == "received" and said == "Spelling: *recieved* may need to be *received*."
    edit, suggestion, said = told("I recieved it.", 2, 10, FALLBACK_TAG, tags)
    assert suggestion is None and edit.type == "R:OTHER" and "recieved" in said


def test_a_spelling_suggestion_keeps_the_words_case_and_prefers_a_learners_slip(tags):
    """The spellchecker's words are lower case: the suggestion is written as the word was (*Secondely*, *REALY*);
    among corrections one edit away a doubled or undoubled letter comes first (*writen*: *written*, not *write*),
    and a changed first letter last (*shoping*: *shopping*, not *hoping*)."""
    from electra_detect.tasks.ged.suggestions import Suggester

    suggester = Suggester()
    for word, meant in (("writen", "written"), ("choosen", "chosen"), ("shoping", "shopping"),
                        ("hopefull", "hopeful"), ("relly", "really"), ("recieve", "receive"), ("frome", "from")):
        assert suggester.spellings(word)[0] == meant, (word, suggester.spellings(word))
    for text, start, end, meant in (("Secondely, it rained.", 0, 9, "Secondly"), ("IT IS REALY BIG", 6, 11, "REALLY")):
        _, suggestion, said = told(text, start, end, "$SPELL", tags, suggester.spellings)
        assert suggestion.value == meant and f"*{meant}*" in said


def test_a_spelling_tag_on_an_over_regular_form_names_the_irregular_one(tags):
    table = inflection_table(["buy", "run", "child", "walk"])
    inflections = Inflections(table["lemmas"], table["forms"])
    assert [inflections.irregular(w) for w in ("buyed", "Runned", "childs", "walked", "walkd")] == [
        "bought", "Ran", "children", None, None]  # walked is a known form; nothing spells walk's past otherwise
    spelled = EditTags(tags.channels, tags.types, inflections)
    edit, suggestion, said = told("I buyed it.", 2, 7, "$SPELL", spelled, lambda w: ["buyer"])
    assert suggestion.value == "bought" and said == "Verb inflection: *buyed* may need to be *bought*."
    assert edit.type == "R:VERB:INFL"  # ERRANT 3.0's type of buyed -> bought: the type follows the fix
    assert spelled.edit("$SPELL", "childs").type == "R:NOUN:INFL"
    assert spelled.edit("$SPELL", "recieved").type == "R:SPELL"  # the spellchecker's fix: a misspelling still


def test_inflections_keep_case_and_agree_for_be():
    table = inflection_table(["Go", "are", "is"])
    inflections = Inflections(table["lemmas"], table["forms"])
    assert inflections.form("Go", "VBZ") == "Goes"
    assert inflections.form("are", "VBD") == "were" and inflections.form("is", "VBD") == "was"
    assert json.loads(json.dumps(table)) == table  # written into the model dir as JSON


# ------------------------------------------------------------------------------------------- the model's side

def test_decode_tags_only_near_likely_errors_and_never_keep():
    probs = np.array([[0.01, 0.01, 0.01, 0.9, 0.01]])
    logits = np.zeros((1, 5, 4))
    logits[..., 0] = 5.0  # $KEEP is the likeliest everywhere: never chosen
    logits[0, :, 2] = 1.0
    out = decode_tags(near_errors(probs), logits)
    assert out[0, :, 0].tolist() == [-1, 2, 2, 2, -1]  # the flagged token and the two before it
    assert 0 < out[0, 3, 2] < 0.5


def test_decode_tags_keeps_the_next_best_tags_best_first():
    probs = np.array([[0.9]])
    logits = np.log(np.array([[[0.4, 0.05, 0.3, 0.15, 0.1]]]))  # $KEEP likeliest: never among them
    out = decode_tags(near_errors(probs), logits)
    assert out.shape == (1, 1, 7)
    assert out[0, 0, [0, 3, 5]].tolist() == [2, 3, 4]  # the best, then the next two
    assert np.allclose(out[0, 0, [2, 4, 6]], [0.3, 0.15, 0.1])
    few = decode_tags(near_errors(probs), np.log(np.array([[[0.5, 0.5]]])))
    assert few[0, 0, [0, 3, 5]].tolist() == [1, -1, -1]  # one tag besides $KEEP: no alternatives


def test_encode_packs_tags_on_first_subwords_only():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained("models/electra-minilm/ged")
    channels = ["error", "tag:$KEEP", "tag:$DELETE", "tag:$FORM_VBZ"]
    sentence = GedSentence(["He", "goooes", "home"], [0, 1, 0], tags=["$KEEP", "$FORM_VBZ", "$KEEP"])
    assert tag_targets(sentence, channels) == [-100, 2, -100]  # a clean token's $KEEP is out of the tag loss
    (ids, packed), = encode(tokenizer, [sentence], 32, channels)
    label, tag = unpack_tags(torch.tensor(packed))
    words = tokenizer(sentence.tokens, is_split_into_words=True).word_ids()
    first = [i for i, w in enumerate(words) if w == 1][0]
    assert tag[first] == 2 and (tag[[i for i, w in enumerate(words) if w == 1 and i != first]] == -100).all()
    assert label.tolist() == [-1 if w is None else sentence.labels[w] for w in words]


def test_a_tag_models_detection_target_may_be_a_teachers_p(tmp_path):
    """Soft targets (a teacher's p, to 0.01) pack beside the tag and come back as they were; the tag loss reads a
    soft word as an error from 0.5 on; a tagged file keeps them, and refuses a label outside [0, 1]."""
    from transformers import AutoTokenizer

    from electra_detect.errors import GedDataError
    from electra_detect.training.finetune.edit_tag_data import TaggedSentence, read_tagged, write_tagged

    tokenizer = AutoTokenizer.from_pretrained("models/electra-minilm/ged")
    channels = ["error", "tag:$KEEP", "tag:$DELETE", "tag:$FORM_VBZ"]
    sentence = GedSentence(["He", "go", "home", "now"], [0.07, 0.93, 0.4, 1], tags=["$KEEP", "$FORM_VBZ", "$KEEP",
                                                                                    "$DELETE"])
    assert tag_targets(sentence, channels) == [-100, 2, -100, 1]  # 0.4 with $KEEP: not an error to the tag loss
    (ids, packed), = encode(tokenizer, [sentence], 32, channels)
    label, tag = unpack_tags(torch.tensor(packed))
    words = tokenizer(sentence.tokens, is_split_into_words=True).word_ids()
    assert np.allclose(label.numpy(), [-1 if w is None else sentence.labels[w] for w in words])
    assert tag.tolist() == [-100 if w is None else [-100, 2, -100, 1][w] for w in words]
    path = tmp_path / "soft.jsonl"
    write_tagged(path, [TaggedSentence(sentence.tokens, sentence.labels, sentence.tags)])
    assert read_tagged(path)[0].labels == [0.07, 0.93, 0.4, 1]
    path.write_text(path.read_text().replace("0.93", "1.5"))
    with pytest.raises(GedDataError, match="soft.jsonl:1"):
        read_tagged(path)
    from electra_detect.training.finetune.ged_finetune import FinetuneConfig, finetune

    with pytest.raises(GedDataError, match="add --tags"):  # a detector's int labels would truncate them silently
        finetune("models/electra-minilm/ged", tmp_path / "out", [sentence], config=FinetuneConfig(max_steps=1))


def test_a_tag_models_dictionary_reads_its_table_not_lemminflect(tmp_path):
    """A dictionary word's forms come from the model's inflection table (regular endings for a word it lacks), so
    a check with a personal dictionary imports neither lemminflect nor the spaCy it pulls in."""
    import subprocess
    import sys

    table = inflection_table(["go", "goes", "went", "cat"])
    (tmp_path / "inflections.json").write_text(json.dumps(table))
    code = ("import sys; from electra_detect.edit_tags import Inflections; "
            "from electra_detect.tasks.ged.dictionary import Vocabulary; "
            f"v = Vocabulary.of(['went', 'tokenise', 'Kubernetes'], Inflections.load({str(tmp_path)!r})); "
            "assert v.knows('goes') and v.knows('going') and v.knows('tokenises') and v.knows('tokenised'), v; "
            "assert v.knows('kubernetes') and not v.knows('cats'); "
            "assert 'lemminflect' not in sys.modules and 'spacy' not in sys.modules, 'imported'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


# ---------------------------------------------------------------------------------------------- synthetic errors

def test_diff_edits_undo_the_corruption_one_word_at_a_time():
    from electra_detect.training.finetune.edit_tag_data import diff_edits

    source = "He go to to store yesterday".split()
    target = "He went to the store yesterday".split()
    types = [[], ["R:VERB:TENSE"], [], ["R:DET"], [], []]
    edits = diff_edits(source, target, types)
    assert [(e.start, e.end, e.correction, e.type) for e in edits] == [
        (1, 2, "went", "R:VERB:TENSE"), (3, 4, "the", "R:DET")]  # neighbouring errors apart, each its own type
    missing = diff_edits("I have cat".split(), "I have a cat".split(), [[], [], ["M:DET"]])
    assert [(e.start, e.end, e.correction, e.type) for e in missing] == [(2, 2, "a", "M:DET")]


def test_synthetic_sentences_are_tagged_by_the_edits_that_undo_them():
    from electra_detect.training.finetune.edit_tag_data import synthetic_tagged
    from electra_detect.training.pretraining.data import corpus_sentences

    clean = corpus_sentences([], 200)
    tagged = synthetic_tagged(clean, seed=3)
    assert len(tagged) == len(clean) and any(any(s.labels) for s in tagged)
    for sentence, tokens in zip(tagged, clean, strict=True):
        assert len(sentence.tokens) == len(sentence.labels) == len(sentence.tags)
        if not any(sentence.labels):  # a clean sentence: every token kept
            assert sentence.tokens == tokens and set(sentence.tags) == {KEEP}
        else:  # applying the edits gives the clean sentence back
            out, at = [], 0
            for edit in sorted(sentence.edits, key=lambda e: e.start):
                out += sentence.tokens[at:edit.start] + edit.correction.split()
                at = edit.end
            assert out + sentence.tokens[at:] == tokens
    tagged_tokens = [t for s in tagged for t, label in zip(s.tags, s.labels, strict=True) if label]
    assert sum(t != KEEP for t in tagged_tokens) >= 0.9 * len(tagged_tokens)  # errors carry their edit's tag
