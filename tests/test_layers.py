"""The dependency direction of STYLE.md, checked on the import graph."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "icecommit"


def _module_file(module: str) -> Path | None:
    parts = module.split(".")
    if parts[0] != "icecommit":
        return None
    base = PACKAGE.joinpath(*parts[1:])
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def reachable(start: str) -> set[str]:
    """Every module imported, directly or through icecommit modules, from ``start``
    (package ``__init__`` files of icecommit itself included, the top-level one not)."""
    seen: set[str] = set()
    stack = [start]
    external: set[str] = set()
    while stack:
        module = stack.pop()
        if module in seen:
            continue
        seen.add(module)
        # the top-level facade re-exports everything (Spark lazily); layers are judged
        # by their own imports, and the runtime test below covers the facade
        path = _module_file(module) if module != "icecommit" else None
        if path is None:
            if module != "icecommit" and not module.startswith("icecommit."):
                external.add(module.split(".")[0])
            continue
        parts = module.split(".")
        for depth in range(2, len(parts)):
            stack.append(".".join(parts[:depth]))
        stack.extend(_imports(path))
    return external | {m for m in seen if m.startswith("icecommit")}


@pytest.mark.parametrize("package", ["icecommit.committer", "icecommit.metrics", "icecommit.catalog"])
def test_committer_metrics_and_catalog_never_import_spark(package: str) -> None:
    assert "pyspark" not in reachable(package)


def test_writers_know_nothing_of_the_committer() -> None:
    assert not any(m.startswith("icecommit.committer") for m in reachable("icecommit.writers"))


def test_metrics_do_not_commit_data() -> None:
    assert not any(m.startswith(("icecommit.committer", "icecommit.writers")) for m in reachable("icecommit.metrics"))


def test_the_state_layer_imports_nothing_above_it() -> None:
    above = ("icecommit.committer", "icecommit.catalog", "icecommit.metrics", "icecommit.writers", "icecommit.cli")
    reached = reachable("icecommit.state")
    assert not any(m.startswith(above) for m in reached), sorted(m for m in reached if m.startswith(above))
    assert "pyspark" not in reached


def test_the_committer_does_not_import_the_catalog_operations() -> None:
    # catalog/ (rollback, expire, orphans) sits above the committer; the committer reaches
    # the state it shares with them through icecommit.state
    assert not any(m.startswith("icecommit.catalog") for m in reachable("icecommit.committer"))


def test_the_walk_does_see_spark_where_it_is_used() -> None:
    assert "pyspark" in reachable("icecommit.writers")


def test_importing_icecommit_and_the_committer_does_not_load_spark() -> None:
    code = "import sys, icecommit, icecommit.committer, icecommit.metrics; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
