"""Hostile documents (issue 68): the markup layer's work and memory grow linearly with the document, deep nesting is
a clear MarkupError (or is read), and no reading silently drops text. Each scaling test counts work (characters
handed to a scanner, tokens, calls, Python lines) or memory (tracemalloc), never time; each failed on the code before
its fix."""

from __future__ import annotations

import re
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from electra_detect.errors import MarkupError
from electra_detect.markup import closing_search, latex, markdown, prose_blocks

PROPERTY = settings(max_examples=200, deadline=None, database=None, derandomize=True)


def repeated(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def peak_bytes(work: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def python_lines(work: Callable[[], object]) -> int:
    """The Python lines ``work`` runs: a count of work done that does not depend on the machine's speed."""
    count = 0

    def tracer(frame: object, event: str, arg: object) -> Callable[..., object]:
        nonlocal count
        count += event == "line"
        return tracer

    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


def grows_linearly(measure: Callable[[str], int], unit: str, size: int = 4000) -> tuple[int, int]:
    """``measure`` of ``unit`` repeated to ``size`` and to four times ``size``, less that of an empty document."""
    measure(repeated(unit, size))  # the first reading loads and builds the parsers (and linkify-it's patterns)
    base = measure("")
    return measure(repeated(unit, size)) - base, measure(repeated(unit, 4 * size)) - base


# ------------------------------------------------------------------------------------------------------- Markdown

@pytest.mark.parametrize("unit", ["[a](", "<a ", "&a", "[a"])
def test_a_markdown_paragraphs_memory_grows_linearly(unit: str) -> None:
    """Each inline rule's record kept the text pending before it: a paragraph of unmatched marks held the square of
    its length (100 KB of "[a](" took 2.7 GB)."""
    small, large = grows_linearly(lambda document: peak_bytes(lambda: prose_blocks(document, "markdown")), unit, 8000)
    assert large < 6 * small, (small, large)


@pytest.mark.parametrize("unit", ["\\begin{equation}\n", "$$a\n# h\n"])
def test_markdown_math_blocks_without_an_end_are_looked_for_once(unit: str) -> None:
    """amsmath and $$ blocks read every following line for their closing from each opening line that had none."""
    small, large = grows_linearly(lambda document: python_lines(lambda: prose_blocks(document, "markdown")), unit, 2000)
    assert large < 6 * small, (small, large)


def test_a_bare_urls_scheme_and_rest_are_read_from_their_own_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """markdown-it's linkify rule handed linkify-it the whole rest of the paragraph at every "://"."""
    from linkify_it import LinkifyIt

    read: list[int] = []
    real = LinkifyIt.match_at_start
    monkeypatch.setattr(LinkifyIt, "match_at_start", lambda self, text: read.append(len(text)) or real(self, text))
    document = repeated("a:// ", 20_000) + " https://example.org/a_b_c done"
    blocks = prose_blocks(document, "markdown")
    assert sum(read) <= 2 * len(document) and blocks[0].text.endswith("X done")
    long_url = "See https://example.org/" + "a" * 3000 + " now."  # a URL past URL_SCAN is cut, not lost
    assert prose_blocks(long_url, "markdown")[0].text.startswith("See X")


def test_urls_in_a_long_run_are_stood_in_by_linear_work() -> None:
    """Each text piece looked through every URL found before it for the one it belonged to."""
    small, large = grows_linearly(lambda document: python_lines(lambda: prose_blocks(document, "latex")),
                                  "a@b.co ", 4000)
    assert large < 6 * small, (small, large)
    blocks = prose_blocks("Mail me@x.org or see www.a.org/p and https://b.io/q today.", "latex")
    assert [b.text for b in blocks] == ["Mail X or see X and X today."]


@pytest.mark.parametrize("depth", [20, 99])
def test_prose_nested_twenty_or_more_block_quotes_deep_is_read(depth: int) -> None:
    """CommonMark's preset skipped what lay 20 levels deep without a word."""
    document = "> " * depth + "He go home."
    [block] = prose_blocks(document, "markdown")
    assert block.text == "He go home." and document[block.start:block.end] == "He go home."


@pytest.mark.parametrize("document", ["> " * 100 + "He go home.", "> " * 10_000 + "x",
                                      "".join("  " * i + "- item\n" for i in range(60))])
def test_markdown_nested_past_the_limit_is_a_clear_error(document: str) -> None:
    with pytest.raises(MarkupError, match=r"nests block quotes and lists too deeply at line \d+") as error:
        prose_blocks(document, "markdown")
    assert "\n" not in str(error.value)


def test_a_line_markdown_changed_is_placed_character_by_character_in_linear_work() -> None:
    """A character markdown-it made (U+FFFD for NUL) is in no line, and was looked for to the line's end each time."""
    finder = markdown._CharFinder("ab\x00ba\tc", 0, 8)
    line = "ab\x00ba\tc"
    for char in "ab\x00\tcz\ufffd":
        for start in range(9):
            assert finder.find(char, start) == line.find(char, start)
    document = "He go \x00 home \x00\x00." + repeated("a\x00", 4000)
    [block] = prose_blocks(document, "markdown")
    assert block.text.startswith("He go \ufffd home")


# ---------------------------------------------------------------------------------------------------------- LaTeX

def test_latex_prose_is_read_in_runs_not_a_token_a_character(monkeypatch: pytest.MonkeyPatch) -> None:
    """pylatexenc appends each 'char' token to a string attribute, copying all of it: a paragraph of plain prose (or
    of paragraph breaks) cost its square. Runs of such characters are one token."""
    from pylatexenc.latexwalker import LatexWalker

    tokens = 0
    real = LatexWalker.get_token

    def counted(self: LatexWalker, *args: object, **kwargs: object) -> object:
        nonlocal tokens
        tokens += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LatexWalker, "get_token", counted)
    prose = repeated("He goes home, and she stays! Why? Yes. ", 20_000) + "\n\n" * 5000 + "End."
    blocks = prose_blocks(prose, "latex")
    assert tokens < 100 and [b.text for b in blocks] == [prose[:20_000].strip(), "End."]


def test_latex_environment_names_are_read_where_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """pylatexenc matched each \\begin's and \\end's name on a copy of the rest of the document."""
    import pylatexenc.latexwalker as walker

    copied: list[int] = []

    class Spy:
        def __getattr__(self, name: str) -> object:
            return getattr(re, name)

        @staticmethod
        def match(pattern: object, text: str, *args: object) -> object:
            copied.append(len(text))
            return re.match(pattern, text, *args)

    monkeypatch.setattr(walker, "re", Spy())
    document = "\\begin{quote}a\\end{quote} " * 1500
    blocks = prose_blocks(document, "latex")
    assert sum(copied) <= len(document) and len(blocks) == 1500


@pytest.mark.parametrize("opening", ["\\href{", "\\cite[", "\\section[", "\\caption["])
def test_latex_arguments_cut_off_by_the_end_are_not_read_again(opening: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tolerant parsing read again all that followed a command whose arguments ran past the end, so each unclosed
    argument inside another doubled the work (18 of them, 162 bytes, took 22 s)."""
    from pylatexenc.latexwalker import LatexWalker

    calls = 0
    real = LatexWalker.get_latex_nodes

    def counted(self: LatexWalker, *args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LatexWalker, "get_latex_nodes", counted)
    counts = []
    for depth in (8, 16):
        calls = 0
        prose_blocks(opening * depth + " He go home.", "latex")
        counts.append(calls)
    assert counts[1] < 4 * counts[0], counts


def test_latex_nested_deeply_is_read_to_the_limit_then_a_clear_error() -> None:
    """500 nested braces (1 KB) were an internal error on the server, 300 were read: Python's recursion limit."""
    def from_deep_stack(levels: int, work: Callable[[], object]) -> object:
        return work() if levels == 0 else from_deep_stack(levels - 1, work)

    for nest in ("{", "\\emph{", "\\footnote{", "\\begin{quote}"):
        closing = "\\end{quote}" if nest.startswith("\\begin") else "}"
        document = nest * latex.MAX_LATEX_DEPTH + "He go home." + closing * latex.MAX_LATEX_DEPTH
        assert [b.text for b in from_deep_stack(200, lambda d=document: prose_blocks(d, "latex"))] == ["He go home."]
    for document in ("{" * 500 + "Some prose." + "}" * 500, "\\section[" * 2000, "\\(" * 5000, "{" * 1_000_000):
        with pytest.raises(MarkupError, match=r"nests braces, environments or arguments more than 100 levels deep "
                                              r"\(line 1\)") as error:
            prose_blocks(document, "latex")
        assert "\n" not in str(error.value)


def test_every_error_of_a_hostile_document_is_a_one_line_markup_error() -> None:
    documents = ["\\emph" + "%c\n" * 3000 + "{word} here", "\\verb", "\\begin{verbatim}" * 3000,
                 "$" * 3000, "\\" * 3001, "%" * 3000, "}" * 3000 + "a", "\\end{a}" * 3000]
    for document in documents:
        try:
            blocks = prose_blocks(document, "latex")
        except MarkupError as exc:
            assert str(exc) and "\n" not in str(exc)
        else:
            assert all(b.text for b in blocks)


def test_closings_are_searched_for_once_between_openers() -> None:
    """Each unclosed \\(, \\[ or \\begin{verbatim} read to the end of the document for its closing."""
    scanned = 0

    class Counted(str):
        def find(self, sub: str, start: int = 0, *args: object) -> int:  # type: ignore[override]
            nonlocal scanned
            found = super().find(sub, start, *args)
            scanned += (len(self) if found < 0 else found) - start
            return found

    text = Counted("\\(" * 5000 + "x\\)" + "\\(" * 5000)
    memory: dict[str, tuple[int, int]] = {}
    at = 0
    for _ in range(10_000):
        found = closing_search.find_closing(memory, text, "\\)", at + 3)
        assert found == str.find(text, "\\)", at + 3)
        at += 2
    assert scanned <= 2 * len(text)


VERBATIM_REGEX = re.compile(r"(\\begin\{(verbatim|Verbatim|BVerbatim|lstlisting|minted|comment|alltt|filecontents)\*?\}"
                            r"(?:\{[^}\n]*\}|\[[^\]\n]*\])*)(.*?)(\\end\{\2\*?\})", re.DOTALL)
VERBATIM_PIECES = ["\\begin{verbatim}", "\\end{verbatim}", "\\begin{minted*}", "{py}", "[o]", "\\end{minted*}",
                   "\\end{minted}]", "\\begin{comment}", "\\end{comment}", "x", "\n", "\r\n", " ", "{", "]"]


@PROPERTY
@given(st.lists(st.sampled_from(VERBATIM_PIECES), max_size=30).map("".join))
def test_verbatim_bodies_are_blanked_as_the_regex_read_them(document: str) -> None:
    """The regex this replaces, kept here as the reading's definition; it read to the end from every opener."""
    expected = VERBATIM_REGEX.sub(lambda m: m.group(1) + re.sub(r"[^\r\n]", " ", m.group(3)) + m.group(4), document)
    assert latex._verbatim_blanked(document) == expected


MATH_PIECES = ["\\(", "\\)", "\\[", "\\]", "$$", "$", " (1)", "(", ")", "a", " ", "\n", "\n\n", "> ", "- ",
               "\\begin{equation}", "\\end{equation}", "\\begin{align*}", "\\end{align*}", "http://a.org", "x://",
               "    ", "# ", "`"]


def _plugin_parser() -> object:
    """The parser as it was: mdit-py-plugins' own rules for \\(...\\), \\[...\\], $$ blocks, amsmath and linkify."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.amsmath import amsmath_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.texmath import texmath_plugin

    md = MarkdownIt("commonmark", {"linkify": True, "maxNesting": markdown.MAX_MARKDOWN_NESTING})
    md.enable(["table", "strikethrough", "linkify"]).use(dollarmath_plugin, double_inline=True).use(amsmath_plugin)
    return md.use(texmath_plugin, delimiters="brackets")


def _tokens(md: object, document: str) -> list[tuple[object, ...]]:
    tokens = md.parse(document)
    return [(t.type, t.map, t.content, t.info, t.markup,
             [(c.type, c.content, c.markup) for c in t.children or ()]) for t in tokens]


@PROPERTY
@given(st.lists(st.sampled_from(MATH_PIECES), max_size=40).map("".join))
def test_the_linear_rules_read_what_the_plugins_read(document: str) -> None:
    ours = markdown._markdown_parser()
    ours.core.ruler.enable("inline")  # compared with inline tokens as markdown-it makes them
    assert _tokens(ours, document) == _tokens(_plugin_parser(), document)


# ------------------------------------------------------------------------------------------- the check's batches

def test_a_line_without_a_sentence_end_runs_in_batches_of_bounded_tokens() -> None:
    """Even as plain text, one 10 KB line of "[a](" cost `ged` 1.6 GB against 180 MB for 10 KB of English: its
    512-token windows ran 32 to an engine batch, whose outputs (thousands of tag logits a token) and attention grow
    with rows x width. A batch holds at most ``batch_size * ROW_TOKENS`` model tokens (one window at least)."""
    from electra_detect.detector import Detector
    from electra_detect.scoring_job import ROW_TOKENS

    detector = Detector.load(Path(__file__).resolve().parents[1] / "models" / "electra-minilm" / "ged", engine="torch")
    shapes: list[tuple[int, ...]] = []
    real = detector.engine.outputs
    detector.engine.outputs = lambda ids, attention: shapes.append(ids.shape) or real(ids, attention)
    english = "He goes to the store every morning, and she buys three apples. " * 20
    scores = detector.score([repeated("[a](", 3000), english], batch_size=32)
    assert len(scores[0].tokens) == 3000 and max(width for _rows, width in shapes) > 256
    assert all(rows * width <= 32 * ROW_TOKENS for rows, width in shapes), shapes
    assert shapes[0][0] == 20  # English sentences: as many rows as ever


# ---------------------------------------------------------------------------------------------- invalid Unicode

@pytest.mark.parametrize("markup_name", ["text", "markdown", "latex"])
def test_a_lone_surrogate_is_an_error_not_dropped(markup_name: str) -> None:
    """Bytes that were not UTF-8 reach the layer as surrogates (a command line's argument, a JSON escape); in code
    or a URL they were dropped without a word."""
    with pytest.raises(MarkupError, match="not valid Unicode: a lone surrogate at character 4"):
        prose_blocks("```\n\udcff\n```\nHe goes home.", markup_name)


def test_ged_reports_invalid_bytes_in_a_documents_argument(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from electra_detect.cli import main

    document = b"```\n\xff\xfe\n```\n\nHe goes home.".decode("utf-8", "surrogateescape")  # as argv decodes it
    code = main(["ged", "--model", str(tmp_path / "no-model"), "--markup", "markdown", document])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("error: ") and "not valid Unicode" in err[-1]
