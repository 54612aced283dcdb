"""A real editor as the client: headless Neovim (Debian's, 0.7.2 on Debian 12) drives `electra-detect lsp` through
tests/lsp/quickfix.lua, which uses only Neovim 0.7's LSP API. On a Markdown file holding the same error in a
sentence, in a fenced code block and in a link target, the diagnostics cover the sentence's error only, and the
first quick fix changes the buffer to the suggestion.

Skips, saying why, when nvim is not installed (scripts/install_neovim.sh installs it; `make test` runs that).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "lsp" / "quickfix.lua"
SERVER = [str(Path(sys.executable).parent / "electra-detect"), "lsp"]
SENTENCE = "Yesterday he go to the store."
MARKDOWN = f"""# Notes

😀 {SENTENCE}

```text
{SENTENCE}
```

See [the notes](<notes/{SENTENCE}>).
"""


def test_neovim_sees_the_sentence_error_only_and_applies_its_quick_fix(tmp_path: Path) -> None:
    nvim = shutil.which("nvim")
    if nvim is None:
        pytest.skip("nvim is not installed (scripts/install_neovim.sh installs Debian's neovim; it needs root or "
                    "password-less sudo)")
    if importlib.util.find_spec("pygls") is None:
        pytest.skip("pygls is not installed: pip install 'electra-detect[lsp]'")
    notes = tmp_path / "project" / "notes.md"
    notes.parent.mkdir()
    notes.write_text(MARKDOWN, encoding="utf-8")
    out = tmp_path / "seen.json"
    env = {**os.environ, "ELECTRA_DETECT_NVIM_CMD": json.dumps(SERVER), "ELECTRA_DETECT_NVIM_FILE": str(notes),
           "ELECTRA_DETECT_NVIM_OUT": str(out), "ELECTRA_DETECT_DICTIONARY": str(tmp_path / "dictionary.txt"),
           # Neovim's own files (log, state) in the test's folder, not the user's
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_STATE_HOME": str(tmp_path / "state")}
    done = subprocess.run([nvim, "--headless", "--clean", "-i", "NONE", "-n", "-c", f"luafile {SCRIPT}"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.exists(), f"nvim wrote nothing (exit {done.returncode}): {done.stderr[-2000:]}"
    seen = json.loads(out.read_text(encoding="utf-8"))
    assert seen.get("error") is None, (seen, done.stderr[-2000:])  # Lua's nil: the key is left out
    line = MARKDOWN.splitlines().index(f"😀 {SENTENCE}")
    column = len(f"😀 {SENTENCE}"[:f"😀 {SENTENCE}".index(" go ") + 1].encode("utf-16-le")) // 2
    assert [d["range"] for d in seen["diagnostics"]] == [  # not in the code block, not in the link target
        {"start": {"line": line, "character": column}, "end": {"line": line, "character": column + 2}}]
    assert seen["applied"] == 'Replace "go" with "went"'
    assert seen["lines"] == MARKDOWN.replace(f"😀 {SENTENCE}", f"😀 {SENTENCE.replace(' go ', ' went ')}").split(
        "\n")[:-1]  # only that line changed
    assert seen["exit"] == {"code": 0, "signal": 0}
    assert seen["messages"] == []
