"""Which catalog a command opens, from the user's side: a catalog named by configuration
that does not exist is not created, a name and a URI that disagree are refused, a URI that
is not one is bad input, an unconfigured name says where icecommit looked; a database driver
that is not installed says what to install; the tries before a failure stay out of the one
line the command prints."""

from __future__ import annotations

import logging
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text

import icecommit as ic
from icecommit.core import connections
from icecommit.errors import StateDatabaseError
from icecommit.state.database import state_engine
from tests import postgres
from tests.cli.runner import invoke
from tests.helpers import EVENTS_SCHEMA

TABLE = "ns.events"


def _one_line(result: object, code: int) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)  # type: ignore[attr-defined]
    stderr = str(result.stderr)  # type: ignore[attr-defined]
    assert "Traceback" not in stderr and stderr.strip().count("\n") == 0, stderr
    return stderr


@pytest.fixture
def configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ~/.pyiceberg.yaml (through PYICEBERG_HOME) naming a SQLite catalog 'ghost' whose
    database does not exist, in a folder that does."""
    folder = tmp_path / "ghost"
    folder.mkdir()
    (tmp_path / ".pyiceberg.yaml").write_text(
        "catalog:\n"
        "  ghost:\n"
        "    type: sql\n"
        f"    uri: sqlite:///{folder / 'catalog.db'}\n"
        f"    warehouse: file://{folder / 'warehouse'}\n"
    )
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))
    return folder


@pytest.mark.parametrize("command", [["tables"], ["checkpoints", TABLE], ["reconcile", TABLE]], ids=lambda c: c[0])
def test_a_configured_catalog_that_does_not_exist_is_not_created(
    configured: Path, tmp_path: Path, command: list[str]
) -> None:
    message = _one_line(invoke(tmp_path / "home", "--catalog", "ghost", *command), 4)
    assert str(configured / "catalog.db") in message and "does not exist (nothing was created)" in message
    assert list(configured.iterdir()) == []  # not the database file, not the warehouse


def test_a_configured_catalog_that_exists_is_opened_by_name(configured: Path, tmp_path: Path) -> None:
    catalog = ic.connect("ghost", uri=f"sqlite:///{configured / 'catalog.db'}", warehouse=str(configured / "warehouse"))
    ic.create_table(catalog, TABLE, EVENTS_SCHEMA)
    catalog.engine.dispose()  # type: ignore[attr-defined]
    done = invoke(tmp_path / "home", "--catalog", "ghost", "tables")
    assert done.returncode == 0, done.stderr
    assert TABLE in done.stdout


@pytest.mark.postgres
def test_a_configured_postgresql_catalog_whose_database_does_not_exist_is_not_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if (reason := postgres.unreachable_reason()) is not None:
        pytest.skip(reason)
    name = f"icecommit_absent_{uuid.uuid4().hex[:8]}"
    uri = f"postgresql+psycopg://postgres@127.0.0.1:{postgres.STARTED_PORT}/{name}"
    monkeypatch.setenv("PYICEBERG_CATALOG__PGHOST__URI", uri)
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))
    message = _one_line(invoke(tmp_path / "home", "--catalog", "pghost", "tables"), 4)
    assert name in message
    engine = postgres._admin_engine()
    try:
        with engine.connect() as conn:
            assert conn.execute(text("select 1 from pg_database where datname = :n"), {"n": name}).first() is None
    finally:
        engine.dispose()


def test_a_name_and_a_uri_that_disagree_are_refused_by_name(configured: Path, tmp_path: Path) -> None:
    other = f"sqlite:///{tmp_path / 'other.db'}"
    message = _one_line(invoke(tmp_path / "home", "--catalog", "ghost", "--uri", other, "tables"), 2)
    assert other in message and str(configured / "catalog.db") in message and "ghost" in message
    assert not (tmp_path / "other.db").exists()


@pytest.mark.parametrize("uri", ["not a uri", "catalog.db", "://nothing"])
def test_a_uri_that_is_not_one_is_bad_input(tmp_path: Path, uri: str) -> None:
    message = _one_line(invoke(tmp_path / "home", "--uri", uri, "tables"), 2)
    assert "uri=" in message and "a database URL" in message
    assert not (tmp_path / "home").exists()


def test_an_unconfigured_name_says_where_icecommit_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))
    message = _one_line(invoke(tmp_path / "home", "--catalog", "prod", "tables"), 4)
    assert "catalog prod: is not configured" in message
    assert str(tmp_path / ".pyiceberg.yaml") in message and "PYICEBERG_CATALOG__PROD__*" in message
    assert "please provide using --uri" not in message


def test_a_missing_postgresql_driver_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if icecommit[postgres] was not installed
    uri = f"postgresql+psycopg://postgres@127.0.0.1:9/{uuid.uuid4().hex}"
    with pytest.raises(StateDatabaseError) as raised:
        state_engine(uri)
    assert "pip install 'icecommit[postgres]'" in str(raised.value)
    assert "once the database is reachable" not in str(raised.value)
    message = _one_line(invoke(tmp_path / "home", "--uri", uri, "tables"), 4)
    assert "pip install 'icecommit[postgres]'" in message


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home), create=True)
    table = ic.create_table(catalog, TABLE, EVENTS_SCHEMA)
    committer = ic.GlobalCommitter(catalog, table, job_id="ingest")
    committer.prepare(1, [])
    catalog.engine.dispose()  # type: ignore[attr-defined]
    return home


def test_an_unknown_namespace_is_named_with_the_ones_there_are(home: Path) -> None:
    message = _one_line(invoke(home, "tables", "nosuchns"), 2)
    assert "namespace='nosuchns'" in message and "ns" in message.split("expected", 1)[1]
    assert "('nosuchns',)" not in message


def test_an_unknown_job_says_it_has_no_checkpoints_there_and_names_the_jobs_that_do(home: Path) -> None:
    message = _one_line(invoke(home, "checkpoints", TABLE, "--job", "nosuchjob"), 2)
    assert "'nosuchjob'" in message and TABLE in message and "ingest" in message
    done = invoke(home, "checkpoints", TABLE, "--job", "ingest")
    assert done.returncode == 0 and "ingest" in done.stdout


def test_retries_before_a_failure_are_debug_on_the_command_line_and_warnings_in_a_job(
    home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    unreachable = "postgresql+psycopg://postgres@127.0.0.1:9/state?connect_timeout=1"
    monkeypatch.setenv("ICECOMMIT_STATE_URI", unreachable)
    monkeypatch.setenv(connections.ENV_ATTEMPTS, "2")
    monkeypatch.setattr(connections, "_policy", None)
    try:
        message = _one_line(invoke(home, "checkpoints", TABLE), 4)  # the retry is not a second line
        assert "127.0.0.1:9/state" in message
    finally:
        connections.log_retries_at(logging.WARNING)  # the command line set debug for this process
    calls = iter([ConnectionError("reset"), "done"])

    def flaky(_tries: int) -> str:
        outcome = next(calls)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    with caplog.at_level(logging.DEBUG, logger="icecommit.core.connections"):
        assert connections.retry_transient(flaky, what="state database", sleep=lambda _: None) == "done"
    assert [r.levelno for r in caplog.records if "retrying" in r.getMessage()] == [logging.WARNING]
