"""``ged --output-format`` (text, json, github), ``--exit-code``, several ``--file`` paths read by their extension,
inline ignores, a project's ``.electra-detect.toml`` and the pre-commit hook: the writers alone, then the verb as a
writer's CI runs it, on the shipped model (its card's sentence: it flags *go*, *buyed* and *apple*)."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from electra_detect.cli.output import GithubWriter, JsonWriter, TextWriter, color_wanted, excerpt
from electra_detect.cli.sources import Lines, Source, Unit, plan_sources
from electra_detect.errors import CliError, UserError
from electra_detect.ignores import drop_ignored, ignored_regions
from electra_detect.project_settings import (
    ProjectSettingsError,
    find_project_settings,
    find_settings_file,
    read_project_settings,
)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "models" / "electra-minilm"
SENTENCE = "He go to the store yesterday and buyed three apple."
CLEAN = "The farmer saw a red house."
GED = ["ged", "--model", str(SHIPPED), "--engine", "torch", "--no-settings"]
ANSI = re.compile(r"\033\[[0-9;]*m")


def word(start: int, end: int, text: str, **extra: object) -> dict:
    return {"word": text[start:end], "start": start, "end": end, "score": 0.9, "operation": "R", "type": "VERB:SVA",
            "rule": "ELECTRA_DETECT_R_VERB_SVA", "category": "GRAMMAR", "message": "Agreement: *go*, not *goes*.",
            **extra}


# -- the writers, alone ------------------------------------------------------------------------------------------

def test_a_line_units_place_is_its_line_and_a_blocks_is_the_documents() -> None:
    line = Unit("She go home.", Source("notes.txt", "text", file="notes.txt"), line=7)
    assert line.place(4) == (7, 5, "She go home.", 4)
    argument = Unit("First.\nShe go home.", Source("2", "text", argument="First.\nShe go home."))
    assert argument.place(11) == (2, 5, "She go home.", 4)  # a text argument's own line breaks count
    document = "# Title\r\n\r\nOne line.\rShe go home.\n"
    source = Source("a.md", "markdown", file="a.md", document=document)
    block = Unit("She go home.", source, 1, block=object())
    assert block.place(document.index("go")) == (4, 5, "She go home.", 4)  # \r\n and a lone \r end lines alike
    assert Lines("a\nb").locate(2) == (1, 0) and Lines("").line(0) == ""


def test_text_output_is_path_line_col_type_message_then_the_sentence_marked() -> None:
    text = "Fine. She go home.\tThen more."
    unit = Unit(text, Source("essay.txt", "text", file="essay.txt"), line=3)
    flagged = [word(10, 12, text, suggestions=[{"value": "goes", "start": 10, "end": 12},
                                                 {"value": "", "start": 10, "end": 12}])]
    plain = TextWriter(io.StringIO(), color=False)
    plain.add(unit, 0.5, {}, flagged)
    plain.flush()
    head, shown, mark = plain.stream.getvalue().splitlines()
    assert head == 'essay.txt:3:11: R:VERB:SVA Agreement: *go*, not *goes*. (goes, "")'
    assert shown == "  She go home." and mark == "      ^^" and plain.flagged == 1  # its sentence, not the line
    untyped = word(0, 3, "She", type=None)
    painted = TextWriter(io.StringIO(), color=True)
    painted.add(Unit("She", Source("-", "text", file="-")), 0.5, {}, [untyped])
    painted.flush()
    out = painted.stream.getvalue()
    assert "\033[1;31mShe\033[0m" in out and ANSI.sub("", out).startswith("-:1:1: ELECTRA_DETECT_R_VERB_SVA ")


def test_a_long_sentence_is_a_window_and_wide_characters_keep_the_mark_under_the_word() -> None:
    line = "word " * 60 + "the 😀 wrong word " + "word " * 60
    start = line.index("wrong")
    shown, (lo, hi) = excerpt(line, start, start + 5)
    assert shown[lo:hi] == "wrong" and shown.startswith("…") and shown.endswith("…") and len(shown) < 110
    writer = TextWriter(io.StringIO(), color=False)
    writer.add(Unit(line, Source("x", "text")), 0.5, {}, [word(start, start + 5, line)])
    writer.flush()
    _head, shown_line, mark = writer.stream.getvalue().splitlines()
    assert mark.index("^") == shown_line.index("wrong") + 1  # the emoji takes two columns on a terminal


def test_color_only_on_a_terminal_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert color_wanted(Terminal()) and not color_wanted(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not color_wanted(Terminal())


def test_github_annotations_escape_their_fields_and_name_files_only() -> None:
    text = "She go, 100% home"
    writer = GithubWriter(io.StringIO())
    flagged = [word(4, 6, text, message="50%: a, b\nnext")]
    writer.add(Unit(text, Source("dir/a,b.txt", "text", file="dir/a,b.txt"), line=2), 0.5, {}, flagged)
    writer.add(Unit(text, Source("-", "text", file="-")), 0.5, {}, flagged)
    writer.flush()
    first, second = writer.stream.getvalue().splitlines()
    assert first == ("::warning file=dir/a%2Cb.txt,line=2,col=5,endColumn=7,"
                     "title=electra-detect ELECTRA_DETECT_R_VERB_SVA::50%25: a, b%0Anext")
    assert second.startswith("::warning line=1,col=5,") and writer.flagged == 2


def test_json_rows_are_todays_rows() -> None:
    writer = JsonWriter(io.StringIO())
    served = {"model": "m", "variant": "int8"}
    writer.add(Unit("She go.", Source("-", "text", file="-")), 0.5, served, [])
    block = type("Block", (), {"start": 3, "end": 10})()
    writer.add(Unit("She go.", Source("a.md", "markdown", fields={"file": "a.md", "document": 1}), 1, block), 0.5,
               served, [])
    writer.flush()
    rows = [json.loads(line) for line in writer.stream.getvalue().splitlines()]
    assert list(rows[0]) == ["text", "threshold", "flagged", "model", "variant"]
    assert rows[1] == {"block": {"start": 3, "end": 10}, "text": "She go.", "threshold": 0.5, "flagged": [],
                       "model": "m", "variant": "int8", "file": "a.md", "document": 1}


# -- inline ignores ----------------------------------------------------------------------------------------------

def test_ignored_regions_run_from_off_to_on_or_the_end() -> None:
    markdown = "A.\n<!-- electra-detect: off -->\nB.\n<!--electra-detect:OFF-->\nC.\n<!-- electra-detect: on -->\nD.\n"
    ignored = ignored_regions(markdown, "markdown")
    assert [markdown.index(c) in ignored for c in "ABCD"] == [False, True, True, False]
    assert ignored.covers(markdown.index("B"), markdown.index("B") + 2)
    latex = "A. \\% electra-detect: off not a marker\n% electra-detect: off\nB.\n"
    ignored = ignored_regions(latex, "latex")
    assert latex.index("A") not in ignored and latex.index("not") not in ignored and latex.index("B") in ignored
    flags = [{"start": latex.index("A")}, {"start": latex.index("B")}]
    assert drop_ignored(flags, ignored) == flags[:1]
    assert not ignored_regions("<!-- electra-detect: off -->", "text")  # plain text has no markers


# -- project settings --------------------------------------------------------------------------------------------

def test_settings_are_found_upward_but_not_past_the_projects_root(tmp_path: Path) -> None:
    outer, project = tmp_path, tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "docs" / "deep").mkdir(parents=True)
    (outer / ".electra-detect.toml").write_text('level = "picky"\n')
    assert find_settings_file(project / "docs" / "deep") is None  # the one above .git is someone else's
    (project / ".electra-detect.toml").write_text(
        'level = "picky"\ndisabled-rules = ["ELECTRA_DETECT_R_SPELL"]\ndisabled-categories = ["STYLE"]\n'
        'words = ["Kubernetes"]\ndictionary = "docs/words.txt"\n')
    (project / "docs" / "words.txt").write_text("# ours\ntokenise\n\nKubernetes\n")
    settings = find_project_settings(project / "docs" / "deep")
    assert settings.path == project / ".electra-detect.toml" and settings.level == "picky"
    assert settings.words == ("Kubernetes", "tokenise") and settings.dictionary == project / "docs" / "words.txt"
    fields = settings.ged_fields(level=None, disabled_rules=[], disabled_categories=["TYPOS"], words=["mine"])
    assert fields == {"level": "picky", "disabled_rules": ["ELECTRA_DETECT_R_SPELL"], "disabled_categories": ["TYPOS"],
                      "words": ["Kubernetes", "tokenise", "mine"]}  # a flag given wins; words add up
    assert settings.ged_fields(level="default")["level"] == "default"


@pytest.mark.parametrize("content, fragment", [
    ("levl = 'picky'\n", "unknown key 'levl'"),
    ("level = \n", "not valid TOML"),
    ("level = 'strict'\n", "level must be one of default, picky"),
    ("words = 'Kubernetes'\n", "words must be a list of strings"),
    ("dictionary = 'missing.txt'\n", "missing.txt not found"),
    ("words = ['" + "x" * 70_000 + "']\n", "larger than 65,536 bytes"),
    (b"level = '\xff'\n", "not UTF-8"),
])
def test_a_bad_settings_file_is_one_user_error(content: str | bytes, fragment: str, tmp_path: Path) -> None:
    path = tmp_path / ".electra-detect.toml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ProjectSettingsError, match=re.escape(fragment)) as caught:
        read_project_settings(path)
    assert isinstance(caught.value, UserError) and "\n" not in str(caught.value) and str(path) in str(caught.value)


# -- inputs -------------------------------------------------------------------------------------------------------

def test_auto_reads_each_file_by_its_extension_and_checks_them_all_first(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Notes\n")
    (tmp_path / "b.tex").write_text("Text.\n")
    (tmp_path / "c.txt").write_text("Line.\n")
    files = [str(tmp_path / name) for name in ("a.md", "b.tex", "c.txt")]
    sources = plan_sources([], files, "auto")
    assert [s.markup for s in sources] == ["markdown", "latex", "text"]
    assert [s.fields for s in sources] == [{"file": files[0], "document": 0}, {"file": files[1], "document": 1},
                                           {"file": files[2]}]
    assert plan_sources([], files[:1], "auto")[0].fields == {}  # one file: today's rows
    with pytest.raises(CliError, match="input file not found: .*missing.txt"):
        plan_sources([], [*files, str(tmp_path / "missing.txt")], "auto")


# -- the verb ------------------------------------------------------------------------------------------------------

def run_ged(*args: str, cwd: Path | None = None, env: dict | None = None, stdout: int | None = None,
            ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "electra_detect.cli", *args], capture_output=stdout is None,
                          stdout=stdout, text=True, timeout=600, cwd=cwd, env=env)


def test_text_is_the_default_and_says_where_each_word_is(tmp_path: Path) -> None:
    essay = tmp_path / "essay.txt"
    essay.write_text(f"{CLEAN}\n\n{SENTENCE}\n")
    result = run_ged(*GED, "--file", str(essay))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    heads = [line for line in lines if not line.startswith(" ")]
    assert [h.split(": ", 1)[0] for h in heads] == [f"{essay}:3:{SENTENCE.index(w) + 1}" for w in
                                                   ("go", "buyed", "apple")]
    assert "*go*" in heads[0] and "\033" not in result.stdout  # the message; no colour into a pipe
    assert lines[1:3] == [f"  {SENTENCE}", "     ^^"]
    arguments = run_ged(*GED, CLEAN, SENTENCE, "--output-format", "github", "--exit-code")
    assert arguments.returncode == 1, arguments.stderr
    assert arguments.stdout.splitlines()[0].startswith("::warning line=1,col=4,endColumn=6,title=electra-detect ")


def test_exit_code_says_whether_anything_was_flagged(tmp_path: Path) -> None:
    clean, flagged = tmp_path / "clean.txt", tmp_path / "flagged.txt"
    clean.write_text(CLEAN + "\n")
    flagged.write_text(SENTENCE + "\n")
    assert run_ged(*GED, "--exit-code", "--file", str(clean)).returncode == 0
    assert run_ged(*GED, "--exit-code", "--file", str(clean), str(flagged)).returncode == 1
    assert run_ged(*GED, "--file", str(flagged)).returncode == 0  # without it: 0, as before
    missing = run_ged(*GED, "--exit-code", "--file", str(tmp_path / "missing.txt"))
    assert missing.returncode == 2 and missing.stderr.strip().splitlines()[-1].startswith("error: input file not found")


def test_several_files_by_extension_with_document_lines_and_ignored_regions(tmp_path: Path) -> None:
    markdown = (f"# Notes\n\n{SENTENCE}\n\n<!-- electra-detect: off -->\nShe go home.\n\n{SENTENCE}\n"
                f"<!-- electra-detect: on -->\n\nLast: {SENTENCE}\n")
    latex = f"\\section{{Shop}}\r\n% electra-detect: off\r\n{SENTENCE}\r\n% electra-detect: on\r\n{SENTENCE}\r\n"
    (tmp_path / "notes.md").write_text(markdown)
    (tmp_path / "paper.tex").write_bytes(latex.encode())
    (tmp_path / "plain.txt").write_text(f"<!-- electra-detect: off -->\n{SENTENCE}\n")
    files = ["notes.md", "paper.tex", "plain.txt"]
    text = run_ged(*GED, "--markup", "auto", "--file", *files, cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    places = [line.split(": ", 1)[0] for line in text.stdout.splitlines() if not line.startswith(" ")]
    column = SENTENCE.index("go") + 1  # "go": where it is in each file (document lines, 1-based)
    assert [p for p in places if p.endswith((f":{column}", f":{column + 6}"))] == [
        f"notes.md:3:{column}", f"notes.md:11:{column + 6}", f"paper.tex:5:{column}", f"plain.txt:2:{column}"]
    rows = [json.loads(line) for line in run_ged(*GED, "--markup", "auto", "--output-format", "json", "--file",
                                                 *files, cwd=tmp_path).stdout.splitlines()]
    assert {row["file"] for row in rows} == set(files)
    assert {row.get("document") for row in rows if "block" in row} == {0, 1}  # plain.txt: a row a line
    for row in rows:
        if "block" not in row:
            continue
        document = (tmp_path / row["file"]).read_bytes().decode()
        ignored = ignored_regions(document, "markdown" if row["file"].endswith(".md") else "latex")
        assert not ignored.covers(row["block"]["start"], row["block"]["end"])  # a switched-off block is not read
        assert all(document[w["start"]:w["end"]] == w["word"] and w["start"] not in ignored for w in row["flagged"])


def test_a_region_inside_a_paragraph_drops_only_its_own_flags(tmp_path: Path) -> None:
    line = f"Intro: he go home. <!-- electra-detect: off -->{SENTENCE}<!-- electra-detect: on --> Then she go home.\n"
    (tmp_path / "inline.md").write_text(line)
    result = run_ged(*GED, "--markup", "auto", "--file", "inline.md", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    places = [row.split(": ", 1)[0] for row in result.stdout.splitlines() if not row.startswith(" ")]
    assert places == [f"inline.md:1:{line.index('go') + 1}", f"inline.md:1:{line.rindex('go') + 1}"]  # one block


def test_project_settings_steer_the_check_and_flags_override_them(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "words.txt").write_text("buyed\n")
    (tmp_path / ".electra-detect.toml").write_text('dictionary = "words.txt"\nwords = ["apple"]\n')
    ged = ["ged", "--model", str(SHIPPED), "--engine", "torch", "--output-format", "json", SENTENCE]

    def flagged(*extra: str) -> set[str]:
        result = run_ged(*ged, *extra, cwd=tmp_path / "docs")
        assert result.returncode == 0, result.stderr
        return {w["word"] for w in json.loads(result.stdout)["flagged"]}

    assert flagged() == {"go"}  # the settings' dictionary, found from a folder inside the project
    assert flagged("--no-settings") == {"go", "buyed", "apple"}
    (tmp_path / ".electra-detect.toml").write_text('disabled-rules = ["ELECTRA_DETECT_R_NOUN_NUM"]\n')
    assert "apple" not in flagged()
    assert "apple" in flagged("--disable", "ELECTRA_DETECT_R_OTHER")  # the flag given replaces the setting
    (tmp_path / ".electra-detect.toml").write_text("level = 'loud'\n")
    bad = run_ged(*ged, cwd=tmp_path / "docs")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        f"error: {(tmp_path / '.electra-detect.toml').resolve()}: level must be one of default, picky, got 'loud'"]


def test_colour_on_a_terminal_unless_no_color(tmp_path: Path) -> None:
    def on_a_terminal(env: dict[str, str]) -> str:
        main, child = os.openpty()
        try:
            result = run_ged(*GED, SENTENCE, env=env, stdout=child)
            os.close(child)
            chunks = []
            while True:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # the child side is closed and read
                    break
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(main)
        assert result.returncode == 0
        return b"".join(chunks).decode()

    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    assert "\033[1;31mgo\033[0m" in on_a_terminal(env)
    plain = on_a_terminal({**env, "NO_COLOR": "1"})
    assert "\033" not in plain and "1:4: " in plain


def test_the_pre_commit_hook_runs_as_pre_commit_calls_it(tmp_path: Path) -> None:
    import yaml

    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "electra-detect" and set(hook["types_or"]) == {"markdown", "tex", "text"}
    names = ("notes.md", "docs/paper.tex", "notes.txt", "setup.py", "data.json")
    assert [bool(re.search(hook["files"], name)) for name in names] == [True, True, True, False, False]
    argv = shlex.split(hook["entry"])
    assert argv[0] == "electra-detect" and argv[-1] == "--file"
    (tmp_path / "good.md").write_text(f"# Notes\n\n{CLEAN}\n")
    (tmp_path / "bad.tex").write_text(f"{SENTENCE}\n")
    model = ["--model", str(SHIPPED), "--engine", "torch", "--no-settings"]
    hook_run = run_ged(*argv[1:-1], *model, argv[-1], "good.md", "bad.tex", cwd=tmp_path)  # file names appended
    assert hook_run.returncode == 1, hook_run.stderr
    assert hook_run.stdout.startswith(f"bad.tex:1:{SENTENCE.index('go') + 1}: ")
    assert run_ged(*argv[1:-1], *model, argv[-1], "good.md", cwd=tmp_path).returncode == 0
