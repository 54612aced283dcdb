"""The house's shape: one installed namespace, dependencies pointing downward, no import circles.

Layers, lowest first: the core (``electra_detect`` without its layer sub-packages), then
``electra_detect.training`` and ``electra_detect.calibration``, then ``electra_detect.app``.
- The core imports no layer above it.
- training and calibration never import app; training never imports calibration.
- calibration imports from training only ``electra_detect.training.pretraining.masking``: the RTD analyses replay
  pre-training's corruption (mask, sample, replace) exactly, so they reuse its functions.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"electra_detect": "electra_detect", "training": "electra_detect.training",
           "calibration": "electra_detect.calibration", "app": "electra_detect.app"}
LAYERS = ("training", "calibration", "app")
FORBIDDEN = {  # importer layer -> layers it must not import
    "core": ("training", "calibration", "app"),
    "training": ("calibration", "app"),
    "calibration": ("app",),
    "app": (),
}
# (importer layer, module): see the docstring
ALLOWED = {("calibration", "electra_detect.training.pretraining.masking")}


def package_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    modules = {}
    for folder, package in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join([package, *parts])] = path
    return modules


def layer(module: str) -> str:
    for name in LAYERS:
        if module == f"electra_detect.{name}" or module.startswith(f"electra_detect.{name}."):
            return name
    return "core"


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``module`` imports (at the top or inside functions; not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _type_checking(node)
            for child in node.body for n in ast.walk(child)}
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".") if is_package else module.split(".")[:-1]
                parent = parent[:len(parent) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for name in names:
            while name and name not in modules:  # `import a.b.c` of a module, or a name inside one
                name = name.rpartition(".")[0]
            if name and name != module and name.startswith("electra_detect"):
                found.add(name)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = package_modules(root)
    return {name: imports(name, path, modules) for name, path in modules.items()}


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, targets in graph.items():
        for target in sorted(targets):
            if layer(target) in FORBIDDEN[layer(module)] and (layer(module), target) not in ALLOWED:
                bad.append(f"{module} ({layer(module)}) imports {target} ({layer(target)})")
    return bad


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import circles (strongly connected components of more than one module, or a self-loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_layer_folder_is_walked() -> None:
    graph = import_graph()
    assert {layer(m) for m in graph} == {"core", "training", "calibration", "app"}
    assert "electra_detect.detector" in graph["electra_detect.app.service"]


def test_dependencies_point_downward() -> None:
    assert layer_violations(import_graph()) == []


def test_no_import_circles() -> None:
    assert circles(import_graph()) == []


def test_the_checks_catch_a_violation_and_a_circle(tmp_path: Path) -> None:
    """The checks themselves: an upward import and a circle planted in a copy of the tree are found."""
    import shutil

    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "electra_detect" / "errors.py").write_text(
        (ROOT / "electra_detect" / "errors.py").read_text() + "\nfrom electra_detect.detector import Detector\n")
    upward = "\n\ndef _up():\n    from electra_detect.app import service\n"
    (tmp_path / "electra_detect" / "highlight.py").write_text((ROOT / "electra_detect" / "highlight.py").read_text()
                                                              + upward)
    graph = import_graph(tmp_path)
    assert any({"electra_detect.detector", "electra_detect.errors"} <= set(c) for c in circles(graph))
    assert layer_violations(graph) == ["electra_detect.highlight (core) imports electra_detect.app.service (app)"]


def test_layers_install_under_one_namespace(tmp_path: Path) -> None:
    """Installed (editable or not), the layers are electra_detect.training/.calibration/.app: no bare
    ``training``, ``app`` or ``calibration`` in site-packages. Run from an empty folder, so that no checkout
    is on the path."""
    probe = (
        "import importlib.metadata as m, importlib.util as u, json\n"
        "try:\n    dist = m.distribution('electra-detect')\nexcept m.PackageNotFoundError:\n    dist = None\n"
        "verbs = [e.name for e in m.entry_points(group='electra_detect.verbs')]\n"
        "out = {'installed': dist is not None, 'verbs': verbs, 'bare': {}, 'layers': {}}\n"
        "for name in ('training', 'app', 'calibration'):\n"
        "    out['bare'][name] = u.find_spec(name) is not None\n"
        "    import importlib\n"
        "    try:\n"
        "        out['layers'][name] = importlib.import_module('electra_detect.' + name).__name__\n"
        "    except ImportError as exc:\n"
        "        out['layers'][name] = repr(exc)\n"
        "print(json.dumps(out))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    if not out["installed"]:
        pytest.skip("electra-detect is not installed in this environment")
    if not out["verbs"]:
        pytest.skip("the installed electra-detect predates the one-namespace layout; run `make install`")
    assert out["bare"] == {"training": False, "app": False, "calibration": False}
    assert out["layers"] == {n: f"electra_detect.{n}" for n in ("training", "app", "calibration")}
    assert {"pretrain", "corpus", "ged-train", "calibrate", "pos-bias", "serve", "demo"} <= set(out["verbs"])


def benchmark_problems(root: Path = ROOT) -> list[str]:
    """The benchmarks' house rules: a package (no script directly in benchmarks/ but its __init__), imported as
    one (no sys.path edits), and nothing outside tests/ imports tests."""
    problems = [f"{p.name}: a script directly in benchmarks/" for p in (root / "benchmarks").glob("*.py")
                if p.name != "__init__.py"]
    for path in sorted((root / "benchmarks").rglob("*.py")):
        if "sys.path" in path.read_text(encoding="utf-8"):
            problems.append(f"{path.relative_to(root)}: edits sys.path")
    for folder in ("benchmarks", "scripts", *FOLDERS):
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(n == "tests" or n.startswith("tests.") for n in names):
                    problems.append(f"{path.relative_to(root)}: imports tests")
    return problems


def test_benchmarks_are_a_package_that_needs_no_path_edits_and_no_tests() -> None:
    assert benchmark_problems() == []


def test_the_benchmark_check_catches_each_rule(tmp_path: Path) -> None:
    (tmp_path / "benchmarks" / "quality").mkdir(parents=True)
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "loose.py").write_text("")
    (tmp_path / "benchmarks" / "quality" / "x.py").write_text("import sys\nsys.path.insert(0, '.')\n")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "y.py").write_text("from tests.conftest import synthetic_text\n")
    for folder in FOLDERS:
        (tmp_path / folder).mkdir()
    assert sorted(benchmark_problems(tmp_path)) == ["benchmarks/quality/x.py: edits sys.path",
                                                    "loose.py: a script directly in benchmarks/",
                                                    "scripts/y.py: imports tests"]


DOCUMENTED_MODULE = re.compile(r"python3? -m (benchmarks(?:\.\w+)+)")
SCRIPT_FORM = re.compile(r"python3? benchmarks/\S+\.py")  # the old form: it no longer runs without sys.path edits


def documented_benchmark_problems(root: Path = ROOT) -> list[str]:
    """Each ``python -m benchmarks...`` in the README, docs/ and the benchmarks' READMEs and tables that names no
    module, and each ``python benchmarks/x.py`` left there."""
    pages = [root / "README.md", *(root / "docs").rglob("*.md"), *(root / "benchmarks").rglob("*.md")]
    problems = []
    for page in pages:
        text, where = page.read_text(encoding="utf-8"), page.relative_to(root).as_posix()
        problems += [f"{where}: {m} is no module" for m in sorted(set(DOCUMENTED_MODULE.findall(text)))
                     if not (root / Path(*m.split("."))).with_suffix(".py").exists()
                     and not (root / Path(*m.split(".")) / "__init__.py").exists()]
        problems += [f"{where}: {m}" for m in sorted(set(SCRIPT_FORM.findall(text)))]
    return problems


def test_every_documented_benchmark_command_names_a_module() -> None:
    assert documented_benchmark_problems() == []


def test_the_documented_command_check_catches_a_moved_benchmark(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks" / "speed").mkdir(parents=True)
    (tmp_path / "benchmarks" / "speed" / "inference.py").write_text("")
    (tmp_path / "README.md").write_text("python -m benchmarks.speed.inference --model m\n")
    (tmp_path / "docs" / "a.md").write_text("python -m benchmarks.inference\npython benchmarks/ged.py --x\n")
    assert documented_benchmark_problems(tmp_path) == ["docs/a.md: benchmarks.inference is no module",
                                                       "docs/a.md: python benchmarks/ged.py"]


# ------------------------------------------------------------------------------------------- the house's other rules

PACKAGES = ("electra_detect", "app", "training")  # the three packages whose modules are held to MAX_LINES
MAX_LINES = 450


def long_modules(root: Path = ROOT) -> list[str]:
    """Modules of the three packages over ``MAX_LINES`` lines: split them by job."""
    found = []
    for folder in PACKAGES:
        for path in sorted((root / folder).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                found.append(f"{path.relative_to(root).as_posix()}: {lines} lines")
    return found


def test_no_module_is_over_450_lines() -> None:
    assert long_modules() == []


# A front translates requests for one kind of user; none imports another's modules. The CLI's shared plumbing (the
# verb registry, the engine and option flags defined once, text arguments) is every verb's, whatever its layer;
# `app/cli.py` holds the `serve` and `demo` verbs, so it launches those two fronts.
FRONTS = ("electra_detect.cli", "electra_detect.spacy_component", "electra_detect.app.lsp", "electra_detect.app.http",
          "electra_detect.app.demo", "electra_detect.app.batch")
SHARED_FRONT_MODULES = {"electra_detect.cli", "electra_detect.cli.engine", "electra_detect.cli.options",
                        "electra_detect.cli.texts"}
LAUNCHERS = {"electra_detect.app.cli": {"electra_detect.app.http", "electra_detect.app.demo"}}


def front_of(module: str) -> str | None:
    return next((f for f in FRONTS if module == f or module.startswith(f + ".")), None)


def front_crossings(graph: dict[str, set[str]]) -> list[str]:
    """Imports of one front's module by another front (or by a module that is no front: the core, a service)."""
    found = []
    for importer, imported in sorted(graph.items()):
        for name in sorted(imported):
            front = front_of(name)
            if front is None or front == front_of(importer) or name in SHARED_FRONT_MODULES:
                continue
            if front in LAUNCHERS.get(importer, ()):
                continue
            found.append(f"{importer} imports {name} ({front})")
    return found


