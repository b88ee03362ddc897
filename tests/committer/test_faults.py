"""Faults the other tests do not inject, each asserting the table, the state and the files
afterwards, on SQLite and PostgreSQL: the state database failing in prepare and after a
commit landed, the ancestry read failing after a commit whose response was lost, a full
disk while staging, two drivers preparing and committing one checkpoint at once, and a
failure in the middle of expiry's file deletion."""

from __future__ import annotations

import errno
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy.exc import OperationalError

import icecommit as ic
import icecommit.committer.staging as staging_module
from icecommit.committer import RetryPolicy
from icecommit.errors import StagingError, StateDatabaseUnavailableError
from icecommit.maintenance import apply_expire, find_orphans, plan_expire
from icecommit.state import CheckpointStore
from icecommit.state.database import shown_uri
from tests.fakes import ScriptedCatalog
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

FAST = RetryPolicy(max_attempts=5, max_seconds=30, min_wait_s=0.001, max_wait_s=0.01)


def _name(catalog: SqlCatalog) -> str:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    return name


def _results(committer: ic.GlobalCommitter, checkpoint_id: int) -> list[ic.WriteResult]:
    rows = events(checkpoint_id * 100, checkpoint_id * 100 + 20)
    return [write_arrow(committer.load_table(), rows, job_id=committer.job_id, checkpoint_id=checkpoint_id)]


def _ids(catalog: SqlCatalog, name: str) -> Counter[int]:
    return Counter(catalog.load_table(name).scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def _expected(*checkpoints: int) -> Counter[int]:
    return Counter(i for c in checkpoints for i in range(c * 100, c * 100 + 20))


def _files(catalog: SqlCatalog) -> set[Path]:
    root = Path(str(catalog.properties["warehouse"]).removeprefix("file://"))
    return {p for p in root.rglob("*") if p.is_file()}


def _fail_once(monkeypatch: pytest.MonkeyPatch, owner: Any, method: str, error: BaseException) -> None:
    original = getattr(owner, method)
    calls = {"n": 0}

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise error
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, method, failing)


def _one_prepared(catalog: SqlCatalog) -> tuple[str, ic.GlobalCommitter]:
    """A table with checkpoint 1 of job A prepared (and the table claimed), committer A."""
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", retry_policy=FAST)
    committer.prepare(1, _results(committer, 1))
    return name, committer


def _always(error: BaseException) -> Any:
    def failing(*_args: Any, **_kwargs: Any) -> Any:
        raise error

    return failing


def _db_error() -> OperationalError:
    return OperationalError("INSERT ...", {}, Exception("server closed the connection unexpectedly"))


