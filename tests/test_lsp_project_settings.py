"""The language server reads the project's `.electra-detect.toml` as the CLI does: its level when the editor sets
none, its rules, categories and words beside the workspace file's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from electra_detect.app.lsp.settings import LspSettings, SettingsError, WorkspaceFile  # noqa: E402


def test_the_project_settings_file_joins_the_workspace_rules(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".electra-detect.toml").write_text('level = "picky"\ndisabled-categories = ["STYLE"]\n'
                                                  'words = ["Kubernetes"]\n')
    folder = project / "docs"
    folder.mkdir()
    (folder / ".electra-detect.json").write_text(json.dumps({"disabledRules": ["ELECTRA_DETECT_R_OTHER"]}))
    rules = WorkspaceFile(folder).rules()
    assert rules.level == "picky" and rules.disabled_categories == ("STYLE",)
    assert rules.disabled_rules == ("ELECTRA_DETECT_R_OTHER",) and rules.words == ("Kubernetes",)
    options = LspSettings.read({}).options(rules)
    assert options.level == "picky" and "STYLE" in options.disabled_categories and "Kubernetes" in options.words
    assert LspSettings.read({"level": "default"}).options(rules).level == "default"  # the editor's own wins
    (project / ".electra-detect.toml").write_text('level = "loud"\n')
    with pytest.raises(SettingsError, match=".electra-detect.toml"):
        WorkspaceFile(folder).rules()