def test_no_front_imports_another_fronts_module() -> None:
    assert front_crossings(import_graph()) == []


def test_the_front_check_catches_a_crossing() -> None:
    graph = {"electra_detect.app.http.routes.ged": {"electra_detect.cli.ged", "electra_detect.cli.options"},
             "electra_detect.app.cli": {"electra_detect.app.http.server"}}
    assert front_crossings(graph) == [
        "electra_detect.app.http.routes.ged imports electra_detect.cli.ged (electra_detect.cli)"]


TAG_SPELLINGS = ("tag:", "$INSERT_", "$APPEND_", "$REPLACE_", "$CASE_", "$FORM_")  # electra_detect.edit_tags' own
TAGS_HOME = "electra_detect/edit_tags/__init__.py"


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def spelled_tag_prefixes(root: Path = ROOT) -> list[str]:
    """String literals (docstrings aside) that spell an edit tag's prefix outside ``electra_detect.edit_tags``."""
    found = []
    for folder in PACKAGES:
        for path in sorted((root / folder).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            if where == TAGS_HOME:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skip = docstrings(tree)
            found += [f"{where}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                      and node.value.startswith(TAG_SPELLINGS)]
    return found


def test_nobody_but_the_edit_tags_spells_a_tag_prefix(tmp_path: Path) -> None:
    assert spelled_tag_prefixes() == []
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "x.py").write_text('"""$REPLACE_ in a docstring is prose."""\nTAG = f"$FORM_{1}"\n')
    assert spelled_tag_prefixes(tmp_path) == ["training/x.py:2: '$FORM_'"]


def defined_names(path: Path) -> set[str]:
    """The names a module binds itself at its top level (functions, classes, assignments, and in if/try blocks)."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, ast.If | ast.Try | ast.With):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return names


def borrowed_imports(root: Path = ROOT) -> list[str]:
    """``from X import name`` in the packages where X neither defines ``name`` nor has a submodule of that name:
    a name imported from a module that only imports it (a re-export)."""
    modules = package_modules(root)
    defined: dict[str, set[str]] = {}
    found = []
    for module, path in sorted(modules.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level or node.module not in modules:
                continue
            if node.module not in defined:
                defined[node.module] = defined_names(modules[node.module])
            for alias in node.names:
                if alias.name not in defined[node.module] and f"{node.module}.{alias.name}" not in modules:
                    found.append(f"{module} imports {alias.name} from {node.module}, which does not define it")
    return found


def test_a_name_is_imported_from_the_module_that_defines_it() -> None:
    assert borrowed_imports() == []


# `--threshold` is defined once (cli/options.py: add_threshold_arg) for the verbs that flag; the options of that name
# that mean something else say so in their help: export's parity gate, distill's labels of a teacher.
THRESHOLD_HOMES = {"electra_detect/cli/options.py", "electra_detect/cli/export.py", "training/cli/distill.py"}


def threshold_definitions(root: Path = ROOT) -> list[str]:
    """Files outside ``THRESHOLD_HOMES`` that define a ``--threshold`` option themselves."""
    found = []
    for folder in (*PACKAGES, "calibration"):
        for path in sorted((root / folder).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "add_argument" and node.args
                        and isinstance(node.args[0], ast.Constant) and node.args[0].value == "--threshold"
                        and where not in THRESHOLD_HOMES):
                    found.append(f"{where}:{node.lineno}")
    return found


def test_the_flag_threshold_option_is_defined_once(tmp_path: Path) -> None:
    assert threshold_definitions() == []
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "x.py").write_text('def add(p):\n    p.add_argument("--threshold", type=float)\n')
    assert threshold_definitions(tmp_path) == ["app/x.py:2"]
