"""pylatexenc's walker with its costs that grew with the square of a document made linear, its nodes unchanged."""

from __future__ import annotations

import functools
import re
from typing import Any

SPACES = re.compile(r"\s*")
_ENVIRONMENT_NAME = re.compile(r"\s*\{([\w* ._-]+)\}")  # pylatexenc's reading of \begin{name}
# Characters pylatexenc reads as a 'char' token wherever they are
_PLAIN_CHARS = re.compile(r"[^\s\\%{}$&~!'\-?`\[\]]+")


@functools.cache
def linear_walker() -> type:
    from pylatexenc.latexwalker import LatexToken, LatexWalker

    class Walker(LatexWalker):
        """pylatexenc's walker with three of its costs made linear, its nodes unchanged:

        - a braced group read once at a place is not read again there: where a command's arguments run past the end
          of the document, tolerant parsing reads on from its name without them, so the groups it had read as
          arguments are read again, and each unclosed ``\\href{``, ``\\cite[`` or ``\\section[`` inside another
          doubled the work (18 of them, 162 bytes, took 22 s); comments before an argument are skipped in a loop
          (the library recursed once per comment);
        - a run of plain characters is one 'char' token, not one a character: the node loop appends each token's
          text to a string attribute, a copy of all of it each time, so a paragraph of plain prose cost its square;
        - ``\\begin``'s and ``\\end``'s name is matched where it is, not on a copy of the rest of the document."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._groups: dict[tuple[Any, ...], Any] = {}

        def get_latex_braced_group(self, pos: int, brace_type: Any = "{", parsing_state: Any = None) -> Any:
            if parsing_state is None:
                parsing_state = self.make_parsing_state()
            key = (pos, brace_type, parsing_state.in_math_mode, parsing_state.math_mode_delimiter,
                   id(parsing_state.latex_context))
            if key not in self._groups:
                self._groups[key] = super().get_latex_braced_group(pos, brace_type, parsing_state)
            return self._groups[key]

        def get_latex_expression(self, pos: int, strict_braces: Any = None, parsing_state: Any = None) -> Any:
            if parsing_state is None:
                parsing_state = self.make_parsing_state()
            while (token := self.get_token(pos, environments=False, parsing_state=parsing_state)).tok == "comment":
                pos = token.pos + token.len
            return super().get_latex_expression(pos, strict_braces=strict_braces, parsing_state=parsing_state)

        def get_token(self, pos: int, include_brace_chars: Any = None, environments: bool = True,
                      keep_inline_math: Any = None, parsing_state: Any = None, **kwargs: Any) -> Any:
            token = super().get_token(pos, include_brace_chars=include_brace_chars, environments=False,
                                      keep_inline_math=keep_inline_math, parsing_state=parsing_state, **kwargs)
            if token.tok == "macro" and environments and token.arg in ("begin", "end"):
                after = token.pos + 1 + len(token.arg)
                name = _ENVIRONMENT_NAME.match(self.s, after)
                if name is None:  # the library's tolerant reading: the command as text
                    return LatexToken(tok="char", arg="\\" + token.arg, pos=token.pos, len=after - token.pos,
                                      pre_space=token.pre_space)
                return LatexToken(tok=f"{token.arg}_environment", arg=name.group(1), pos=token.pos,
                                  len=name.end() - token.pos, pre_space=token.pre_space)
            # a run only where the node loop reads (an argument, read with environments=False, is one character)
            if (token.tok == "char" and token.arg in (token.arg[:1], "\n\n") and token.arg != "*" and environments
                    and not kwargs):
                brackets = {char for pair in include_brace_chars or () for char in pair}
                start = token.pos + len(token.arg)
                end = self._plain_run(start, brackets, parsing_state or self.make_parsing_state())
                if end > start:
                    return LatexToken(tok="char", arg=self.s[token.pos:end], pos=token.pos, len=end - token.pos,
                                      pre_space=token.pre_space)
            return token

        def _plain_run(self, end: int, brackets: set[str], parsing_state: Any) -> int:
            """Where the run from ``end`` stops of characters that the library reads one 'char' token at a time
            and the spaces and paragraph breaks between them (which it reads as 'char' tokens or their pre_space):
            after such a character, or after a paragraph break."""
            text, size = self.s, len(self.s)
            while end < size:
                at = SPACES.match(text, end).end()
                if at < size and (plain := _PLAIN_CHARS.match(text, at)):
                    end = plain.end()
                elif at < size and (text[at] in "[]" and text[at] not in brackets or text[at] in "!'-?`"
                                    and parsing_state.latex_context.test_for_specials(text, at, parsing_state)
                                    is None):
                    end = at + 1
                else:
                    paragraph = text.rfind("\n\n", end, at)  # the spaces up to it are the run's; the rest the next
                    end = paragraph + 2 if paragraph >= 0 else end  # token's pre_space, as the library reads them
                    break
            return end

    return Walker
