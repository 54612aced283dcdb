"""LanguageTool's HTTP API (``/v2/check``, ``/v2/languages``) over the GED scores: the translation, no I/O.

Editors and plugins that accept a custom LanguageTool server send the text (or LanguageTool's ``data``
annotation: text parts that are checked, markup parts that are not) and read back ``matches``. Offsets and
lengths are in UTF-16 code units of the original text, markup included, as LanguageTool counts them (its
clients are Java and JavaScript; ``language_tool_python`` converts them back to code points). For text in
the Basic Multilingual Plane that is the same as Python's string indices.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from electra_detect.app.message_quotes import quoted
from electra_detect.edit_tags.messages import over_word
from electra_detect.sentences import sentence_around, sentence_spans
from electra_detect.tasks.ged.dictionary import MAX_REQUEST_WORDS, request_words
from electra_detect.tasks.ged.flags import FlaggedWord
from electra_detect.tasks.ged.options import GedOptions, build_ged_options
from electra_detect.tasks.ged.rule_table import MAIN_TYPES, Rule

SOFTWARE = {"name": "electra-detect", "buildDate": "", "apiVersion": 1, "premium": False, "status": ""}
LANGUAGES = [{"name": "English", "code": "en", "longCode": "en"},
             {"name": "English (US)", "code": "en", "longCode": "en-US"},
             {"name": "English (GB)", "code": "en", "longCode": "en-GB"},
             {"name": "English (Australian)", "code": "en", "longCode": "en-AU"},
             {"name": "English (Canadian)", "code": "en", "longCode": "en-CA"},
             {"name": "English (New Zealand)", "code": "en", "longCode": "en-NZ"},
             {"name": "English (South African)", "code": "en", "longCode": "en-ZA"}]
LANGUAGE_PATTERN = r"^([Aa][Uu][Tt][Oo]|[Ee][Nn]([-_][A-Za-z]{2,8})*)$"  # English or auto: the check and the schema
# LanguageTool's annotation JSON, spelled as a regex so that the schema and the check agree: an object with one
# key, "annotation", a list of {"text": string} and {"markup": string, "interpretAs"?: string} (in either order);
# a \\u escape is a character or a surrogate pair, never a lone surrogate. No whitespace run meets another, so a
# long one costs linear time.
_WS = r"[ \t\n\r]*"
_ESCAPE = (r"\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}"  # not a surrogate, or a pair
           r"|[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})")
_STRING = rf'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|{_ESCAPE})*"'
_TEXT = rf'\{{{_WS}"text"{_WS}:{_WS}{_STRING}{_WS}\}}'
_AS = rf'"interpretAs"{_WS}:{_WS}{_STRING}'
_MARKUP_KEY = rf'"markup"{_WS}:{_WS}{_STRING}'
_MARKUP = rf"\{{{_WS}(?:{_MARKUP_KEY}(?:{_WS},{_WS}{_AS})?|{_AS}{_WS},{_WS}{_MARKUP_KEY}){_WS}\}}"
_PART = rf"(?:{_TEXT}|{_MARKUP})"
DATA_PATTERN = rf'^{_WS}\{{{_WS}"annotation"{_WS}:{_WS}\[{_WS}(?:{_PART}(?:{_WS},{_WS}{_PART})*{_WS})?\]{_WS}\}}{_WS}$'
CONTEXT_CHARS = 40  # characters of context on each side of a match, as LanguageTool gives

TRUE = ("true", "yes")  # LanguageTool's enabledOnly: exactly "true" or "yes" turns it on, any other value leaves it off
WORDS_FIELD = "words"  # this server's per-request dictionary: LanguageTool's own ``dicts`` names stored dictionaries


class CheckError(ValueError):
    """A /v2/check request that cannot be checked (the server answers it 4xx)."""


@dataclass
class Document:
    """What /v2/check checks: ``checked`` is the text the model reads; ``original`` the text offsets count in
    (the same, or text and markup parts together); ``spans`` map checked text onto the original:
    (checked start, original start, length) for each text part."""

    original: str
    checked: str
    spans: list[tuple[int, int, int]]

    def to_original(self, start: int, end: int) -> tuple[int, int] | None:
        """The original [start, end) of a checked word, None when it starts in a markup's stand-in (not the
        user's text); a word that runs on past its text part ends where that part ends."""
        for checked, original, length in self.spans:
            if checked <= start < checked + length:
                return original + start - checked, original + min(end, checked + length) - checked
        return None


