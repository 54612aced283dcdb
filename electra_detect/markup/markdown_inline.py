"""Markdown's inline reading: markdown-it's inline tokenizer, recording where each rule matched (the library gives
inline tokens no source positions), then each character of a block's content marked prose, dropped syntax or part of
a stand-in, and handed to the writer so."""

from __future__ import annotations

import functools
from array import array
from dataclasses import dataclass
from typing import Any

from electra_detect.markup.writer import STAND_IN, Writer

_PROSE, _DROPPED, _STOOD_IN = 0, 1, 2


def install_recording_tokenizer(md: Any) -> None:
    """Make ``md``'s inline tokenizer record, on a recording state (:func:`_recording_state`), where each rule
    matched. It is markdown-it-py's ``ParserInline.tokenize`` loop (the same rules in the same order) plus the
    records: the library gives inline tokens no source positions."""
    def tokenize(state: Any) -> None:
        recording = getattr(state, "recording", False)
        rules = md.inline.ruler.getRules("")
        end = state.posMax
        max_nesting = md.options["maxNesting"]
        if recording:
            state.calls.append((state.pos, end))
        while state.pos < end:
            pos, ok = state.pos, False
            if state.level < max_nesting:
                for rule in rules:
                    count = len(state.tokens)
                    pending = len(state.pending) if recording else 0  # its length: a reference would copy it
                    calls = len(state.calls) if recording else 0
                    ok = rule(state, False)
                    if ok:
                        if state.pos <= pos:
                            raise RuntimeError("inline rule didn't increment state.pos")
                        if recording:
                            state.record(pos, pending, count, calls)
                        break
            if ok:
                if state.pos >= end:
                    break
                continue
            state.append_pending(state.src[state.pos])  # amortised O(1); `pending +=` copies all of it
            state.pos += 1
        if state.pending:
            state.pushPending()

    md.inline.tokenize = tokenize


@dataclass
class _Match:
    """Where one inline rule matched and made tokens: [start, end) of the content, the length of the text pending
    before it, the tokens it made (each with its type and content then: post-processing changes them), the flushed
    pending text's token, and the span of a link's label (its nested tokenize call)."""

    start: int
    end: int
    pending: int
    made: list[tuple[Any, str, str]]
    flushed: Any
    label: tuple[int, int] | None


@functools.cache
def _recording_state() -> type:
    from markdown_it.rules_inline import StateInline

    class RecordingState(StateInline):
        """An inline state that keeps where each rule matched and which tokens were flushed pending text."""

        recording = True

        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.flushed: set[int] = set()
            self.calls: list[tuple[int, int]] = []  # tokenize calls: (pos, posMax); a link's label is one
            self.matches: list[_Match] = []
            self.closings: dict[str, tuple[int, int]] = {}  # :func:`find_closing`'s memory

        def pushPending(self) -> Any:  # noqa: N802 - markdown-it's name
            token = super().pushPending()
            self.flushed.add(id(token))
            return token

        def record(self, start: int, pending: int, count: int, calls: int) -> None:
            made = [(t, t.type, t.content) for t in self.tokens[count:] if id(t) not in self.flushed]
            if not made:
                return  # plain text (the text rule, a backtick run that closed nothing): prose, nothing to keep
            flushed = next((t for t in self.tokens[count:] if id(t) in self.flushed), None)
            label = self.calls[calls] if len(self.calls) > calls else None
            self.matches.append(_Match(start, self.pos, pending, made, flushed, label))

    return RecordingState


