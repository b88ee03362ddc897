"""The suite's PostgreSQL: required under CI (an unreachable server fails the run within
seconds), one database per test session, dropped at the end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests import postgres, processes
from tests.conftest import make_catalog

ROOT = Path(__file__).resolve().parent.parent
ONE_TEST = "tests/catalog/test_connect.py::test_postgres_uri"
NOWHERE = "postgresql+psycopg://postgres@127.0.0.1:1/test"


def _pytest(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    done, elapsed, _pid = _pytest_with_pid(env, *args)
    return done, elapsed


def _pytest_with_pid(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float, int]:
    """An inner test session, its output, how long it took, and its process id (which
    names its database)."""
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "ICECOMMIT_REQUIRE_POSTGRES")}
    started = time.monotonic()
    args = ("-q", "-rs", "-p", "no:cacheprovider", *args)
    with processes.Child(processes.pytest_session, *args, env={**base, **env}) as child:
        stdout, stderr = child.communicate(timeout=300)
    code = child.returncode
    assert code is not None
    return subprocess.CompletedProcess(list(args), code, stdout, stderr), time.monotonic() - started, child.pid


def _session_databases() -> set[str]:
    engine = postgres._admin_engine()
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("select datname from pg_database where datname like 'icecommit_test_%%'")
            return {r[0] for r in rows}
    finally:
        engine.dispose()


@pytest.mark.parametrize("switch", [{"CI": "true"}, {"ICECOMMIT_REQUIRE_POSTGRES": "1"}])
def test_an_unreachable_server_fails_the_run_where_it_is_required(switch: dict[str, str]) -> None:
    done, elapsed = _pytest({**switch, "ICECOMMIT_TEST_PG_URI": NOWHERE}, ONE_TEST)
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert "PostgreSQL is not reachable at" in output and "127.0.0.1:1" in output
    assert "is required here" in output
    assert elapsed < 60, f"the probe took {elapsed:.1f}s"


def test_elsewhere_an_unreachable_server_skips_with_its_reason() -> None:
    done, _ = _pytest({"ICECOMMIT_TEST_PG_URI": NOWHERE}, ONE_TEST)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "1 passed, 1 skipped" in output
    assert "SKIPPED" in output and "PostgreSQL is not reachable at" in output


@pytest.mark.postgres
def test_each_session_has_a_database_of_its_own_and_drops_it(tmp_path: Path) -> None:
    catalog = make_catalog("postgres", tmp_path)
    url = make_url(str(catalog.properties["uri"]))
    catalog.engine.dispose()
    assert url.database is not None and url.database.startswith("icecommit_test_")
    assert url.database != make_url(postgres.ADMIN_URI).database
    assert url.database in _session_databases()
    done, _, pid = _pytest_with_pid({"CI": "true"}, ONE_TEST)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout  # its PostgreSQL case ran, in a database of its own
    # only the inner session's database is looked at: other sessions may run on this server
    after = _session_databases()
    assert not {d for d in after if d.startswith(f"icecommit_test_{pid}_")}, "the inner session left its database"
    assert url.database in after  # and ours is untouched


def test_a_database_left_by_a_killed_session_is_dropped_by_the_next(tmp_path: Path) -> None:
    reason = postgres.unreachable_reason()
    if reason is not None:
        pytest.skip(reason)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = f"icecommit_test_{dead.stdout.strip()}_deadbeef"
    engine = postgres._admin_engine()
    with engine.connect() as conn:
        conn.exec_driver_sql(f'create database "{orphan}"')
    engine.dispose()
    fresh = postgres.SessionDatabase()
    fresh.create()
    try:
        assert orphan not in _session_databases()
        assert fresh.exists()
    finally:
        fresh.drop()
    assert not fresh.exists()


class _Item:
    """What the collection hook reads of a test: its markers."""

    def __init__(self, name: str, *markers: str) -> None:
        self.name = name
        self.markers = set(markers)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


class _Config:
    def __init__(self) -> None:
        self.deselected: list[str] = []
        self.hook = self

    def pytest_deselected(self, items: list[_Item]) -> None:
        self.deselected += [item.name for item in items]


@pytest.mark.parametrize("every", [None, "0", "1"])
def test_a_database_independent_tests_postgresql_case_runs_only_when_asked(
    every: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests import conftest

    if every is None:
        monkeypatch.delenv(conftest.EVERY_DATABASE, raising=False)
    else:
        monkeypatch.setenv(conftest.EVERY_DATABASE, every)
    items = [
        _Item("contention[sqlite]"),
        _Item("contention[postgres]", "postgres"),
        _Item("report[sqlite]", "database_independent"),
        _Item("report[postgres]", "database_independent", "postgres"),
        _Item("pure", "database_independent"),
    ]
    config = _Config()
    conftest.pytest_collection_modifyitems(config, items)  # type: ignore[arg-type]
    left_out = [] if every == "1" else ["report[postgres]"]
    assert config.deselected == left_out
    assert [i.name for i in items] == [
        n for n in ("contention[sqlite]", "contention[postgres]", "report[sqlite]", "report[postgres]", "pure")
        if n not in left_out
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("uri", "started"),
    [
        ("postgresql+psycopg://postgres@127.0.0.1:5432/test", True),
        ("postgresql+psycopg://postgres@localhost/test", True),
        ("postgresql+psycopg://postgres@127.0.0.1:1/test", False),
        ("postgresql+psycopg://postgres@db.example.com:5432/test", False),
    ],
)
def test_only_the_default_local_server_is_installed_and_started_by_the_tests(uri: str, started: bool) -> None:
    assert postgres.startable(uri) is started


def _as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("scripts/postgres.sh installs and starts clusters as root (pg_ctlcluster); not root here")


def test_the_setup_script_returns_at_once_where_the_server_answers() -> None:
    _as_root()
    first = subprocess.run(["bash", str(postgres.START_SCRIPT)], capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr
    started = time.monotonic()
    second = subprocess.run(["bash", str(postgres.START_SCRIPT)], capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - started
    assert second.returncode == 0, second.stderr
    assert second.stderr == ""  # nothing to install, configure or start
    assert elapsed < 10, f"a second run took {elapsed:.1f}s"


SECOND_PORT = 5439
SECOND_CLUSTER = "icecommit_probe"


def test_a_stopped_server_is_started_by_the_test_session_that_needs_it() -> None:
    """A second cluster on another port, made by the script and stopped: an inner test
    session pointed at it (with the script's port) starts it and runs its PostgreSQL case."""
    _as_root()
    env = {"ICECOMMIT_PG_PORT": str(SECOND_PORT), "ICECOMMIT_PG_CLUSTER": SECOND_CLUSTER}
    made = subprocess.run(
        ["bash", str(postgres.START_SCRIPT)], env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    try:
        assert made.returncode == 0, made.stderr
        stopped = subprocess.run(["pg_ctlcluster", "15", SECOND_CLUSTER, "stop"], capture_output=True, text=True)
        assert stopped.returncode == 0, stopped.stderr
        uri = f"postgresql+psycopg://postgres@127.0.0.1:{SECOND_PORT}/test"
        done, _ = _pytest({**env, "CI": "true", "ICECOMMIT_TEST_PG_URI": uri}, ONE_TEST)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "2 passed" in done.stdout  # its PostgreSQL case ran on the started server
    finally:
        subprocess.run(["pg_dropcluster", "15", SECOND_CLUSTER, "--stop"], capture_output=True, check=False)
