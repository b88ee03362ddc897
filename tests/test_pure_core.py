"""``icecommit/core`` is pure: no file, network, database, thread or process of its own.

Every module of the package ``icecommit.core`` is parsed; what runs (everything but the
imports under ``if TYPE_CHECKING:``, which are types only) may not import a module that
opens files, sockets, databases, threads or processes, nor call what reads or writes a
table's files. The I/O lives in the layers above: reading manifests, delete files and
data files in ``icecommit.catalog`` (``manifest_entries``, ``position_deletes``,
``removals``, ``data_file_keys``), Spark's tasks in ``icecommit.writers``.

Not counted as I/O, on purpose:

- clocks and sleeps: ``core/connections.py``'s bounded retry reads ``time.monotonic`` and
  waits through its ``sleep`` argument (``time.sleep`` unless the caller injects one), the
  way tenacity does;
- the environment: ``os.environ`` (``core/connections.py``'s retry bounds);
- Python's own imports (``importlib``): ``core/extras.py`` imports an optional extra when
  it is first used, ``core/telemetry.py`` imports OpenTelemetry and asks the installed
  package's version once;
- logging, and recording through OpenTelemetry's API (``core/telemetry.py``): what a
  configured exporter does with it is the application's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_layers import _runtime_nodes

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "icecommit" / "core"

#: Modules (and their submodules) that do I/O, with what they reach.
FORBIDDEN_MODULES: dict[str, str] = {
    "threading": "threads",
    "concurrent": "a thread or process pool",
    "multiprocessing": "processes",
    "asyncio": "an event loop",
    "subprocess": "processes",
    "atexit": "a hook run when the process exits",
    "socket": "the network",
    "ssl": "the network",
    "http": "the network",
    "urllib": "the network",
    "requests": "the network",
    "shutil": "files",
    "tempfile": "files",
    "glob": "files",
    "pathlib": "files (a Path's methods read the file system)",
    "fsspec": "files",
    "boto3": "object storage",
    "botocore": "object storage",
    "sqlite3": "a database",
    "psycopg": "a database",
    "sqlalchemy": "a database",
    "pyarrow.parquet": "Parquet files",
    "pyarrow.fs": "files",
    "pyarrow.dataset": "files",
    "pyarrow.csv": "files",
    "pyarrow.orc": "files",
    "pyarrow.feather": "files",
    "pyiceberg.io": "a table's files (FileIO)",
    "pyiceberg.avro": "manifest files",
    "pyiceberg.catalog": "a catalog",
}

#: Submodules of a forbidden module that hold no I/O: exception classes, which the pure
#: rules match (which failure is transient, which proves a commit did not land).
ALLOWED_MODULES: dict[str, str] = {
    "requests.exceptions": "exception classes (core/connections.py: which failures are transient)",
    "sqlalchemy.exc": "exception classes (core/connections.py, core/conflicts.py)",
    "urllib.parse": "string rules of URLs (quoting), no request",
}

#: Names of a forbidden module that are pure conversions, by module.
ALLOWED_NAMES: dict[str, frozenset[str]] = {
    # core/pyiceberg_internals.py names pyiceberg's private API in one module (see its
    # test): from pyiceberg's Arrow module it takes a schema visitor and the Parquet
    # writer's arguments read from table properties; nothing that opens a file
    "pyiceberg.io.pyarrow": frozenset(
        {"PyArrowSchemaVisitor", "_ConvertToIcebergWithoutIDs", "_get_parquet_writer_kwargs"}
    ),
}

#: ``os`` attributes that touch neither files nor processes.
OS_PURE = frozenset({"environ", "getenv", "fspath", "PathLike", "sep", "linesep", "path"})
#: ``os.path`` (and ``posixpath``) functions that ask the file system; the rest are string rules.
PATH_FILE_FUNCTIONS = frozenset(
    {"exists", "lexists", "isfile", "isdir", "islink", "ismount", "getsize", "getmtime", "getatime", "getctime",
     "realpath", "abspath", "expanduser", "samefile", "samestat"}
)  # fmt: skip

#: Calls that read or write a table's files (an attribute or a function of that name).
FORBIDDEN_CALLS: dict[str, str] = {
    "open": "opens a file or a stream",
    "manifests": "reads a snapshot's manifest list",
    "fetch_manifest_entry": "reads a manifest",
    "new_input": "opens a table file",
    "new_output": "creates a table file",
    "plan_files": "reads manifests",
    "to_arrow": "reads data files",
    "refresh": "asks the catalog",
    "load_table": "asks the catalog",
    "read": "reads a file or a stream",
    "write": "writes a file or a stream",
}
#: Prefixes of calls that read or write files (``read_table``, ``write_table``, ...).
FORBIDDEN_CALL_PREFIXES = ("read_", "write_")


def _core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _forbidden_module(name: str, imported: tuple[str, ...] = ()) -> str | None:
    """What a module does that core may not (None when it may be imported, or when every
    name ``imported`` from it is an allowed pure one)."""
    if any(name == m or name.startswith(m + ".") for m in ALLOWED_MODULES):
        return None
    allowed = ALLOWED_NAMES.get(name)
    if allowed is not None and imported and set(imported) <= allowed:
        return None
    for module, reaches in FORBIDDEN_MODULES.items():
        if name == module or name.startswith(module + "."):
            return reaches
    return None


def _call_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def io_of(source: str) -> list[tuple[int, str]]:
    """(line, what) for every I/O the source does when it runs."""
    found: list[tuple[int, str]] = []
    for node in _runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (reaches := _forbidden_module(alias.name)) is not None:
                    found.append((node.lineno, f"imports {alias.name} ({reaches})"))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = tuple(alias.name for alias in node.names)
            if node.module in ("os", "os.path", "posixpath"):
                bad = [n for n in names if (n not in OS_PURE if node.module == "os" else n in PATH_FILE_FUNCTIONS)]
                if bad:
                    found.append((node.lineno, f"imports {', '.join(bad)} from {node.module} (files)"))
            elif (reaches := _forbidden_module(node.module, names)) is not None:
                found.append((node.lineno, f"imports {', '.join(names)} from {node.module} ({reaches})"))
            elif _forbidden_module(node.module) is None:
                for alias in node.names:  # ``from pyarrow import parquet``
                    if (reaches := _forbidden_module(f"{node.module}.{alias.name}")) is not None:
                        found.append((node.lineno, f"imports {node.module}.{alias.name} ({reaches})"))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "os" and node.attr not in OS_PURE:
                found.append((node.lineno, f"uses os.{node.attr} (files or processes)"))
            elif node.value.id == "posixpath" and node.attr in PATH_FILE_FUNCTIONS:
                found.append((node.lineno, f"uses posixpath.{node.attr} (files)"))
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name)
            and (node.value.value.id, node.value.attr) == ("os", "path")
            and node.attr in PATH_FILE_FUNCTIONS
        ):
            found.append((node.lineno, f"uses os.path.{node.attr} (files)"))
        if isinstance(node, ast.Call) and (name := _call_name(node)) is not None:
            if name in FORBIDDEN_CALLS:
                found.append((node.lineno, f"calls {name}() ({FORBIDDEN_CALLS[name]})"))
            elif name.startswith(FORBIDDEN_CALL_PREFIXES):
                found.append((node.lineno, f"calls {name}() (reads or writes files)"))
    return sorted(found)


@pytest.mark.parametrize("path", _core_modules(), ids=lambda p: _module_name(p))
def test_a_core_module_does_no_io(path: Path) -> None:
    where = path.relative_to(ROOT)
    found = [f"{_module_name(path)} ({where}:{line}) {what}" for line, what in io_of(path.read_text())]
    assert found == [], "core/ is pure: move the I/O to the layer that does it (catalog/ reads table files)"


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("import threading", "imports threading (threads)"),
        ("from concurrent.futures import ThreadPoolExecutor", "imports ThreadPoolExecutor from concurrent.futures"),
        ("import pyarrow.parquet as pq", "imports pyarrow.parquet (Parquet files)"),
        ("from pyarrow import parquet", "imports pyarrow.parquet (Parquet files)"),
        ("from pyiceberg.io import FileIO", "imports FileIO from pyiceberg.io"),
        ("from pyiceberg.io.pyarrow import schema_to_pyarrow", "imports schema_to_pyarrow from pyiceberg.io.pyarrow"),
        ("import requests", "imports requests (the network)"),
        ("from urllib.request import urlopen", "imports urlopen from urllib.request"),
        ("import subprocess", "imports subprocess (processes)"),
        ("from pathlib import Path", "imports Path from pathlib"),
        ("from os import remove", "imports remove from os (files)"),
        ("from os.path import isfile", "imports isfile from os.path (files)"),
        ("import os\nos.listdir('.')", "uses os.listdir"),
        ("import os\nos.path.exists('x')", "uses os.path.exists (files)"),
        ("with open('x') as f: pass", "calls open()"),
        ("snapshot.manifests(io)", "calls manifests()"),
        ("manifest.fetch_manifest_entry(io)", "calls fetch_manifest_entry()"),
        ("io.new_input(path)", "calls new_input()"),
        ("io.new_output(path)", "calls new_output()"),
        ("pq.read_table(stream)", "calls read_table()"),
        ("read_entries(io, manifest)", "calls read_entries()"),
        ("writer.write_table(rows)", "calls write_table()"),
    ],
)
def test_the_check_sees_each_kind_of_io(source: str, what: str) -> None:
    assert any(what in found for _, found in io_of(source)), io_of(source)


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.environ.get('X')",
        "import posixpath\nposixpath.normpath('a//b')",
        "from requests.exceptions import Timeout",
        "from sqlalchemy.exc import OperationalError",
        "from urllib.parse import quote",
        "from pyiceberg.io.pyarrow import PyArrowSchemaVisitor",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pyiceberg.io import FileIO",
        "import time\ntime.monotonic()",
        "import pyarrow.compute as pc\npc.equal(a, b)",
        "from pyiceberg.manifest import DataFile",
    ],
)
def test_the_check_lets_pure_code_be(source: str) -> None:
    assert io_of(source) == []
