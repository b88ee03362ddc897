"""Shared fixtures: catalogs on SQLite and PostgreSQL (and, for the tests marked
``over_rest``, an Iceberg REST catalog), and one local Spark session."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

from icecommit.core import connections
from icecommit.state.database import dispose_state_engines
from icecommit.writers.session import local_session
from tests import postgres
from tests.rest import server as rest

_PG_UNAVAILABLE: str | None = "PostgreSQL was not probed (the test session did not start)"
_PG_DATABASE: postgres.SessionDatabase | None = None
_REST_SERVER: rest.RestServer | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Put the tests' temporary folders (catalogs, state databases, warehouses) in memory
    where the machine has a tmpfs, as a database's test suite runs on one: a test's SQLite
    commits and file writes then cost no disk flush. No test depends on a flush reaching
    the disk (a killed process's writes stay in the page cache either way), so what is
    checked is the same. ``PYTEST_DEBUG_TEMPROOT`` (pytest's own setting) or ``--basetemp``
    chooses another place; ``ICECOMMIT_TEST_TMPFS=0`` keeps pytest's default."""
    _cache_bytecode()
    if config.option.basetemp or os.environ.get("PYTEST_DEBUG_TEMPROOT"):
        return
    if os.environ.get("ICECOMMIT_TEST_TMPFS", "1") == "0":
        return
    memory = _tmpfs_folder()
    if memory is not None:
        os.environ["PYTEST_DEBUG_TEMPROOT"] = memory  # read when tmp_path's root is first made


def _cache_bytecode() -> None:
    """Let pytest keep the test modules it rewrote for its assertions (and Python its
    compiled modules) in ``__pycache__``, as it does by default: where the environment
    turns that off (``PYTHONDONTWRITEBYTECODE=1``, set on this project's machines), every
    xdist worker parses and rewrites all the test modules again on every run, about 5 s
    each of a fast suite's two minutes. Workers and the processes the tests start inherit
    it through the environment."""
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


#: Free space a tmpfs needs before the tests use it (a container's /dev/shm is often 64 MiB;
#: a whole run keeps a few hundred MiB, and pytest keeps the last three runs' folders).
TMPFS_MIN_FREE = 2 * 1024**3
#: The tmpfs the tests' folders go to where it is there.
TMPFS = "/dev/shm"


def _is_tmpfs(folder: str) -> bool:
    """Whether ``folder`` is a tmpfs mount point (False where /proc/mounts is not there)."""
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            return any(line.split()[1:3] == [folder, "tmpfs"] for line in mounts)
    except OSError:
        return False


def _free_bytes(folder: str) -> int:
    room = os.statvfs(folder)
    return room.f_bavail * room.f_frsize


def _tmpfs_folder() -> str | None:
    """A writable folder on a tmpfs with room to spare (``/dev/shm`` on Linux), or None."""
    if not _is_tmpfs(TMPFS) or not os.access(TMPFS, os.W_OK | os.X_OK):
        return None
    return TMPFS if _free_bytes(TMPFS) >= TMPFS_MIN_FREE else None


