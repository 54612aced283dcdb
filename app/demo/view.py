"""What the page shows: the colour bands and their legend, the examples, the Errors table's columns, the model's
header line and the cells made from flags."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

# Probability bands, low to high: the legend reads left to right as a colour scale. Only words at or
# above the threshold are coloured, each by the band its probability falls in.
BANDS: list[tuple[float, str, str]] = [
    (0.0, "p < 0.1", "#fef3c7"),
    (0.1, "p 0.1–0.3", "#fde047"),
    (0.3, "p 0.3–0.5", "#fb923c"),
    (0.5, "p 0.5–0.7", "#f87171"),
    (0.7, "p 0.7–0.9", "#ef4444"),
    (0.9, "p ≥ 0.9", "#b91c1c"),
]
COLOR_MAP = {label: colour for _low, label, colour in BANDS}

EXAMPLES = [
    "He go to the store yesterday and buyed three apple.",
    "The committee have decided to postpone the the meeting until next week.",
    "We must strengthen our economy and protect our nation.",
    "She don't like the new bridge near the school.",
]
NBEST_EXAMPLES = [  # (label shown on the button, list): a multi-line value would render as an empty button
    ("4-best with recogniser scores", "i want to recognize speech\t-12.1\ni want to wreck a nice beach\t-11.8\n"
                                      "eye want to recognise speech\t-12.6\ni want two recognize speech\t-12.0"),
    ("3-best, no scores", "their going to the station\nthey're going to the station\nthere going to the station"),
]

GED_HEADERS = ["word", "message", "category", "type", "rule", "suggestions", "p", "start", "end"]
GED_WIDTHS = ["8%", "27%", "9%", "11%", "18%", "12%", "7%", "4%", "4%"]  # the message gets the room
CSS = "#model-info p { margin: 0; } #status-highlight, #status-ged, #status-rerank { min-height: 1.5em; }"


@dataclass
class ModelInfo:
    """What the header shows: which weights, which engine on which provider, which probabilities."""

    name: str
    path: str
    engine: str
    provider: str
    calibration: str
    note: str = ""

    def markdown(self) -> str:
        line = (f"**Model** `{self.name}` · **engine** `{self.engine}` · **provider** `{self.provider}` · "
                f"**calibration** `{self.calibration}`")
        return line + (f"  \n{self.note}" if self.note else "")


def band(score: float) -> str:
    """The legend label of the band ``score`` falls in."""
    label = BANDS[0][1]
    for low, name, _colour in BANDS:
        if score >= low:
            label = name
    return label


def escape_md(text: str) -> str:
    """User text inside Markdown: HTML-escaped and with Markdown's special characters neutralised."""
    out = html.escape(text, quote=False)
    for char in "\\`*_{}[]()#+-.!|>~":
        out = out.replace(char, "\\" + char)
    return out


def suggestion_cell(text: str, suggestions: list[Any]) -> str:
    """A flagged word's suggestions in one cell: ``go → went, goes`` (a deletion is "(delete)")."""
    if not suggestions:
        return "–"
    target = text[suggestions[0].start:suggestions[0].end]
    return f"{target} → " + ", ".join(s.value or "(delete)" for s in suggestions)
