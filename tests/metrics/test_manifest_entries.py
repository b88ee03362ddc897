"""The projected manifest reader agrees with pyiceberg's full decode, entry by entry, on
every manifest of a table's history (appends, compaction, copy-on-write deletes, position
delete files; v1 and v2); a reconciliation over a range reads only the manifests written
since the range's first snapshot and still judges its checkpoints exactly."""

from __future__ import annotations

import datetime as dt
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import LessThan
from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestFile
from pyiceberg.table import Table

import icecommit as ic
from icecommit.catalog.manifest_entries import read_entries
from icecommit.state import CheckpointStore, state_engine, state_uri
from tests.helpers import DAY0, EVENTS_SCHEMA, compact, delete_positions, events, write_arrow

# manifests are files
pytestmark = pytest.mark.database_independent

JOB = "ranges"
#: the module (``icecommit.metrics.reconcile`` as an attribute is the function it exports)
reconcile_module = importlib.import_module("icecommit.metrics.reconcile")


def _history(catalog: SqlCatalog, name: str, *, version: int, checkpoints: int = 3) -> Table:
    """A table whose history has appends by icecommit, a compaction, a copy-on-write
    delete and a position delete file: manifests with ADDED, EXISTING and DELETED entries
    of data and delete files."""
    table = ic.create_table(
        catalog, f"{catalog.name}.{name}", EVENTS_SCHEMA, partition_by=["event"],
        properties={"format-version": str(version)},
    )  # fmt: skip
    committer = ic.GlobalCommitter(catalog, table, job_id=JOB)
    for checkpoint_id in range(1, checkpoints + 1):
        loaded = committer.load_table()
        rows = events(checkpoint_id * 100, checkpoint_id * 100 + 60)
        committer.prepare(checkpoint_id, [write_arrow(loaded, rows, job_id=JOB, checkpoint_id=checkpoint_id)])
        committer.commit(checkpoint_id)
    table = committer.load_table()
    compact(table)
    table = committer.load_table()
    table.delete(LessThan("id", 110))  # copy-on-write: files rewritten without some rows
    table = committer.load_table()
    if version >= 2:
        some = table.inspect.data_files().column("file_path")[0].as_py()
        delete_positions(table, {some: [0, 1]})
    return committer.load_table()


def _full(io: FileIO, manifest: ManifestFile, discard_deleted: bool) -> list[tuple[Any, ...]]:
    return [
        (e.status, e.snapshot_id, e.sequence_number, e.data_file.content, e.data_file.file_path,
         e.data_file.record_count)
        for e in manifest.fetch_manifest_entry(io, discard_deleted=discard_deleted)
    ]  # fmt: skip


@pytest.mark.parametrize("version", [1, 2])
def test_projected_entries_equal_pyicebergs_on_every_manifest_of_the_history(catalog: SqlCatalog, version: int) -> None:
    table = _history(catalog, f"v{version}", version=version)
    manifests = {m.manifest_path: m for s in table.metadata.snapshots for m in s.manifests(table.io)}
    statuses = set()
    contents = set()
    for manifest in manifests.values():
        for discard in (True, False):
            ours = [
                (e.status, e.snapshot_id, e.sequence_number, e.content, e.file_path, e.record_count)
                for e in read_entries(table.io, manifest, discard_deleted=discard)
            ]
            assert ours == _full(table.io, manifest, discard), manifest.manifest_path
            statuses.update(e[0] for e in ours)
            contents.update(e[3] for e in ours)
    # the history exercised every kind of entry the reader must tell apart
    assert {s.name for s in statuses} == {"ADDED", "EXISTING", "DELETED"}
    assert {c.name for c in contents} == ({"DATA", "POSITION_DELETES"} if version >= 2 else {"DATA"})


