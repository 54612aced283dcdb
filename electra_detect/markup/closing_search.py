"""The search for a closing mark (``\\)``, ``\\]``, ``\\end{verbatim}``) made once between openers, not once per
opener: the Markdown math rules and LaTeX's verbatim blanking share it."""

from __future__ import annotations


def find_closing(memory: dict[str, tuple[int, int]], text: str, closing: str, start: int) -> int:
    """``text.find(closing, start)``, remembering the last answer: a search from a later start that the answer
    still covers (no ``closing`` between the two starts) is not made again, so openers that are never closed cost
    one scan of the text between them, not one scan each to the end."""
    known = memory.get(closing)
    if known is not None and known[0] <= start and (known[1] < 0 or known[1] >= start):
        return known[1]
    found = text.find(closing, start)
    memory[closing] = (start, found)
    return found
