"""Other engines agree: Apache Iceberg's Java reader (Spark 3.5, iceberg-spark-runtime 1.10)
reads a table that icecommit wrote and compacted as pyiceberg does.

Java loads the table from its current metadata file (no catalog: the catalog only points at
that file), in a subprocess with the environment of ``scripts/java_iceberg/setup.sh``; the
test skips, saying how to build it, where ``ICECOMMIT_JAVA_ICEBERG`` names none (and fails
instead under ``ICECOMMIT_REQUIRE_JAVA_ICEBERG=1``, as in CI). Marked ``spark`` (it starts
one, in that subprocess) so that CI's pyspark 3.5 pass runs it.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.maintenance.compaction import compact
from tests import java_iceberg
from tests.conftest import unique_table
from tests.helpers import DAY0, EVENTS_SCHEMA, assert_same_rows, events, write_arrow

pytestmark = pytest.mark.spark

TARGET = 64 * 1024
CHECKPOINTS = 6
ROWS = 60  # per checkpoint: about 4 rows in each of the 16 partitions
PARTITION_BY = ["day(ts)", "event", "bucket(2, id)"]

Row = dict[str, Any]
# Filters Java evaluates with its own partition pruning and column-metrics pruning over the
# partition values and bounds icecommit wrote; each with the same predicate in Python.
FILTERS: dict[str, Callable[[Row], bool]] = {
    "event = 'click'": lambda r: r["event"] == "click",
    "event IS NULL": lambda r: r["event"] is None,
    "id = 7": lambda r: r["id"] == 7,  # one bucket of id
    "id IN (3, 250, 301)": lambda r: r["id"] in (3, 250, 301),
    "ts >= TIMESTAMP '2026-01-02 00:00:00'": lambda r: r["ts"] >= DAY0 + dt.timedelta(days=1),
    "score < 10": lambda r: r["score"] is not None and not math.isnan(r["score"]) and r["score"] < 10,
}


@pytest.fixture
def java() -> Iterator[java_iceberg.JavaIceberg]:
    yield java_iceberg.found_or_skip()


def _source() -> pa.Table:
    return pa.concat_tables(events(c * ROWS, (c + 1) * ROWS, days=2) for c in range(CHECKPOINTS))


def _plain(rows: list[Row]) -> list[Row]:
    """Metadata-table rows in the JSON form the Java driver reports them in."""

    def default(value: object) -> object:
        if isinstance(value, bytes):
            return value.hex()
        if isinstance(value, dt.date):
            return value.isoformat()
        raise TypeError(type(value))

    plain: list[Row] = json.loads(json.dumps(rows, default=default))
    return plain


def _by_path(rows: list[Row], key: str = "file_path") -> dict[str, Row]:
    keyed = {row[key]: row for row in rows}
    assert len(keyed) == len(rows), f"a {key} listed twice"
    return keyed


def _differences(java: Row, ours: Row) -> dict[str, tuple[object, object]]:
    return {k: (java[k], ours[k]) for k in java.keys() & ours.keys() if java[k] != ours[k]}


def test_java_iceberg_reads_a_compacted_table_as_icecommit_wrote_it(
    sqlite_catalog: SqlCatalog, java: java_iceberg.JavaIceberg, tmp_path: Path
) -> None:
    catalog, name = sqlite_catalog, unique_table()
    ic.create_table(
        catalog, name, EVENTS_SCHEMA, partition_by=PARTITION_BY,
        properties={"write.target-file-size-bytes": str(TARGET)},
    )  # fmt: skip
    committer = ic.GlobalCommitter(catalog, name, job_id="job")
    for checkpoint in range(CHECKPOINTS):
        rows = events(checkpoint * ROWS, (checkpoint + 1) * ROWS, days=2)
        written = write_arrow(committer.load_table(), rows, job_id="job", checkpoint_id=checkpoint)
        committer.prepare(checkpoint, [written])
        committer.commit(checkpoint)
    before = catalog.load_table(name)
    first, last_append = before.snapshots()[0], before.current_snapshot()
    assert last_append is not None
    inputs = {f["file_path"] for f in before.inspect.files().to_pylist()}

    done = compact(catalog, name, min_input_files=2)
    assert (done.committed, done.aborted) == (1, 0)
    table = catalog.load_table(name)
    head = table.current_snapshot()
    assert head is not None and head.snapshot_id == done.groups[0].snapshot_id

    rows_file, report = java.read(
        table.metadata_location, tmp_path / "java",
        *(arg for where in FILTERS for arg in ("--where", where)),
        "--as-of", str(last_append.snapshot_id), "--incremental-from", str(first.snapshot_id),
    )  # fmt: skip

    # the same rows, by id as multisets and by value
    source = _source()
    java_rows = pq.read_table(rows_file)
    source_ids = source.column("id").to_pylist()
    assert Counter(java_rows.column("id").to_pylist()) == Counter(source_ids)
    assert_same_rows(java_rows.select(EVENTS_SCHEMA.names).cast(EVENTS_SCHEMA), source)
    # Java's partition and metrics pruning over icecommit's partition values and bounds
    source_rows = source.to_pylist()
    for where, predicate in FILTERS.items():
        expected = sorted(r["id"] for r in source_rows if predicate(r))
        assert 0 < len(expected) < len(source_rows), where
        assert report["where"][where] == expected, where
    # time travel to before the compaction: the same rows; an incremental read of appends skips the replace
    assert report["as_of"] == sorted(source_ids)
    assert report["incremental"] == sorted(source_ids[ROWS:])

    # the head is the replace, in Java's view of the history as in pyiceberg's
    java_snapshots = {s["snapshot_id"]: s for s in report["snapshots"]}
    assert java_snapshots.keys() == {s.snapshot_id for s in table.snapshots()}
    main = next(r for r in report["refs"] if r["name"] == "main")
    assert main["snapshot_id"] == head.snapshot_id
    assert java_snapshots[head.snapshot_id]["operation"] == "replace"
    assert java_snapshots[head.snapshot_id]["summary"]["icecommit.compaction"] == "true"
    for snapshot in table.snapshots():
        seen = java_snapshots[snapshot.snapshot_id]
        assert snapshot.summary is not None
        assert (seen["parent_id"], seen["operation"], seen["committed_at_ms"], seen["manifest_list"]) == (
            snapshot.parent_snapshot_id, snapshot.summary.operation.value, snapshot.timestamp_ms,
            snapshot.manifest_list,
        )  # fmt: skip
        assert seen["summary"] == snapshot.summary.additional_properties

    # the live data files: the compaction's outputs, with the same partition values and metrics
    java_files = _by_path(report["files"])
    our_files = _by_path(_plain(table.inspect.files().drop(["readable_metrics"]).to_pylist(maps_as_pydicts="strict")))
    assert java_files.keys() == our_files.keys()
    assert len(java_files) == sum(g.output_files for g in done.groups)
    assert not java_files.keys() & inputs
    assert sum(f["record_count"] for f in java_files.values()) == len(source_ids)
    compared = {"content", "file_format", "spec_id", "partition", "record_count", "file_size_in_bytes",
                "column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds",
                "upper_bounds", "split_offsets", "sort_order_id"}  # fmt: skip
    for path, seen in java_files.items():
        assert compared <= seen.keys() & our_files[path].keys(), sorted(seen.keys() ^ our_files[path].keys())
        assert _differences(seen, our_files[path]) == {}, path

    # the manifest entries of the head (the replaced files as deleted) and the partition summaries
    our_entries = [
        {"status": e["status"], "snapshot_id": e["snapshot_id"], "sequence_number": e["sequence_number"],
         "file_sequence_number": e["file_sequence_number"], "file_path": e["data_file"]["file_path"],
         "record_count": e["data_file"]["record_count"]}
        for e in table.inspect.entries().to_pylist()
    ]  # fmt: skip
    assert sorted(report["entries"], key=_entry_key) == sorted(our_entries, key=_entry_key)
    assert {e["file_path"] for e in report["entries"] if e["status"] == 2} == inputs
    java_partitions = {json.dumps(p["partition"], sort_keys=True): p for p in report["partitions"]}
    our_partitions = {
        json.dumps(p["partition"], sort_keys=True): p
        for p in _plain(table.inspect.partitions().drop(["last_updated_at"]).to_pylist())
    }
    assert java_partitions.keys() == our_partitions.keys()
    for partition, seen in java_partitions.items():
        assert _differences(seen, our_partitions[partition]) == {}, partition


def _entry_key(entry: Row) -> tuple[object, ...]:
    return (entry["file_path"], entry["status"])
