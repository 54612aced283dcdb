"""Edits to tags: each source token's tag (``electra_detect/edit_tags.py``) from the ERRANT edits on its sentence.

An edit without a correction, or two edits on one token, leave their tokens out of the tag loss (not ``$KEEP``):
their tag is :data:`IGNORE`. Case changes and inflections become g-transformations (``$CASE_*``, ``$FORM_*``),
a misspelling ``$SPELL``, any other word change ``$REPLACE_w``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from electra_detect.edit_tags import APPEND, CASE, DELETE, FORM, FORMS, INSERT, KEEP, REPLACE, SPELL
from electra_detect.tasks.ged.readers import GedEdit

IGNORE = None  # a token whose tag is unknown: out of the tag loss


def case_tag(source: str, target: str) -> str | None:
    """``$CASE_*`` when ``target`` is ``source`` in another case, else None."""
    if source == target or source.lower() != target.lower():
        return None
    if target == target.lower():
        return CASE + "LOWER"
    if target == target.upper() and len(target) > 1:
        return CASE + "UPPER"
    return CASE + "CAPITAL" if target == target[:1].upper() + target[1:].lower() else None


def form_tag(source: str, target: str) -> str | None:
    """``$FORM_<PTB tag>`` when ``target`` is a form of a lemma of ``source`` (lemminflect), else None."""
    import lemminflect

    lower, goal = source.lower(), target.lower()
    if lower == goal or not goal.isalpha():
        return None
    for upos, lemmas in lemminflect.getAllLemmas(lower).items():
        for lemma in lemmas:
            for tag, forms in lemminflect.getAllInflections(lemma, upos=upos).items():
                if tag in FORMS and forms and choose_form(lower, forms) == goal:
                    return FORM + tag
    return None


def choose_form(word: str, forms: Sequence[str]) -> str:
    """The form a ``$FORM_`` tag gives when a lemma has several for one tag (be: VBD was/were, VBP am/are): the
    plural-agreeing one for a plural-looking word, else the first."""
    if len(forms) > 1 and word in ("are", "were", "'re") and "were" in forms:
        return "were"
    if len(forms) > 1 and "are" in forms:
        return "are"
    return forms[0]


def word_tag(source: str, target: str, edit_type: str) -> str:
    """The tag that turns one source word into one target text."""
    if " " not in target:
        tag = case_tag(source, target) or form_tag(source, target)
        if tag:
            return tag
        if edit_type.endswith(":SPELL"):
            return SPELL
    return REPLACE + target.replace(" ", "_")


def tags_of(source: Sequence[str], edits: Sequence[GedEdit], unknown: set[int] = frozenset()) -> list[str | None]:
    """One tag per source token from its edits (their ``correction``: the target text); a token two edits claim,
    or one in ``unknown``, gets None (out of the tag loss)."""
    tags: list[str | None] = [KEEP] * len(source)
    claimed = Counter()
    for edit in edits:
        target = (edit.correction or "").split()
        lo, hi = edit.start, edit.end
        # an edit may still share words at its ends (a merge, FCE's "because" -> "because of"): strip them
        while lo < hi and target and source[lo] == target[0]:
            lo, target = lo + 1, target[1:]
        while hi > lo and target and source[hi - 1] == target[-1]:
            hi, target = hi - 1, target[:-1]
        if lo == hi:  # an insertion before token lo: on that token, or after the last where the gap ends it
            if not target:
                continue
            new = {lo: INSERT + "_".join(target)} if lo < len(source) else \
                {len(source) - 1: APPEND + "_".join(target)}
        elif not target:
            new = dict.fromkeys(range(lo, hi), DELETE)
        else:
            new = {}
            pairs = min(hi - lo, len(target))
            for k in range(pairs):
                text = " ".join(target[k:]) if k == pairs - 1 else target[k]  # the last pair takes the rest
                new[lo + k] = word_tag(source[lo + k], text, edit.type)
            for i in range(lo + pairs, hi):
                new[i] = DELETE
        for i, tag in new.items():
            claimed[i] += 1
            tags[i] = tag
    for i, n in claimed.items():
        if n > 1:
            tags[i] = IGNORE
    for i in unknown:
        if 0 <= i < len(tags):
            tags[i] = IGNORE
    return tags