def parse_language(language: str | None) -> dict[str, str]:
    """LanguageTool's ``language`` as this server checks it: English only; ``auto`` is English."""
    code = "auto" if language is None else language.strip()
    if code.lower() == "auto":
        return {"name": "English (US)", "code": "en-US"}
    for entry in LANGUAGES:
        if entry["longCode"].lower() == code.lower():
            return {"name": entry["name"], "code": entry["longCode"]}
    if re.search(LANGUAGE_PATTERN, code):
        return {"name": "English", "code": code}
    raise CheckError(f"language {code!r} is not supported: this server checks English (en, en-US, ... or auto)")


def parse_document(text: str | None, data: str | None) -> Document:
    """The document of a request's ``text`` or ``data`` (LanguageTool's annotation JSON:
    ``{"annotation": [{"text": ...}, {"markup": ..., "interpretAs": ...}]}``). Markup is not checked but counts
    for offsets; its ``interpretAs`` (default nothing) stands in for it in the checked text."""
    if text is not None and data is not None:
        raise CheckError("give text or data, not both")
    if text is not None:
        return Document(text, text, [(0, 0, len(text))])
    if data is None:
        raise CheckError("missing text or data: give the text to check")
    if not re.fullmatch(DATA_PATTERN, data):
        raise CheckError('data must be LanguageTool\'s annotation JSON: {"annotation": [{"text": "..."}, '
                         '{"markup": "...", "interpretAs": "..."}, ...]}')
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError):
        raise CheckError("data is not valid JSON") from None
    parts = parsed.get("annotation") if isinstance(parsed, dict) else None
    if not isinstance(parts, list):
        raise CheckError('data must be {"annotation": [{"text": ...} or {"markup": ...}, ...]}')
    original, checked, spans = [], [], []
    at_original = at_checked = 0
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            raise CheckError(f"data annotation[{index}] must be an object with text or markup")
        if isinstance(part.get("text"), str) and "markup" not in part:
            spans.append((at_checked, at_original, len(part["text"])))
            original.append(part["text"])
            checked.append(part["text"])
            at_original += len(part["text"])
            at_checked += len(part["text"])
        elif isinstance(part.get("markup"), str) and "text" not in part:
            stand_in = part.get("interpretAs", "")
            if not isinstance(stand_in, str):
                raise CheckError(f"data annotation[{index}].interpretAs must be a string")
            original.append(part["markup"])
            checked.append(stand_in)
            at_original += len(part["markup"])
            at_checked += len(stand_in)
        else:
            raise CheckError(f"data annotation[{index}] must hold a string text or a string markup")
    return Document("".join(original), "".join(checked), spans)


def utf16_offsets(text: str) -> list[int]:
    """UTF-16 offset of every code-point index of ``text`` (one more than its length): what LanguageTool counts."""
    offsets, at = [0] * (len(text) + 1), 0
    for index, char in enumerate(text):
        at += 2 if ord(char) > 0xFFFF else 1
        offsets[index + 1] = at
    return offsets


