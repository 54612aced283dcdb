"""markdown-it rules for bare URLs, \\(...\\), \\[...\\], amsmath environments and $$ blocks that read
the same syntax as markdown-it's and mdit-py-plugins' own rules in linear time: theirs looked for a closing mark to
the end of the document at every opening one."""

from __future__ import annotations

import bisect
import re
from typing import Any

from electra_detect.markup.closing_search import find_closing
from electra_detect.markup.writer import URL_SCAN

_SCHEME_CHAR = re.compile(r"[a-z0-9.+-]", re.IGNORECASE)  # markdown-it's linkify rule: a URL scheme's characters
_SPACE = re.compile(r"\s")
_EQUATION_LABEL = re.compile(r"\s*?\(([^)$\r\n]+?)\)")  # texmath's "\[...\] (label)"


def _closings(state: Any) -> dict[str, tuple[int, int]]:
    memory = getattr(state, "closings", None)
    if memory is None:  # a block state, or another tokenizer's inline state
        memory = state.closings = {}
    return memory


def linkify_rule(state: Any, silent: bool) -> bool:
    """markdown-it's ``linkify`` rule (a bare URL with a scheme, at its ``://``), reading only the scheme's run of
    the pending text and the URL's run of non-space characters (at most :data:`URL_SCAN`): the library's rule
    searched all the pending text and copied all the rest of the paragraph at every ``://``."""
    from markdown_it.rules_inline.linkify import SCHEME_RE

    if not state.md.options.linkify or state.linkLevel > 0:
        return False
    if not state.md.linkify:
        raise ModuleNotFoundError("Linkify enabled but not installed.")
    pos, src = state.pos, state.src
    if pos + 3 > state.posMax or src[pos] != ":" or src[pos + 1] != "/" or src[pos + 2] != "/":
        return False
    pending = state.pending
    run = len(pending)
    while run and _SCHEME_CHAR.match(pending, run - 1):
        run -= 1
    match = SCHEME_RE.search(pending, max(0, run - 1))  # the library's pattern, on the one run it can end with
    if not match:
        return False
    proto = match.group(1)
    space = _SPACE.search(src, pos, pos + URL_SCAN)
    link = state.md.linkify.match_at_start(src[pos - len(proto):space.start() if space else pos + URL_SCAN])
    if not link:
        return False
    url: str = link.url.rstrip("*")  # disallow '*' at the end of the link (conflicts with emphasis)
    full_url = state.md.normalizeLink(url)
    if not state.md.validateLink(full_url):
        return False
    if not silent:
        state.pending = state.pending[:-len(proto)]
        token = state.push("link_open", "a", 1)
        token.attrs = {"href": full_url}
        token.markup = "linkify"
        token.info = "auto"
        token = state.push("text", "", 0)
        token.content = state.md.normalizeLinkText(url)
        token = state.push("link_close", "a", -1)
        token.markup = "linkify"
        token.info = "auto"
    state.pos += len(url) - len(proto)
    return True


def bracket_math_inline(state: Any, silent: bool) -> bool:
    """mdit-py-plugins' texmath ``\\(...\\)`` (at least one character inside, the first ``\\)`` closes), with the
    closing looked for once between openers (:func:`find_closing`); the plugin's regex read the rest of the
    paragraph from every unclosed ``\\(``."""
    src, pos = state.src, state.pos
    if not src.startswith("\\(", pos):
        return False
    close = find_closing(_closings(state), src, "\\)", pos + 3)
    if close < 0:
        return False
    if not silent:
        token = state.push("math_inline", "math", 0)
        token.content = src[pos + 2:close]
        token.markup = "\\("
    state.pos = close + 2
    return True


def bracket_math_block(state: Any, start: int, end: int, silent: bool) -> bool:
    """mdit-py-plugins' texmath ``\\[...\\]`` display math (with an optional ``(label)`` after it), in linear time:
    the closing ``\\]`` is looked for once between openers (:func:`find_closing`) and its line found by bisection
    (the plugin read the rest of the document from every opening line)."""
    src = state.src
    begin = state.bMarks[start] + state.tShift[start]
    if not src.startswith("\\[", begin):
        return False
    close = find_closing(_closings(state), src, "\\]", begin + 3)  # at least one character inside
    if close < 0:
        return False
    name, content, info, stop = "math_block", src[begin + 2:close], None, close + 2
    # the labelled form: nothing inside opens or closes another, and "(label)" follows
    if src.find("\\]", begin + 2, begin + 4) != begin + 2 and src.find("\\[", begin + 2, close) < 0:
        label = _EQUATION_LABEL.match(src, close + 2)
        if label:
            name, info, stop = "math_block_eqno", label.group(1), label.end()
    last = stop - 1  # the match's last character: the block ends on its line, within this container
    line = bisect.bisect_left(state.eMarks, last, start, end)
    if line >= end or last < state.bMarks[line]:
        return False
    if not silent:
        token = state.push(name, "math", 0)
        token.block = True
        token.content = content
        token.info = content if info is None else info
        token.markup = "\\["
    state.line = line + 1
    return True


