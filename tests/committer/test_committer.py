"""GlobalCommitter on the real SqlCatalog (SQLite and PostgreSQL), without Spark."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table

import icecommit as ic
from icecommit.committer import RetryPolicy, committed_checkpoints
from icecommit.core import ancestry
from icecommit.core.datafiles import WriteResult
from icecommit.core.decision import Action
from icecommit.errors import CheckpointReusedError, DataFileMissingError
from icecommit.state.database import state_identity
from icecommit.state.identity import STATE_ID_PROPERTY, state_properties
from tests.fakes import ScriptedCatalog, concurrent_append
from tests.helpers import EVENTS_SCHEMA, assert_same_rows, events, write_arrow

FAST = RetryPolicy(max_attempts=5, max_seconds=60, min_wait_s=0.01, max_wait_s=0.1)


def _table(catalog: SqlCatalog, partition_by: list[str] | None = None) -> Table:
    return ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA, partition_by=partition_by or ["event"])


def _sorted(data: pa.Table) -> pa.Table:
    return data.sort_by("id")


def _rows(catalog: SqlCatalog, table: Table) -> pa.Table:
    return _sorted(catalog.load_table(".".join(table.name())).scan().to_arrow())


@pytest.mark.database_independent
def test_prepare_and_commit_make_one_snapshot_with_the_checkpoint_in_its_summary(catalog: SqlCatalog) -> None:
    table = _table(catalog)
    committer = ic.GlobalCommitter(catalog, table, job_id="ingest", retry_policy=FAST)
    results = [
        write_arrow(table, events(0, 600), job_id="ingest", checkpoint_id=7, task_id=0),
        write_arrow(table, events(600, 1000), job_id="ingest", checkpoint_id=7, task_id=1),
    ]
    state = committer.prepare(7, results)
    assert state.status == "prepared" and state.records == 1000
    assert catalog.load_table(".".join(table.name())).current_snapshot() is None
    result = committer.commit(7)
    assert result.committed and result.records == 1000 and result.attempts == 1
    loaded = catalog.load_table(".".join(table.name()))
    summary = loaded.current_snapshot().summary
    assert summary["icecommit.job-id"] == "ingest"
    assert summary["icecommit.checkpoint-id"] == "7"
    assert summary["icecommit.records"] == "1000"
    assert result.snapshot_id == loaded.current_snapshot().snapshot_id
    assert_same_rows(_rows(catalog, table), events(0, 1000))
    assert committer.last_committed_checkpoint() == 7
    assert committer.store.get("ingest", committer.table_name, 7).status == "committed"


@pytest.mark.database_independent
def test_the_steps_pass_their_fault_points_in_order_once_each(catalog: SqlCatalog) -> None:
    """The points a crash is injected at (the crash tests and the soak kill processes there)
    are reached by name, in order, once per checkpoint: a point renamed or skipped would
    leave its crash untested. A prepare repeated with the same files stages nothing and
    passes no point."""
    table = _table(catalog)
    seen: list[tuple[str, int]] = []
    committer = ic.GlobalCommitter(
        catalog, table, job_id="ingest", retry_policy=FAST, fault=lambda point, cp: seen.append((point, cp))
    )
    results = [write_arrow(table, events(0, 10), job_id="ingest", checkpoint_id=3)]
    committer.prepare(3, results)
    assert seen == [("after-stage", 3), ("after-prepare", 3)]
    committer.prepare(3, results)
    assert seen == [("after-stage", 3), ("after-prepare", 3)]
    committer.commit(3)
    assert seen == [("after-stage", 3), ("after-prepare", 3), ("before-commit-attempt", 3), ("after-commit", 3)]


@pytest.mark.database_independent
def test_committing_twice_is_a_no_op(catalog: SqlCatalog) -> None:
    table = _table(catalog)
    committer = ic.GlobalCommitter(catalog, table, job_id="ingest", retry_policy=FAST)
    committer.prepare(1, [write_arrow(table, events(0, 100), job_id="ingest", checkpoint_id=1)])
    first = committer.commit(1)
    again = committer.commit(1)
    assert first.committed and not again.committed
    assert again.status == "already-committed" and again.snapshot_id == first.snapshot_id
    # a second committer (a restarted driver) with no memory of the first agrees
    restarted = ic.GlobalCommitter(catalog, table, job_id="ingest", retry_policy=FAST)
    assert restarted.commit(1).status == "already-committed"
    assert len(catalog.load_table(".".join(table.name())).metadata.snapshots) == 1
    assert _rows(catalog, table).num_rows == 100


@pytest.mark.database_independent
def test_prepare_twice_with_same_files_is_a_no_op_and_with_other_files_an_error(catalog: SqlCatalog) -> None:
    table = _table(catalog)
    committer = ic.GlobalCommitter(catalog, table, job_id="ingest", retry_policy=FAST)
    results = [write_arrow(table, events(0, 100), job_id="ingest", checkpoint_id=1)]
    first = committer.prepare(1, results)
    assert committer.prepare(1, results) == first
    other = [write_arrow(table, events(0, 100), job_id="ingest", checkpoint_id=1)]
    with pytest.raises(CheckpointReusedError, match="already prepared with different data files"):
        committer.prepare(1, other)
    committer.commit(1)
    assert _rows(catalog, table).num_rows == 100


@pytest.mark.database_independent
def test_commit_commits_every_prepared_checkpoint_up_to_n_in_order(catalog: SqlCatalog) -> None:
    table = _table(catalog)
    committer = ic.GlobalCommitter(catalog, table, job_id="ingest", retry_policy=FAST)
    for checkpoint_id in (1, 2, 3, 4):
        data = events(checkpoint_id * 100, checkpoint_id * 100 + 50)
        committer.prepare(checkpoint_id, [write_arrow(table, data, job_id="ingest", checkpoint_id=checkpoint_id)])
    assert committer.commit(3).committed
    loaded = catalog.load_table(".".join(table.name()))
    assert [c.checkpoint_id for c in committed_checkpoints(loaded.metadata, job_id="ingest")] == [3, 2, 1]
    assert committer.store.get("ingest", committer.table_name, 4).status == "prepared"
    assert committer.commit(2).status == "already-committed"
    assert [r.checkpoint_id for r in committer.recover()] == [4]
    assert committer.recover() == []
    assert _rows(catalog, table).num_rows == 200


@pytest.mark.database_independent
def test_commit_of_an_unknown_checkpoint_is_an_error(catalog: SqlCatalog) -> None:
    committer = ic.GlobalCommitter(catalog, _table(catalog), job_id="ingest")
    with pytest.raises(ic.CheckpointNotFoundError, match="no checkpoint 5"):
        committer.commit(5)


@pytest.mark.database_independent
def test_empty_checkpoint_commits_no_snapshot(catalog: SqlCatalog) -> None:
    table = _table(catalog)
    committer = ic.GlobalCommitter(catalog, table, job_id="ingest")
    empty = write_arrow(table, events(0, 0), job_id="ingest", checkpoint_id=1)
    assert empty.data_files == ()
    committer.prepare(1, [empty])
    result = committer.commit(1)
    assert result.status == "empty" and result.snapshot_id is None and not result.committed
    assert catalog.load_table(".".join(table.name())).current_snapshot() is None
    assert committer.commit(1).status == "empty"


def _tampered(result: WriteResult, **changes: Any) -> WriteResult:
    return dataclasses.replace(result, **changes)


@pytest.mark.parametrize(
    ("tamper", "error", "message"),
    [
        (
            lambda r: _tampered(r, records=r.records + 1),
            ic.ValidationError,
            "reported 101 records but its data files hold 100",
        ),
        (
            lambda r: _tampered(r, source_records=r.source_records + 5),
            ic.ValidationError,
            "received 105 records but wrote 100",
        ),
        (lambda r: _tampered(r, job_id="other"), ic.ValidationError, "reported job 'other'"),
        (lambda r: _tampered(r, checkpoint_id=2), ic.ValidationError, "checkpoint 2, expected"),
        (
            lambda r: _tampered(r, data_files=(dataclasses.replace(r.data_files[0], file_size_in_bytes=3),)),
            DataFileMissingError,
            "has .* bytes on storage, 3 recorded",
        ),
        (
            lambda r: _tampered(r, data_files=(dataclasses.replace(r.data_files[0], path=r.data_files[0].path + "x"),)),
            DataFileMissingError,
            "is missing from storage",
        ),
        (
            lambda r: _tampered(r, data_files=(dataclasses.replace(r.data_files[0], spec_id=5),)),
            ic.ValidationError,
            "partition spec 5",
        ),
    ],
)
def test_bad_results_are_refused_and_change_nothing(
    catalog: SqlCatalog, tamper: Callable[[WriteResult], WriteResult], error: type[Exception], message: str
) -> None:
    table = ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA)
    committer = ic.GlobalCommitter(catalog, table, job_id="ingest")
    good = write_arrow(table, events(0, 100), job_id="ingest", checkpoint_id=1)
    assert len(good.data_files) == 1
    with pytest.raises(error, match=message):
        committer.prepare(1, [tamper(good)])
    assert committer.store.get("ingest", committer.table_name, 1) is None
    assert catalog.load_table(".".join(table.name())).current_snapshot() is None


@pytest.mark.database_independent
def test_the_same_task_reported_twice_is_refused(catalog: SqlCatalog) -> None:
    table = _table(catalog)
    committer = ic.GlobalCommitter(catalog, table, job_id="ingest")
    a = write_arrow(table, events(0, 10), job_id="ingest", checkpoint_id=1, task_id=3, attempt=0)
    b = write_arrow(table, events(0, 10), job_id="ingest", checkpoint_id=1, task_id=3, attempt=1)
    with pytest.raises(ic.ValidationError, match="task 3 reported twice"):
        committer.prepare(1, [a, b])


@pytest.mark.database_independent
def test_nulls_in_a_required_column_name_the_column(catalog: SqlCatalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string(), nullable=False)])
    table = ic.create_table(catalog, f"{catalog.name}.req", schema)
    committer = ic.GlobalCommitter(catalog, table, job_id="ingest")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": pa.array(["a", None, None])})
    with pytest.raises(ic.SchemaMismatchError, match=r"column 'v'.*2 null value") as info:
        committer.prepare(1, [write_arrow(table, data, job_id="ingest", checkpoint_id=1)])
    assert info.value.column == "v"


def test_a_conflicting_commit_is_retried_with_backoff(scripted_catalog: ScriptedCatalog) -> None:
    table = _table(scripted_catalog)
    name = ".".join(table.name())
    sleeps: list[float] = []
    committer = ic.GlobalCommitter(scripted_catalog, table, job_id="ingest", retry_policy=FAST, sleep=sleeps.append)
    committer.prepare(1, [write_arrow(table, events(0, 100), job_id="ingest", checkpoint_id=1)])
    scripted_catalog.before = [concurrent_append(scripted_catalog, name), concurrent_append(scripted_catalog, name)]
    result = committer.commit(1)
    assert result.committed and result.attempts == 3 and result.retries == 2
    assert len(sleeps) == 2 and all(0 < s <= FAST.max_wait_s + FAST.min_wait_s for s in sleeps)
    state = committer.store.get("ingest", committer.table_name, 1)
    assert state.retries == 2 and state.attempts == 3
    assert _rows(scripted_catalog, table).num_rows == 102


def _claimed_meanwhile(catalog: SqlCatalog, name: str, committer: ic.GlobalCommitter) -> Callable[[], None]:
    """Another committer of the same state database claims the table, then this claim's
    swap is refused."""

    def claim_then_refuse() -> None:
        other = SqlCatalog(catalog.name, **catalog.properties)
        with other.load_table(name).transaction() as tx:
            tx.set_properties(state_properties(committer.store.engine))
        other.engine.dispose()
        raise CommitFailedException("the table was claimed by another committer meanwhile")

    return claim_then_refuse


def _refused() -> None:
    raise CommitFailedException("another commit won the swap")


def test_a_claim_that_loses_the_swap_is_retried_on_a_fresh_table(scripted_catalog: ScriptedCatalog) -> None:
    """The first checkpoint's claim of the table for the state database is one catalog
    commit; when it loses the swap it is made again, after the policy's wait."""
    name = ".".join(_table(scripted_catalog).name())
    sleeps: list[float] = []
    committer = ic.GlobalCommitter(scripted_catalog, name, job_id="ingest", retry_policy=FAST, sleep=sleeps.append)
    scripted_catalog.before = [_refused]
    scripted_catalog.loads = 0
    state = committer.prepare(1, [write_arrow(committer.load_table(), events(0, 10), job_id="ingest",
                                              checkpoint_id=1)])  # fmt: skip
    assert state.status == "prepared"
    assert scripted_catalog.calls == 2 and len(sleeps) == 1 and 0 < sleeps[0] <= FAST.max_wait_s + FAST.min_wait_s
    assert scripted_catalog.loads == 3  # write_arrow's table, prepare's, and the retry's fresh one
    properties = scripted_catalog.load_table(name).metadata.properties
    assert properties[STATE_ID_PROPERTY] == state_identity(committer.store.engine)
    assert committer.commit(1).committed and _rows(scripted_catalog, scripted_catalog.load_table(name)).num_rows == 10


