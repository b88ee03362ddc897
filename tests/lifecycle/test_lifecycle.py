"""Exactly once over a table's whole life: expiry, rollback (icecommit's and another
tool's), out-of-order checkpoint ids. Each test is one of the reproductions of the
lifecycle issue, on the real SqlCatalog (SQLite and PostgreSQL), without Spark."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

import icecommit as ic
from icecommit.committer import RetryPolicy
from icecommit.committer.staging import read_staged
from icecommit.core import ancestry
from icecommit.errors import CheckpointOutOfOrderError, CheckpointRefusedError, PlanChangedError
from icecommit.maintenance import apply_expire, apply_rollback, plan_expire, plan_rollback
from icecommit.maintenance.compaction import compact
from tests.fakes import Crash, crash_at
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

# one process, one step after another; rollback and expiry's queries are tested in tests/state
pytestmark = [pytest.mark.database_independent, pytest.mark.over_rest]

FAST = RetryPolicy(max_attempts=5, max_seconds=60, min_wait_s=0.01, max_wait_s=0.1)
ROWS = 10


def _table(catalog: SqlCatalog) -> Table:
    return ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA, partition_by=["event"])


def _rows_of(job: str, checkpoint_id: int) -> pa.Table:
    base = (sum(map(ord, job)) % 50) * 100_000 + checkpoint_id * 1_000
    return events(base, base + ROWS)


def _committer(catalog: SqlCatalog, job: str, **kwargs: object) -> ic.GlobalCommitter:
    return ic.GlobalCommitter(catalog, f"{catalog.name}.events", job_id=job, retry_policy=FAST, **kwargs)  # type: ignore[arg-type]


def _land(committer: ic.GlobalCommitter, checkpoint_id: int) -> ic.CommitResult:
    table = committer.load_table()
    results = [write_arrow(table, _rows_of(committer.job_id, checkpoint_id), job_id=committer.job_id,
                           checkpoint_id=checkpoint_id)]  # fmt: skip
    committer.prepare(checkpoint_id, results)
    return committer.commit(checkpoint_id)


def _ids(catalog: SqlCatalog) -> Counter[int]:
    data = catalog.load_table(f"{catalog.name}.events").scan(selected_fields=("id",)).to_arrow()
    return Counter(data.column("id").to_pylist())


def _expected(*checkpoints: tuple[str, int]) -> Counter[int]:
    return Counter(i for job, c in checkpoints for i in _rows_of(job, c).column("id").to_pylist())


def _expire_all_but_head(catalog: SqlCatalog) -> None:
    plan = plan_expire(catalog, f"{catalog.name}.events", older_than=timedelta(0), retain_last=1)
    apply_expire(catalog, plan)


def test_expiry_never_makes_a_landed_checkpoint_commit_again(catalog: SqlCatalog) -> None:
    _table(catalog)
    crashed = _committer(catalog, "A", fault=crash_at("after-commit", 7))
    with pytest.raises(Crash):  # the catalog took checkpoint 7; the state row still says prepared
        _land(crashed, 7)
    landed = ancestry.find_checkpoint(catalog.load_table(f"{catalog.name}.events").metadata, "A", 7)
    assert landed is not None
    other = _committer(catalog, "B")
    for c in range(1, 14):
        _land(other, c)
    _expire_all_but_head(catalog)
    assert ancestry.find_checkpoint(catalog.load_table(f"{catalog.name}.events").metadata, "A", 7) is None

    restarted = _committer(catalog, "A")
    [result] = restarted.recover()
    # its snapshot is gone; the live manifest entries of its files still name it
    assert (result.status, result.snapshot_id) == ("already-committed", landed.snapshot_id)
    recorded = restarted.store.get("A", restarted.table_name, 7)
    assert recorded is not None and (recorded.status, recorded.snapshot_id) == ("committed", landed.snapshot_id)
    assert restarted.commit(7).status == "already-committed"
    # a replay of an expired checkpoint of the other job is recognised too, not refused
    assert other.commit(3).status == "already-committed"
    assert _ids(catalog) == _expected(("A", 7), *(("B", c) for c in range(1, 14)))


def test_a_landed_checkpoint_compacted_after_its_snapshot_expired_names_no_snapshot(catalog: SqlCatalog) -> None:
    _table(catalog)
    with pytest.raises(Crash):  # the catalog took checkpoint 7; the state row still says prepared
        _land(_committer(catalog, "A", fault=crash_at("after-commit", 7)), 7)
    other = _committer(catalog, "B")
    for c in range(1, 4):
        _land(other, c)
    done = compact(catalog, f"{catalog.name}.events", min_input_files=2)
    assert done.committed >= 1
    _expire_all_but_head(catalog)  # only the compaction's snapshot is left
    live = {e.data_file.file_path for e in _current_entries(catalog)}
    restarted = _committer(catalog, "A")
    state = restarted.store.get("A", restarted.table_name, 7)
    assert state is not None and not live & {f.file_path for f in read_staged(state, restarted.load_table())}

    [result] = restarted.recover()
    # in the table (compacted on purpose), and the snapshot that added it is gone: none is named,
    # not the compaction whose manifest lists its files as deleted
    assert (result.status, result.snapshot_id) == ("already-committed", None)
    assert _ids(catalog) == _expected(("A", 7), *(("B", c) for c in range(1, 4)))


def _current_entries(catalog: SqlCatalog) -> list[Any]:
    table = catalog.load_table(f"{catalog.name}.events")
    current = table.current_snapshot()
    assert current is not None
    return [e for m in current.manifests(table.io) for e in m.fetch_manifest_entry(table.io, discard_deleted=True)]


def test_a_rollback_sticks_for_a_checkpoint_the_job_never_recorded(catalog: SqlCatalog) -> None:
    _table(catalog)
    _land(_committer(catalog, "A"), 1)
    with pytest.raises(Crash):
        _land(_committer(catalog, "A", fault=crash_at("after-commit", 2)), 2)
    plan = plan_rollback(catalog, f"{catalog.name}.events", to_checkpoint=1, job_id="A")
    assert plan.hidden_checkpoints == (("A", 2),)
    apply_rollback(catalog, plan)

    restarted = _committer(catalog, "A")
    # the rollback recorded it: recovery has nothing to commit
    assert restarted.store.get("A", restarted.table_name, 2).status == "rolled-back"  # type: ignore[union-attr]
    assert restarted.recover() == []
    with pytest.raises(ic.CheckpointRolledBackError) as refused:
        restarted.commit(2)
    assert (refused.value.job_id, refused.value.checkpoint_id) == ("A", 2)
    assert _ids(catalog) == _expected(("A", 1))
    # only an explicit re-commit brings it back, once
    assert restarted.recommit(2).status == "committed"
    assert restarted.commit(2).status == "already-committed"
    assert _ids(catalog) == _expected(("A", 1), ("A", 2))


def test_a_rollback_to_one_jobs_checkpoint_removes_the_later_checkpoints_of_every_job(catalog: SqlCatalog) -> None:
    _table(catalog)
    a, b = _committer(catalog, "A"), _committer(catalog, "B")
    _land(a, 1)
    _land(b, 1)
    _land(a, 2)
    plan = plan_rollback(catalog, f"{catalog.name}.events", to_checkpoint=1, job_id="A")
    assert sorted(plan.hidden_checkpoints) == [("A", 2), ("B", 1)]
    apply_rollback(catalog, plan)
    _expire_all_but_head(catalog)  # the hidden snapshots are gone from the metadata too
    for committer, checkpoint_id in ((b, 1), (a, 2)):
        with pytest.raises(ic.CheckpointRolledBackError):
            committer.commit(checkpoint_id)
    assert _ids(catalog) == _expected(("A", 1))
    # the jobs go on with new checkpoints
    assert _land(b, 2).status == "committed" and _land(a, 3).status == "committed"
    assert _ids(catalog) == _expected(("A", 1), ("B", 2), ("A", 3))


def test_another_tools_rollback_is_detected_before_and_after_expiry(catalog: SqlCatalog) -> None:
    _table(catalog)
    committer = _committer(catalog, "A")
    first = _land(committer, 1)
    _land(committer, 2)
    with pytest.raises(Crash):
        _land(_committer(catalog, "A", fault=crash_at("after-commit", 3)), 3)
    # pyiceberg (or Spark, or Java) rolls the table back; icecommit's state knows nothing of it
    loaded = catalog.load_table(f"{catalog.name}.events")
    assert first.snapshot_id is not None
    loaded.manage_snapshots().rollback_to_snapshot(first.snapshot_id).commit()

    with pytest.raises(ic.CheckpointRolledBackError):  # committed, its snapshot now off the branch
        committer.commit(2)
    # 3 landed but its row says prepared: recovery finds it off the branch and records it
    [recovered] = _committer(catalog, "A").recover()
    assert (recovered.checkpoint_id, recovered.status) == (3, "rolled-back")
    assert committer.store.get("A", committer.table_name, 3).status == "rolled-back"  # type: ignore[union-attr]
    # icecommit's expiry records what it removes of a rollback before removing it
    plan = plan_expire(catalog, f"{catalog.name}.events", older_than=timedelta(0), retain_last=1)
    assert sorted(plan.rolled_back_checkpoints) == [("A", 2), ("A", 3)]
    apply_expire(catalog, plan)
    assert committer.store.get("A", committer.table_name, 2).status == "rolled-back"  # type: ignore[union-attr]
    restarted = _committer(catalog, "A")
    assert restarted.recover() == []
    for checkpoint_id in (2, 3):
        with pytest.raises(ic.CheckpointRolledBackError):
            restarted.commit(checkpoint_id)
    assert _ids(catalog) == _expected(("A", 1))


def test_after_rollback_and_expiry_a_replay_is_refused_not_reported_committed(catalog: SqlCatalog) -> None:
    _table(catalog)
    committer = _committer(catalog, "A")
    for c in (1, 2, 3, 4):
        _land(committer, c)
    apply_rollback(catalog, plan_rollback(catalog, f"{catalog.name}.events", to_checkpoint=2, job_id="A"))
    _expire_all_but_head(catalog)
    with pytest.raises(ic.CheckpointRolledBackError):
        committer.commit(3)
    assert not committer.is_committed(3)
    assert committer.is_committed(1)  # expired, its rows still in the table
    assert _ids(catalog) == _expected(("A", 1), ("A", 2))


def test_checkpoint_ids_grow_and_out_of_order_is_refused_before_anything_is_staged(catalog: SqlCatalog) -> None:
    _table(catalog)
    batch = _committer(catalog, "events-ingest")
    _land(batch, 7)
    # the README's two snippets: a stream with the same job id starts at batch 0
    stream = _committer(catalog, "events-ingest")
    table = stream.load_table()
    results = [write_arrow(table, _rows_of("stream", 0), job_id="events-ingest", checkpoint_id=0)]
    with pytest.raises(CheckpointOutOfOrderError) as refused:
        stream.prepare(0, results)
    error = refused.value
    assert (error.job_id, error.checkpoint_id, error.highest_committed) == ("events-ingest", 0, 7)
    assert isinstance(error, CheckpointRefusedError)
    assert stream.store.get("events-ingest", stream.table_name, 0) is None
    with pytest.raises(CheckpointOutOfOrderError):
        stream.commit(0)
    # a replay of 7 itself is recognised; 8 goes on
    assert stream.commit(7).status == "already-committed"
    assert _land(stream, 8).status == "committed"
    assert _ids(catalog) == _expected(("events-ingest", 7), ("events-ingest", 8))


def test_the_job_high_water_mark_is_set_in_the_same_commit_as_the_append(catalog: SqlCatalog) -> None:
    _table(catalog)
    committer = _committer(catalog, "A")
    result = _land(committer, 5)
    loaded = catalog.load_table(f"{catalog.name}.events")
    assert loaded.metadata.properties[ancestry.job_checkpoint_property("A")] == "5"
    # one metadata file for the append and the property: the same catalog commit
    previous = loaded.metadata.metadata_log[-1].metadata_file
    before = catalog.load_table(f"{catalog.name}.events")
    assert before.metadata.current_snapshot_id == result.snapshot_id
    assert previous != loaded.metadata_location
    assert _land(committer, 6).status == "committed"
    assert ancestry.recorded_highest_checkpoints(catalog.load_table(f"{catalog.name}.events").properties) == {"A": 6}


# -- found in review: each was a sequence that lost or duplicated rows -----------------


def _count(catalog: SqlCatalog, job: str, checkpoint_id: int) -> set[int]:
    """How many copies of each row of one checkpoint the table holds."""
    found = _ids(catalog)
    return {found[i] for i in _rows_of(job, checkpoint_id).column("id").to_pylist()}


def _foreign_expire_all_but_head(catalog: SqlCatalog) -> None:
    table = catalog.load_table(f"{catalog.name}.events")
    head = table.current_snapshot()
    assert head is not None
    doomed = [s.snapshot_id for s in table.metadata.snapshots if s.snapshot_id != head.snapshot_id]
    table.maintenance.expire_snapshots().by_ids(doomed).commit()


def test_recommit_on_a_long_lived_committer_decides_on_the_table_as_it_is_now(catalog: SqlCatalog) -> None:
    _table(catalog)
    committer = _committer(catalog, "A")
    for c in (1, 2, 3):
        _land(committer, c)  # the committer caches the table its last commit made
    apply_rollback(catalog, plan_rollback(catalog, f"{catalog.name}.events", to_checkpoint=2, job_id="A"))
    assert committer.recommit(3).status == "committed"
    assert _count(catalog, "A", 3) == {1}


def test_expiring_the_snapshot_a_rollback_removed_keeps_the_recommitted_checkpoint_committed(
    catalog: SqlCatalog,
) -> None:
    _table(catalog)
    committer = _committer(catalog, "A")
    for c in (1, 2, 3):
        _land(committer, c)
    apply_rollback(catalog, plan_rollback(catalog, f"{catalog.name}.events", to_checkpoint=1, job_id="A"))
    committer.recommit(2)
    committer.recommit(3)
    # the old snapshots of 2 and 3 are off the branch and expire; their checkpoints are on it again
    plan = plan_expire(catalog, f"{catalog.name}.events", older_than=timedelta(0), retain_last=1)
    assert plan.rolled_back_checkpoints == ()
    apply_expire(catalog, plan)
    assert [committer.store.get("A", committer.table_name, c).status for c in (1, 2, 3)] == ["committed"] * 3  # type: ignore[union-attr]
    assert _committer(catalog, "A").commit(3).status == "already-committed"
    assert ic.reconcile(catalog, f"{catalog.name}.events", job_id="A").ok
    assert _ids(catalog) == _expected(("A", 1), ("A", 2), ("A", 3))


def test_a_recommit_that_landed_before_a_crash_is_not_committed_twice_after_expiry(catalog: SqlCatalog) -> None:
    _table(catalog)
    committer = _committer(catalog, "A")
    for c in (1, 2, 3):
        _land(committer, c)
    apply_rollback(catalog, plan_rollback(catalog, f"{catalog.name}.events", to_checkpoint=2, job_id="A"))
    with pytest.raises(Crash):  # the re-commit lands; the row still says rolled back
        _committer(catalog, "A", fault=crash_at("after-commit", 3)).recommit(3)
    other = _committer(catalog, "B")
    for c in (1, 2):
        _land(other, c)
    _expire_all_but_head(catalog)
    restarted = _committer(catalog, "A")
    assert restarted.commit(3).status == "already-committed"  # its files are live: it is in
    assert restarted.store.get("A", restarted.table_name, 3).status == "committed"  # and recorded so
    with pytest.raises(ic.ValidationError):
        restarted.recommit(3)
    assert _count(catalog, "A", 3) == {1}


@pytest.mark.parametrize("expiry", ["icecommit", "pyiceberg"])
def test_another_tools_rollback_then_expiry_never_counts_missing_rows_as_committed(
    catalog: SqlCatalog, expiry: str
) -> None:
    _table(catalog)
    committer = _committer(catalog, "A")
    _land(committer, 1)
    _land(committer, 2)
    _expire_all_but_head(catalog)  # routine expiry: the lineage is incomplete from now on
    kept = catalog.load_table(f"{catalog.name}.events").current_snapshot()
    assert kept is not None
    _land(committer, 3)
    with pytest.raises(Crash):
        _land(_committer(catalog, "A", fault=crash_at("after-commit", 4)), 4)
    catalog.load_table(f"{catalog.name}.events").manage_snapshots().rollback_to_snapshot(kept.snapshot_id).commit()
    if expiry == "icecommit":
        _expire_all_but_head(catalog)
    else:
        _foreign_expire_all_but_head(catalog)
    restarted = _committer(catalog, "A")
    assert [(r.checkpoint_id, r.status) for r in restarted.recover()] in ([(4, "rolled-back")], [])
    for c in (3, 4):
        with pytest.raises(ic.CheckpointRolledBackError):
            restarted.commit(c)
        assert restarted.store.get("A", restarted.table_name, c).status in ("committed", "rolled-back")  # type: ignore[union-attr]
    # their files were kept, so the user can bring them back, once each
    assert restarted.recommit(3).status == "committed" and restarted.recommit(4).status == "committed"
    assert _ids(catalog) == _expected(("A", 1), ("A", 2), ("A", 3), ("A", 4))


def test_a_rollback_between_the_append_and_the_state_update_stays(catalog: SqlCatalog) -> None:
    _table(catalog)
    committer = _committer(catalog, "A")
    _land(committer, 1)
    _land(committer, 2)

    def rollback_meanwhile(where: str, checkpoint_id: int) -> None:
        if where == "after-commit" and checkpoint_id == 3:
            plan = plan_rollback(catalog, f"{catalog.name}.events", to_checkpoint=2, job_id="A")
            apply_rollback(catalog, plan)

    with pytest.raises(ic.CheckpointRolledBackError):
        _land(_committer(catalog, "A", fault=rollback_meanwhile), 3)
    assert committer.store.get("A", committer.table_name, 3).status == "rolled-back"  # type: ignore[union-attr]
    _land(_committer(catalog, "B"), 1)
    _foreign_expire_all_but_head(catalog)
    with pytest.raises(ic.CheckpointRolledBackError):
        _committer(catalog, "A").commit(3)
    assert _count(catalog, "A", 3) == {0}


def test_expire_refuses_a_plan_whose_branch_moved(catalog: SqlCatalog) -> None:
    _table(catalog)
    committer = _committer(catalog, "A")
    first = _land(committer, 1)
    _land(committer, 2)
    last = _land(committer, 3)
    assert first.snapshot_id is not None and last.snapshot_id is not None
    table = catalog.load_table(f"{catalog.name}.events")
    table.manage_snapshots().rollback_to_snapshot(first.snapshot_id).commit()  # another tool
    plan = plan_expire(catalog, f"{catalog.name}.events", older_than=timedelta(0), retain_last=1)
    assert sorted(plan.rolled_back_checkpoints) == [("A", 2), ("A", 3)]
    catalog.load_table(f"{catalog.name}.events").manage_snapshots().set_current_snapshot(last.snapshot_id).commit()
    with pytest.raises(PlanChangedError, match="changed since"):
        apply_expire(catalog, plan)
    assert [committer.store.get("A", committer.table_name, c).status for c in (2, 3)] == ["committed"] * 2  # type: ignore[union-attr]
    assert _ids(catalog) == _expected(("A", 1), ("A", 2), ("A", 3))


# -- found by the lifecycle soak (bench/lifecycle_soak.py) ----------------------------------


def _foreign_rollback_to(catalog: SqlCatalog, result: ic.CommitResult) -> None:
    assert result.snapshot_id is not None
    catalog.load_table(f"{catalog.name}.events").manage_snapshots().rollback_to_snapshot(result.snapshot_id).commit()


def test_a_recommit_after_another_tools_rollback_counts_its_rows_as_committed(catalog: SqlCatalog) -> None:
    _table(catalog)
    committer = _committer(catalog, "A")
    first = _land(committer, 1)
    _land(committer, 2)
    _foreign_rollback_to(catalog, first)  # the state still says 2 is committed
    assert committer.recommit(2).status == "committed"
    report = ic.reconcile(catalog, f"{catalog.name}.events", job_id="A")
    assert report.ok, report.to_markdown()  # not "window-mismatch: committed 10 of 20"
    assert sum(w.committed for w in report.windows) == 2 * ROWS
    assert _ids(catalog) == _expected(("A", 1), ("A", 2))


def test_a_checkpoint_another_tool_rolled_back_can_be_abandoned(catalog: SqlCatalog) -> None:
    _table(catalog)
    committer = _committer(catalog, "A")
    first = _land(committer, 1)
    _land(committer, 2)
    _foreign_rollback_to(catalog, first)
    state = committer.abandon(2, reason="bad data", by="oncall")
    assert state.status == "abandoned"
    assert _committer(catalog, "A").commit(2).status == "abandoned"  # a replay is a no-op
    assert _ids(catalog) == _expected(("A", 1))


def test_after_another_tools_rollback_and_expiry_reconciliation_reports_removed_not_loss(catalog: SqlCatalog) -> None:
    _table(catalog)
    committer = _committer(catalog, "A")
    first = _land(committer, 1)
    _land(committer, 2)
    _land(committer, 3)
    _foreign_rollback_to(catalog, first)
    _foreign_expire_all_but_head(catalog)  # nothing left in the table says what happened
    report = ic.reconcile(catalog, f"{catalog.name}.events", job_id="A")
    assert report.ok, report.to_markdown()
    assert [(c.checkpoint_id, c.status) for c in report.checkpoints] == [
        (1, "committed"), (2, "rolled-back"), (3, "rolled-back")
    ]  # fmt: skip
    removed = [p for p in report.problems if p.kind == "rolled-back"]
    assert [(p.checkpoint_id, p.severity) for p in removed] == [(2, "info"), (3, "info")]
    assert "another tool's rollback" in removed[0].message
    with pytest.raises(ic.CheckpointRolledBackError):  # the committer judges it the same way
        committer.commit(3)
