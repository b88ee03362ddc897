"""Compaction of partitions that carry position delete files: the deleted rows are left out
of the rewrite, the delete files that no longer apply leave the table, the lineage says
which snapshot removed the rows, and reconciliation keeps proving every row."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

import icecommit as ic
from icecommit.errors import InvalidArgumentError
from icecommit.maintenance.compaction import compact, plan_compaction
from icecommit.maintenance.expire import apply_expire, plan_expire
from icecommit.maintenance.policy import MaintenancePolicy, maintain
from tests.cli.runner import invoke
from tests.fakes import small_checkpoints
from tests.helpers import EVENTS_SCHEMA, assert_same_rows, delete_equal, delete_positions, events, write_arrow


def _files(table: Table, content: int) -> list[dict[str, object]]:
    return [f for f in table.inspect.files().to_pylist() if f["content"] == content]


def _click_files(table: Table) -> list[str]:
    return sorted(str(f["file_path"]) for f in _files(table, 0) if f["partition"]["event"] == "click")


def _kinds(report: ic.ReconciliationReport) -> Counter[str]:
    return Counter(p.kind for p in report.problems)


@pytest.mark.database_independent
def test_deleted_rows_are_left_out_and_the_delete_files_dropped(catalog: SqlCatalog, table_name: str) -> None:
    table = small_checkpoints(catalog, table_name, 6)
    clicks = _click_files(table)
    deleter = delete_positions(table, {clicks[0]: [0, 1, 2], clicks[3]: [4]})
    table = catalog.load_table(table_name)
    before = table.scan().to_arrow()
    assert len(_files(table, 1)) == 2 and ic.reconcile(catalog, table_name).ok

    plan = plan_compaction(catalog, table_name)
    click = next(p for g in plan.groups for p in g.partitions if p.partition == ("click",))
    assert (click.deleted_records, click.delete_files) == (4, 2) and plan.skipped == ()
    done = compact(catalog, table_name)
    assert done.committed == 1 and done.groups[0].removed_delete_files == 2
    after = catalog.load_table(table_name)
    assert_same_rows(after.scan().to_arrow(), before)
    assert _files(after, 1) == []  # every delete file applied and dropped
    head = after.current_snapshot()
    assert head is not None and head.summary is not None
    assert (head.summary["removed-delete-files"], head.summary["removed-position-deletes"]) == ("2", "4")
    assert head.summary.get("total-delete-files") == "0"
    # the four rows are still accounted for: removed by the deleting snapshot, not lost
    report = ic.reconcile(catalog, table_name)
    assert report.ok, report.problems
    removed = [p for p in report.problems if p.kind == "removed"]
    assert sum(line.removed for line in report.checkpoints) == 4
    assert removed and all(f"snapshot {deleter} (row-level deletes)" in p.message for p in removed)
    # and stay so once the deleting and compacting snapshots are expired (the lineage is in the state)
    when = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
    apply_expire(catalog, plan_expire(catalog, table_name, older_than=dt.timedelta(0), retain_last=1, now=when))
    expired = ic.reconcile(catalog, table_name)
    assert expired.ok, expired.problems
    assert sum(line.removed for line in expired.checkpoints) == 4 and "untraceable" not in _kinds(expired)


@pytest.mark.database_independent
def test_a_delete_file_that_names_a_file_not_rewritten_stays_until_that_one_is(
    catalog: SqlCatalog, table_name: str
) -> None:
    small_checkpoints(catalog, table_name, 5)
    committer = ic.GlobalCommitter(catalog, table_name, job_id="big")
    rows = events(10_000, 10_900)
    committer.prepare(1, [write_arrow(committer.load_table(), rows, job_id="big", checkpoint_id=1)])
    committer.commit(1)
    table = catalog.load_table(table_name)
    sizes = {
        str(f["file_path"]): int(f["file_size_in_bytes"])
        for f in _files(table, 0)
        if f["partition"]["event"] == "click"
    }
    big = max(sizes, key=sizes.__getitem__)
    small = sorted(p for p in sizes if p != big)
    # one delete file for a small file and the big one (as Spark writes one per partition)
    delete_positions(table, {small[0]: [0], big: [3]}, one_file=True)
    before = catalog.load_table(table_name).scan().to_arrow()
    target = sizes[big] * 4 // 3  # the big file is not small for it, the others are

    first = compact(catalog, table_name, where="event = 'click'", target_file_size=target, delete_ratio=None)
    assert first.committed == 1 and first.groups[0].removed_delete_files == 0
    assert big not in first.groups[0].partitions[0].files and small[0] in first.groups[0].partitions[0].files
    after = catalog.load_table(table_name)
    assert len(_files(after, 1)) == 1  # it still deletes a row of the big file
    assert_same_rows(after.scan().to_arrow(), before)
    assert ic.reconcile(catalog, table_name).ok

    second = compact(catalog, table_name, where="event = 'click'", target_file_size=target, delete_ratio=0.001)
    assert second.committed == 1 and big in second.groups[0].partitions[0].files
    assert second.groups[0].removed_delete_files == 1
    done = catalog.load_table(table_name)
    assert _files(done, 1) == []
    assert_same_rows(done.scan().to_arrow(), before)
    report = ic.reconcile(catalog, table_name)
    assert report.ok, report.problems
    assert sum(line.removed for line in report.checkpoints) == 2


@pytest.mark.database_independent
def test_a_file_with_many_deleted_rows_is_rewritten_whatever_its_size(catalog: SqlCatalog, table_name: str) -> None:
    small_checkpoints(catalog, table_name, 2)  # two small files per partition: fewer than min_input_files
    table = catalog.load_table(table_name)
    clicks = _click_files(table)
    rows = int(next(f["record_count"] for f in _files(table, 0) if f["file_path"] == clicks[0]))
    delete_positions(table, {clicks[0]: list(range(rows // 2)), clicks[1]: [0]})
    assert plan_compaction(catalog, table_name, delete_ratio=None).groups == ()
    plan = plan_compaction(catalog, table_name)  # the default ratio, 0.3: half of one file is deleted
    assert [p.partition for g in plan.groups for p in g.partitions] == [("click",)]
    assert plan.groups[0].partitions[0].files == tuple(clicks)  # the small one of the partition too
    assert plan_compaction(catalog, table_name, delete_ratio=0.6).groups == ()
    for bad in (0, 1.5, "half", True):
        with pytest.raises(InvalidArgumentError) as refused:
            plan_compaction(catalog, table_name, delete_ratio=bad)  # type: ignore[arg-type]
        assert refused.value.argument == "delete_ratio"


@pytest.mark.database_independent
def test_the_policy_compacts_partitions_past_its_delete_ratio(catalog: SqlCatalog, table_name: str) -> None:
    small_checkpoints(catalog, table_name, 2)
    table = catalog.load_table(table_name)
    clicks = _click_files(table)
    delete_positions(table, {clicks[0]: list(range(20))})
    before = catalog.load_table(table_name).scan().to_arrow()
    idle = maintain(catalog, table_name, MaintenancePolicy(compact_delete_ratio=None, only_complete=False))
    assert idle.compaction is not None and idle.compaction.groups == ()
    run = maintain(catalog, table_name, MaintenancePolicy(compact_delete_ratio=0.25, only_complete=False))
    assert run.compaction is not None and run.compaction.committed == 1
    after = catalog.load_table(table_name)
    assert _files(after, 1) == [] and after.scan().to_arrow().num_rows == before.num_rows
    with pytest.raises(InvalidArgumentError):
        MaintenancePolicy(compact_delete_ratio=2)


@pytest.mark.database_independent
def test_a_partition_with_equality_deletes_is_skipped_and_named(catalog: SqlCatalog, table_name: str) -> None:
    table = small_checkpoints(catalog, table_name, 6)
    delete_equal(table, _click_files(table)[0], "id", [0])
    plan = plan_compaction(catalog, table_name)
    assert ("event=click", "equality delete files (another engine's) apply to its rows") in plan.skipped
    assert ("click",) not in [p.partition for g in plan.groups for p in g.partitions]
    assert ("pv",) in [p.partition for g in plan.groups for p in g.partitions]


def _ids(table: Table) -> list[int]:
    return sorted(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


@pytest.mark.database_independent
def test_rows_deleted_after_the_rewrite_abort_the_group_and_stay_deleted(catalog: SqlCatalog, table_name: str) -> None:
    table = small_checkpoints(catalog, table_name, 6)
    clicks = _click_files(table)
    delete_positions(table, {clicks[0]: [0]})
    expected = set(_ids(catalog.load_table(table_name)))

    def delete_more(step: str, group: object) -> None:
        if step == "commit":
            current = catalog.load_table(table_name)
            before = set(_ids(current))
            delete_positions(current, {clicks[0]: [1]})
            expected.clear()
            expected.update(set(_ids(catalog.load_table(table_name))))
            assert len(before - expected) == 1

    done = compact(catalog, table_name, on_step=delete_more)
    assert done.aborted == 1 and "changed since they were rewritten" in (done.groups[0].reason or "")
    after = catalog.load_table(table_name)
    assert _ids(after) == sorted(expected)
    assert ic.reconcile(catalog, table_name).ok


@pytest.mark.database_independent
def test_rows_deleted_from_compacted_files_are_removed_not_readable(catalog: SqlCatalog, table_name: str) -> None:
    small_checkpoints(catalog, table_name, 6)
    assert compact(catalog, table_name).committed == 1
    table = catalog.load_table(table_name)
    clicks = _click_files(table)
    assert len(clicks) == 1  # every checkpoint's clicks in one file now
    deleter = delete_positions(table, {clicks[0]: [0, 1, 2, 3, 4]})
    report = ic.reconcile(catalog, table_name)
    assert report.ok, report.problems
    rows = json.loads(report.to_json())["summary"]["rows"]
    assert (rows["readable"], rows["removed"]) == (355, 5)  # exactly, though shared among six checkpoints
    assert sum(line.readable for line in report.checkpoints) == 355
    assert all(f"snapshot {deleter} (row-level deletes)" in p.message for p in report.problems if p.kind == "removed")
    assert all("0 removed" not in line.note for line in report.checkpoints)
    deep = ic.reconcile(catalog, table_name, deep=True)  # the rows read from the files agree
    assert deep.ok, deep.problems
    assert json.loads(deep.to_json())["summary"]["rows"]["readable"] == 355
    # compacting again applies the delete file: the same numbers, from the lineage now
    assert compact(catalog, table_name, min_input_files=1, where="event = 'click'").committed == 1
    again = json.loads(ic.reconcile(catalog, table_name).to_json())["summary"]["rows"]
    assert (again["readable"], again["removed"]) == (355, 5)


def test_the_cli_says_what_deletes_it_applied(tmp_path: Path) -> None:
    home = tmp_path / "home"
    catalog = ic.connect(uri=f"sqlite:///{home / 'catalog.db'}", warehouse=str(home))
    ic.create_table(catalog, "ns.events", EVENTS_SCHEMA, partition_by=["event"])
    table = small_checkpoints(catalog, "ns.events", 5)
    clicks = _click_files(table)
    delete_positions(table, {clicks[0]: [0, 1], clicks[1]: [0]})
    catalog.engine.dispose()  # type: ignore[attr-defined]
    plan = invoke(home, "compact", "ns.events", "--dry-run", "--where", "event = 'click'")
    assert plan.returncode == 0, plan.stderr
    assert "event=click: 5 file(s)" in plan.stdout and "3 deleted row(s) left out (2 delete file(s))" in plan.stdout
    done = invoke(home, "compact", "ns.events", "--where", "event = 'click'")
    assert done.returncode == 0 and "2 delete file(s) dropped" in done.stdout, done.stdout + done.stderr
    refused = invoke(home, "compact", "ns.events", "--delete-ratio", "0")
    assert refused.returncode == 2 and "--delete-ratio" in refused.stderr
