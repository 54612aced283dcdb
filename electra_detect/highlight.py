"""Terminal rendering of scores: flagged words highlighted, then a token table."""

from __future__ import annotations

from electra_detect.scores import TextScores

_RED, _RESET = "\033[1;31m", "\033[0m"


def render_highlight(scores: TextScores, threshold: float, color: bool) -> str:
    """The text with words scoring >= threshold wrapped in red (tty) or ``[[...]]`` (plain)."""
    pieces, cursor = [], 0
    for word in scores.words:
        pieces.append(scores.text[cursor:word.start])
        if word.score >= threshold:
            pieces.append(f"{_RED}{word.word}{_RESET}" if color else f"[[{word.word}]]")
        else:
            pieces.append(word.word)
        cursor = word.end
    pieces.append(scores.text[cursor:])
    return "".join(pieces) + f"    (sentence score {scores.sentence_mean:.3f})"


def render_table(scores: TextScores) -> str:
    rows = [f"  {t.token:<16} {t.p_replaced:.3f} {'#' * round(t.p_replaced * 20)}" for t in scores.tokens]
    return "\n".join(rows)