def parse_options(fields: Mapping[str, str], suggest: bool) -> GedOptions:
    """The GED options of a /v2/check's fields (``build_ged_options``), read as LanguageTool reads them:
    ``disabledRules``, ``enabledRules``, ``disabledCategories``, ``enabledCategories`` (comma-separated ids; unknown
    ones ignored), ``enabledOnly`` (exactly "true" or "yes"), ``level`` (exactly default or picky), and this server's
    ``words`` (the request's own dictionary words, comma- or newline-separated, at most ``MAX_REQUEST_WORDS``).
    ``suggest``: whether replacements are given. Raises CheckError or GedOptionsError (both a 422)."""
    words = request_words(fields.get(WORDS_FIELD, ""))
    if len(words) > MAX_REQUEST_WORDS:
        raise CheckError(f"{WORDS_FIELD} holds {len(words)} entries; the limit is {MAX_REQUEST_WORDS} a request (put "
                         f"more in the server's dictionary file)")
    return build_ged_options(level=fields.get("level", "default"), disabled_rules=fields.get("disabledRules", ""),
                             enabled_rules=fields.get("enabledRules", ""),
                             disabled_categories=fields.get("disabledCategories", ""),
                             enabled_categories=fields.get("enabledCategories", ""),
                             enabled_only=fields.get("enabledOnly") in TRUE, words=words, suggest=suggest)


def rule_json(rule: Rule) -> dict[str, Any]:
    """A rule of the table as LanguageTool's JSON writes one."""
    return {"id": rule.id, "description": rule.description, "issueType": rule.issue_type,
            "category": {"id": rule.category, "name": rule.category_name}}


def short_message(rule: Rule) -> str:
    """The rule's error in two or three words (``Verb tense``), LanguageTool's ``shortMessage``."""
    return MAIN_TYPES[rule.type.split(":", 1)[1]].name if rule.type else "Possible error"


def matches(document: Document, flagged: list[FlaggedWord]) -> list[dict[str, Any]]:
    """LanguageTool matches of the words flagged in ``document.checked`` (the GED task's records), in offsets of
    the original text, each with its rule, category and message from the rule table. A word with suggestions gets
    them as ``replacements`` and its match covers what they replace (the whole written word: *don't* for a flagged
    *don*); words whose matches would cover the same text give one match, the first's."""
    original, units = document.original, utf16_offsets(document.original)
    sentences = sentence_spans(original)  # each match's sentence, as the Detector split the text to score it
    found, seen = [], set()
    for word in flagged:
        # an insertion (a tag model's missing word) is a replacement over the flagged word here, as LanguageTool's is
        suggestions = [over_word(document.checked, word.start, word.end, s) for s in word.suggestions or []]
        span = document.to_original(word.start, word.end)
        if suggestions:
            target = (suggestions[0].start, suggestions[0].end)
            wide = document.to_original(*target)
            if wide is None or wide[1] - wide[0] != target[1] - target[0]:  # it runs into markup: not replaceable
                suggestions = []
            else:
                span = wide
        if span is None or span in seen:
            continue
        seen.add(span)
        start, end = span
        left, right = max(0, start - CONTEXT_CHARS), min(len(original), end + CONTEXT_CHARS)
        found.append({
            "message": quoted(word.message), "shortMessage": short_message(word.rule),
            "replacements": [{"value": s.value} for s in suggestions],
            "offset": units[start], "length": units[end] - units[start],
            "context": {"text": original[left:right], "offset": units[start] - units[left],
                        "length": units[end] - units[start]},
            "sentence": original[slice(*sentence_around(sentences, start, end))],
            "type": {"typeName": "UnknownWord" if word.rule.category == "TYPOS" else "Other"},
            "rule": rule_json(word.rule), "ignoreForIncompleteSentence": False, "contextForSureMatch": 0})
    return found


def check_answer(language: dict[str, str], found: list[dict[str, Any]], version: str) -> dict[str, Any]:
    """The body of a /v2/check answer (``version``: the server's)."""
    return {"software": {**SOFTWARE, "version": version}, "warnings": {"incompleteResults": False},
            "language": {**language, "detectedLanguage": {**language, "confidence": 1.0}}, "matches": found}
