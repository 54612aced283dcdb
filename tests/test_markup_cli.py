"""``ged --markup``: a Markdown or LaTeX file checked as one document, block by block, with offsets into the file; the
same error in code, a link target or a command's argument is not reported. The shipped model, as `ged` runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "models" / "electra-minilm"
CLI = [sys.executable, "-m", "electra_detect.cli", "ged", "--output-format", "json", "--model", str(SHIPPED),
       "--engine", "torch"]
SENTENCE = "He go to the store yesterday and buyed three apple."
ERRORS = {"go", "buyed", "apple"}  # what the shipped model flags in SENTENCE (its card's example)

MARKDOWN = f"""---
title: {SENTENCE}
---

# Shopping notes 😀

{SENTENCE}

```text
{SENTENCE}
```

See [the shop](<{SENTENCE}>) and `{SENTENCE}` for more.
"""

LATEX = rf"""\documentclass{{article}}
\begin{{document}}
\section{{Shopping}}
{SENTENCE}
\begin{{lstlisting}}
{SENTENCE}
\end{{lstlisting}}
See \url{{{SENTENCE}}} and \verb|{SENTENCE}| for more.
\end{{document}}
"""


def ged(*args: str, stdin: str | None = None) -> list[dict]:
    result = subprocess.run([*CLI, *args], input=stdin, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def flagged_in_file(rows: list[dict]) -> list[tuple[str, int, int]]:
    return [(word["word"], word["start"], word["end"]) for row in rows for word in row["flagged"]]


def test_markdown_reports_the_sentences_errors_only_with_file_offsets(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_bytes(MARKDOWN.replace("\n", "\r\n").encode("utf-8"))  # offsets count the file's own \r\n
    document = path.read_bytes().decode("utf-8")
    sentence = document.index(SENTENCE, document.index("notes"))
    lines = ged("--file", str(path))  # the default: every line is a text, code and link target included
    assert sum(ERRORS <= {w["word"] for w in row["flagged"]} for row in lines) >= 3
    rows = ged("--markup", "markdown", "--file", str(path), "--suggest")
    assert [row["text"] for row in rows] == ["Shopping notes 😀", SENTENCE, "See the shop and X for more."]
    assert [document[row["block"]["start"]:row["block"]["end"]] for row in rows][:2] == ["Shopping notes 😀", SENTENCE]
    found = flagged_in_file(rows)
    assert {word for word, _start, _end in found} == ERRORS
    for word, start, end in found:  # exact offsets into the file, inside the sentence
        assert document[start:end] == word and sentence <= start < end <= sentence + len(SENTENCE)
    for word in rows[1]["flagged"]:
        for suggestion in word["suggestions"]:  # a suggestion replaces the file's own characters (a deletion: with
            span = document[suggestion["start"]:suggestion["end"]]  # the space before the word)
            assert span.strip() == word["word"] and suggestion["start"] <= word["start"] < word["end"] <= \
                suggestion["end"]
    assert ged("--markup", "auto", "--file", str(path), "--suggest") == rows  # auto: by the .md extension


def test_latex_reports_the_sentences_errors_only(tmp_path: Path) -> None:
    path = tmp_path / "paper.tex"
    path.write_text(LATEX, encoding="utf-8")
    rows = ged("--markup", "auto", "--file", str(path))
    assert [row["text"] for row in rows] == ["Shopping", SENTENCE, "See X and X for more."]
    sentence = LATEX.index(SENTENCE)
    found = flagged_in_file(rows)
    assert {word for word, _start, _end in found} == ERRORS
    assert all(LATEX[start:end] == word and sentence <= start < sentence + len(SENTENCE) for word, start, end in found)


def test_text_arguments_are_documents_and_processes_write_the_same(tmp_path: Path) -> None:
    paragraphs = f"*Shopping*\n\n{SENTENCE}\n"
    rows = ged("--markup", "markdown", paragraphs, f"- {SENTENCE}")
    assert [(row["document"], row["text"]) for row in rows] == [(0, "Shopping"), (0, SENTENCE), (1, SENTENCE)]
    in_block = [[w["start"] - row["block"]["start"] for w in row["flagged"]] for row in rows[1:]]
    assert in_block[0] == in_block[1] and rows[2]["block"]["start"] == 2 and rows[1]["block"]["start"] == 12
    assert ged("--markup", "markdown", stdin=paragraphs) == [{k: v for k, v in row.items() if k != "document"}
                                                             for row in rows[:2]]
    path = tmp_path / "long.md"
    path.write_text("\n\n".join(f"Item {i}: {SENTENCE}" for i in range(30)) + "\n", encoding="utf-8")
    one = ged("--markup", "markdown", "--file", str(path))
    assert len(one) == 30 and ged("--markup", "markdown", "--file", str(path), "--processes", "2") == one


@pytest.mark.parametrize("case, fragment", [
    ("missing", "input file not found"), ("binary", "not UTF-8"), ("markup", "invalid choice: 'html'")])
def test_bad_markup_input_is_one_error_line(case: str, fragment: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from electra_detect.cli import main

    path = tmp_path / "notes.md"
    if case == "binary":
        path.write_bytes(b"# Notes\n\n\xff\xfe broken\n")
    markup = "html" if case == "markup" else "markdown"
    with pytest.raises(SystemExit) if case == "markup" else _no_exit():
        code = main(["ged", "--model", str(tmp_path / "no-model"), "--markup", markup, "--file", str(path)])
        assert code == 2  # before the model (which does not exist) is loaded
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err) and fragment in err[-1] and "error: " in err[-1]


class _no_exit:  # noqa: N801 - a null context, for the cases that return instead of exiting
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False