def test_a_claim_made_meanwhile_by_the_same_state_database_is_not_made_twice(scripted_catalog: ScriptedCatalog) -> None:
    name = ".".join(_table(scripted_catalog).name())
    sleeps: list[float] = []
    committer = ic.GlobalCommitter(scripted_catalog, name, job_id="ingest", retry_policy=FAST, sleep=sleeps.append)
    results = [write_arrow(committer.load_table(), events(0, 10), job_id="ingest", checkpoint_id=1)]
    scripted_catalog.before = [_claimed_meanwhile(scripted_catalog, name, committer)]
    scripted_catalog.loads = 0
    committer.prepare(1, results)
    assert scripted_catalog.calls == 1 and len(sleeps) == 1  # the refused claim only: the retry found it made
    assert scripted_catalog.loads == 2  # prepare's table, and the retry's fresh one
    properties = scripted_catalog.load_table(name).metadata.properties
    assert properties[STATE_ID_PROPERTY] == state_identity(committer.store.engine)
    assert committer.commit(1).committed and scripted_catalog.calls == 2


@pytest.mark.database_independent
def test_a_checkpoints_catalog_round_trips_are_counted(scripted_catalog: ScriptedCatalog) -> None:
    """The fixed cost of a checkpoint: prepare reads the table once, and writes to the
    catalog only for the first checkpoint, whose claim records the state database; the
    commit starts from the table the committer's last commit made (read once at first)."""
    name = ".".join(_table(scripted_catalog).name())
    committer = ic.GlobalCommitter(scripted_catalog, name, job_id="ingest", retry_policy=FAST)
    for checkpoint_id in (1, 2):
        results = [write_arrow(committer.load_table(), events(checkpoint_id * 10, checkpoint_id * 10 + 10),
                               job_id="ingest", checkpoint_id=checkpoint_id)]  # fmt: skip
        loads, calls = scripted_catalog.loads, scripted_catalog.calls
        committer.prepare(checkpoint_id, results)
        assert (scripted_catalog.loads - loads, scripted_catalog.calls - calls) == (
            (1, 1) if checkpoint_id == 1 else (1, 0)
        )
        loads, calls = scripted_catalog.loads, scripted_catalog.calls
        assert committer.commit(checkpoint_id).attempts == 1
        # its first attempt's base: read once, then the table its own last commit made
        assert (scripted_catalog.loads - loads, scripted_catalog.calls - calls) == (1 if checkpoint_id == 1 else 0, 1)
    loads = scripted_catalog.loads
    assert committer.commit(2).status == "already-committed"  # asked again: one read to decide
    assert (scripted_catalog.loads - loads, scripted_catalog.calls) == (1, 3)
    committer.prepare(3, [write_arrow(committer.load_table(), events(30, 40), job_id="ingest", checkpoint_id=3)])
    before = scripted_catalog.loads
    committer.decide(3)
    assert scripted_catalog.loads - before == 1
    base = committer.load_table()
    committer.commit(3)
    assert committer.decide(3, table=base).action is Action.ROLLED_BACK  # answered for the table it is given
    assert committer.decide(3).action is Action.ALREADY_IN


