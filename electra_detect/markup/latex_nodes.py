"""LaTeX's nodes (pylatexenc's, each with its place in the document) written as prose, stand-ins and block breaks,
by what each command and environment is: prose, a side block, a stand-in, a break, or dropped."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from electra_detect.markup.writer import STAND_IN, Writer

# Commands whose last braced argument is prose in the sentence around them.
_INLINE_PROSE = frozenset("""text emph textbf textit textsl textsc textrm textsf textup textmd textnormal underline
    uline mbox makebox fbox enquote foreignlanguage href hyperref textcolor colorbox""".split())
# Commands whose last braced argument is prose of its own: a block apart (headings also end the paragraph).
_HEADINGS = frozenset("part chapter section subsection subsubsection paragraph subparagraph".split())
_SIDE_PROSE = frozenset("footnote footnotetext caption captionof thanks marginpar title subtitle".split()) | _HEADINGS
# Commands that stand for a word in the sentence (a citation, a reference, a URL, code).
_STOOD_IN_MACROS = frozenset("""cite citep citet citealp citealt citeauthor citeyear citeyearpar citenum Citet Citep
    Citealt Citealp Citeauthor parencite textcite autocite footcite smartcite ref eqref autoref cref Cref pageref
    nameref vref Vref labelcref url nolinkurl path verb lstinline mintinline texttt code SI si num ang qty""".split())
# Commands that end the paragraph (a list item, a line break, a new paragraph).
_BREAK_MACROS = frozenset("item par \\ newline linebreak bibitem".split())
# Commands with no text of their own: dropped with their arguments.
_DROPPED_MACROS = frozenset("""label index vspace hspace noindent indent centering raggedright raggedleft maketitle
    tableofcontents listoffigures listoftables newpage clearpage cleardoublepage pagebreak nopagebreak bigskip medskip
    smallskip hline cline toprule midrule bottomrule cmidrule addlinespace documentclass usepackage RequirePackage
    newcommand renewcommand providecommand newenvironment renewenvironment def let gdef edef setlength addtolength
    setcounter addtocounter stepcounter addbibresource bibliography bibliographystyle printbibliography input include
    includegraphics author date affiliation address email keywords pagestyle thispagestyle appendix frontmatter
    mainmatter backmatter newtheorem DeclareMathOperator graphicspath hypersetup geometry small footnotesize large
    Large LARGE normalsize tiny scriptsize huge Huge bfseries itshape mdseries upshape slshape scshape rmfamily sffamily
    ttfamily normalfont em bf it sl sc tt rm sf phantom hphantom vphantom vfill hfill protect nocite FloatBarrier
    selectlanguage linespread onehalfspacing doublespacing singlespacing setcitestyle urlstyle definecolor color
    captionsetup lstset setminted newline nolinebreak""".split())
_MATH_ENVIRONMENTS = frozenset("""equation align gather multline flalign alignat eqnarray displaymath math split
    dmath dgroup subequations""".split())
_SKIPPED_ENVIRONMENTS = frozenset("""verbatim Verbatim BVerbatim lstlisting minted comment tikzpicture pgfpicture
    picture filecontents algorithmic algorithm thebibliography alltt code forest""".split())
_TABLE_ENVIRONMENTS = frozenset("tabular tabularx tabulary longtable supertabular array tblr".split())
_BLANK_LINE = re.compile(r"(?:\r\n|\r|\n)[ \t]*(?:\r\n|\r|\n)\s*")
_SPECIAL_TEXT = {"~": " ", "``": "\u201c", "''": "\u201d", "--": "\u2013", "---": "\u2014", "!`": "\u00a1",
                 "?`": "\u00bf"}


class LatexReader:
    """Walks pylatexenc's nodes (each with its position in the document) into the writer."""

    def __init__(self, document: str, writer: Writer, to_text: Any) -> None:
        self.document, self.writer, self.to_text = document, writer, to_text

    def nodes(self, nodes: Iterable[Any], in_table: bool = False) -> None:
        from pylatexenc import latexwalker as lw

        nodes = [n for n in nodes if n is not None]
        index = 0
        while index < len(nodes):
            node = nodes[index]
            index += 1
            end = node.pos + node.len
            if isinstance(node, lw.LatexCharsNode):
                at = node.pos
                for match in _BLANK_LINE.finditer(self.document, node.pos, end):
                    self.writer.prose(at, match.start())
                    self.writer.close()
                    at = match.end()
                self.writer.prose(at, end)
            elif isinstance(node, lw.LatexCommentNode):
                continue
            elif isinstance(node, lw.LatexGroupNode):
                self.nodes(node.nodelist, in_table)
            elif isinstance(node, lw.LatexMathNode):
                self.writer.stand_in(STAND_IN, node.pos, end)
            elif isinstance(node, lw.LatexSpecialsNode):
                if node.specials_chars == "&":
                    self.writer.close()
                else:
                    text = _SPECIAL_TEXT.get(node.specials_chars)
                    self.writer.stand_in(self.to_text.nodelist_to_text([node]) if text is None else text,
                                         node.pos, end)
            elif isinstance(node, lw.LatexEnvironmentNode):
                self.environment(node, end)
            elif isinstance(node, lw.LatexMacroNode):
                index = self.macro(node, nodes, index, in_table)
            else:
                self.writer.stand_in(STAND_IN, node.pos, end)

    def environment(self, node: Any, end: int) -> None:
        name = node.environmentname.rstrip("*")
        if name in _MATH_ENVIRONMENTS:
            self.writer.stand_in(STAND_IN, node.pos, end)
            return
        self.writer.close()
        if name not in _SKIPPED_ENVIRONMENTS:
            self.nodes(node.nodelist, in_table=name in _TABLE_ENVIRONMENTS)
        self.writer.close()

    def macro(self, node: Any, nodes: list[Any], index: int, in_table: bool) -> int:
        """Write one command; returns the index of the next node (an unknown command takes the braced groups that
        follow it as its arguments). The space after a command's name is the node's: it is written back as prose,
        since the writer meant a space (``\\LaTeX is``)."""
        name, end = node.macroname, node.pos + node.len
        core = node.pos + len(self.document[node.pos:end].rstrip())
        args = node.nodeargd.argnlist if node.nodeargd is not None else []
        spec = getattr(node.nodeargd, "argspec", "") or ""
        if name in _INLINE_PROSE or name in _SIDE_PROSE:
            text = _last_braced(spec, args)
            if name in _HEADINGS:
                self.writer.close()
            if text is not None:
                if name in _SIDE_PROSE:
                    self.writer.side(lambda: self.nodes(_children(text), in_table))
                else:
                    self.nodes(_children(text), in_table)
        elif name in _STOOD_IN_MACROS:
            self.writer.stand_in(STAND_IN, node.pos, core)
        elif name in _BREAK_MACROS:
            self.writer.close()
        elif name in _DROPPED_MACROS:
            pass
        elif self.to_text.latex_context.get_macro_spec(name) is not None:  # a symbol, an accent: its character
            text = self.to_text.nodelist_to_text([node]).strip()
            if text:
                self.writer.stand_in(text, node.pos, core)
        elif any(a is not None for a in args):
            pass  # a command pylatexenc knows the arguments of, with no text (usepackage, newcommand, ...)
        else:  # a command unknown to both: it stands for a word; braced groups right after it are its arguments
            from pylatexenc.latexwalker import LatexGroupNode

            stop = core
            while index < len(nodes) and isinstance(nodes[index], LatexGroupNode) and nodes[index].pos == end:
                stop = end = core = nodes[index].pos + nodes[index].len
                index += 1
            self.writer.stand_in(STAND_IN, node.pos, stop)
        if core < end:
            self.writer.prose(core, end)
        return index


def _last_braced(spec: str, args: list[Any]) -> Any:
    """The last {...} argument of a command, or None."""
    for kind, arg in reversed(list(zip(spec, args, strict=False))):
        if kind == "{" and arg is not None:
            return arg
    return None


def _children(node: Any) -> list[Any]:
    from pylatexenc.latexwalker import LatexGroupNode

    return list(node.nodelist) if isinstance(node, LatexGroupNode) else [node]
