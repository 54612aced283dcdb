"""One request path: the GED options built by one function (its threshold checked in one place), and every front's
check through ``Service.check``."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from electra_detect.errors import GedOptionsError
from electra_detect.tasks.ged.options import GedOptions, build_ged_options

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ("electra_detect", "app", "calibration", "training")  # the installed package's layers


def _functions(path: Path) -> list[tuple[str, ast.AST]]:
    """(enclosing function name or "<module>", node) for every node of the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, ast.AST]] = []

    def walk(node: ast.AST, owner: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else owner
            found.append((name, child))
            walk(child, name)

    walk(tree, "<module>")
    return found


def _sources() -> list[Path]:
    return sorted(p for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py"))


def test_ged_options_are_built_by_one_function() -> None:
    builders = []
    for path in _sources():
        for owner, node in _functions(path):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name == "GedOptions":
                    builders.append(f"{path.relative_to(ROOT)}:{node.lineno} in {owner}")
    assert [b.split(":")[0] + b.split(" in ")[1] for b in builders] == [
        "electra_detect/tasks/ged/options.pybuild_ged_options"], builders


def test_a_threshold_range_is_checked_in_one_place() -> None:
    """A unit-interval comparison (``0 <= x <= 1``) about a threshold exists once in the source tree: the flag
    threshold's check, which build_ged_options (every GED front) calls."""
    checks = []
    for path in _sources():
        for owner, node in _functions(path):
            if isinstance(node, ast.Compare) and len(node.ops) == 2:
                low, high = node.left, node.comparators[-1]
                if (isinstance(low, ast.Constant) and isinstance(high, ast.Constant) and low.value == 0
                        and high.value == 1 and "threshold" in (owner + ast.unparse(node.comparators[0])).lower()):
                    checks.append(f"{path.relative_to(ROOT)}:{owner}")
    assert checks == ["electra_detect/model_dir.py:check_threshold"], checks
    calls = {(str(p.relative_to(ROOT)), owner) for p in _sources() for owner, node in _functions(p)
             if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("check_threshold")}
    assert ("electra_detect/tasks/ged/options.py", "_threshold") in calls


@pytest.mark.parametrize("threshold", [-0.1, 1.5, math.nan, math.inf, 10 ** 400, "abc", True, [0.5]])
def test_a_bad_threshold_is_one_error(threshold) -> None:
    with pytest.raises(GedOptionsError, match=r"^--threshold must be a number in \[0, 1\]"):
        build_ged_options(threshold=threshold, threshold_name="--threshold")


def test_options_from_input() -> None:
    options = build_ged_options(threshold="0.25", level="picky", disabled_categories="STYLE, typos",
                                enabled_rules=["a", "b,c"], words=[" Kubernetes ", ""], suggest=True)
    assert options == GedOptions(threshold=0.25, level="picky", disabled_categories=frozenset({"STYLE", "TYPOS"}),
                                 enabled_rules=frozenset({"A", "B", "C"}), words=("Kubernetes",), suggest=True)
    assert build_ged_options(threshold=1).threshold == 1.0 and build_ged_options().threshold is None
    with pytest.raises(GedOptionsError, match="unknown level"):
        build_ged_options(level="pedantic")
    with pytest.raises(GedOptionsError, match="enabledOnly needs"):
        build_ged_options(enabled_only=True)


def test_every_front_checks_through_service_check() -> None:
    """The GED check's fronts (/v1/ged, /v2/check, the demo) call Service.check and build no GedChecker of their own:
    the service (one per app) is the only place in app/ a checker is made, beside the batch actor's (the one-host
    verbs' checker, as `ged --file` runs it)."""
    def calls(path: Path) -> set[str]:
        return {ast.unparse(node.func) for _, node in _functions(path) if isinstance(node, ast.Call)}

    for front, call in (("app/http/routes/ged.py", "service.check"),
                        ("app/http/routes/languagetool.py", "service.check"),
                        ("app/demo/page.py", "self._service_thread.check"),
                        ("app/lsp/checks.py", "self.service.check")):
        assert call in calls(ROOT / front), front
    makers = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "app").rglob("*.py")) if "GedChecker" in calls(p)]
    # the batch actor is `ged --file` spread over actors: no admission or queues to share, so the CLI's checker
    assert makers == ["app/batch/worker.py", "app/service.py"], makers