@pytest.mark.database_independent
def test_retries_are_bounded_and_end_in_a_conflict_error(scripted_catalog: ScriptedCatalog) -> None:
    table = _table(scripted_catalog)
    name = ".".join(table.name())
    policy = RetryPolicy(max_attempts=3, max_seconds=60, min_wait_s=0.01, max_wait_s=0.02)
    committer = ic.GlobalCommitter(scripted_catalog, table, job_id="ingest", retry_policy=policy, sleep=lambda _: None)
    committer.prepare(1, [write_arrow(table, events(0, 100), job_id="ingest", checkpoint_id=1)])
    scripted_catalog.before = [concurrent_append(scripted_catalog, name) for _ in range(3)]
    with pytest.raises(ic.CommitConflictError, match="gave up after 3"):
        committer.commit(1)
    assert committer.store.get("ingest", committer.table_name, 1).status == "prepared"
    # the files are still there: a later commit succeeds
    assert committer.commit(1).committed
    assert _rows(scripted_catalog, table).num_rows == 103


@pytest.mark.database_independent
def test_lost_response_is_resolved_by_the_ancestry_and_never_committed_twice(scripted_catalog: ScriptedCatalog) -> None:
    table = _table(scripted_catalog)

    def lose_response() -> None:
        raise ConnectionError("response lost")

    committer = ic.GlobalCommitter(scripted_catalog, table, job_id="ingest", retry_policy=FAST, sleep=lambda _: None)
    committer.prepare(1, [write_arrow(table, events(0, 100), job_id="ingest", checkpoint_id=1)])
    scripted_catalog.calls = 0  # the first prepare's claim of the table is a catalog commit of its own
    scripted_catalog.after = [lose_response]
    result = committer.commit(1)
    assert result.committed and scripted_catalog.calls == 1
    assert len(scripted_catalog.load_table(".".join(table.name())).metadata.snapshots) == 1


