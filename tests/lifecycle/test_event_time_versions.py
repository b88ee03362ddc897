"""Event-time versions, read-only: the table as of an event time, complete (the partition
holding it was published) or as rollback --to-event-time sees it (no data after it)."""

from __future__ import annotations

import datetime as dt
import json
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.core.ancestry import newest_without_data_after
from icecommit.errors import CompletenessNotReachedError, SnapshotNotFoundError
from tests.cli.runner import invoke
from tests.fakes import catalog_of
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

# versions are read from the table's history
pytestmark = pytest.mark.database_independent

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.timezone.utc)


def at(first_id: int, *minutes: int) -> pa.Table:
    data = events(first_id, first_id + len(minutes), days=1)
    times = [T0 + timedelta(minutes=m) for m in minutes]
    return data.set_column(1, "ts", pa.array(times, data.schema.field("ts").type))


def _table(catalog: SqlCatalog) -> tuple[str, dict[int, int]]:
    """Checkpoint 0 holds 00:10 and 00:20; 1 straddles the hour (00:50, 01:10) and closes
    hour 0; 2 holds a late row for hour 0 (00:15) and 02:10, which closes hour 1."""
    name = f"{catalog.name}.events"
    table = ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["hour(ts)"])
    committer = ic.GlobalCommitter(catalog, table, job_id="job")
    snapshots = {}
    for n, rows in enumerate([at(0, 10, 20), at(10, 50, 70), at(20, 15, 130)]):
        committer.prepare(n, [write_arrow(table, rows, job_id="job", checkpoint_id=n)])
        result = committer.commit(n)
        assert result.snapshot_id is not None
        snapshots[n] = result.snapshot_id
    return name, snapshots


def test_the_complete_version_holds_everything_up_to_t_that_had_arrived_and_counts_late_rows(
    catalog: SqlCatalog,
) -> None:
    name, snapshots = _table(catalog)
    when = T0 + timedelta(minutes=30)
    version = ic.snapshot_at_event_time(catalog, name, when)
    assert (version.snapshot_id, version.partition, version.late_records) == (
        snapshots[1],
        "ts_hour=2026-05-01-00",
        1,
    )
    scan, same = ic.scan_at_event_time(catalog, name, when)
    assert same == version
    assert sorted(scan.to_arrow().column("id").to_pylist()) == [0, 1]  # 00:10, 00:20; the late 00:15 came later
    # the rollback selector leaves out checkpoint 1, which straddles T
    rollback = ic.snapshot_at_event_time(catalog, name, when, complete=False)
    assert (rollback.snapshot_id, rollback.complete, rollback.late_records) == (snapshots[0], False, 0)
    with pytest.raises(CompletenessNotReachedError) as raised:
        ic.snapshot_at_event_time(catalog, name, T0 + timedelta(hours=2, minutes=30))
    assert raised.value.partition == "ts_hour=2026-05-01-02"
    with pytest.raises(SnapshotNotFoundError):
        ic.snapshot_at_event_time(catalog, name, T0, complete=False)  # every snapshot has data after 00:00


def test_snapshots_at_event_time_shows_both_versions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    local = catalog_of(home)
    name, snapshots = _table(local)
    out = invoke(home, "--output", "json", "snapshots", name, "--at-event-time", "2026-05-01T00:30:00Z")
    assert out.returncode == 0, out.stderr

    versions = {v["kind"]: v for v in json.loads(out.stdout)["versions"]}
    assert versions["complete"]["snapshot_id"] == str(snapshots[1]) and versions["complete"]["late_records"] == 1
    assert versions["no-data-after"]["snapshot_id"] == str(snapshots[0])
    text = invoke(home, "snapshots", name, "--at-event-time", "2026-05-01T02:30:00Z")
    assert text.returncode == 0 and "not complete yet" in text.stdout and str(snapshots[2]) in text.stdout


def test_a_rollback_by_event_time_says_how_many_rows_up_to_t_its_target_lacks(catalog: SqlCatalog) -> None:
    from icecommit.maintenance import plan_rollback

    name, snapshots = _table(catalog)
    plan = plan_rollback(catalog, name, to_event_time=T0 + timedelta(minutes=30))
    assert plan.target_snapshot_id == snapshots[0]
    # now: 00:10, 00:20 and the late 00:15 are at or before 00:30; the target holds two of them
    assert plan.lacking_up_to_event_time == 1
    assert plan_rollback(catalog, name, to_checkpoint=0, job_id="job").lacking_up_to_event_time is None


def test_the_rollback_target_by_event_time_keeps_a_checkpoint_ending_exactly_then_and_reads_its_branch(
    catalog: SqlCatalog,
) -> None:
    name, snapshots = _table(catalog)
    metadata = catalog.load_table(name).metadata
    # checkpoint 0's last row is at 00:20: at exactly 00:20 it is all "at or before"
    assert newest_without_data_after(metadata, name, T0 + timedelta(minutes=20)).snapshot_id == snapshots[0]
    with pytest.raises(SnapshotNotFoundError):
        newest_without_data_after(metadata, name, T0 + timedelta(minutes=20) - timedelta(microseconds=1))
    # a branch of its own: the walk follows that branch, not main
    catalog.load_table(name).manage_snapshots().create_branch(snapshots[0], "audit").commit()
    metadata = catalog.load_table(name).metadata
    later = T0 + timedelta(days=1)
    assert newest_without_data_after(metadata, name, later, "audit").snapshot_id == snapshots[0]
    assert newest_without_data_after(metadata, name, later).snapshot_id == snapshots[2]
