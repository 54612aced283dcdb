"""A tag model's flagged words told to the writer: the suggestion and the message follow from the word's edit tag
(``electra_detect/edit_tags.py``), with no parse and no candidate scored.

A suggestion is a replacement of ``text[start:end]`` by ``value``; an insertion is zero-width (``start == end``):
a word goes in before the flagged word with its space (``"a "`` at the word's start), a punctuation mark right
after the word before the gap (``","`` at the end of *However*). ``/v2/check`` turns an insertion into a replacement
over the flagged word (:func:`over_word`), as LanguageTool's own server does.
"""

from __future__ import annotations

from collections.abc import Callable

from electra_detect.edit_tags import SPELL, EditTags, TagEdit
from electra_detect.tasks.ged.rule_table import MAIN_TYPES
from electra_detect.tasks.ged.suggestions import Suggestion, match_case

PUNCTUATION = {",": "a comma", ".": "a full stop", "?": "a question mark", "!": "an exclamation mark",
               ":": "a colon", ";": "a semicolon", "-": "a hyphen", "'": "an apostrophe", '"': "a quotation mark",
               "(": "a bracket", ")": "a bracket"}


def previous_word(text: str, start: int) -> tuple[str, int]:
    """The word before ``text[start:]`` and where it ends ("" and ``start`` when there is none)."""
    before = text[:start].rstrip()
    words = before.split()
    return (words[-1], len(before)) if words else ("", start)


def tag_suggestion(text: str, start: int, end: int, edit: TagEdit,
                   spellings: Callable[[str], list[str]] | None = None) -> Suggestion | None:
    """The suggestion of ``edit`` at the word ``text[start:end]``, or None when the tag cannot name one."""
    word = text[start:end]
    value = edit.replacement
    if edit.tag == SPELL and value is None:
        found = spellings(word) if spellings else []
        value = match_case(word, found[0]) if found else None  # the suggester's words are lower case
    if value is None:
        return None
    if edit.operation == "M":
        punctuation = all(not c.isalnum() for c in value)
        if edit.before:
            if punctuation:  # a mark goes right after the word before the gap: "However, I"
                _, at = previous_word(text, start)
                return Suggestion(value, at, at, 0.0, "tag")
            return Suggestion(value + " ", start, start, 0.0, "tag")
        return Suggestion(value if punctuation else " " + value, end, end, 0.0, "tag")
    if value == "":  # a deletion takes one space beside the word with it, so the text reads as written
        lo, hi = start, end
        if lo > 0 and text[lo - 1] == " ":
            lo -= 1
        elif hi < len(text) and text[hi] == " ":
            hi += 1
        return Suggestion("", lo, hi, 0.0, "tag")
    return Suggestion(value, start, end, 0.0, "tag")


def tag_message(text: str, start: int, end: int, edit: TagEdit, suggestion: Suggestion | None) -> str:
    """The message of a tagged word: its type's name, the word, the place and the edit."""
    word = text[start:end]
    main = edit.type.split(":", 1)[1] if ":" in edit.type else "OTHER"
    name = MAIN_TYPES.get(main, MAIN_TYPES["OTHER"]).name
    value = None if suggestion is None else suggestion.value.strip()
    if edit.operation == "M":
        if value is None:
            return f"{name}: {MAIN_TYPES.get(main, MAIN_TYPES['OTHER']).missing} may be missing before *{word}*."
        what = PUNCTUATION.get(value, f"*{value}*")
        if not edit.before:
            return f"{name}: {what} may be missing after *{word}*."
        if value in PUNCTUATION:
            before, _ = previous_word(text, start)
            if before:
                return f"{name}: {what} may be missing after *{before}*."
        return f"{name}: {what} may be missing before *{word}*."
    if edit.operation == "U":
        before, _ = previous_word(text, start)
        if before.lower() == word.lower():
            return f"{name}: the second *{word}* may be unnecessary."
        return f"{name}: *{word}* may be unnecessary."
    if value:
        return f"{name}: *{word}* may need to be *{value}*."
    return f"{name}: *{word}* may be {MAIN_TYPES.get(main, MAIN_TYPES['OTHER']).problem}."


def over_word(text: str, start: int, end: int, suggestion: Suggestion) -> Suggestion:
    """An insertion as a replacement over the flagged word ``text[start:end]`` (LanguageTool's way): the span from
    the insertion point (or the word) to the word's end, with the inserted text in place."""
    if suggestion.start != suggestion.end:
        return suggestion
    lo, hi = min(suggestion.start, start), max(end, suggestion.end)
    value = text[lo:suggestion.start] + suggestion.value + text[suggestion.start:hi]
    return Suggestion(value, lo, hi, suggestion.score, suggestion.source)


def told(text: str, start: int, end: int, tag: str, tags: EditTags,
         spellings: Callable[[str], list[str]] | None = None) -> tuple[TagEdit, Suggestion | None, str]:
    """(the edit, its suggestion, the message) of the word ``text[start:end]`` tagged ``tag``."""
    edit = tags.edit(tag, text[start:end])
    suggestion = tag_suggestion(text, start, end, edit, spellings)
    return edit, suggestion, tag_message(text, start, end, edit, suggestion)