def test_service_check_needs_no_web_objects_and_stops_when_cancelled(micro_run: Path) -> None:
    """A front without FastAPI (the language server) calls Service.check with a client name and a threading.Event;
    a check cancelled before its scores arrive is a 499, and the model stops working on it."""
    import asyncio
    import threading

    from electra_detect.app.api_errors import ApiError
    from electra_detect.app.service import Service
    from electra_detect.app.settings import ServerSettings
    from electra_detect.detector import Detector

    detector = Detector.load(micro_run / "discriminator", engine="torch")
    service = Service(detector, ServerSettings(ged_threshold=0.0))

    async def run() -> None:
        await service.start()
        try:
            checked = await service.check(["He go home."], build_ged_options(suggest=True), "lsp")
            assert checked.threshold == 0.0 and checked.options.threshold is None  # the server's default, decided once
            assert checked.flagged[0] and all(w.suggestions is not None for w in checked.flagged[0])  # every word
            cancel = threading.Event()
            cancel.set()
            with pytest.raises(ApiError) as cancelled:
                await service.check(["He go home. " * 50], build_ged_options(), "lsp", cancel)
            assert cancelled.value.status == 499
            assert service.shares.clients == {}  # nothing held after either
        finally:
            await service.stop()

    asyncio.run(run())


MARKDOWN = """# Notes

The farmer go to the market yesterday, see [the site](https://example.org/he-go-there) for more.

```python
he_go = "to the market"  # the farmer go
```

Use `the farmer go` in code.
"""
LATEX = r"""\section{Notes}
The farmer go to the market yesterday, as $x + y$ shows \cite{he-go}.
\begin{verbatim}the farmer go\end{verbatim}
"""


@pytest.mark.parametrize("markup, document, outside", [
    ("markdown", MARKDOWN, ["https://example.org/he-go-there", "he_go = \"to the market\"  # the farmer go",
                            "`the farmer go`"]),
    ("latex", LATEX, ["\\section", "$x + y$", "\\cite{he-go}", "\\begin{verbatim}the farmer go\\end{verbatim}"])])
def test_ged_reads_markup_and_flags_prose_only(micro_run: Path, tmp_path: Path, markup: str, document: str,
                                                outside: list[str]) -> None:
    """/v1/ged's markup field: every word of the prose flagged at threshold 0, none in code, URLs, math or commands,
    every offset into the document as given (the markup layer's blocks, through Service.check)."""
    from fastapi.testclient import TestClient

    from electra_detect.app.http.server import create_app
    from electra_detect.app.settings import ServerSettings
    from electra_detect.detector import Detector

    detector = Detector.load(micro_run / "discriminator", engine="torch")
    settings = ServerSettings(ged_threshold=0.0, dictionary=str(tmp_path / "none.txt"))
    with TestClient(create_app(detector, settings)) as client:
        answer = client.post("/v1/ged", json={"texts": [document], "markup": markup, "suggest": True})
        assert answer.status_code == 200, answer.text
        result = answer.json()["results"][0]
        flagged = result["flagged"]
        assert result["text"] == document and answer.json()["threshold"] == 0.0
        spans = [(w["start"], w["end"]) for w in flagged]
        assert all(document[start:end] == w["word"] for (start, end), w in zip(spans, flagged, strict=True))
        assert {"farmer", "go", "market"} <= {w["word"] for w in flagged}  # the prose sentence
        for piece in outside:
            lo = document.index(piece)
            hi = lo + len(piece)
            assert not [s for s in spans if s[0] < hi and lo < s[1]], (piece, flagged)
        plain = client.post("/v1/ged", json={"texts": [document]}).json()["results"][0]["flagged"]
        assert len(plain) > len(flagged)  # read as text, the markup's words are flagged too
        assert client.post("/v1/ged", json={"texts": [document], "markup": "html"}).status_code == 422