@pytest.mark.database_independent
def test_a_commit_that_landed_but_reported_a_conflict_is_not_retried_into_a_duplicate(
    scripted_catalog: ScriptedCatalog,
) -> None:
    # apache/iceberg#14425: an attempt lands late although its caller saw it fail
    table = _table(scripted_catalog)

    def misreport() -> None:
        raise CommitFailedException("reported as failed, but it landed")

    committer = ic.GlobalCommitter(scripted_catalog, table, job_id="ingest", retry_policy=FAST, sleep=lambda _: None)
    committer.prepare(1, [write_arrow(table, events(0, 100), job_id="ingest", checkpoint_id=1)])
    scripted_catalog.calls = 0  # the first prepare's claim of the table is a catalog commit of its own
    scripted_catalog.after = [misreport]
    result = committer.commit(1)
    assert scripted_catalog.calls == 1
    assert result.snapshot_id == scripted_catalog.load_table(".".join(table.name())).current_snapshot().snapshot_id
    assert _rows(scripted_catalog, table).num_rows == 100


@pytest.mark.database_independent
def test_unknown_outcome_deletes_nothing_and_recover_resolves_it(
    scripted_catalog: ScriptedCatalog, tmp_path: Path
) -> None:
    table = _table(scripted_catalog)

    def time_out() -> None:
        raise TimeoutError("catalog did not answer")

    committer = ic.GlobalCommitter(scripted_catalog, table, job_id="ingest", retry_policy=FAST, sleep=lambda _: None)
    result = write_arrow(table, events(0, 100), job_id="ingest", checkpoint_id=1)
    committer.prepare(1, [result])
    scripted_catalog.before = [time_out]
    with pytest.raises(ic.CommitStateUnknownError, match="outcome unknown") as info:
        committer.commit(1)
    assert isinstance(info.value.cause, TimeoutError)
    assert all(Path(f.path.removeprefix("file://")).exists() for f in result.data_files)
    assert committer.store.get("ingest", committer.table_name, 1).status == "prepared"
    assert [r.status for r in committer.recover()] == ["committed"]
    assert_same_rows(_rows(scripted_catalog, table), events(0, 100))


