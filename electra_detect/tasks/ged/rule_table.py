"""The published table of GED rules: one rule per ERRANT error type (operation M/R/U x main type), each with a
stable rule id, a LanguageTool-style category and a message in plain words.

Rule ids are made from the type alone (``R:VERB:TENSE`` -> ``ELECTRA_DETECT_R_VERB_TENSE``), never from a model,
so a saved list of disabled rules keeps working across model updates; the table covers every ERRANT type, not
only those today's model names. ``docs/ged_rules.md`` is generated from it::

    python -m electra_detect.tasks.ged.rule_table docs/ged_rules.md
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

OPERATIONS = ("M", "R", "U")
RULE_PREFIX = "ELECTRA_DETECT_"
UNTYPED_RULE = RULE_PREFIX + "ERROR"  # a model with no type head names no type: one rule for all its flags

# LanguageTool's category ids where one fits (a client that knows them shows their names), with their names.
CATEGORIES = {"GRAMMAR": "Grammar", "TYPOS": "Possible Typo", "PUNCTUATION": "Punctuation",
              "CASING": "Capitalization", "STYLE": "Word choice"}


@dataclass(frozen=True)
class MainType:
    """An ERRANT main type in words: its ``name`` (the message's lead), what is missing for ``M`` (``missing``)
    and what may be wrong for ``R`` without a suggestion (``problem``)."""

    name: str
    missing: str
    problem: str


# Every ERRANT main type (errant 3.0's classifier and its documentation); UNK is read as R:OTHER (error_types).
MAIN_TYPES = {
    "ADJ": MainType("Adjective", "an adjective", "the wrong adjective"),
    "ADJ:FORM": MainType("Adjective form", "an adjective form", "the wrong comparative or superlative form"),
    "ADV": MainType("Adverb", "an adverb", "the wrong adverb"),
    "CONJ": MainType("Conjunction", "a conjunction", "the wrong conjunction"),
    "CONTR": MainType("Contraction", "a contraction", "a wrong contraction"),
    "DET": MainType("Determiner", "a determiner (a, the, this, ...)", "the wrong determiner"),
    "MORPH": MainType("Word form", "a word", "the wrong form of the word"),
    "NOUN": MainType("Noun", "a noun", "the wrong noun"),
    "NOUN:INFL": MainType("Noun inflection", "a noun ending", "a wrongly inflected noun"),
    "NOUN:NUM": MainType("Noun number", "a noun", "in the wrong number (singular or plural)"),
    "NOUN:POSS": MainType("Possessive", "a possessive ('s)", "the wrong possessive form"),
    "ORTH": MainType("Capitalisation or spacing", "a space", "wrongly capitalised or spaced"),
    "OTHER": MainType("Wording", "a word", "the wrong word here"),
    "PART": MainType("Particle", "a particle", "the wrong particle"),
    "PREP": MainType("Preposition", "a preposition", "the wrong preposition"),
    "PRON": MainType("Pronoun", "a pronoun", "the wrong pronoun"),
    "PUNCT": MainType("Punctuation", "a punctuation mark", "the wrong punctuation mark"),
    "SPELL": MainType("Spelling", "a letter", "misspelt"),
    "VERB": MainType("Verb", "a verb", "the wrong verb"),
    "VERB:FORM": MainType("Verb form", "a verb form (to, -ing, participle)", "in the wrong verb form"),
    "VERB:INFL": MainType("Verb inflection", "a verb ending", "a wrongly inflected verb"),
    "VERB:SVA": MainType("Subject-verb agreement", "an agreeing verb", "in the wrong form for its subject"),
    "VERB:TENSE": MainType("Verb tense", "a verb (a tense needs it)", "in the wrong tense"),
    "WO": MainType("Word order", "a word", "in the wrong place"),
}
TYPOS, PUNCTUATION, CASING, STYLE = ("SPELL",), ("PUNCT",), ("ORTH",), ("ADJ", "ADV", "NOUN", "VERB", "OTHER")
ISSUE_TYPES = {"TYPOS": "misspelling", "PUNCTUATION": "typographical", "CASING": "typographical", "STYLE": "style",
               "GRAMMAR": "grammar"}  # LanguageTool's issueType (the W3C ITS names) of each category


@dataclass(frozen=True)
class Rule:
    """One row of the table: the ERRANT ``type`` (``R:VERB:TENSE``; "" for the untyped rule), its ``id``,
    ``category`` and the message templates (``{word}``, ``{suggestion}``), with and without a suggestion."""

    type: str
    id: str
    category: str
    message: str
    message_suggested: str

    @property
    def category_name(self) -> str:
        return CATEGORIES[self.category]

    @property
    def issue_type(self) -> str:
        return ISSUE_TYPES[self.category]

    @property
    def description(self) -> str:
        """A short description: ``Verb tense (R:VERB:TENSE)``."""
        if not self.type:
            return "Possible error"
        op, main = self.type.split(":", 1)
        return f"{MAIN_TYPES[main].name} ({self.type})"

    def explain(self, word: str, suggestion: str | None = None) -> str:
        """The message for ``word`` with its best ``suggestion`` ("" deletes the word; None: none)."""
        if suggestion is None:
            return self.message.format(word=word)
        return self.message_suggested.format(word=word, suggestion=suggestion)


def rule_id(op: str, main: str) -> str:
    """``R``, ``VERB:TENSE`` -> ``ELECTRA_DETECT_R_VERB_TENSE``."""
    return RULE_PREFIX + f"{op}_{main}".replace(":", "_")


def category_of(op: str, main: str) -> str:
    """TYPOS for spelling, PUNCTUATION, CASING for ORTH, STYLE for word choice (a content word replaced or
    unnecessary, OTHER but missing), GRAMMAR for the rest (a missing content word is a grammar gap)."""
    if main in TYPOS:
        return "TYPOS"
    if main in PUNCTUATION:
        return "PUNCTUATION"
    if main in CASING:
        return "CASING"
    if main in STYLE and op != "M":
        return "STYLE"
    return "GRAMMAR"


def _make_rule(op: str, main: str) -> Rule:
    info = MAIN_TYPES[main]
    if op == "M":
        plain = f"{info.name}: {info.missing} may be missing before *{{word}}*."
        suggested = f"{info.name}: *{{suggestion}}* may be missing before *{{word}}*."
    elif op == "U":
        plain = suggested = f"{info.name}: *{{word}}* may be unnecessary."
    else:
        plain = f"{info.name}: *{{word}}* may be {info.problem}."
        suggested = f"{info.name}: *{{word}}* may need to be *{{suggestion}}*."
    return Rule(f"{op}:{main}", rule_id(op, main), category_of(op, main), plain, suggested)


RULES: dict[str, Rule] = {f"{op}:{main}": _make_rule(op, main) for main in MAIN_TYPES for op in OPERATIONS}
UNTYPED = Rule("", UNTYPED_RULE, "GRAMMAR", "*{word}* may be an error.", "*{word}* may need to be *{suggestion}*.")
RULES_BY_ID = {rule.id: rule for rule in (*RULES.values(), UNTYPED)}


def rule_for(op: str | None, main: str | None) -> Rule:
    """The rule of an error type (``R``, ``VERB:TENSE``); the untyped rule when there is no type; an unknown main
    type is read as OTHER."""
    if main is None:
        return UNTYPED
    op = op if op in OPERATIONS else "R"
    return RULES.get(f"{op}:{main}") or RULES[f"{op}:OTHER"]


def rules_markdown() -> str:
    """The doc page of the table (docs/ged_rules.md): every rule, its category and its messages."""
    lines = ["# GED rules: ids, categories and messages", "",
             "Generated from `electra_detect/tasks/ged/rule_table.py` by "
             "`python -m electra_detect.tasks.ged.rule_table docs/ged_rules.md`; a test checks that they agree.", "",
             "Each flagged word gets an ERRANT error type (operation `M` missing, `R` replaced, `U` unnecessary, "
             "and a main type), and through it a rule id, a category and a message. The ids are made from the type "
             "alone, so a list of disabled rules keeps working when the model changes; unknown ids are ignored. "
             "Switch rules or categories off with `electra-detect ged --disable ID --disable-category CATEGORY`, "
             "LanguageTool's `disabledRules` / `disabledCategories`, or the spaCy component's `disabled_rules` "
             "(docs/writers.md). `{word}` is the flagged word, `{suggestion}` its best replacement.", "",
             "| category id | name | LanguageTool issueType |", "|---|---|---|"]
    lines += [f"| `{key}` | {name} | {ISSUE_TYPES[key]} |" for key, name in CATEGORIES.items()]
    lines += ["", "| type | rule id | category | message | message with a suggestion |", "|---|---|---|---|---|"]
    for rule in (*RULES.values(), UNTYPED):
        lines.append(f"| {rule.type or '(untyped model)'} | `{rule.id}` | `{rule.category}` | "
                     f"{rule.message} | {rule.message_suggested} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from electra_detect.fileio import atomic_write_text

    atomic_write_text(Path(sys.argv[1]), rules_markdown()) if len(sys.argv) > 1 else print(rules_markdown())