def inline_marks(md: Any, content: str, env: dict[str, Any]) -> tuple[list[int], dict[int, str]]:
    """Parse ``content`` inline and say what each character is: prose, dropped syntax (emphasis marks, a link's
    brackets and target, HTML, an escape's backslash) or part of a stand-in (inline code, math, an autolink or
    bare URL, an image, an entity). Returns (marks, stand_ins): ``marks[i]`` is ``_PROSE``, ``_DROPPED`` or
    ``_STOOD_IN + n`` for the n-th stand-in, whose text is ``stand_ins[n]``."""
    state = _recording_state()(content, md, env, [])
    md.inline.tokenize(state)
    for rule in md.inline.ruler2.getRules(""):  # emphasis and strikethrough pair their marks (fragments_join is off)
        rule(state)
    marks = [_PROSE] * len(content)
    stand_ins: dict[int, str] = {}

    def mark(start: int, end: int, value: int) -> None:
        marks[start:end] = [value] * (end - start)

    def stand_in(start: int, end: int, text: str) -> None:
        stand_ins[len(stand_ins)] = text
        mark(start, end, _STOOD_IN + len(stand_ins) - 1)

    for match in state.matches:
        start, end = match.start, match.end
        first, first_type, _content = match.made[0]
        types = {made_type for _token, made_type, _content in match.made}
        if types <= {"softbreak", "hardbreak"}:
            if content[start] == "\\":  # a backslash hard break: the backslash is syntax, the break reads as a space
                marks[start] = _DROPPED
        elif first_type == "text_special" and first.info == "escape":
            if first.content != first.markup:
                marks[start] = _DROPPED
        elif first_type == "text_special":  # an entity: its character, not the checker's to judge
            stand_in(start, end, first.content if first.content.strip() else " ")
        elif first_type == "link_open" and first.markup in ("linkify", "autolink"):
            if first.markup == "linkify":  # its scheme was read as pending text before the rule saw "://"
                start -= match.pending - (len(match.flushed.content) if match.flushed is not None else 0)
            stand_in(start, end, STAND_IN)
        elif first_type == "link_open":  # [label](target): the label is prose, the rest syntax
            low, high = match.label or (end, end)
            mark(start, low, _DROPPED)
            mark(high, end, _DROPPED)
        elif types == {"html_inline"}:
            mark(start, end, _DROPPED)
        elif types == {"text"}:  # emphasis or strikethrough marks: syntax where they paired, text where not
            at = start
            for token, _type, made_content in match.made:
                width = min(len(made_content), end - at)
                if token.type != "text" or not token.content:
                    mark(at, at + width, _DROPPED)
                at += width
        else:  # code, math, an image, whatever a plugin made
            stand_in(start, end, STAND_IN)
    return marks, stand_ins


def write_inline(content: str, places: tuple[array, array], marks: list[int], stand_ins: dict[int, str],
                  writer: Writer) -> None:
    """Hand ``content``'s pieces to ``writer``: prose runs as the document's characters (a line break as a space),
    each stand-in once, over the document span its characters cover."""
    starts, ends = places
    index, size, last = 0, len(content), 0
    while index < size:
        mark, place = marks[index], starts[index]
        if mark == _DROPPED:
            index += 1
            continue
        if mark >= _STOOD_IN:
            stop = index
            while stop < size and marks[stop] == mark:
                stop += 1
            first = next((i for i in range(index, stop) if starts[i] >= 0), -1)
            if first < 0:
                start = end = last
            else:
                start, end = starts[first], ends[next(i for i in range(stop - 1, first - 1, -1) if starts[i] >= 0)]
            writer.stand_in(stand_ins[mark - _STOOD_IN], start, end)
            last, index = end, stop
            continue
        if place < 0 or content[index] == "\n":
            start, end = (place, ends[index]) if place >= 0 else (last, last)
            writer.stand_in(" " if content[index] == "\n" else content[index], start, end)
            last, index = end, index + 1
            continue
        stop = index + 1  # a run of prose characters in a row in the document
        while (stop < size and marks[stop] == _PROSE and starts[stop] >= 0 and content[stop] != "\n"
               and starts[stop] == ends[stop - 1]):
            stop += 1
        writer.prose(place, ends[stop - 1])
        last, index = ends[stop - 1], stop
