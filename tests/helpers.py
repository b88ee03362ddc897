"""Small builders shared by tests: Arrow data into WriteResults without Spark."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.manifest import DataFile, ManifestContent
from pyiceberg.table import Table

from icecommit import writers
from icecommit.core.datafiles import WriteResult

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

EVENTS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("event", pa.string()),
        pa.field("score", pa.float64()),
    ]
)
DAY0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def events(start: int, end: int, days: int = 3) -> pa.Table:
    """Rows ``start..end`` of a small deterministic event table (nulls and NaNs included)."""
    ids = list(range(start, end))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array(
                [DAY0 + dt.timedelta(days=i % days, seconds=i * 7 % 86_400) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "event": pa.array([(None if i % 11 == 0 else ("pv", "show", "click")[i % 3]) for i in ids]),
            "score": pa.array([float("nan") if i % 13 == 0 else (None if i % 17 == 0 else i / 4) for i in ids]),
        },
        schema=EVENTS_SCHEMA,
    )


def write_arrow(
    table: Table,
    data: pa.Table,
    *,
    job_id: str | None,
    checkpoint_id: int,
    task_id: int = 0,
    attempt: int = 0,
    target_size: int | None = None,
    batch_rows: int = 1000,
) -> WriteResult:
    """Write ``data`` the way one Spark task would."""
    return writers.write_arrow(
        table,
        data.to_batches(max_chunksize=batch_rows),
        job_id=job_id,
        checkpoint_id=checkpoint_id,
        task_id=task_id,
        attempt=attempt,
        target_size=target_size,
    )


def _normalised(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: ("NaN" if isinstance(v, float) and v != v else v) for k, v in row.items()} for row in rows]


def assert_same_rows(actual: pa.Table, expected: pa.Table, key: str = "id") -> None:
    """Equal by content: same rows and values (NaN equals NaN), whatever the order or
    the Arrow string/list width."""
    assert actual.num_rows == expected.num_rows, f"{actual.num_rows} rows, expected {expected.num_rows}"
    assert actual.column_names == expected.column_names
    left = _normalised(actual.sort_by(key).to_pylist())
    right = _normalised(expected.sort_by(key).to_pylist())
    for position, (a, b) in enumerate(zip(left, right, strict=True)):
        assert a == b, f"row {position} differs: {a} != {b}"


def run_to_end(query: StreamingQuery, timeout_s: float = 300.0) -> None:
    """Wait for a query started with ``availableNow`` to finish; fail if it is still
    running after ``timeout_s`` (stopping it) or if it failed."""
    if not query.awaitTermination(timeout_s):
        query.stop()
        raise AssertionError(f"streaming query {query.id} still running after {timeout_s:.0f}s")
    assert query.exception() is None, f"streaming query {query.id} failed: {query.exception()}"


class DistinctMillis:
    """A stand-in for the ``time`` module of ``pyiceberg.table.snapshots``: wall-clock time
    that moves forward by at least a millisecond per call, so snapshots made one after the
    other get distinct timestamps without sleeping (install with monkeypatch)."""

    def __init__(self) -> None:
        self._last_ms = 0

    def time(self) -> float:
        now_ms = max(int(time.time() * 1000), self._last_ms + 1)
        self._last_ms = now_ms
        return (now_ms + 0.5) / 1000


def compact(table: Table, *, snapshot_properties: dict[str, str] | None = None) -> int:
    """Rewrite every live data file of ``table`` into new files holding the same rows, as
    one ``replace`` snapshot (what an engine's compaction does); returns its snapshot id."""
    from icecommit.committer.producer import RewriteFiles
    from icecommit.state.manifests import to_data_file

    current = table.current_snapshot()
    assert current is not None
    old = [
        entry.data_file
        for manifest in current.manifests(table.io)
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    ]
    data = table.scan().to_arrow()
    result = write_arrow(table, data, job_id=None, checkpoint_id=0, task_id=99)
    with (
        table.transaction() as tx,
        RewriteFiles.of(tx, branch="main", snapshot_properties=snapshot_properties or {}) as rewrite,
    ):
        for data_file in old:
            rewrite.delete_data_file(data_file)
        for record in result.data_files:
            rewrite.append_data_file(to_data_file(record, table.metadata.format_version))
    head = table.current_snapshot()
    assert head is not None and head.summary is not None and head.summary.operation.value == "replace"
    return head.snapshot_id


def delete_positions(table: Table, positions: dict[str, list[int]], *, one_file: bool = False) -> int:
    """Delete rows by position, merge-on-read, as another engine's row-level ``DELETE``
    does: one position delete file per data file (``positions``: data file path to row
    positions), or with ``one_file`` one for them all (as Spark writes one per partition),
    committed as a ``delete`` snapshot with no icecommit key (icecommit's own delete-file
    writer and producer); returns its snapshot id."""
    from icecommit.committer.delete_files import write_position_deletes

    files = _live_data_files(table)
    if one_file:
        deletes = [_position_deletes_of_many(table, files, positions)]
    else:
        deletes = [
            write_position_deletes(table, files[path], rows, job_id="another-engine", checkpoint_id=0)
            for path, rows in positions.items()
        ]
    return _commit_deletes(table, deletes)


def delete_equal(table: Table, partition_of: str, column: str, values: list[object]) -> int:
    """Delete rows by value, as Flink's upsert sink does: one equality delete file on
    ``column`` in the partition of the data file ``partition_of``; returns its snapshot id."""
    from pyiceberg.manifest import DataFileContent

    field = table.schema().find_field(column)
    source = _live_data_files(table)[partition_of]
    array = pa.array(values)
    key = pa.field(column, array.type, metadata={"PARQUET:field_id": str(field.field_id)})
    rows = pa.Table.from_arrays([array], schema=pa.schema([key]))
    delete = _delete_file(
        table, rows, "equality", source, DataFileContent.EQUALITY_DELETES, equality_ids=[field.field_id]
    )
    return _commit_deletes(table, [delete])


def _live_data_files(table: Table) -> dict[str, DataFile]:
    current = table.current_snapshot()
    assert current is not None
    return {
        entry.data_file.file_path: entry.data_file
        for manifest in current.manifests(table.io)
        if manifest.content == ManifestContent.DATA
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    }


def _position_deletes_of_many(table: Table, files: dict[str, DataFile], positions: dict[str, list[int]]) -> DataFile:
    """One position delete file for rows of several data files (of one partition)."""
    from pyiceberg.manifest import DataFileContent

    from icecommit.committer.delete_files import DELETE_SCHEMA

    pairs = sorted((path, pos) for path, rows in positions.items() for pos in rows)
    rows = pa.table({"file_path": [p for p, _ in pairs], "pos": [n for _, n in pairs]}, schema=DELETE_SCHEMA)
    return _delete_file(table, rows, "position", files[pairs[0][0]], DataFileContent.POSITION_DELETES)


def _delete_file(
    table: Table, rows: pa.Table, kind: str, source: DataFile, content: object, **extra: object
) -> DataFile:
    """``rows`` written as a delete file of ``content`` in the partition (and spec) of ``source``."""
    import pyarrow.parquet as pq
    from pyiceberg.manifest import FileFormat

    location = table.location_provider().new_data_location(f"{kind}-deletes-{time.time_ns()}.parquet")
    with table.io.new_output(location).create(overwrite=False) as stream:
        pq.write_table(rows, stream)
    delete = DataFile.from_args(
        _table_format_version=table.metadata.format_version, content=content, file_path=location,
        file_format=FileFormat.PARQUET, partition=source.partition, record_count=len(rows),
        file_size_in_bytes=len(table.io.new_input(location)), **extra,
    )  # fmt: skip
    delete.spec_id = source.spec_id
    return delete


def _commit_deletes(table: Table, deletes: list[DataFile]) -> int:
    from icecommit.committer.producer import SpecPreservingAppend

    with table.transaction() as tx, SpecPreservingAppend.of(tx, branch="main", snapshot_properties={}, deletes=deletes):
        pass  # the producer commits its snapshot into the transaction as it closes
    head = table.current_snapshot()
    assert head is not None
    return head.snapshot_id


def drop_json(folder: Path, name: str, rows: list[dict[str, object]]) -> None:
    """A JSON-lines file of ``rows`` in ``folder``, after every file already there: Spark's
    file source orders files by modification time, and two files written within one
    millisecond (as on a tmpfs) tie, in no fixed order."""
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = [p.stat().st_mtime for p in folder.iterdir() if p != path]
    if before:
        at = max(max(before) + 1, path.stat().st_mtime)
        os.utime(path, (at, at))
