"""LaTeX's prose blocks: the document made safe for pylatexenc (verbatim bodies blanked, unclosed \\verb renamed,
its nesting checked against :data:`MAX_LATEX_DEPTH`), parsed on a thread of its own, and its nodes written
(:mod:`electra_detect.markup.latex_nodes`)."""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from typing import Any

from electra_detect.errors import MarkupError
from electra_detect.markup.closing_search import find_closing
from electra_detect.markup.latex_nodes import LatexReader
from electra_detect.markup.latex_walker import SPACES, linear_walker
from electra_detect.markup.writer import Writer

# Verbatim-like bodies are blanked (same length) before parsing: pylatexenc would read their code as LaTeX.
_VERBATIM_BEGIN = re.compile(r"\\begin\{(verbatim|Verbatim|BVerbatim|lstlisting|minted|comment|alltt|filecontents)"
                             r"\*?\}")
_VERBATIM_ARGUMENT = re.compile(r"\{[^}\n]*\}|\[[^\]\n]*\]")
_NOT_LINE_BREAK = re.compile(r"[^\r\n]")
_VERB = re.compile(r"\\(?:verb|lstinline)(?![a-zA-Z])")
# How deep braces, environments, optional arguments and \(...\) may nest: pylatexenc's parser recurses about six
# Python frames a level, and Python stops at 1,000 (TeX itself allows 255 groups); deeper is a MarkupError.
MAX_LATEX_DEPTH = 100
_NESTING = re.compile(r"%[^\r\n]*|\\(?:verb|lstinline)(?![a-zA-Z])\s*(.).*?\1"  # a comment, a \verb: skipped
                      r"|\\(begin|end)(?![a-zA-Z@])(?:\s*\{[^{}]*\})?|\\[a-zA-Z@]+\*?\s*(\[)|\\([(\[])|\\([)\]])"
                      r"|\\[a-zA-Z@]+|\\.|([{}\]])", re.DOTALL)


@functools.cache
def _latex_context() -> Any:
    """pylatexenc's default commands, with the arguments of those it does not know that this layer reads."""
    from pylatexenc.latexwalker import get_default_latex_context_db
    from pylatexenc.macrospec import MacroSpec, VerbatimArgsParser

    specs = {"href": "{{", "hyperref": "[{", "caption": "[{", "captionof": "*{[{", "enquote": "*{",
             "foreignlanguage": "[{{", "paragraph": "*[{", "footnotetext": "[{", "subtitle": "{", "thanks": "{",
             "marginpar": "[{", "uline": "{", "fbox": "{", "makebox": "[[{", "textcolor": "[{{", "colorbox": "[{{",
             "parencite": "*[[{", "textcite": "*[[{", "autocite": "*[[{", "footcite": "*[[{", "smartcite": "*[[{",
             "pageref": "{", "nameref": "{", "vref": "{", "Vref": "{", "labelcref": "{", "nolinkurl": "{",
             "path": "{", "code": "{", "SI": "[{{", "si": "[{", "num": "[{", "ang": "[{", "qty": "[{{",
             "mintinline": "[{{", "index": "{", "addbibresource": "[{", "printbibliography": "[",
             "newtheorem": "*{[{[", "graphicspath": "{", "hypersetup": "{", "geometry": "{", "affiliation": "[{",
             "address": "{", "email": "{", "keywords": "{", "pagestyle": "{", "thispagestyle": "{",
             "addtocounter": "{{", "stepcounter": "{", "bibitem": "[{", "cmidrule": "[{", "cline": "{",
             "addlinespace": "[", "linespread": "{", "setcitestyle": "{", "urlstyle": "{", "definecolor": "{{{",
             "color": "[{", "captionsetup": "[{", "lstset": "{", "setminted": "[{", "phantom": "{", "hphantom": "{",
             "vphantom": "{", "nocite": "{", "bibliographystyle": "{", "let": "", "newpage": "", "gdef": ""}
    db = get_default_latex_context_db()
    db.add_context_category("electra-detect", prepend=True,
                            macros=[MacroSpec(name, spec) for name, spec in specs.items()]
                            + [MacroSpec("lstinline", args_parser=VerbatimArgsParser(verbatim_arg_type="verb-macro"))])
    return db