def _ranged_pipeline(
    catalog: SqlCatalog, checkpoints: int, properties: dict[str, str]
) -> tuple[Table, list[dt.datetime]]:
    """Checkpoints prepared an hour apart (an injected clock), one commit each."""
    now = [DAY0 + dt.timedelta(days=10)]
    table = ic.create_table(
        catalog, f"{catalog.name}.ranged", EVENTS_SCHEMA, partition_by=["event"],
        properties={"icecommit.event-time-column": "ts", **properties},
    )  # fmt: skip
    store = CheckpointStore(state_engine(state_uri(catalog)), clock=lambda: now[0])
    committer = ic.GlobalCommitter(catalog, table, job_id=JOB, store=store)
    prepared = []
    for checkpoint_id in range(1, checkpoints + 1):
        now[0] += dt.timedelta(hours=1)
        prepared.append(now[0])
        loaded = committer.load_table()
        rows = events(checkpoint_id * 1000, checkpoint_id * 1000 + 40)
        committer.prepare(checkpoint_id, [
            write_arrow(loaded, rows.slice(0, 20), job_id=JOB, checkpoint_id=checkpoint_id, task_id=0),
            write_arrow(loaded, rows.slice(20), job_id=JOB, checkpoint_id=checkpoint_id, task_id=1),
        ])  # fmt: skip
        committer.commit(checkpoint_id)
    return committer.load_table(), prepared


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[ManifestFile]:
    read: list[ManifestFile] = []
    original: Callable[..., Any] = reconcile_module.read_entries

    def spy(io: FileIO, manifest: ManifestFile, **kwargs: Any) -> Any:
        read.append(manifest)
        return original(io, manifest, **kwargs)

    monkeypatch.setattr(reconcile_module, "read_entries", spy)
    return read


def test_a_range_reads_only_the_manifests_written_since_and_judges_its_checkpoints(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, prepared = _ranged_pipeline(catalog, 5, {})
    # an older checkpoint's file is gone: the whole-table run sees it, a run over the
    # newest checkpoint (whose manifests do not hold that file) does not look at it
    old_files = [
        e.file_path
        for s in table.metadata.snapshots
        if s.summary is not None and s.summary.get("icecommit.checkpoint-id") == "1"
        for m in s.manifests(table.io)
        if m.added_snapshot_id == s.snapshot_id
        for e in read_entries(table.io, m)
    ]
    assert old_files
    Path(old_files[0].removeprefix("file://")).unlink()
    read = _counting(monkeypatch)
    full = ic.reconcile(catalog, table, job_id=JOB)
    assert {p.kind for p in full.problems} >= {"missing-file"}
    assert len(read) == len(table.current_snapshot().manifests(table.io)) == 5
    read.clear()
    newest = ic.reconcile(catalog, table, job_id=JOB, since=prepared[-1] - dt.timedelta(minutes=1))
    assert [c.checkpoint_id for c in newest.checkpoints] == [5]
    assert newest.ok, newest.to_markdown()
    assert newest.checkpoints[0].readable == 40
    newest_snapshot = table.current_snapshot()
    assert [m.added_snapshot_id for m in read] == [newest_snapshot.snapshot_id]


def test_a_range_after_manifests_were_merged_still_finds_every_file(
    catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # merging every second commit: the newest checkpoints' files sit in merged manifests
    # (EXISTING entries written by a later snapshot than the one that added them)
    table, prepared = _ranged_pipeline(
        catalog, 6, {"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "2"}
    )
    manifests = table.current_snapshot().manifests(table.io)
    assert len(manifests) < 6  # merged
    read = _counting(monkeypatch)
    for start in (2, 4, 5):
        read.clear()
        report = ic.reconcile(catalog, table, job_id=JOB, since=prepared[start] - dt.timedelta(minutes=1))
        assert [c.checkpoint_id for c in report.checkpoints] == list(range(start + 1, 7))
        assert report.ok, report.to_markdown()
        assert [c.readable for c in report.checkpoints] == [40] * (6 - start)
        assert len(read) <= len(manifests)


def test_a_range_on_a_v1_table_reads_every_manifest(catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch) -> None:
    table, prepared = _ranged_pipeline(catalog, 3, {"format-version": "1"})
    read = _counting(monkeypatch)
    report = ic.reconcile(catalog, table, job_id=JOB, since=prepared[-1] - dt.timedelta(minutes=1))
    assert report.ok and [c.readable for c in report.checkpoints] == [40]
    assert len(read) == len(table.current_snapshot().manifests(table.io))  # no sequence numbers to prune by
