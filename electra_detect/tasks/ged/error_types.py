"""Error types, ERRANT-style: an operation (M missing, R replace, U unnecessary) and a main type, ``R:VERB``."""

from __future__ import annotations

# FCE's error codes (Nicholls 2003) are a kind (M/R/U missing/replace/unnecessary, F form, I inflection,
# D derivation, AG agreement, C countability) and a part-of-speech letter; ERRANT names the same errors by
# operation and main type. This table maps the codes onto ERRANT's main types; the operation comes from the edit.
FCE_POS = {"V": "VERB", "T": "PREP", "P": "PUNCT", "D": "DET", "N": "NOUN", "J": "ADJ", "Y": "ADV", "A": "PRON",
           "C": "CONJ", "Q": "DET"}


FCE_CODES = {"S": "SPELL", "SA": "SPELL", "SX": "SPELL", "W": "WO", "TV": "VERB:TENSE", "AGV": "VERB:SVA",
             "FV": "VERB:FORM", "IV": "VERB:INFL", "IN": "NOUN:INFL", "FN": "NOUN:NUM", "AGN": "NOUN:NUM",
             "CN": "NOUN:NUM", "CE": "OTHER", "CL": "OTHER", "ID": "OTHER", "L": "OTHER", "X": "OTHER"}


def fce_main_type(code: str) -> str:
    """ERRANT main type of an FCE error code: ``RT`` -> ``PREP``, ``AGV`` -> ``VERB:SVA``, ``DN`` -> ``MORPH``."""
    if code in FCE_CODES:
        return FCE_CODES[code]
    kind, pos = code[:-1], FCE_POS.get(code[-1:])
    if pos is None or kind not in ("M", "R", "U", "F", "I", "D", "AG", "C"):
        return "OTHER"
    return "MORPH" if kind in ("D", "F", "I") else pos


def edit_operation(start: int, end: int, correction: str | None) -> str:
    """ERRANT's operation: M (missing: an insertion), U (unnecessary: deleted), R (replaced)."""
    if start == end:
        return "M"
    return "U" if correction == "" else "R"


def bea_edit_type(start: int, end: int, correction: str | None, code: object) -> str:
    """``OP:MAIN`` for a BEA-2019 JSON edit: an ERRANT type is kept as given (W&I), an FCE code is mapped
    (:func:`fce_main_type`), a missing one is ``OP:OTHER``."""
    code = str(code) if code else ""
    if code[:2] in ("M:", "R:", "U:"):
        return code
    return f"{edit_operation(start, end, correction)}:{fce_main_type(code) if code else 'OTHER'}"


def split_type(edit_type: str) -> tuple[str, str]:
    """(operation, main type) of an ERRANT type: ``R:VERB:SVA`` -> (``R``, ``VERB:SVA``); ``UNK`` -> R, OTHER."""
    op, _, main = edit_type.partition(":")
    return (op, main) if op in ("M", "R", "U") and main else ("R", "OTHER")