def test_the_state_database_failing_in_prepare_records_nothing(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", retry_policy=FAST)
    results = _results(committer, 1)
    _fail_once(monkeypatch, CheckpointStore, "insert_prepared", _db_error())
    with pytest.raises(StateDatabaseUnavailableError) as raised:
        committer.prepare(1, results)
    assert isinstance(raised.value.__cause__, OperationalError) and "prepare it again" in str(raised.value)
    assert committer.store.list(name) == [] and catalog.load_table(name).current_snapshot() is None
    committer.prepare(1, results)  # the same results, once the database is back
    assert committer.commit(1).status == "committed"
    assert _ids(catalog, name) == _expected(1)


def test_the_state_database_failing_after_the_commit_landed(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", retry_policy=FAST)
    committer.prepare(1, _results(committer, 1))
    _fail_once(monkeypatch, CheckpointStore, "mark_committed", _db_error())
    with pytest.raises(StateDatabaseUnavailableError) as raised:
        committer.commit(1)
    [snapshot] = catalog.load_table(name).metadata.snapshots  # it landed, once
    assert raised.value.uri == shown_uri(committer.store.engine)
    assert raised.value.reason.endswith(
        f"checkpoint 1 is in the table (snapshot {snapshot.snapshot_id}) but not recorded: "
        "recover() records it, and nothing is committed twice"
    )
    assert committer.store.get("A", name, 1).status == "prepared"  # type: ignore[union-attr]
    [recovered] = ic.GlobalCommitter(catalog, name, job_id="A").recover()
    assert (recovered.status, recovered.snapshot_id) == ("already-committed", snapshot.snapshot_id)
    assert committer.store.get("A", name, 1).status == "committed"  # type: ignore[union-attr]
    assert len(catalog.load_table(name).metadata.snapshots) == 1 and _ids(catalog, name) == _expected(1)
    assert ic.reconcile(catalog, name, job_id="A").ok


def test_the_ancestry_read_failing_after_a_lost_response(
    scripted_catalog: ScriptedCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted = scripted_catalog
    name, committer = _one_prepared(scripted)
    files = _files(scripted)

    def lose_the_response() -> None:
        # the catalog accepted the commit; the reply is lost, and the catalog stays unreachable
        monkeypatch.setattr(scripted, "load_table", _always(ConnectionError("catalog unreachable")))
        raise ConnectionError("connection reset after the commit was sent")

    scripted.after.append(lose_the_response)
    with pytest.raises(ic.CommitStateUnknownError):
        committer.commit(1)
    monkeypatch.undo()
    assert _files(scripted) >= files  # nothing deleted on an unknown outcome
    assert committer.store.get("A", name, 1).counters.missing == 0  # type: ignore[union-attr]
    [recovered] = ic.GlobalCommitter(scripted, name, job_id="A").recover()
    assert recovered.status == "already-committed"
    assert len(scripted.load_table(name).metadata.snapshots) == 1 and _ids(scripted, name) == _expected(1)


def test_a_lost_response_and_a_failed_read_after_it_are_retried_and_found(
    scripted_catalog: ScriptedCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted = scripted_catalog
    name, committer = _one_prepared(scripted)

    def lose_the_response() -> None:
        # the catalog accepted the commit; the reply is lost, and so is the next read
        _fail_once(monkeypatch, scripted, "load_table", ConnectionError("catalog unreachable"))
        raise ConnectionError("connection reset after the commit was sent")

    scripted.after.append(lose_the_response)
    result = committer.commit(1)  # the read is tried again, and the table shows the commit
    [snapshot] = scripted.load_table(name).metadata.snapshots
    assert (result.status, result.snapshot_id) == ("committed", snapshot.snapshot_id)
    state = committer.store.get("A", name, 1)
    assert state is not None and (state.status, state.unknown_outcomes) == ("committed", 1)
    assert _ids(scripted, name) == _expected(1)


def test_attempts_whose_connection_failed_and_did_not_land_are_retried_then_unknown(
    scripted_catalog: ScriptedCatalog,
) -> None:
    scripted = scripted_catalog
    name, committer = _one_prepared(scripted)

    def refused() -> None:  # the connection drops before the catalog did anything
        raise ConnectionError("connection reset before the commit ran")

    scripted.before.extend([refused] * FAST.max_attempts)
    claimed = scripted.calls  # the table's claim of its state database, at prepare
    with pytest.raises(ic.CommitStateUnknownError) as raised:
        committer.commit(1)
    assert scripted.calls - claimed == FAST.max_attempts  # each retried once the table showed it had not landed
    assert isinstance(raised.value.__cause__, ConnectionError)
    state = committer.store.get("A", name, 1)
    assert state is not None and (state.status, state.unknown_outcomes) == ("prepared", FAST.max_attempts)
    assert scripted.load_table(name).metadata.snapshots == []
    [recovered] = ic.GlobalCommitter(scripted, name, job_id="A").recover()
    assert recovered.status == "committed" and _ids(scripted, name) == _expected(1)


def test_one_failed_attempt_is_retried_and_lands_once(scripted_catalog: ScriptedCatalog) -> None:
    scripted = scripted_catalog
    name, committer = _one_prepared(scripted)

    def refused() -> None:
        raise ConnectionError("connection reset before the commit ran")

    scripted.before.append(refused)
    claimed = scripted.calls
    result = committer.commit(1)
    assert (result.status, result.attempts, scripted.calls - claimed) == ("committed", 2, 2)
    assert len(scripted.load_table(name).metadata.snapshots) == 1 and _ids(scripted, name) == _expected(1)


def test_a_full_disk_while_staging_records_nothing(catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", retry_policy=FAST)
    results = _results(committer, 1)
    _fail_once(monkeypatch, staging_module, "write_staged_manifest", OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(StagingError) as raised:
        committer.prepare(1, results)
    assert raised.value.checkpoint_id == 1 and "No space left" in str(raised.value)
    assert isinstance(raised.value, ic.IcecommitError) and isinstance(raised.value.__cause__, OSError)
    assert committer.store.list(name) == [] and catalog.load_table(name).current_snapshot() is None
    committer.prepare(1, results)
    assert committer.commit(1).status == "committed" and _ids(catalog, name) == _expected(1)


def test_two_drivers_preparing_and_committing_one_checkpoint_at_once(catalog: SqlCatalog) -> None:
    name = _name(catalog)
    drivers = [ic.GlobalCommitter(catalog, name, job_id="A", retry_policy=FAST) for _ in range(2)]
    results = _results(drivers[0], 1)
    start = threading.Barrier(2)
    outcomes: list[object] = [None, None]

    def run(i: int) -> None:
        try:
            start.wait()
            drivers[i].prepare(1, results)
            outcomes[i] = drivers[i].commit(1).status
        except Exception as e:  # reported below, with which driver raised it
            outcomes[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(map(str, outcomes)) == ["already-committed", "committed"], outcomes
    assert len(catalog.load_table(name).metadata.snapshots) == 1 and _ids(catalog, name) == _expected(1)
    assert [s.status for s in drivers[0].store.list(name)] == ["committed"]


def test_a_failure_in_the_middle_of_expirys_file_deletion(catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch) -> None:
    name = _name(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", retry_policy=FAST)
    for c in (1, 2, 3):
        committer.prepare(c, _results(committer, c))
        committer.commit(c)
    catalog.load_table(name).delete("id < 200")  # makes files that only old snapshots reference
    plan = plan_expire(catalog, name, older_than=timedelta(0), retain_last=1)
    assert len(plan.files_to_delete) >= 2
    table = catalog.load_table(name)
    io_type = type(table.io)
    original = io_type.delete
    deleted: list[str] = []

    def dies_on_the_second(self: Any, location: Any) -> None:
        if len(deleted) == 1:
            raise OSError(errno.EIO, "I/O error")
        deleted.append(str(location))
        original(self, location)

    monkeypatch.setattr(io_type, "delete", dies_on_the_second)
    with pytest.raises(OSError):
        apply_expire(catalog, plan)
    monkeypatch.undo()
    assert _ids(catalog, name) == _expected(2, 3)  # the table is whole: only unreferenced files went
    # what was left behind is an orphan now, and the sweep finds exactly those files
    left = {Path(p.removeprefix("file://")) for p in plan.files_to_delete} - {
        Path(p.removeprefix("file://")) for p in deleted
    }
    sweep = find_orphans(catalog, name, older_than=timedelta(0), delete=True)
    assert {Path(o.path) for o in sweep.orphans} >= {p for p in left if p.exists()} or not left
    assert _ids(catalog, name) == _expected(2, 3)
    assert not any(p.exists() for p in left)
