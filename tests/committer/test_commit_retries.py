"""How a commit that loses to another is retried: the table's ``commit.retry.*`` properties
bound the attempts and their waits, SQLite's "database is locked" (the catalog's UPDATE did
not run) is retried like a conflict, and the backoff between attempts grows."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy.exc import OperationalError

import icecommit as ic
from icecommit.committer import RetryPolicy
from tests.fakes import ScriptedCatalog, concurrent_append, prepared_committer


def test_the_tables_commit_retry_properties_bound_the_retries(scripted_catalog: ScriptedCatalog) -> None:
    properties = {"commit.retry.num-retries": "1", "commit.retry.min-wait-ms": "40", "commit.retry.max-wait-ms": "50"}
    sleeps: list[float] = []
    committer = prepared_committer(scripted_catalog, properties, sleep=sleeps.append)
    name = committer.table_name
    scripted_catalog.before = [concurrent_append(scripted_catalog, name) for _ in range(3)]
    with pytest.raises(ic.CommitConflictError) as raised:
        committer.commit(1)
    assert "gave up after 2" in str(raised.value)  # 1 retry: 2 attempts, not Iceberg's default 5
    assert len(sleeps) == 1 and 0.04 <= sleeps[0] <= 0.05 + 0.04


def test_sqlite_database_is_locked_is_retried(scripted_catalog: ScriptedCatalog) -> None:
    committer = prepared_committer(
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
    committer = prepared_committer(scripted_catalog, retry_policy=policy, sleep=sleeps.append)
    scripted_catalog.before = [concurrent_append(scripted_catalog, committer.table_name) for _ in range(4)]
    assert committer.commit(1).retries == 4
    # exponential with at most min_wait of jitter: the 4th wait is at least 4 times the 1st
    assert len(sleeps) == 4 and sleeps[3] >= 4 * sleeps[0] and sleeps == sorted(sleeps)
