"""Partition overwrite (``mode="overwrite-partitions"``): a checkpoint's rows replace the
partitions they touch under the table's current spec, exactly once, never another job's
rows. Written without Spark (``write_arrow``, as a task writes); SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import os
import time
from collections import Counter
from datetime import timedelta

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.transforms import DayTransform, HourTransform

import icecommit as ic
from icecommit.committer import committed_checkpoints
from icecommit.committer.features import require_supported, supported
from icecommit.core import ancestry
from icecommit.errors import (
    CheckpointFeatureError,
    CommitConflictError,
    InvalidArgumentError,
    OverwriteConflictError,
    OverwriteSpansFileError,
)
from icecommit.maintenance import apply_expire, apply_rollback, plan_expire, plan_rollback
from tests import processes
from tests.committer import crash_driver
from tests.committer.crash_driver import (
    CRASH_POINTS,
    crash_then_replay_as_processes,
    crash_then_replay_in_process,
    overwritten_ids,
)
from tests.helpers import EVENTS_SCHEMA, delete_positions, events, write_arrow

OVERWRITE = "overwrite-partitions"
H0 = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)


def _table(catalog: SqlCatalog, partition_by: list[str], suffix: str = "", **properties: str) -> str:
    name = f"{catalog.name}.events{suffix}"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=partition_by, properties=properties or None)
    return name


def _land(catalog: SqlCatalog, name: str, checkpoint: int, rows: pa.Table, mode: str = OVERWRITE, job: str = "j"):
    committer = ic.GlobalCommitter(catalog, name, job_id=job)
    table = committer.load_table()
    committer.prepare(checkpoint, [write_arrow(table, rows, job_id=job, checkpoint_id=checkpoint)], mode=mode)
    return committer.commit(checkpoint)


def _ids(catalog: SqlCatalog, name: str) -> list[int]:
    return sorted(catalog.load_table(name).scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def _where(rows: pa.Table, **equal: object) -> pa.Table:
    keep = [all(r[k] == v for k, v in equal.items()) for r in rows.to_pylist()]
    return rows.filter(pa.array(keep))


def _at(hours: list[float], first_id: int) -> pa.Table:
    """Rows at ``hours`` after H0 (one per hour offset), ids from ``first_id``."""
    return pa.table(
        {
            "id": pa.array(range(first_id, first_id + len(hours)), pa.int64()),
            "ts": pa.array([H0 + timedelta(hours=h) for h in hours], pa.timestamp("us", tz="UTC")),
            "event": pa.array(["pv"] * len(hours)),
            "score": pa.array([1.0] * len(hours)),
        },
        schema=EVENTS_SCHEMA,
    )


def test_an_overwrite_replaces_exactly_the_partitions_its_rows_touch(catalog: SqlCatalog) -> None:
    name = _table(catalog, ["event"])
    first = events(0, 60)
    _land(catalog, name, 1, first, mode="append")
    rerun = _where(events(1000, 1030), event="pv")
    result = _land(catalog, name, 2, rerun)
    assert result.committed and result.records == rerun.num_rows
    kept = [r["id"] for r in first.to_pylist() if r["event"] != "pv"]
    assert _ids(catalog, name) == sorted(kept + rerun.column("id").to_pylist())
    table = catalog.load_table(name)
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.operation.value == "overwrite"
    summary = snapshot.summary.additional_properties
    assert (summary["icecommit.job-id"], summary["icecommit.checkpoint-id"]) == ("j", "2")
    assert summary["icecommit.write-mode"] == OVERWRITE and summary["icecommit.replaced-partitions"] == "1"
    assert int(summary["deleted-records"]) == len(first) - len(kept)
    state = ic.GlobalCommitter(catalog, name, job_id="j").store.get("j", name, 2)
    assert state is not None and state.features == (OVERWRITE,) and state.base_sequence_number == 1
    # the rows it replaced are superseded, not lost; the overwrite says what it replaced
    report = ic.reconcile(catalog, name, job_id="j")
    assert report.ok, report.to_markdown()
    lines = {line.checkpoint_id: line for line in report.checkpoints}
    assert f"{len(first) - len(kept)} superseded by checkpoint 2 of job j" in lines[1].note
    assert f"overwrote 1 partition(s): replaced {len(first) - len(kept)} row(s) in 1 file(s)" in lines[2].note
    assert any(p.kind == "superseded" for p in report.problems)


def test_an_unpartitioned_table_is_replaced_whole_and_an_empty_checkpoint_replaces_nothing(
    catalog: SqlCatalog,
) -> None:
    name = _table(catalog, [])
    _land(catalog, name, 1, events(0, 30), mode="append")
    _land(catalog, name, 2, events(100, 105))
    assert _ids(catalog, name) == list(range(100, 105))
    empty = _land(catalog, name, 3, events(0, 0))
    assert empty.status == "empty" and _ids(catalog, name) == list(range(100, 105))


def test_day_and_hour_partitions_across_a_spec_change(catalog: SqlCatalog) -> None:
    name = _table(catalog, ["day(ts)"])
    _land(catalog, name, 1, _at([1, 5, 25, 30, 49], 0), mode="append")  # days 0, 1, 2
    _land(catalog, name, 2, _at([26, 27], 100))  # day 1 replaced
    assert _ids(catalog, name) == [0, 1, 4, 100, 101]
    _land(catalog, name, 3, _at([49.5], 200), mode="append")  # day 2 now holds hour 49 only
    with catalog.load_table(name).update_spec() as spec:
        spec.remove_field("ts_day")
        spec.add_field("ts", HourTransform(), "ts_hour")
    # hour 49 of day 2: the old day-2 files hold only rows of that hour, so they are replaced
    _land(catalog, name, 4, _at([49.25], 300))
    assert _ids(catalog, name) == [0, 1, 100, 101, 300]
    # hour 1 of day 0: the old day-0 file also holds hour 5, so it cannot be replaced whole
    with pytest.raises(OverwriteSpansFileError, match=r"ts_hour=2026-03-01-01.*partition spec 0") as refused:
        _land(catalog, name, 5, _at([1.5], 400))
    assert refused.value.spec_id == 0
    assert _ids(catalog, name) == [0, 1, 100, 101, 300]  # nothing committed
    # back to days: an overwrite of day 2 replaces the hour file inside it
    with catalog.load_table(name).update_spec() as spec:
        spec.remove_field("ts_hour")
        spec.add_field("ts", DayTransform(), "ts_day2")
    _land(catalog, name, 6, _at([48], 500), job="k")
    assert _ids(catalog, name) == [0, 1, 100, 101, 500]


def test_rows_another_job_added_to_a_touched_partition_are_a_conflict_never_dropped(catalog: SqlCatalog) -> None:
    name = _table(catalog, ["event"])
    _land(catalog, name, 1, events(0, 60), mode="append")
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    rows = _where(events(1000, 1030), event="pv")
    written = write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=2)  # the writers read the table
    _land(catalog, name, 1, _where(events(2000, 2030), event="show"), mode="append", job="elsewhere")  # untouched
    _land(catalog, name, 7, _where(events(3000, 3030), event="pv"), mode="append", job="other")  # touched
    before = _ids(catalog, name)
    committer.prepare(2, [written], mode=OVERWRITE)
    with pytest.raises(OverwriteConflictError, match=r"partition event=pv.*checkpoint 7 of job 'other'") as raised:
        committer.commit(2)
    assert isinstance(raised.value, CommitConflictError) and raised.value.by == ("other", 7)
    assert _ids(catalog, name) == before
    assert committer.store.get("j", name, 2).status == "prepared"  # type: ignore[union-attr]
    # the way on: give it up, run the overwrite again as a new checkpoint (it sees those rows)
    committer.abandon(2, reason="rerun after a conflict")
    _land(catalog, name, 3, rows)
    assert 3000 not in _ids(catalog, name) and set(rows.column("id").to_pylist()) <= set(_ids(catalog, name))


def test_rows_added_only_to_untouched_partitions_meanwhile_are_kept_and_the_overwrite_lands(
    catalog: SqlCatalog,
) -> None:
    name = _table(catalog, ["event"])
    _land(catalog, name, 1, events(0, 60), mode="append")
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    rows = _where(events(1000, 1030), event="pv")
    written = write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=2)
    show = _where(events(2000, 2030), event="show")
    _land(catalog, name, 1, show, mode="append", job="elsewhere")  # an untouched partition, after the base
    committer.prepare(2, [written], mode=OVERWRITE)
    assert committer.commit(2).committed
    kept = [r["id"] for r in events(0, 60).to_pylist() if r["event"] != "pv"]
    assert _ids(catalog, name) == sorted(kept + show.column("id").to_pylist() + rows.column("id").to_pylist())


def test_rows_added_to_a_touched_partition_conflict_after_their_snapshots_expired(catalog: SqlCatalog) -> None:
    name = _table(catalog, ["event"])
    _land(catalog, name, 1, events(0, 60), mode="append")
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    written = write_arrow(committer.load_table(), _where(events(1000, 1030), event="pv"), job_id="j", checkpoint_id=2)
    _land(catalog, name, 1, _where(events(3000, 3030), event="pv"), mode="append", job="other")
    _land(catalog, name, 2, _where(events(4000, 4030), event="show"), mode="append", job="other")
    later = dt.datetime.now(dt.timezone.utc) + timedelta(seconds=1)
    apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), retain_last=1, now=later))
    before = _ids(catalog, name)
    committer.prepare(2, [written], mode=OVERWRITE)
    with pytest.raises(OverwriteConflictError, match="a snapshot expired since added") as raised:
        committer.commit(2)
    assert raised.value.snapshot_id is None and "event=pv" in str(raised.value)
    assert _ids(catalog, name) == before


def test_a_delete_in_a_touched_partition_is_a_conflict(catalog: SqlCatalog) -> None:
    name = _table(catalog, ["event"])
    _land(catalog, name, 1, events(0, 60), mode="append")
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    written = write_arrow(committer.load_table(), _where(events(1000, 1030), event="click"), job_id="j",
                          checkpoint_id=2)  # fmt: skip
    table = catalog.load_table(name)
    click = next(t for t in table.inspect.files().to_pylist() if t["partition"]["event"] == "click")
    deleting = delete_positions(table, {click["file_path"]: [0]})  # another engine's row-level delete
    committer.prepare(2, [written], mode=OVERWRITE)
    with pytest.raises(OverwriteConflictError, match="another writer") as raised:
        committer.commit(2)
    assert raised.value.snapshot_id == deleting and raised.value.by is None


def test_a_lost_response_and_a_replay_apply_the_overwrite_once(scripted_catalog: SqlCatalog) -> None:
    catalog = scripted_catalog
    name = _table(catalog, ["event"])
    _land(catalog, name, 1, events(0, 60), mode="append")

    def lost() -> None:
        raise ConnectionResetError("the catalog's answer was lost")

    catalog.after.append(lost)  # type: ignore[attr-defined]
    rerun = _where(events(1000, 1030), event="pv")
    assert _land(catalog, name, 2, rerun).committed
    _land(catalog, name, 3, _where(events(4000, 4030), event="pv"), mode="append")
    after = _ids(catalog, name)
    again = ic.GlobalCommitter(catalog, name, job_id="j").commit(2)  # a replay after later checkpoints wrote there
    assert again.status == "already-committed" and _ids(catalog, name) == after
    landed = Counter((c.job_id, c.checkpoint_id) for c in committed_checkpoints(catalog.load_table(name).metadata))
    assert landed == Counter({("j", 1): 1, ("j", 2): 1, ("j", 3): 1})


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_an_exception_at_each_step_then_a_replay_overwrites_once(catalog: SqlCatalog, point: str) -> None:
    crash_then_replay_in_process(catalog, f"{catalog.name}.events", "crashy", point, overwrite=True)
    _assert_overwritten_once(catalog, f"{catalog.name}.events", "crashy")


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_process_killed_mid_overwrite_then_replayed_overwrites_once(catalog: SqlCatalog, point: str) -> None:
    crash_then_replay_as_processes(catalog, f"{catalog.name}.events", "crashy", point, "--overwrite")
    _assert_overwritten_once(catalog, f"{catalog.name}.events", "crashy")


def _assert_overwritten_once(catalog: SqlCatalog, name: str, job: str) -> None:
    assert _ids(catalog, name) == overwritten_ids()
    metadata = catalog.load_table(name).metadata
    by_checkpoint = {ancestry.checkpoint_of(s): s for s in metadata.snapshots}
    second = by_checkpoint[(job, 2)].summary
    assert second is not None and second.operation.value == "overwrite"  # not an append: it replaced pv
    assert int(second["deleted-records"]) == sum(1 for r in crash_driver.checkpoint_rows(1).to_pylist()
                                                 if r["event"] == "pv")  # fmt: skip
    assert Counter((c.job_id, c.checkpoint_id) for c in committed_checkpoints(metadata)) == Counter(
        (job, c) for c in (1, 2, 3)
    )
    committer = ic.GlobalCommitter(catalog, name, job_id=job)
    states = committer.store.list(committer.table_name, job_id=job)
    assert [(s.checkpoint_id, s.status) for s in states] == [(c, "committed") for c in (1, 2, 3)]
    assert [OVERWRITE in s.features for s in states] == [False, True, True]


def test_rollback_and_expiry_hold_for_overwrites(catalog: SqlCatalog) -> None:
    name = _table(catalog, ["event"])
    first = events(0, 60)
    _land(catalog, name, 1, first, mode="append")
    _land(catalog, name, 2, _where(events(1000, 1030), event="pv"))
    plan = plan_rollback(catalog, name, to_checkpoint=1, job_id="j")
    replaced = len(_where(first, event="pv"))
    assert (plan.hidden_records, plan.reappearing_records) == (len(_where(events(1000, 1030), event="pv")), replaced)
    assert plan.reappearing_checkpoints == (("j", 2),)  # the dry run says which rows come back, and why
    apply_rollback(catalog, plan)
    assert _ids(catalog, name) == list(range(60))  # the replaced rows are back
    assert ic.GlobalCommitter(catalog, name, job_id="j").store.get("j", name, 2).status == "rolled-back"  # type: ignore[union-attr]
    _land(catalog, name, 3, _where(events(2000, 2030), event="show"))
    later = dt.datetime.now(dt.timezone.utc) + timedelta(seconds=1)
    apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), retain_last=1, now=later))
    again = ic.GlobalCommitter(catalog, name, job_id="j").commit(3)  # its snapshot is the only one left
    assert again.status == "already-committed"
    assert _ids(catalog, name) == sorted(
        [r["id"] for r in first.to_pylist() if r["event"] != "show"] + list(_where(events(2000, 2030), event="show")
                                                                            .column("id").to_pylist())
    )  # fmt: skip


def test_modes_are_checked_and_older_code_refuses_an_overwrite(catalog: SqlCatalog) -> None:
    name = _table(catalog, ["event"], **{"icecommit.write-mode": OVERWRITE})
    _land(catalog, name, 1, events(0, 60), mode="append")
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    rows = _where(events(100, 130), event="pv")
    committer.prepare(2, [write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=2)])  # the default
    state = committer.store.get("j", name, 2)
    assert state is not None and state.features == (OVERWRITE,)
    with pytest.raises(CheckpointFeatureError, match=OVERWRITE):
        require_supported(state, supported() - {OVERWRITE})
    with pytest.raises(InvalidArgumentError, match="mode='replace' is not valid: expected one of append, overwrite"):
        ic.WriteOptions(mode="replace")
    with pytest.raises(InvalidArgumentError, match="mode"):
        committer.prepare(3, [], mode="replace")
    v1 = f"{catalog.name}.v1"
    ic.create_table(catalog, v1, EVENTS_SCHEMA, properties={"format-version": "1"})
    old = ic.GlobalCommitter(catalog, v1, job_id="j")
    with pytest.raises(InvalidArgumentError, match="format version 1"):
        old.prepare(1, [write_arrow(old.load_table(), rows, job_id="j", checkpoint_id=1)], mode=OVERWRITE)
    assert old.store.get("j", v1, 1) is None


def _overwriter(uri: str, warehouse: str, name: str, table: str, job: str, start: float) -> None:
    """One job: write its ``pv`` rows from the table as it is, wait for the common start,
    then prepare and commit an overwrite of ``pv``; exits 29 on a conflict."""
    catalog = SqlCatalog(name, uri=uri, warehouse=warehouse)
    committer = ic.GlobalCommitter(catalog, table, job_id=job)
    offset = 10_000 if job == "a" else 20_000
    rows = _where(events(offset, offset + 30), event="pv")
    written = write_arrow(committer.load_table(), rows, job_id=job, checkpoint_id=1)
    time.sleep(max(0.0, start - time.time()))
    committer.prepare(1, [written], mode=OVERWRITE)
    try:
        committer.commit(1)
    except OverwriteConflictError as e:
        print(e)
        os._exit(29)
    finally:
        catalog.engine.dispose()


def test_two_processes_overwriting_one_partition_at_once_one_lands_the_other_conflicts(catalog: SqlCatalog) -> None:
    name = _table(catalog, ["event"])
    _land(catalog, name, 1, events(0, 60), mode="append", job="seed")
    start = time.time() + 2.0
    uri, warehouse = catalog.properties["uri"], catalog.properties["warehouse"]
    children = {job: processes.Child(_overwriter, uri, warehouse, catalog.name, name, job, start) for job in "ab"}
    codes = {}
    for job, child in children.items():
        out, err = child.communicate(timeout=120)
        codes[job] = (child.returncode, out + err[-2000:])
    assert sorted(code for code, _ in codes.values()) == [0, 29], codes
    loser = next(job for job, (code, _) in codes.items() if code == 29)
    winner = "b" if loser == "a" else "a"
    assert f"checkpoint 1 of job '{winner}'" in codes[loser][1] and "partition event=pv" in codes[loser][1]
    offset = 10_000 if winner == "a" else 20_000
    pv = [r["id"] for r in events(0, 60).to_pylist() if r["event"] != "pv"]
    assert _ids(catalog, name) == sorted(pv + _where(events(offset, offset + 30), event="pv").column("id").to_pylist())
