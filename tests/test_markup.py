"""The markup layer (electra_detect.markup): what each markup's prose is, and that every offset maps back exactly.

Property tests build random Markdown and LaTeX from fragments of their syntax; fixed documents pin what is checked
(paragraphs, headings, items, cells, link text) and what is not (code, URLs, math, commands, HTML, front matter).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from electra_detect.errors import MarkupError
from electra_detect.markup import (
    MARKUPS,
    ProseBlock,
    markup_for_language_id,
    markup_for_path,
    prose_blocks,
)
from electra_detect.markup.writer import STAND_IN

PROPERTY = settings(max_examples=300, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

WORDS = ["He", "go", "home", "the", "cats", "is", "ok.", "Yes,", "é", "日本", "😀", "a_b", "x*y", "5"]
MARKDOWN_SYNTAX = ["`", "``", "`code`", "*", "**", "_", "__", "~~", "[", "]", "](", ")", "(", "<", ">", "!", "![",
                   "https://x.org/a_b", "www.foo.com", "me@x.org", "<https://y.org>", "$", "$$", "\\(", "\\)",
                   "\\[", "\\]", "\\", "\\*", "&amp;", "&#35;", "&bogus;", "|", "---", "===", "# ", "## ", "> ",
                   "- ", "* ", "1. ", "2) ", "```", "~~~", "    ", "\t", "<b>", "</b>", "<!-- c -->", "+++", "{",
                   "}", "[x]: http://r.org", "[x]", "\\begin{equation}", "\\end{equation}", "\x00", "\r\n", "\r"]
LATEX_SYNTAX = ["\\emph{", "\\textbf{", "}", "{", "\\section{", "\\section*{", "\\cite{k}", "\\ref{f}", "$", "$$",
                "\\(", "\\)", "\\[", "\\]", "%", "% note\n", "~", "``", "''", "--", "---", "&", "\\\\", "\\item ",
                "\\item[a] ", "\\begin{itemize}", "\\end{itemize}", "\\begin{equation}", "\\end{equation}",
                "\\begin{tabular}{ll}", "\\end{tabular}", "\\verb|x_y|", "\\verb", "\\foo", "\\foo{bar}", "\\'e",
                "\\%", "\\footnote{", "\\caption{", "\\begin{lstlisting}", "\\end{lstlisting}", "\\href{http://a}{",
                "\\url{http://b}", "\\LaTeX", "\\label{x}", "\\usepackage{y}", "\\begin{document}", "\\end{document}",
                "\\begin{figure}[h]", "\\end{figure}", "\\par", "\\noindent", "https://z.org", "[", "]", "\\"]
SPACE = [" ", " ", "\n", "\n\n", "  \n"]


def documents(syntax: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(WORDS) | st.sampled_from(syntax) | st.sampled_from(SPACE), max_size=40).map("".join)


def assert_maps_back(document: str, blocks: list[ProseBlock], data: st.DataObject | None = None) -> None:
    """Every block lies in the document, its pieces cover its text in order, each piece of the document's own text
    is that text, and spans map inside the block."""
    previous_start = -1
    for block in blocks:
        assert block.text and block.text == block.text.strip()
        assert 0 <= block.start <= block.end <= len(document)
        assert block.start >= previous_start  # document order
        previous_start = block.start
        at, doc_at = 0, block.start
        for text_start, text_end, doc_start, doc_end, own in block.segments:
            assert text_start == at and text_end >= text_start
            assert doc_at <= doc_start <= doc_end <= block.end  # in order, never overlapping
            piece = block.text[text_start:text_end]
            if own:
                assert document[doc_start:doc_end] == piece
            at, doc_at = text_end, doc_end
        assert at == len(block.text)
        assert block.to_original(0) == block.start and block.to_original(len(block.text)) == block.end
        if data is not None:
            start = data.draw(st.integers(0, len(block.text)))
            end = data.draw(st.integers(start, len(block.text)))
            low, high = block.span(start, end)
            assert block.start <= low <= high <= block.end
            if block.is_prose(start, end) and start < end:
                own = [s for s in block.segments if s[0] <= start and end <= s[1] and s[4]]
                if own:  # inside one piece of prose: the document holds the very characters
                    assert document[low:high] == block.text[start:end]


@PROPERTY
@given(documents(MARKDOWN_SYNTAX), st.data())
def test_markdown_blocks_map_back_to_the_document(document: str, data: st.DataObject) -> None:
    assert_maps_back(document, prose_blocks(document, "markdown"), data)


@PROPERTY
@given(documents(LATEX_SYNTAX), st.data())
def test_latex_blocks_map_back_to_the_document(document: str, data: st.DataObject) -> None:
    try:
        blocks = prose_blocks(document, "latex")
    except MarkupError as exc:  # a document pylatexenc cannot read at all: one line, never a crash
        assert "\n" not in str(exc)
        return
    assert_maps_back(document, blocks, data)


@PROPERTY
@given(st.text(max_size=200), st.sampled_from(MARKUPS), st.data())
def test_any_text_in_any_markup_maps_back(document: str, markup: str, data: st.DataObject) -> None:
    try:
        blocks = prose_blocks(document, markup)
    except MarkupError:
        assert markup == "latex"
        return
    assert_maps_back(document, blocks, data)


@PROPERTY
@given(st.lists(st.tuples(st.sampled_from(["He", "go", "home.", "cats,", "is"]), st.sampled_from([" ", "\n", "\n\n"])),
                max_size=30).map(lambda pairs: "".join(word + space for word, space in pairs)))
def test_plain_words_read_alike_in_every_markup(document: str) -> None:
    """Words, spaces and line breaks (no line starting with a space: Markdown's indented code) are prose alike."""
    expected = [(b.text, b.start, b.end) for b in prose_blocks(document, "text")]
    for markup in ("markdown", "latex"):
        assert [(b.text, b.start, b.end) for b in prose_blocks(document, markup)] == expected


def texts(document: str, markup: str) -> list[str]:
    return [b.text for b in prose_blocks(document, markup)]


def test_plain_text_is_paragraphs_split_at_blank_lines() -> None:
    document = "  He go home.\nShe stays.\n \n\r\nNew paragraph here.  \n"
    blocks = prose_blocks(document, "text")
    assert [b.text for b in blocks] == ["He go home. She stays.", "New paragraph here."]
    assert document[blocks[1].start:blocks[1].end] == "New paragraph here."
    assert blocks[0].span(12, 15) == (14, 17) and document[14:17] == "She"  # after the line break read as a space
    assert not blocks[0].is_prose(11, 12) and blocks[0].is_prose(12, 15)


def test_markdown_code_is_not_prose() -> None:
    document = "Run `he go home` now.\n\n```python\nhe go home\n```\n\n    he go home\n\n~~~\nhe go\n~~~\n"
    blocks = prose_blocks(document, "markdown")
    assert [b.text for b in blocks] == [f"Run {STAND_IN} now."]
    block = blocks[0]
    assert block.span(4, 5) == (4, 16) and not block.is_prose(4, 5)  # the stand-in covers the whole code span
    assert block.is_prose(0, 3) and block.is_prose(6, 9) and block.span(6, 9) == (17, 20)


def test_markdown_link_text_is_prose_and_its_target_is_not() -> None:
    document = 'See [the docs he go](https://he.go/home "he go") and <https://a.org>, https://b.org/x or www.c.org.\n'
    block, = prose_blocks(document, "markdown")
    assert block.text == f"See the docs he go and {STAND_IN}, {STAND_IN} or {STAND_IN}."
    start = block.text.index("he go")
    assert block.span(start, start + 5) == (document.index("he go"), document.index("he go") + 5)
    reference = "A [reference link][ref] here.\n\n[ref]: https://r.org/he/go\n"
    assert texts(reference, "markdown") == ["A reference link here."]


def test_markdown_tables_are_cells() -> None:
    document = "| Name | Notes |\n|:-----|------:|\n| one | he go home |\n| `x` | a \\| b |\n"
    blocks = prose_blocks(document, "markdown")
    assert [b.text for b in blocks] == ["Name", "Notes", "one", "he go home", "a | b"]
    cell = blocks[3]
    assert document[cell.start:cell.end] == "he go home"
    assert document[slice(*blocks[4].span(0, 1))] == "a"


def test_markdown_front_matter_math_html_and_emphasis() -> None:
    document = ("---\ntitle: he go home\n---\n\n# A *fine* heading\n\nThe value $he go$ and $$x$$ and \\(y\\) are "
                "**very** _good_ <span class='x'>here</span> &amp; there.\n\n$$\nhe go\n$$\n\n<div>\nhe go\n</div>\n\n"
                "\\begin{equation}\nhe go\n\\end{equation}\n")
    assert texts(document, "markdown") == [
        "A fine heading", f"The value {STAND_IN} and {STAND_IN} and {STAND_IN} are very good here & there."]
    block = prose_blocks(document, "markdown")[1]
    at = block.text.index("&")
    assert block.span(at, at + 1) == (document.index("&amp;"), document.index("&amp;") + 5)
    assert not block.is_prose(at, at + 1)


def test_markdown_lists_quotes_and_wrapped_lines() -> None:
    document = "> He go\n> home today.\n\n- first item\n  wraps here\n- second\n\n1. third\n"
    blocks = prose_blocks(document, "markdown")
    assert [b.text for b in blocks] == ["He go home today.", "first item wraps here", "second", "third"]
    quote = blocks[0]
    assert quote.span(6, 10) == (10, 14) and document[10:14] == "home"  # after the next line's "> "
    assert document[slice(*quote.span(3, 10))] == "go\n> home"


def test_markdown_with_crlf_and_unmatched_marks() -> None:
    document = "He go home,\r\nshe said. 5 * 3 = 15 and snake_case_name.\r\n"
    block, = prose_blocks(document, "markdown")
    assert block.text == "He go home, she said. 5 * 3 = 15 and snake_case_name."
    at = block.text.index("snake")
    assert document[slice(*block.span(at, at + 15))] == "snake_case_name"


def test_latex_commands_math_and_environments() -> None:
    document = r"""\documentclass{article}
\usepackage{amsmath}
\title{He go home}
\begin{document}
\section{Results}\label{sec:r}
We \emph{has} shown, see~\cite{knuth} and Figure~\ref{f}, that $x$ and \(y\) hold. % he go
\begin{equation}
he go
\end{equation}
The \LaTeX{} way\footnote{A note he go.} is \textbf{good}.

\begin{itemize}
\item One item
\end{itemize}
\begin{lstlisting}
he go { $
\end{lstlisting}
\begin{tabular}{ll}
left & right \\
\end{tabular}
\end{document}
"""
    assert texts(document, "latex") == [
        "He go home", "Results",
        f"We has shown, see {STAND_IN} and Figure {STAND_IN}, that {STAND_IN} and {STAND_IN} hold. {STAND_IN} The "
        f"{STAND_IN} way is good.", "A note he go.", "One item", "left", "right"]
    paragraph = prose_blocks(document, "latex")[2]
    at = paragraph.text.index("has")
    assert document[slice(*paragraph.span(at, at + 3))] == "has"
    at = paragraph.text.index("Figure") + 7
    assert document[slice(*paragraph.span(at, at + 1))] == r"\ref{f}" and not paragraph.is_prose(at, at + 1)


def test_markup_names() -> None:
    assert markup_for_path("notes/README.md") == "markdown" and markup_for_path("a.MDX") == "markdown"
    assert markup_for_path("paper.tex") == "latex" and markup_for_path("x.latex") == "latex"
    assert markup_for_path("a.txt") == "text" and markup_for_path("Makefile") == "text"
    assert markup_for_language_id("markdown") == "markdown" and markup_for_language_id("latex") == "latex"
    assert markup_for_language_id("tex") == "latex" and markup_for_language_id("plaintext") == "text"
    with pytest.raises(MarkupError, match="unknown markup 'html'") as error:
        prose_blocks("x", "html")
    assert isinstance(error.value, ValueError)


def test_offsets_outside_a_block_are_refused() -> None:
    block, = prose_blocks("He go home.", "text")
    with pytest.raises(ValueError):
        block.to_original(12)
    with pytest.raises(ValueError):
        block.span(3, 2)
