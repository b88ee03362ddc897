"""Errors at the command line, from the user's side: every failure to open the catalog or
the table is one line and exit 2, nothing is created that was only to be read, no traceback
without --debug, and a report that cannot be saved fails before the run is recorded."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import icecommit as ic
from tests.cli.runner import invoke
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

TABLE = "ns.events"
#: every command that reads or changes an existing table (none of them may create a catalog)
READERS = [
    ["snapshots", TABLE],
    ["checkpoints", TABLE],
    ["partitions", TABLE],
    ["reconcile", TABLE],
    ["expire", TABLE],
    ["orphans", TABLE],
    ["rollback", TABLE, "--to-checkpoint", "1", "--job", "job", "--yes"],
    ["abandon", TABLE, "--job", "job", "--checkpoint", "1", "--reason", "x"],
]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A catalog with one committed checkpoint of job 'job' (the embedded default under home)."""
    home = tmp_path / "home"
    catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home), create=True)
    table = ic.create_table(catalog, TABLE, EVENTS_SCHEMA, partition_by=["event"])
    committer = ic.GlobalCommitter(catalog, table, job_id="job")
    committer.prepare(1, [write_arrow(committer.load_table(), events(0, 20), job_id="job", checkpoint_id=1)])
    committer.commit(1)
    catalog.engine.dispose()  # type: ignore[attr-defined]
    return home


def _one_line(result: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The one line of a refused command, which exits ``code`` (2 usage or input, 4 an
    environment failure such as a catalog that cannot be opened)."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stderr.strip().count("\n") == 0, result.stderr
    return result.stderr


@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
def test_a_missing_catalog_is_named_and_not_created(tmp_path: Path, command: list[str]) -> None:
    home = tmp_path / "nowhere"
    message = _one_line(invoke(home, *command), code=4)
    assert f"sqlite:///{home / 'catalog.db'}" in message and "does not exist (nothing was created)" in message
    assert not home.exists()  # not the folder, not the database file


def test_a_database_without_a_catalog_is_refused_and_left_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    message = _one_line(invoke(tmp_path, "--uri", f"sqlite:///{empty}", "snapshots", TABLE), code=4)
    assert "holds no Iceberg catalog" in message
    with sqlite3.connect(empty) as conn:
        assert conn.execute("select count(*) from sqlite_master").fetchone() == (0,)


def test_an_unreachable_catalog_server_is_named_without_its_password(tmp_path: Path) -> None:
    uri = "postgresql+psycopg://alice:s3cret@127.0.0.1:9/lake?connect_timeout=2"
    message = _one_line(invoke(tmp_path, "--uri", uri, "checkpoints", TABLE), code=4)
    assert "127.0.0.1:9/lake" in message and "cannot be opened" in message
    assert "s3cret" not in message and "***" in message


def test_an_unknown_table_and_an_unknown_namespace_are_one_line(home: Path) -> None:
    assert "ns.missing" in _one_line(invoke(home, "snapshots", "ns.missing"))
    assert "nope" in _one_line(invoke(home, "checkpoints", "nope.events"))


def test_reconcile_for_a_job_with_no_checkpoints_names_the_known_jobs(home: Path) -> None:
    message = _one_line(invoke(home, "reconcile", TABLE, "--job", "jbo"))
    assert "no checkpoints for job 'jbo'" in message and "known jobs: job" in message
    with pytest.raises(ic.IcecommitError) as raised:  # the API says the same, with the facts
        catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home), create=False)
        ic.reconcile(catalog, TABLE, job_id="jbo")
    assert (raised.value.job_id, raised.value.known_jobs) == ("jbo", ["job"])  # type: ignore[attr-defined]


def _runs(home: Path) -> int:
    with sqlite3.connect(home / "catalog.db") as conn:
        return int(conn.execute("select count(*) from icecommit_reconcile_runs").fetchone()[0])


def test_a_report_that_cannot_be_written_fails_before_the_run_is_recorded(home: Path, tmp_path: Path) -> None:
    assert invoke(home, "reconcile", TABLE).returncode == 0
    before = _runs(home)
    missing = tmp_path / "no-such-folder" / "r.md"
    assert str(missing) in _one_line(invoke(home, "reconcile", TABLE, "--out", str(missing)))
    folder = invoke(home, "reconcile", TABLE, "--out", str(tmp_path))  # click's own usage error
    assert folder.returncode == 2 and "is a directory" in folder.stderr and "Traceback" not in folder.stderr
    assert _runs(home) == before
    good = tmp_path / "r.md"
    assert invoke(home, "reconcile", TABLE, "--out", str(good)).returncode == 0 and good.read_text()
    assert _runs(home) == before + 1


def test_an_unexpected_error_is_one_line_and_exit_1_and_debug_shows_where(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main = sys.modules["icecommit.cli.main"]

    def broken(*_args: object, **_kwargs: object) -> object:
        raise RuntimeError("the disk said no")

    monkeypatch.setattr(main, "list_snapshots", broken)
    result = invoke(home, "snapshots", TABLE)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "unexpected RuntimeError: the disk said no (--debug shows where)" in result.stderr
    debug = invoke(home, "--debug", "snapshots", TABLE)
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "the disk said no" in debug.stderr


def test_a_real_process_prints_one_line_and_no_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "ICECOMMIT_HOME": str(tmp_path / "nowhere")}
    done = subprocess.run(
        [sys.executable, "-m", "icecommit.cli", "--uri", "postgresql+psycopg://u:pw@127.0.0.1:9/x?connect_timeout=2",
         "snapshots", TABLE], env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 4 and done.stdout == "" and "Traceback" not in done.stderr  # environment
    assert done.stderr.strip().count("\n") == 0 and "127.0.0.1:9/x" in done.stderr and "pw" not in done.stderr