def read_latex(document: str, writer: Writer) -> None:
    parsed = _unclosed_verbs_renamed(_verbatim_blanked(document))
    _check_latex_depth(parsed)
    try:
        _in_a_thread_of_its_own(lambda: _read_latex_nodes(document, parsed, writer))
    except RecursionError:
        raise MarkupError("cannot read the LaTeX: it nests deeper than Python's recursion allows (braces, "
                          "environments or arguments inside one another); nest it less deeply") from None
    writer.close()


def _read_latex_nodes(document: str, parsed: str, writer: Writer) -> None:
    from pylatexenc.latex2text import LatexNodes2Text

    try:
        nodes, _pos, _len = linear_walker()(parsed, latex_context=_latex_context(),
                                            tolerant_parsing=True).get_latex_nodes()
    except RecursionError:
        raise
    except Exception as exc:  # noqa: BLE001 - tolerant parsing forgives nearly all; what it cannot is a bad document
        raise MarkupError(f"cannot read the LaTeX: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") \
            from None
    LatexReader(document, writer, LatexNodes2Text(strict_latex_spaces=True)).nodes(nodes)


def _in_a_thread_of_its_own(work: Callable[[], None]) -> None:
    """``work()`` on a new thread, its exception raised here: pylatexenc's reading recurses about eight Python frames
    a level of nesting, and a thread's recursion count starts at zero, so :data:`MAX_LATEX_DEPTH` levels are read
    however deep the caller's own stack is (a server's, a test runner's)."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - carried to the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="electra-detect-latex")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def _verbatim_blanked(document: str) -> str:
    """Each verbatim-like environment's body (after its arguments, to the first ``\\end`` of its name) blanked to
    spaces, line breaks kept. The closing is looked for once between openers (:func:`find_closing`): the regex this
    replaces read to the end of the document from every ``\\begin{verbatim}`` that nothing closed."""
    out: list[str] = []
    memory: dict[str, tuple[int, int]] = {}
    at = search = 0
    while opening := _VERBATIM_BEGIN.search(document, search):
        name = opening.group(1)
        arguments = [opening.end()]  # as many as follow; fewer only when the last ones hold the only \end
        while argument := _VERBATIM_ARGUMENT.match(document, arguments[-1]):
            arguments.append(argument.end())
        close = body = -1
        for body in reversed(arguments):
            ends = [found for found in (find_closing(memory, document, f"\\end{{{name}}}", body),
                                        find_closing(memory, document, f"\\end{{{name}*}}", body)) if found >= 0]
            if ends:
                close = min(ends)
                break
        if close < 0:
            search = opening.end()
            continue
        starred = document.startswith(f"\\end{{{name}*}}", close)
        out += [document[at:body], _NOT_LINE_BREAK.sub(" ", document[body:close])]
        at, search = close, close + len(name) + (7 if starred else 6)  # the \end{...} is kept, and read past
    return "".join(out) + document[at:] if out else document


def _unclosed_verbs_renamed(text: str) -> str:
    """Each \\verb (\\lstinline) with no closing delimiter renamed to an unknown command of the same length (a
    stand-in): pylatexenc's verbatim reader runs past the end of a document that ends in one (an editor's half-typed
    line). Whether its delimiter comes again is read from each character's last place, found once."""
    last: dict[str, int] = {}

    def renamed(match: re.Match[str]) -> str:
        delimiter = SPACES.match(text, match.end()).end()  # pylatexenc's reading: the first character after spaces
        if delimiter < len(text):
            if not last:
                last.update((char, at) for at, char in enumerate(text))
            if last[text[delimiter]] > delimiter:
                return match.group(0)
        return "\\" + "q" * (len(match.group(0)) - 1)

    return _VERB.sub(renamed, text)


def _check_latex_depth(text: str) -> None:
    """A MarkupError when braces, environments, optional arguments or \\(...\\) nest deeper than
    :data:`MAX_LATEX_DEPTH`, counted in one pass before pylatexenc's recursive reading."""
    depth = brackets = 0
    for token in _NESTING.finditer(text):
        _verb, environment, bracket, math_open, math_close, brace = token.groups()
        if brace == "}" or math_close or environment == "end" or (brace == "]" and brackets):
            brackets -= brace == "]"
            depth = max(0, depth - 1)
        elif brace == "{" or math_open or environment == "begin" or bracket:
            brackets += bool(bracket)
            depth += 1
            if depth > MAX_LATEX_DEPTH:
                line = text.count("\n", 0, token.start()) + 1
                raise MarkupError(f"cannot read the LaTeX: it nests braces, environments or arguments more than "
                                  f"{MAX_LATEX_DEPTH} levels deep (line {line}); nest it less deeply")