def amsmath_block(state: Any, start: int, end: int, silent: bool) -> bool:
    """mdit-py-plugins' amsmath block (``\\begin{equation}`` ... a line ending ``\\end{equation}``), remembering
    where a search for a closing line failed: each line that opens an environment is also a paragraph's end, so the
    plugin read every following line at each such line when none closed it."""
    from mdit_py_plugins.amsmath import RE_OPEN
    from mdit_py_plugins.utils import is_code_block

    if is_code_block(state, start):
        return False
    first_start = state.bMarks[start] + state.tShift[start]
    first_end = state.eMarks[start]
    opening = re.match(RE_OPEN, state.src[first_start:first_end])
    if not opening:
        return False
    environment, numbered = opening.group(1), opening.group(2)
    closing = rf"\end{{{environment}{numbered}}}"
    failed = _closings(state)
    key = f"amsmath {closing} {end}"
    if failed.get(key, (end, -1))[0] <= start:  # no line from an earlier start to `end` closes it
        return False
    line = start - 1
    while True:
        line += 1
        if line >= end:
            failed[key] = (start, -1)
            return False
        line_start = state.bMarks[line] + state.tShift[line]
        if line_start < first_end and state.sCount[line] < state.blkIndent:
            return False
        if state.src[line_start:state.eMarks[line]].rstrip().endswith(closing):
            break
    state.line = line + 1
    if not silent:
        token = state.push("amsmath", "math", 0)
        token.block = True
        token.content = state.getLines(start, state.line, state.sCount[start], False)
        token.meta = {"environment": environment, "numbered": numbered}
        token.map = [start, line]
    return True


def dollar_math_block(state: Any, start: int, end: int, silent: bool) -> bool:
    """mdit-py-plugins' dollarmath ``$$`` block (labels and blank lines allowed inside), remembering where a search
    for its closing line reached the end of its container without one: a later ``$$`` line would too, and the
    plugin read those lines again for each (a ``$$`` line after every heading cost the square of the document)."""
    from mdit_py_plugins.dollarmath.index import DOLLAR_EQNO_REV, _math_block_content
    from mdit_py_plugins.utils import is_code_block

    if is_code_block(state, start):
        return False
    src = state.src
    first, stop = state.bMarks[start] + state.tShift[start], state.eMarks[start]
    if first + 2 > stop or not src.startswith("$$", first):
        return False
    line, label, closed = start, None, False
    text = src[first:stop]
    if len(text.strip()) > 3:  # closed on its own line, or not at all
        if text.strip().endswith("$$"):
            closed, stop = True, stop - 2 - (len(text) - len(text.strip()))
        elif equation := DOLLAR_EQNO_REV.match(text[::-1]):
            closed, label, stop = True, equation.group(1)[::-1], stop - equation.end()
        elif "$$" in text[2:]:
            return False
    if not closed:
        memory, key = _closings(state), f"$$ {end}"
        searched = memory.get(key)
        if searched is not None and searched[0] < start < searched[1]:
            return False  # an earlier search went past this line to the end without a closing line
        while True:
            line += 1
            if line >= end:
                break
            line_start, stop = state.bMarks[line] + state.tShift[line], state.eMarks[line]
            text = src[line_start:stop]
            if text.strip().endswith("$$"):
                closed, stop = True, stop - 2 - (len(text) - len(text.strip()))
                break
            if equation := DOLLAR_EQNO_REV.match(text[::-1]):
                closed, label, stop = True, equation.group(1)[::-1], stop - equation.end()
                break
        if not closed:
            memory[key] = (start, line)
            return False
    state.line = line + 1
    token = state.push("math_block_label" if label else "math_block", "math", 0)
    token.block = True
    token.content = _math_block_content(state, start, first, line, stop)
    token.markup = "$$"
    token.map = [start, state.line]
    if label:
        token.info = re.sub(r"\s+", "-", label)
    return True
