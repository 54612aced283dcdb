"""The page's input checks: what a box may hold, refused with a message a person can act on (``InputProblem``)."""

from __future__ import annotations

from typing import Any

from electra_detect.app.demo.errors import InputProblem

MAX_CHARS = 5_000  # one page of text; longer input is refused with a message (the CLI scores files)
MAX_HYPOTHESES = 200
MAX_NBEST_CHARS = 50_000


def check_text(text: Any, limit: int = MAX_CHARS) -> str:
    """The text to score, or InputProblem with a message a person can act on."""
    if not isinstance(text, str) or not text.strip():
        raise InputProblem("Type or paste a sentence first (the box is empty).")
    if len(text) > limit:
        raise InputProblem(f"That input is {len(text):,} characters; the demo scores at most {limit:,} at a time. "
                           f"Paste a shorter passage, or score whole files with `electra-detect score --file`.")
    return text


def slider_value(threshold: Any) -> Any:
    """The slider's value, which must be there (the page's number box can be cleared); its range and type are
    checked where every front's are, in ``build_ged_options``."""
    if threshold is None:
        raise InputProblem("The threshold must be a number between 0 and 1 (the box is empty).")
    return threshold


def own_words(words: Any) -> tuple[str, ...]:
    """The personal-words box: words or phrases, one a line or comma-separated."""
    if words is None:
        return ()
    if not isinstance(words, str):
        raise InputProblem("Your words must be text: one word a line, or comma-separated.")
    from electra_detect.tasks.ged.dictionary import MAX_REQUEST_WORDS, request_words

    found = request_words(words)
    if len(found) > MAX_REQUEST_WORDS:
        raise InputProblem(f"{len(found):,} words in the box; the demo takes at most {MAX_REQUEST_WORDS:,}. Put more "
                           f"in your dictionary file (docs/writers.md).")
    return found