def test_two_jobs_interleave_checkpoint_ids_on_one_table(catalog: SqlCatalog) -> None:
    table = _table(catalog)
    a = ic.GlobalCommitter(catalog, table, job_id="a", retry_policy=FAST)
    b = ic.GlobalCommitter(catalog, table, job_id="b", retry_policy=FAST)
    for checkpoint_id in (1, 2):
        a.prepare(
            checkpoint_id,
            [
                write_arrow(
                    table, events(checkpoint_id * 10, checkpoint_id * 10 + 5), job_id="a", checkpoint_id=checkpoint_id
                )
            ],
        )
        b.prepare(
            checkpoint_id,
            [
                write_arrow(
                    table,
                    events(100 + checkpoint_id * 10, 100 + checkpoint_id * 10 + 5),
                    job_id="b",
                    checkpoint_id=checkpoint_id,
                )
            ],
        )
        assert a.commit(checkpoint_id).committed
        assert b.commit(checkpoint_id).committed
    assert a.last_committed_checkpoint() == 2 and b.last_committed_checkpoint() == 2
    assert _rows(catalog, table).num_rows == 20


@pytest.mark.database_independent
def test_committed_checkpoints_lists_each_jobs_snapshots_of_the_branch_newest_first(catalog: SqlCatalog) -> None:
    from icecommit.core.ancestry import CommittedCheckpoint, checkpoint_of

    table = _table(catalog)
    a = ic.GlobalCommitter(catalog, table, job_id="a", retry_policy=FAST)
    b = ic.GlobalCommitter(catalog, table, job_id="b", retry_policy=FAST)
    for job, committer, checkpoint_id in (("a", a, 1), ("b", b, 7), ("a", a, 2)):
        rows = events(checkpoint_id * 10 + (job == "b") * 100, checkpoint_id * 10 + (job == "b") * 100 + 5)
        committer.prepare(checkpoint_id, [write_arrow(committer.load_table(), rows, job_id=job,
                                                      checkpoint_id=checkpoint_id)])  # fmt: skip
        committer.commit(checkpoint_id)
    loaded = a.load_table()
    loaded.manage_snapshots().create_branch(loaded.current_snapshot().snapshot_id, "audit").commit()
    loaded = a.load_table()
    loaded.append(events(500, 505))  # another tool's snapshot, newest on main: no checkpoint of any job
    loaded = a.load_table()
    own = [s for s in loaded.snapshots() if checkpoint_of(s) is not None]  # oldest first
    expected = [CommittedCheckpoint(*checkpoint_of(s), s.snapshot_id, s.timestamp_ms) for s in reversed(own)]  # type: ignore[misc]
    assert [(c.job_id, c.checkpoint_id) for c in expected] == [("a", 2), ("b", 7), ("a", 1)]
    assert committed_checkpoints(loaded.metadata) == expected
    assert committed_checkpoints(loaded.metadata, job_id="a") == [expected[0], expected[2]]
    assert committed_checkpoints(loaded.metadata, job_id="b") == [expected[1]]
    assert committed_checkpoints(loaded.metadata, job_id="c") == []
    loaded.manage_snapshots().rollback_to_snapshot(own[0].snapshot_id).commit()  # main back to a's checkpoint 1
    rolled = a.load_table().metadata
    assert committed_checkpoints(rolled) == [expected[2]]
    assert committed_checkpoints(rolled, branch="audit") == expected  # the other branch keeps all three


