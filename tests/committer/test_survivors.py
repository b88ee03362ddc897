"""Tests that kill the one-line changes the suite once let through (the regression-catching
issue): the table's commit.retry.* properties, SQLite's "database is locked" retried, a
backoff that grows, unknown outcomes counted, an empty checkpoint recorded as committed,
and exit code 3 for an unknown outcome at the command line."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy.exc import OperationalError

import icecommit as ic
from icecommit.committer import RetryPolicy
from tests.cli.runner import invoke
from tests.committer.test_committer import ScriptedCatalog, _concurrent_append
from tests.helpers import EVENTS_SCHEMA, events, write_arrow


def _prepared(catalog: SqlCatalog, properties: dict[str, str] | None = None, **kwargs: object) -> ic.GlobalCommitter:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"], properties=properties)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", **kwargs)  # type: ignore[arg-type]
    committer.prepare(1, [write_arrow(committer.load_table(), events(0, 20), job_id="A", checkpoint_id=1)])
    return committer


def test_the_tables_commit_retry_properties_bound_the_retries(scripted_catalog: ScriptedCatalog) -> None:
    properties = {"commit.retry.num-retries": "1", "commit.retry.min-wait-ms": "40", "commit.retry.max-wait-ms": "50"}
    sleeps: list[float] = []
    committer = _prepared(scripted_catalog, properties, sleep=sleeps.append)
    name = committer.table_name
    scripted_catalog.before = [_concurrent_append(scripted_catalog, name) for _ in range(3)]
    with pytest.raises(ic.CommitConflictError) as raised:
        committer.commit(1)
    assert "gave up after 2" in str(raised.value)  # 1 retry: 2 attempts, not Iceberg's default 5
    assert len(sleeps) == 1 and 0.04 <= sleeps[0] <= 0.05 + 0.04


def test_sqlite_database_is_locked_is_retried(scripted_catalog: ScriptedCatalog) -> None:
    committer = _prepared(
        scripted_catalog, retry_policy=RetryPolicy(max_attempts=3, min_wait_s=0.001, max_wait_s=0.002)
    )

    def locked() -> None:  # the catalog's UPDATE did not run: another process holds the write lock
        raise OperationalError("UPDATE iceberg_tables ...", {}, sqlite3.OperationalError("database is locked"))

    scripted_catalog.before = [locked]
    result = committer.commit(1)
    assert (result.status, result.attempts, result.retries) == ("committed", 2, 1)
    assert committer.store.get("A", committer.table_name, 1).unknown_outcomes == 0  # type: ignore[union-attr]
    assert len(scripted_catalog.load_table(committer.table_name).metadata.snapshots) == 1


def test_the_backoff_grows(scripted_catalog: ScriptedCatalog) -> None:
    sleeps: list[float] = []
    policy = RetryPolicy(max_attempts=5, min_wait_s=0.01, max_wait_s=10)
    committer = _prepared(scripted_catalog, retry_policy=policy, sleep=sleeps.append)
    scripted_catalog.before = [_concurrent_append(scripted_catalog, committer.table_name) for _ in range(4)]
    assert committer.commit(1).retries == 4
    # exponential with at most min_wait of jitter: the 4th wait is at least 4 times the 1st
    assert len(sleeps) == 4 and sleeps[3] >= 4 * sleeps[0] and sleeps == sorted(sleeps)


def test_an_unknown_outcome_is_counted(scripted_catalog: ScriptedCatalog) -> None:
    committer = _prepared(
        scripted_catalog, retry_policy=RetryPolicy(max_attempts=3, min_wait_s=0.001, max_wait_s=0.002)
    )

    def lost() -> None:
        raise ConnectionError("reply lost after the catalog accepted the commit")

    scripted_catalog.after = [lost]
    assert committer.commit(1).status == "committed"  # the ancestry shows it landed
    state = committer.store.get("A", committer.table_name, 1)
    assert state is not None and state.unknown_outcomes == 1
    assert len(scripted_catalog.load_table(committer.table_name).metadata.snapshots) == 1


def test_an_empty_checkpoint_is_recorded_committed(catalog: SqlCatalog) -> None:
    name = f"{catalog.name}.events"
    table = ic.create_table(catalog, name, EVENTS_SCHEMA)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, [write_arrow(table, events(0, 0), job_id="A", checkpoint_id=1)])
    assert committer.commit(1).status == "empty"
    state = committer.store.get("A", name, 1)
    assert state is not None and (state.status, state.snapshot_id) == ("committed", None)
    assert committer.recover() == []  # nothing left to do for it


def test_an_unknown_outcome_exits_3_at_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home))
    main = sys.modules["icecommit.cli.main"]

    def unknown(*_args: object, **_kwargs: object) -> Callable[[], None]:
        raise ic.CommitStateUnknownError("ns.events", 7, ConnectionError("reply lost"))

    monkeypatch.setattr(main, "list_snapshots", unknown)
    result = invoke(home, "snapshots", "ns.events")
    assert result.returncode == 3 and "checkpoint 7" in result.stderr and "Traceback" not in result.stderr
