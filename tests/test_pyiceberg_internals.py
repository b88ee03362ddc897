"""pyiceberg's private names are spelled in ``icecommit/core/pyiceberg_internals.py`` only,
and every one that module uses still exists in the installed pyiceberg: an upgrade that
renames or removes one fails here with its name, and the fix is that one file."""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import json
import threading
from collections.abc import Iterator
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyiceberg
import pytest
from pyiceberg.avro.file import AvroFile
from pyiceberg.avro.reader import IntegerReader, ListReader, MapReader
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import ManifestWriterV2
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _MergeAppendFiles, _OverwriteFiles

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "icecommit"
INTERNALS = PACKAGE / "core" / "pyiceberg_internals.py"

#: Every private name pyiceberg_internals uses, and what in pyiceberg holds it: a module
#: (a name imported from it) or one of the objects of ``holders`` (an attribute).
USED: dict[str, str] = {
    "_ConvertToIcebergWithoutIDs": "pyiceberg.io.pyarrow",
    "_get_parquet_writer_kwargs": "pyiceberg.io.pyarrow",
    "_to_partition_representation": "pyiceberg.partitioning",
    "_MergeAppendFiles": "pyiceberg.table.update.snapshot",
    "_OverwriteFiles": "pyiceberg.table.update.snapshot",
    "_SnapshotProducer": "pyiceberg.table.update.snapshot",
    "_validate_data_files_exist": "pyiceberg.table.update.validate",
    "_validate_no_new_deletes_for_data_files": "pyiceberg.table.update.validate",
    # the hooks a snapshot producer's commit calls, routed to public methods
    "_manifests": "merge append, overwrite",
    "_summary": "merge append, overwrite",
    "_existing_manifests": "merge append, overwrite",
    "_validate_concurrency": "overwrite",
    # a snapshot producer's state and steps
    "_added_data_files": "merge append",
    "_deleted_data_files": "overwrite",
    "_transaction": "merge append",
    "_io": "merge append",
    "_operation": "merge append",
    "_parent_snapshot_id": "merge append",
    "_commit_window": "overwrite",
    "_process_manifests": "merge append",
    "_deleted_entries": "overwrite",
    "_build_delete_files_partition_predicate": "overwrite",
    "_table": "transaction",
    "_manifest_planner": "scan",
    "_lazy_id_to_field": "schema",
    "_meta": "manifest writer",
    "_is_int_int": "map reader",
    "_is_int_bytes": "map reader",
    "_is_int_list": "list reader",
    "_read_header": "Avro file",
    # a REST catalog's HTTP session and the endpoints its server listed
    "_session": "REST catalog",
    "_supported_endpoints": "REST catalog",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _names_used_by_internals() -> set[str]:
    """The private names the module spells: imported from pyiceberg, read as attributes,
    or defined as (overriding) members of its classes."""
    used: set[str] = set()
    tree = ast.parse(INTERNALS.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyiceberg"):
            used.update(alias.name for alias in node.names if _private(alias.name))
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            used.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            used.update(
                n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(n.name)
            )
    return used


# -- (b) the names pyiceberg_internals uses still exist -------------------------------


def test_every_private_name_the_module_uses_is_listed_here() -> None:
    used = _names_used_by_internals()
    assert sorted(used - set(USED)) == [], "used by pyiceberg_internals but not listed in USED"
    assert sorted(set(USED) - used) == [], "listed in USED but no longer used by pyiceberg_internals"


@pytest.fixture(scope="module")
def holders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Real pyiceberg objects (never icecommit's subclasses, which define the hooks
    themselves) on a table of an in-memory catalog."""
    warehouse = tmp_path_factory.mktemp("warehouse")
    catalog = SqlCatalog("internals", uri="sqlite:///:memory:", warehouse=warehouse.as_uri())
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", pa.schema([pa.field("id", pa.int64())]))
    transaction = table.transaction()
    config = _ConfigServer()
    yield {
        "REST catalog": RestCatalog("internals", uri=config.url),
        "merge append": _MergeAppendFiles(operation=Operation.APPEND, transaction=transaction, io=table.io),
        "overwrite": _OverwriteFiles(operation=Operation.OVERWRITE, transaction=transaction, io=table.io),
        "transaction": transaction,
        "scan": table.scan(),
        "schema": table.schema(),
        "manifest writer": ManifestWriterV2,
        "map reader": MapReader(IntegerReader(), IntegerReader()),
        "list reader": ListReader(IntegerReader()),
        "Avro file": AvroFile,
    }
    catalog.engine.dispose()
    config.stop()


class _ConfigServer:
    """A loopback server that answers a REST catalog's ``GET /v1/config`` (all a
    ``RestCatalog`` asks when it is made)."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps({"defaults": {}, "overrides": {}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.mark.parametrize("name", sorted(USED))
def test_the_installed_pyiceberg_still_has(name: str, holders: dict[str, Any]) -> None:
    where = USED[name]
    if where.startswith("pyiceberg."):
        assert hasattr(importlib.import_module(where), name), f"{where} has no {name} any more"
        return
    for holder in where.split(", "):
        assert hasattr(holders[holder], name), f"pyiceberg's {holder} ({type(holders[holder]).__name__}) has no {name}"


# -- (a) no other module spells one ---------------------------------------------------


def _stored_attributes(source: str) -> set[str]:
    """The private names a piece of pyiceberg source defines as members or assigns as attributes."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(member.name)
                elif isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name):
                    names.add(member.target.id)
                elif isinstance(member, ast.Assign):
                    names.update(t.id for t in member.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return {n for n in names if _private(n)}


@cache
def _pyiceberg_attributes() -> frozenset[str]:
    """Every private attribute or member name of any pyiceberg class."""
    root = Path(pyiceberg.__file__).parent
    return frozenset(n for path in root.rglob("*.py") for n in _stored_attributes(path.read_text()))


def _pyiceberg_members(cls: type) -> set[str]:
    """The private names a class inherits from pyiceberg (members, slots, attributes)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("pyiceberg"):
            continue
        names.update(n for n in vars(klass) if _private(n))
        names.update(n for n in getattr(klass, "__slots__", ()) if _private(n))
        with contextlib.suppress(OSError, TypeError):  # no source: a builtin or a generated class
            names |= _stored_attributes(inspect.getsource(klass))
    return names


def _self(node: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object of the class being defined."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


class _Module:
    """One icecommit module: what its names import, and the pyiceberg private names its
    classes inherit."""

    def __init__(self, tree: ast.Module) -> None:
        self.imports: dict[str, tuple[str, str | None]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (node.module, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = (alias.name, None)
                    else:
                        top = alias.name.split(".")[0]
                        self.imports[top] = (top, None)
        self.classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}

    def _runtime(self, module: str, name: str | None) -> Any:
        if not module.startswith(("pyiceberg", "icecommit")):
            return None
        try:
            found = importlib.import_module(module)
        except ImportError:
            return None
        if name is None:
            return found
        if hasattr(found, name):
            return getattr(found, name)
        try:
            return importlib.import_module(f"{module}.{name}")
        except ImportError:
            return None

    def _resolve(self, base: ast.expr) -> Any:
        if isinstance(base, ast.Subscript):  # a generic base, AvroFile[Any]
            return self._resolve(base.value)
        if isinstance(base, ast.Name) and base.id in self.imports:
            return self._runtime(*self.imports[base.id])
        if isinstance(base, ast.Attribute):
            owner = self._resolve(base.value)
            return getattr(owner, base.attr, None) if owner is not None else None
        return None

    def inherited(self, cls: ast.ClassDef) -> set[str]:
        names: set[str] = set()
        for base in cls.bases:
            if isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name) and base.id in self.classes and base.id not in self.imports:
                names |= self.inherited(self.classes[base.id])
            elif isinstance(resolved := self._resolve(base), type):
                names |= _pyiceberg_members(resolved)
        return names


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    module = _Module(tree)
    where = path.relative_to(ROOT)
    found: list[str] = []
    in_class: set[int] = set()
    for cls in module.classes.values():
        inherited = module.inherited(cls)
        for node in ast.walk(cls):
            if isinstance(node, ast.Attribute) and _self(node.value) and node.attr in inherited:
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)} (in {cls.name})")
                in_class.add(id(node))
        for member in cls.body:
            if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and member.name in inherited:
                found.append(f"{where}:{member.lineno}: {cls.name}.{member.name} overrides pyiceberg's")
    attributes = _pyiceberg_attributes()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyiceberg"):
            private = [a.name for a in node.names if _private(a.name)]
            if any(_private(part) for part in (node.module or "").split(".")) or private:
                found.append(f"{where}:{node.lineno}: from {node.module} import {', '.join(private) or '...'}")
        elif isinstance(node, ast.Import):
            found.extend(
                f"{where}:{node.lineno}: import {a.name}"
                for a in node.names
                if a.name.startswith("pyiceberg") and any(_private(p) for p in a.name.split("."))
            )
        elif isinstance(node, ast.Attribute) and id(node) not in in_class and not _self(node.value):
            if node.attr in attributes:
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in attributes
        ):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_but_pyiceberg_internals_spells_a_pyiceberg_private_name() -> None:
    found = [v for path in sorted(PACKAGE.rglob("*.py")) if path != INTERNALS for v in _violations(path)]
    assert found == [], "use (or add) a public name in icecommit/core/pyiceberg_internals.py"


def test_the_scan_does_see_a_private_name() -> None:
    # the scan itself, on the module that is allowed them
    spelled = "\n".join(_violations(INTERNALS))
    for name in ("_MergeAppendFiles", "producer._added_data_files", "scan._manifest_planner", "_meta"):
        assert name in spelled
