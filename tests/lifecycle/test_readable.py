"""Readable means readable (issue 12, point 6): a checkpoint's rows count as readable
wherever they live now. Compaction (a ``replace`` snapshot that conserves the record
count) keeps them readable; an overwrite or delete removes them on purpose (information,
not loss); and neither the checkpoint's own snapshot nor the rewrite's needs to be retained
for a replay to know the checkpoint is in the table."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.maintenance import apply_expire, find_orphans, plan_expire
from tests.helpers import EVENTS_SCHEMA, compact, delete_positions, events, write_arrow

# readable counts are read from the table's files
pytestmark = pytest.mark.database_independent


def _commit(catalog: SqlCatalog, name: str, checkpoint_id: int, start: int) -> ic.GlobalCommitter:
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    rows = write_arrow(committer.load_table(), events(start, start + 30), job_id="A", checkpoint_id=checkpoint_id)
    committer.prepare(checkpoint_id, [rows])
    assert committer.commit(checkpoint_id).status == "committed"
    return committer


def _table(catalog: SqlCatalog) -> str:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["day(ts)"])
    for n in (1, 2, 3):
        _commit(catalog, name, n, n * 100)
    return name


def _ids(catalog: SqlCatalog, name: str) -> Counter[int]:
    return Counter(catalog.load_table(name).scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def _expire_all_but_head(catalog: SqlCatalog, name: str) -> None:
    apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), retain_last=1))


def test_compacted_checkpoints_stay_readable_before_and_after_expiry(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    replace = compact(catalog.load_table(name))
    for when in ("after compaction", "after the checkpoints' snapshots expired"):
        for deep in (False, True):
            report = ic.reconcile(catalog, name, deep=deep)
            assert report.ok, (when, deep, report.problems)
            lines = {line.checkpoint_id: line for line in report.checkpoints}
            assert [(lines[n].committed, lines[n].readable) for n in (1, 2, 3)] == [(30, 30)] * 3, when
            assert all("30 readable in files another snapshot rewrote" in lines[n].note for n in (1, 2, 3))
            assert not [p for p in report.problems if p.kind in ("loss", "untraceable", "rolled-back")]
        _expire_all_but_head(catalog, name)
        table = catalog.load_table(name)
        assert [s.snapshot_id for s in table.snapshots()] == [replace]
    # a replay of a compacted checkpoint whose snapshot is gone: in the table, not rolled back
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    assert committer.commit(2).status == "already-committed"
    assert committer.recover() == []
    assert _ids(catalog, name) == Counter([*range(100, 130), *range(200, 230), *range(300, 330)])


def test_rows_deleted_on_purpose_are_removed_not_lost_and_a_replay_does_not_bring_them_back(
    catalog: SqlCatalog,
) -> None:
    name = _table(catalog)
    table = catalog.load_table(name)
    table.delete("id >= 200 and id < 215")  # 15 rows of checkpoint 2, by a pyiceberg delete
    head = catalog.load_table(name).current_snapshot()
    assert head is not None and head.summary is not None
    removing = head.snapshot_id
    report = ic.reconcile(catalog, name)
    assert report.ok, report.problems
    line = {line.checkpoint_id: line for line in report.checkpoints}[2]
    assert (line.committed, line.readable) == (30, 15)
    removed = [p for p in report.problems if p.kind == "removed"]
    assert [(p.checkpoint_id, p.severity) for p in removed] == [(2, "info")]
    assert f"snapshot {removing}" in removed[0].message and "15 of its rows" in removed[0].message
    _expire_all_but_head(catalog, name)  # the delete is the head: its record is kept
    assert ic.GlobalCommitter(catalog, name, job_id="A").commit(2).status == "already-committed"
    assert _ids(catalog, name) == Counter([*range(100, 130), *range(215, 230), *range(300, 330)])
    assert ic.reconcile(catalog, name).ok


def test_rows_whose_rewrite_was_expired_too_are_untraceable_a_warning_not_loss(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    compact(catalog.load_table(name))
    _commit(catalog, name, 4, 400)  # the rewrite is no longer the head
    _expire_all_but_head(catalog, name)
    report = ic.reconcile(catalog, name)
    untraceable = [p for p in report.problems if p.kind == "untraceable"]
    assert not untraceable  # the checkpoints' snapshots went with it: each is "gone", shown as information
    lines = {line.checkpoint_id: line for line in report.checkpoints}
    assert lines[4].readable == 30 and lines[4].ok
    assert not [p for p in report.problems if p.kind == "loss"]


def test_rows_deleted_by_position_delete_files_are_removed_by_that_snapshot(catalog: SqlCatalog) -> None:
    name = _table(catalog)
    table = catalog.load_table(name)
    files = table.inspect.files()
    by_path = dict(zip(files.column("file_path").to_pylist(), files.column("record_count").to_pylist(), strict=True))
    path = sorted(by_path)[0]  # one data file of one checkpoint
    deleting = delete_positions(table, {path: [0, 2, 4]})
    table = catalog.load_table(name)
    assert sum(_ids(catalog, name).values()) == 90 - 3  # readers apply the deletes
    for deep in (False, True):
        report = ic.reconcile(catalog, name, deep=deep)
        assert report.ok, report.problems
        removed = [p for p in report.problems if p.kind == "removed"]
        assert len(removed) == 1 and removed[0].severity == "info"
        assert f"3 of its rows were removed on purpose by snapshot {deleting} (row-level deletes)" in removed[0].message
        line = {line.checkpoint_id: line for line in report.checkpoints}[removed[0].checkpoint_id]  # type: ignore[index]
        assert (line.committed, line.readable) == (30, 27)
    sweep = find_orphans(catalog, name, older_than=timedelta(0))  # the delete file is the table's
    assert not [o.path for o in sweep.orphans if "deletes-" in o.path]


def test_a_checkpoint_that_landed_unrecorded_then_was_compacted_and_expired_is_recorded_as_in(
    catalog: SqlCatalog,
) -> None:
    """Found by the lifecycle soak: the job died after the catalog accepted checkpoint 4
    and before its state said so; its snapshot was then expired and its files compacted.
    Recovery must record it as in the table (not as an empty checkpoint), replays must say
    already-committed, and reconciliation must count its rows."""
    name = _table(catalog)

    def die_after_commit(where: str, _checkpoint_id: int) -> None:
        if where == "after-commit":
            raise KeyboardInterrupt

    dying = ic.GlobalCommitter(catalog, name, job_id="A", fault=die_after_commit)
    rows = write_arrow(dying.load_table(), events(400, 430), job_id="A", checkpoint_id=4)
    dying.prepare(4, [rows])
    with pytest.raises(KeyboardInterrupt):
        dying.commit(4)
    other = ic.GlobalCommitter(catalog, name, job_id="B")  # another job of the table goes on
    other.prepare(1, [write_arrow(other.load_table(), events(500, 530), job_id="B", checkpoint_id=1)])
    other.commit(1)
    compact(catalog.load_table(name))
    _expire_all_but_head(catalog, name)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    state = committer.store.get("A", name, 4)
    assert state is not None and state.status == "prepared"
    [recovered] = committer.recover()
    assert (recovered.checkpoint_id, recovered.status) == (4, "already-committed")
    assert committer.commit(4).status == "already-committed"
    assert sum(_ids(catalog, name).values()) == 150
    report = ic.reconcile(catalog, name)
    assert report.ok, report.problems
    line = {line.checkpoint_id: line for line in report.checkpoints}[4]
    assert (line.status, line.committed, line.readable) == ("committed", 30, 30)