def test_the_summary_of_a_checkpoint_snapshot_holds_its_facts_and_only_the_optional_ones_it_has() -> None:
    from icecommit.core.ancestry import snapshot_summary

    assert snapshot_summary(job_id="j", checkpoint_id=3, records=10, files=2, bytes_=512) == {
        "icecommit.job-id": "j", "icecommit.checkpoint-id": "3", "icecommit.records": "10", "icecommit.files": "2",
        "icecommit.bytes": "512",
    }  # fmt: skip
    base = snapshot_summary(job_id="j", checkpoint_id=3, records=10, files=2, bytes_=512)
    optional = {"max_event_time_us": 7, "watermark_us": 6, "late_records": 1, "future_records": 2, "query_id": "q",
                "recovered_by": "k"}  # fmt: skip
    full = snapshot_summary(job_id="j", checkpoint_id=3, records=10, files=2, bytes_=512, **optional)  # type: ignore[arg-type]
    assert {k: v for k, v in full.items() if k not in base} == {
        "icecommit.max-event-time-us": "7", "icecommit.watermark-us": "6", "icecommit.late-records": "1",
        "icecommit.future-records": "2", "icecommit.query-id": "q", "icecommit.recovered-by": "k",
    }  # fmt: skip


@pytest.mark.database_independent
def test_the_job_and_its_last_checkpoint_are_read_from_the_branch_asked_for(catalog: SqlCatalog) -> None:
    from icecommit.core.ancestry import (
        checkpoint_of,
        find_checkpoint,
        highest_committed_checkpoint,
        last_committed_checkpoint,
    )

    table = _table(catalog)
    committer = ic.GlobalCommitter(catalog, table, job_id="a", retry_policy=FAST)
    for checkpoint_id in (1, 2):
        rows = events(checkpoint_id * 10, checkpoint_id * 10 + 5)
        committer.prepare(checkpoint_id, [write_arrow(committer.load_table(), rows, job_id="a",
                                                      checkpoint_id=checkpoint_id)])  # fmt: skip
        committer.commit(checkpoint_id)
    loaded = committer.load_table()
    first = next(s for s in loaded.snapshots() if checkpoint_of(s) == ("a", 1))
    loaded.manage_snapshots().create_branch(first.snapshot_id, "audit").commit()
    metadata = committer.load_table().metadata
    assert last_committed_checkpoint(metadata, "a") == 2 and last_committed_checkpoint(metadata, "a", "audit") == 1
    assert last_committed_checkpoint(metadata, "b") is None
    assert last_committed_checkpoint(metadata, "3") is None  # a job id is never matched against checkpoint ids
    # each branch reads its own mark: main's property says 2; audit has none, and its ancestry says 1
    assert (highest_committed_checkpoint(metadata, "a"), highest_committed_checkpoint(metadata, "a", "audit")) == (2, 1)
    bare = metadata.model_copy(update={"properties": {}})
    assert highest_committed_checkpoint(bare, "a") == 2 and highest_committed_checkpoint(bare, "a", "audit") == 1
    assert find_checkpoint(metadata, "a", 2) is not None and find_checkpoint(metadata, "a", 2, "audit") is None
    assert find_checkpoint(metadata, "a", 1, "audit") == first


