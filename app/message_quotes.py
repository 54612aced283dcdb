"""A flag's message as plain text: its emphasised words (``*went*``) in double quotes, as LanguageTool's JSON and
the demo's table show it."""

from __future__ import annotations

import re


def quoted(message: str) -> str:
    """A message with its emphasised words (``*went*``) in double quotes, as LanguageTool's JSON gives them (its
    ``<suggestion>`` markup becomes quotes)."""
    return re.sub(r"\*([^*]+)\*", r'"\1"', message)
