"""The layers of ARCHITECTURE.md, checked on the import graph: each layer imports only
from the layers below it (and itself), nothing imports upward, no two packages import
each other, and the sizes the architecture promises hold."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "icecommit"

#: Lowest first. A module may import its own layer and the layers before it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("icecommit.core",)),
    ("state", ("icecommit.state",)),
    ("catalog", ("icecommit.catalog",)),
    ("writers", ("icecommit.writers",)),
    ("committer", ("icecommit.committer",)),
    ("maintenance", ("icecommit.maintenance",)),
    ("metrics", ("icecommit.metrics",)),
    ("pipeline", ("icecommit.options", "icecommit.pipeline", "icecommit.streaming")),
    ("demo", ("icecommit.demo",)),
    ("cli", ("icecommit.cli",)),
]
#: Facades that only re-export (judged by what they re-export, not as a layer).
FACADES = {"icecommit", "icecommit.errors", "icecommit.checks"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of a tree but those under ``if TYPE_CHECKING:`` (never run)."""
    found: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        found.append(node)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def _imports(path: Path) -> set[str]:
    """The icecommit modules a file imports when it runs, at module level or inside functions."""
    names: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    known = _modules()
    return {n for n in names if n in known}


def layer_of(module: str) -> int | None:
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


def test_every_module_belongs_to_a_layer() -> None:
    loose = [m for m in _modules() if m not in FACADES and layer_of(m) is None]
    assert loose == []


@pytest.mark.parametrize("layer", [name for name, _ in LAYERS])
def test_a_layer_imports_only_the_layers_below_it(layer: str) -> None:
    index = [name for name, _ in LAYERS].index(layer)
    upward = sorted(
        f"{module} imports {imported} ({LAYERS[layer_of(imported) or 0][0]})"
        for module, path in _modules().items()
        if layer_of(module) == index
        for imported in _imports(path)
        if imported not in FACADES and (layer_of(imported) or 0) > index
    )
    assert upward == []


def test_no_layer_imports_the_public_facades() -> None:
    # icecommit and icecommit.errors re-export for users; the package itself names the
    # module that defines a thing, so a facade can never hide an upward import
    through = sorted(
        f"{module} imports {imported}"
        for module, path in _modules().items()
        if module not in FACADES
        for imported in _imports(path)
        if imported in FACADES
    )
    assert through == []


def test_no_two_modules_import_each_other_in_a_circle() -> None:
    graph = {m: {i for i in _imports(p) if i not in FACADES} for m, p in _modules().items() if m not in FACADES}
    # a module's package __init__ is run before it: a package that imports its own module
    # is not a circle
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if node.startswith(nxt + ".") or nxt.startswith(node + "."):
                continue
            if state.get(nxt) == 1:
                cycles.append([*trail[trail.index(nxt) :], nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_at_most_eight_loose_modules_and_none_over_700_lines() -> None:
    loose = [p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"]
    assert len(loose) <= 8, loose
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 700}
    assert long == {}


def test_no_two_modules_share_a_name_across_layers() -> None:
    # a name says what a module is in the domain: ``from ... import overwrite`` and a
    # traceback's file name then point at one module (``__init__``/``__main__`` are roles)
    by_name: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name not in ("__init__.py", "__main__.py"):
            by_name.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}


def test_the_committer_class_stays_under_450_lines() -> None:
    tree = ast.parse((PACKAGE / "committer" / "committer.py").read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GlobalCommitter"]
    assert cls.end_lineno is not None and cls.end_lineno - cls.lineno + 1 <= 450


def test_no_file_of_the_project_cites_a_document_outside_it() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    outside = []
    for name in tracked.split():
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".sh", ".toml", ".ipynb"} or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if name == "tests/test_layers.py":
            continue
        if "../" + "shared/" in text:
            outside.append(f"{name}: a shared folder outside the repository")
        for document in ("DESIGN", "STYLE", "API"):
            document += ".md"
            if document in text and not (ROOT / document).is_file():
                outside.append(f"{name}: {document}")
    assert outside == []


def _reachable(start: str) -> set[str]:
    """Every module (and third-party package) imported at module level, directly or
    through icecommit modules, from ``start``."""
    seen: set[str] = set()
    external: set[str] = set()
    stack = [start]
    modules = _modules()
    while stack:
        module = stack.pop()
        if module in seen:
            continue
        seen.add(module)
        path = modules.get(module) if module != "icecommit" else None
        if path is None:
            continue
        parts = module.split(".")
        stack.extend(".".join(parts[:depth]) for depth in range(2, len(parts)))
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only: a lazy import inside a function is allowed
            if isinstance(node, ast.Import):
                for alias in node.names:
                    (stack if alias.name.startswith("icecommit") else external.add)(alias.name)  # type: ignore[operator]
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith("icecommit"):
                    stack.append(node.module)
                    stack.extend(f"{node.module}.{a.name}" for a in node.names)
                else:
                    external.add(node.module.split(".")[0])
    return external | seen


@pytest.mark.parametrize(
    "package", ["icecommit.core", "icecommit.state", "icecommit.catalog", "icecommit.committer", "icecommit.metrics"]
)
def test_the_driver_side_layers_never_import_spark(package: str) -> None:
    assert "pyspark" not in _reachable(package)


def test_the_walk_does_see_spark_where_it_is_used() -> None:
    assert "pyspark" in _reachable("icecommit.writers.spark")


def test_the_writers_package_and_write_arrow_import_without_spark() -> None:
    # write_arrow serves writers that are not Spark tasks; SparkWriter comes on first use
    assert "pyspark" not in _reachable("icecommit.writers")


def test_importing_icecommit_and_its_driver_side_packages_does_not_load_spark() -> None:
    code = (
        "import sys, icecommit, icecommit.committer, icecommit.metrics, icecommit.maintenance, icecommit.catalog; "
        "print('pyspark' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