def test_a_snapshot_with_a_job_id_and_no_checkpoint_id_is_not_a_checkpoint() -> None:
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary

    from icecommit.core.ancestry import checkpoint_of

    def snapshot(**summary: str) -> Snapshot:
        return Snapshot(snapshot_id=1, sequence_number=1, timestamp_ms=0, manifest_list="m",
                        summary=Summary(Operation.APPEND, **summary))  # fmt: skip

    assert checkpoint_of(snapshot(**{"icecommit.job-id": "j"})) is None
    assert checkpoint_of(snapshot(**{"icecommit.checkpoint-id": "3"})) is None
    assert checkpoint_of(snapshot(**{"icecommit.job-id": "j", "icecommit.checkpoint-id": "3"})) == ("j", 3)


@pytest.mark.database_independent
def test_a_high_water_mark_property_that_is_not_a_checkpoint_id_is_ignored(catalog: SqlCatalog) -> None:
    from icecommit.core.ancestry import highest_committed_checkpoint, job_checkpoint_property

    table = _table(catalog)
    committer = ic.GlobalCommitter(catalog, table, job_id="a", retry_policy=FAST)
    committer.prepare(4, [write_arrow(committer.load_table(), events(0, 5), job_id="a", checkpoint_id=4)])
    committer.commit(4)
    metadata = committer.load_table().metadata
    key = job_checkpoint_property("a")
    assert metadata.properties[key] == "4"
    for value, expected in (("9", 9), ("-1", 4), ("²", 4), ("x9", 4), ("", 4), (" 9", 4)):
        edited = metadata.model_copy(update={"properties": {**metadata.properties, key: value}})
        assert highest_committed_checkpoint(edited, "a") == expected, value


@pytest.mark.database_independent
def test_a_lineage_is_complete_until_its_first_snapshot_is_expired(catalog: SqlCatalog) -> None:
    from icecommit.core.ancestry import lineage_complete

    table = _table(catalog)
    assert lineage_complete(table.metadata)  # no snapshot yet: nothing can be missing
    committer = ic.GlobalCommitter(catalog, table, job_id="a", retry_policy=FAST)
    for checkpoint_id in (1, 2, 3):
        rows = events(checkpoint_id * 10, checkpoint_id * 10 + 5)
        committer.prepare(checkpoint_id, [write_arrow(committer.load_table(), rows, job_id="a",
                                                      checkpoint_id=checkpoint_id)])  # fmt: skip
        committer.commit(checkpoint_id)
    loaded = committer.load_table()
    assert lineage_complete(loaded.metadata) and lineage_complete(loaded.metadata, "main")
    first = min(loaded.snapshots(), key=lambda s: s.sequence_number)
    loaded.maintenance.expire_snapshots().by_ids([first.snapshot_id]).commit()
    expired = committer.load_table().metadata
    assert not lineage_complete(expired) and not lineage_complete(expired, "main")
    assert lineage_complete(expired, "no-such-branch")  # a branch without snapshots lacks nothing