#: Set to 1 to run the tests marked ``database_independent`` on PostgreSQL too (CI does).
EVERY_DATABASE = "ICECOMMIT_TEST_EVERY_DATABASE"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the PostgreSQL case of a test marked ``database_independent`` unless
    ``ICECOMMIT_TEST_EVERY_DATABASE=1``.

    A test runs on both databases where the database can change what it checks: processes
    or threads racing, a process killed mid-way, the state layer's queries, schema and
    leases. What lands in the table, how a rollback, expiry or compaction changes it, what a
    report or an error says, is decided above the database: those tests run on SQLite, and
    CI runs their PostgreSQL cases in a pass of their own (``.ci/run``)."""
    every = os.environ.get(EVERY_DATABASE) == "1"
    kept: list[pytest.Item] = []
    left_out: list[pytest.Item] = []
    for item in items:
        independent = item.get_closest_marker("database_independent") is not None
        on_rest = getattr(item, "callspec", None) is not None and item.callspec.params.get("catalog") == "rest"
        if on_rest:  # the REST case of a test that does not ask for it
            leave = item.get_closest_marker("over_rest") is None
        else:
            leave = not every and independent and item.get_closest_marker("postgres") is not None
        (left_out if leave else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


def pytest_sessionstart(session: pytest.Session) -> None:
    """Probe PostgreSQL once (a few seconds at most), installing and starting it first where
    the default local server is absent (``scripts/postgres.sh``); under CI an unreachable
    server ends the run instead of skipping its tests. The session's own database is made by
    the first test that needs it (a run of SQLite tests alone, such as each mutant's, makes
    none)."""
    global _PG_UNAVAILABLE
    _PG_UNAVAILABLE = postgres.start_where_absent()
    if _PG_UNAVAILABLE is not None and postgres.required():
        pytest.exit(
            f"{_PG_UNAVAILABLE}\nPostgreSQL is required here (CI=true or ICECOMMIT_REQUIRE_POSTGRES=1): "
            "start it or point ICECOMMIT_TEST_PG_URI at one",
            returncode=3,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _PG_DATABASE, _REST_SERVER
    if _REST_SERVER is not None:
        _REST_SERVER.stop()
        _REST_SERVER = None
    if _PG_DATABASE is not None:
        dispose_state_engines()
        _PG_DATABASE.drop()
        _PG_DATABASE = None  # a later session in this process (mutmut runs several) makes its own


def pg_uri() -> str:
    """This session's PostgreSQL database, made on first use (dropped when the session ends);
    skips the calling test where the server is absent."""
    global _PG_DATABASE
    if _PG_UNAVAILABLE is not None:
        pytest.skip(_PG_UNAVAILABLE)
    if _PG_DATABASE is None:
        database = postgres.SessionDatabase()
        database.create()  # kept only once it exists: a failed create is tried again by the next test
        _PG_DATABASE = database
    return _PG_DATABASE.uri


def rest_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The URL of this session's REST catalog server, started on first use (stopped when
    the session ends); skips the calling test where it cannot start here, or fails where
    ``ICECOMMIT_REQUIRE_REST=1``."""
    global _REST_SERVER
    if _REST_SERVER is None:
        reason = rest.missing()
        if reason is not None:
            if rest.required():
                pytest.fail(f"{reason} ({rest.REQUIRE_VAR}=1)")
            pytest.skip(reason)
        pg_uri()  # the server's catalog tables are in PostgreSQL
        _REST_SERVER = rest.RestServer(tmp_path_factory.mktemp("rest") / "warehouse").start()
    return _REST_SERVER.url


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in (
        "ICECOMMIT_CATALOG",
        "ICECOMMIT_CATALOG_URI",
        "ICECOMMIT_WAREHOUSE",
        "ICECOMMIT_METRICS_URI",
        "ICECOMMIT_STATE_URI",
    ):
        monkeypatch.delenv(name, raising=False)
    for name in (connections.ENV_ATTEMPTS, connections.ENV_SECONDS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ICECOMMIT_HOME", str(tmp_path / "home"))
    # the default number of tries, with short waits between them
    connections.set_connection_retry(connections.ConnectionRetry(first_wait_s=0.001, max_wait_s=0.01))
    yield
    connections.set_connection_retry(None)
    dispose_state_engines()


def make_catalog(backend: str, tmp_path: Path) -> SqlCatalog:
    """A fresh, isolated SQL catalog on ``backend`` with its warehouse under tmp_path."""
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir(exist_ok=True)
    name = f"t{uuid.uuid4().hex[:12]}"
    uri = f"sqlite:///{tmp_path / 'catalog.db'}" if backend == "sqlite" else pg_uri()
    return SqlCatalog(name, uri=uri, warehouse=warehouse.as_uri())


def make_rest_catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """A catalog of this session's REST server, opened the pyiceberg way through
    ``ic.connect(name, ...)``, with its state in the session's PostgreSQL database (named
    by the catalog property ``icecommit.state-uri``). Its name is new, and so are the
    namespaces the tests make in it (``<catalog name>.events``)."""
    import icecommit as ic

    name = f"t{uuid.uuid4().hex[:12]}"
    catalog = ic.connect(name, **{"type": "rest", "uri": rest_url(tmp_path_factory), "icecommit.state-uri": pg_uri()})
    assert type(catalog).__name__ == "RestCatalog", type(catalog)
    return catalog


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("rest", marks=pytest.mark.rest),
    ]
)
def catalog(
    request: pytest.FixtureRequest, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SqlCatalog]:
    """A SqlCatalog on SQLite and on PostgreSQL (each test runs on both); a test marked
    ``over_rest`` also runs on the REST catalog server (:func:`make_rest_catalog`)."""
    if request.param == "rest":
        yield make_rest_catalog(tmp_path_factory)  # type: ignore[misc]
        return
    cat = make_catalog(request.param, tmp_path)
    yield cat
    cat.engine.dispose()


@pytest.fixture
def sqlite_catalog(tmp_path: Path) -> Iterator[SqlCatalog]:
    """A SqlCatalog on SQLite only, for tests that do not touch concurrency."""
    cat = make_catalog("sqlite", tmp_path)
    yield cat
    cat.engine.dispose()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark session for the whole run: 2 cores, up to 4 attempts per task."""
    # Python workers import task hooks defined in the tests by module name.
    root = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    session = local_session("icecommit-tests", master="local[2,4]")
    yield session
    session.stop()


def unique_table(prefix: str = "t") -> str:
    """A table name no other test of this session uses (one PostgreSQL database serves the session)."""
    return f"ns_{uuid.uuid4().hex[:8]}.{prefix}"
