"""Inline ignores: the regions of a Markdown or LaTeX document its writer switched the check off for.

    <!-- electra-detect: off -->          % electra-detect: off
    Text the check leaves alone.          Text the check leaves alone.
    <!-- electra-detect: on -->           % electra-detect: on

A region runs from an ``off`` marker to the next ``on`` (the markers in any case), or to the document's end; a second
``off`` inside a region changes nothing. A flag whose first character lies in a region is dropped. This works on the
document's own characters, beside the markup layer (``electra_detect.markup``): any front that has a document and
flags with offsets into it (the CLI, the server, the language server) filters them here.

    ignored = ignored_regions(document, "markdown")
    flags = drop_ignored(flags, ignored)      # dicts with "start", offsets into the document
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from typing import Any

# An HTML comment alone; LaTeX: a comment (a % not escaped as \%) that holds the marker.
MARKERS = {"markdown": re.compile(r"<!--[ \t]*electra-detect:[ \t]*(off|on)[ \t]*-->", re.IGNORECASE),
           "latex": re.compile(r"(?<!\\)%[ \t]*electra-detect:[ \t]*(off|on)\b", re.IGNORECASE)}


class Ignored:
    """A document's ignored regions: sorted, disjoint ``(start, end)`` character ranges."""

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        self.ranges = ranges
        self._starts = [start for start, _end in ranges]

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def _region(self, offset: int) -> tuple[int, int] | None:
        at = bisect.bisect_right(self._starts, offset) - 1
        return self.ranges[at] if at >= 0 and offset < self.ranges[at][1] else None

    def __contains__(self, offset: int) -> bool:
        """Whether the character at ``offset`` lies in an ignored region."""
        return self._region(offset) is not None

    def covers(self, start: int, end: int) -> bool:
        """Whether all of ``[start, end)`` lies in one ignored region (a block there need not be checked at all)."""
        region = self._region(start)
        return region is not None and end <= region[1]


def ignored_regions(document: str, markup: str) -> Ignored:
    """The regions of ``document`` (read as ``markup``: markdown or latex; plain text has no markers) that its
    ``electra-detect: off`` / ``on`` markers leave unchecked."""
    pattern = MARKERS.get(markup)
    ranges: list[tuple[int, int]] = []
    off_at = None
    for match in pattern.finditer(document) if pattern is not None else ():
        if match.group(1).lower() == "off":
            off_at = match.start() if off_at is None else off_at
        elif off_at is not None:
            ranges.append((off_at, match.end()))
            off_at = None
    if off_at is not None:
        ranges.append((off_at, len(document)))
    return Ignored(ranges)


def drop_ignored(flags: Iterable[dict[str, Any]], ignored: Ignored) -> list[dict[str, Any]]:
    """The flags (objects with ``start``, an offset into the document) that do not start in an ignored region."""
    return [flag for flag in flags if flag["start"] not in ignored] if ignored else list(flags)