@pytest.mark.database_independent
def test_what_the_table_shows_about_a_checkpoint_is_read_on_the_branch_asked_for(catalog: SqlCatalog) -> None:
    from icecommit.core.ancestry import checkpoint_of, require_branch, table_view
    from icecommit.core.decision import TableView
    from icecommit.errors import InvalidArgumentError

    table = _table(catalog)
    committer = ic.GlobalCommitter(catalog, table, job_id="a", retry_policy=FAST)
    for checkpoint_id in (1, 2, 3):
        rows = events(checkpoint_id * 10, checkpoint_id * 10 + 5)
        committer.prepare(checkpoint_id, [write_arrow(committer.load_table(), rows, job_id="a",
                                                      checkpoint_id=checkpoint_id)])  # fmt: skip
        committer.commit(checkpoint_id)
    loaded = committer.load_table()
    s1, s2, s3 = (next(s.snapshot_id for s in loaded.snapshots() if checkpoint_of(s) == ("a", c)) for c in (1, 2, 3))
    loaded.manage_snapshots().create_branch(s3, "audit").create_tag(s1, "v1").commit()
    committer.load_table().manage_snapshots().rollback_to_snapshot(s1).commit()  # another tool's rollback of main
    committer.load_table().maintenance.expire_snapshots().by_ids([s2]).commit()  # audit's history now has a gap
    metadata = committer.load_table().metadata

    assert table_view(metadata, "a", 1) == TableView(s1, None, 3, True)
    assert table_view(metadata, "a", 2) == TableView(None, None, 3, True)  # its snapshot is gone altogether
    assert table_view(metadata, "a", 3) == TableView(None, s3, 3, True)  # off main, still in the metadata
    assert table_view(metadata, "a", 4) == TableView(None, None, 3, True)
    assert table_view(metadata, "a", 3, "audit") == TableView(s3, None, 3, False)
    assert table_view(metadata, "a", 1, "audit") == TableView(None, s1, 3, False)
    bare = metadata.model_copy(update={"properties": {}})  # a table committed to before the property existed
    assert table_view(bare, "a", 1).highest_committed == 1 and table_view(bare, "a", 1, "audit").highest_committed == 3
    assert require_branch(metadata, "audit") == "audit" and require_branch(metadata, "main") == "main"
    with pytest.raises(InvalidArgumentError) as refused:
        require_branch(metadata, "v1")  # a tag is not a branch
    create = "; create a new branch first (ManageSnapshots.create_branch)"
    assert (refused.value.argument, refused.value.value) == ("branch", "v1")
    assert refused.value.accepted == f"a branch of the table (audit, main){create}"
    fresh = ic.create_table(catalog, f"{catalog.name}.fresh", EVENTS_SCHEMA).metadata  # no commit: no branch
    for branch, accepted in (("dev", f"a branch of the table (main, made by the first commit){create}"),
                             (5, "a branch of the table (main, made by the first commit)"),
                             ("", "a branch of the table (main, made by the first commit)")):  # fmt: skip
        with pytest.raises(InvalidArgumentError) as refused:
            require_branch(fresh, branch)
        assert refused.value.accepted == accepted, branch


def test_a_commit_to_a_branch_while_another_lands_on_main_is_retried_not_left_unknown(
    scripted_catalog: ScriptedCatalog,
) -> None:
    table = _table(scripted_catalog)
    name = ".".join(table.name())
    table.append(events(900, 901))  # a snapshot to branch from
    scripted_catalog.load_table(name).manage_snapshots().create_branch(
        scripted_catalog.load_table(name).current_snapshot().snapshot_id,  # type: ignore[union-attr]
        "audit",
    ).commit()
    sleeps: list[float] = []
    committer = ic.GlobalCommitter(
        scripted_catalog, name, job_id="ingest", branch="audit", retry_policy=FAST, sleep=sleeps.append
    )  # fmt: skip
    committer.prepare(1, [write_arrow(committer.load_table(), events(0, 10), job_id="ingest", checkpoint_id=1)])
    # main moves on between the attempt's load and its swap: the audit branch's own requirement
    # still holds, but pyiceberg refuses a snapshot whose sequence number is no longer the next
    scripted_catalog.before = [concurrent_append(scripted_catalog, name)]
    result = committer.commit(1)
    assert (result.status, result.attempts, result.retries, len(sleeps)) == ("committed", 2, 1, 1)
    state = committer.store.get("ingest", name, 1)
    assert state is not None and (state.status, state.unknown_outcomes) == ("committed", 0)
    loaded = scripted_catalog.load_table(name)
    audit = ancestry.branch_ancestry(loaded.metadata, "audit")
    [on_audit] = [s for s in audit if ancestry.checkpoint_of(s) is not None]
    assert on_audit.snapshot_id == result.snapshot_id
    assert len(loaded.metadata.snapshots) == 3  # the branch point, main's append, and the checkpoint once
