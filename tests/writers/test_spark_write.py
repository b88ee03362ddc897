"""Spark DataFrame -> data files -> one committed snapshot, on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import math
import struct
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession

import icecommit as ic
from icecommit.writers import SparkWriter, TaskAttempt, WriteResult
from tests.fakes import spark_events
from tests.helpers import EVENTS_SCHEMA

pytestmark = pytest.mark.spark


def _value(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dt.datetime) and v.tzinfo is None:
        return v.replace(tzinfo=dt.timezone.utc)
    return v


def _rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(_value(v) for v in row.values()) for row in rows)


def assert_table_equals_frame(table: Table, df: DataFrame) -> None:
    expected = _rows([r.asDict() for r in df.collect()])
    actual = _rows(table.scan().to_arrow().to_pylist())
    assert len(actual) == len(expected)
    assert actual == expected


def _name(table: Table) -> str:
    return ".".join(table.name())


@pytest.mark.parametrize(
    "partition_by",
    [[], ["day(ts)", "event"], ["bucket(4, id)", "truncate(2, event)"], ["hour(ts)"]],
    ids=["unpartitioned", "day-identity", "bucket-truncate", "hour"],
)
def test_scan_equals_the_source_rows(spark: SparkSession, catalog: SqlCatalog, partition_by: list[str]) -> None:
    table = ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA, partition_by=partition_by)
    df = spark_events(spark, 0, 3000)
    result = ic.write(df, table, catalog=catalog, job_id="ingest", checkpoint_id=1)
    assert result.committed and result.records == 3000 and result.snapshot_id is not None
    loaded = catalog.load_table(_name(table))
    assert_table_equals_frame(loaded, df)
    assert loaded.current_snapshot().summary["icecommit.records"] == "3000"


def test_manifests_carry_correct_column_metrics(spark: SparkSession, catalog: SqlCatalog) -> None:
    table = ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA, partition_by=["event"])
    ic.write(spark_events(spark, 0, 2000), table, catalog=catalog, job_id="ingest", checkpoint_id=1)
    loaded = catalog.load_table(_name(table))
    ids = {f.name: f.field_id for f in loaded.schema().fields}
    entries = [e for m in loaded.current_snapshot().manifests(loaded.io) for e in m.fetch_manifest_entry(loaded.io)]
    assert entries
    for entry in entries:
        data_file = entry.data_file
        data = pq.read_table(data_file.file_path.removeprefix("file://")).to_pydict()
        scores = data["score"]
        assert data_file.record_count == len(data["id"])
        assert data_file.value_counts[ids["id"]] == len(data["id"])
        assert data_file.null_value_counts[ids["score"]] == sum(v is None for v in scores)
        assert data_file.nan_value_counts[ids["score"]] == sum(v is not None and math.isnan(v) for v in scores)
        assert data_file.null_value_counts[ids["event"]] == sum(v is None for v in data["event"])
        assert struct.unpack("<q", data_file.lower_bounds[ids["id"]])[0] == min(data["id"])
        assert struct.unpack("<q", data_file.upper_bounds[ids["id"]])[0] == max(data["id"])
        finite = [v for v in scores if v is not None and not math.isnan(v)]
        assert struct.unpack("<d", data_file.upper_bounds[ids["score"]])[0] == max(finite)


def test_partition_filters_prune_files(spark: SparkSession, catalog: SqlCatalog) -> None:
    table = ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA, partition_by=["day(ts)", "event"])
    df = spark_events(spark, 0, 3000)
    ic.write(df, table, catalog=catalog, job_id="ingest", checkpoint_id=1)
    loaded = catalog.load_table(_name(table))
    every = list(loaded.scan().plan_files())
    clicks = list(loaded.scan(row_filter="event == 'click'").plan_files())
    assert 0 < len(clicks) < len(every)
    assert all(task.file.partition[1] == "click" for task in clicks)
    assert loaded.scan(row_filter="event == 'click'").to_arrow().num_rows == df.filter("event = 'click'").count()
    day_two = "ts >= '2026-01-02T00:00:00+00:00' and ts < '2026-01-03T00:00:00+00:00'"
    by_day = list(loaded.scan(row_filter=day_two).plan_files())
    assert 0 < len(by_day) < len(every)
    assert {task.file.partition[0] for task in by_day} == {20455}


def test_writing_a_checkpoint_twice_is_a_no_op(spark: SparkSession, catalog: SqlCatalog) -> None:
    table = ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA, partition_by=["event"])
    df = spark_events(spark, 0, 500)
    first = ic.write(df, table, catalog=catalog, job_id="ingest", checkpoint_id=3)
    files_on_disk = sorted(Path(table.metadata.location.removeprefix("file://"), "data").rglob("*.parquet"))
    again = ic.write(df, table, catalog=catalog, job_id="ingest", checkpoint_id=3)
    assert first.committed and not again.committed
    assert again.snapshot_id == first.snapshot_id and again.records == 500
    loaded = catalog.load_table(_name(table))
    assert len(loaded.metadata.snapshots) == 1
    assert loaded.scan().to_arrow().num_rows == 500
    # nothing was even written the second time
    assert sorted(Path(table.metadata.location.removeprefix("file://"), "data").rglob("*.parquet")) == files_on_disk


def fail_first_attempt_of_task_zero(task: TaskAttempt, result: WriteResult) -> None:
    if task.partition_id == 0 and task.attempt == 0:
        assert result.data_files, "the failing attempt should have written files first"
        raise RuntimeError("injected failure after writing files")


def test_a_retried_task_counts_once_and_leaves_no_extra_files_in_the_table(
    spark: SparkSession, catalog: SqlCatalog
) -> None:
    table = ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA, partition_by=["event"])
    df = spark_events(spark, 0, 3000)
    result = ic.write(
        df, table, catalog=catalog, job_id="ingest", checkpoint_id=1, task_hook=fail_first_attempt_of_task_zero
    )
    assert result.records == 3000
    loaded = catalog.load_table(_name(table))
    assert_table_equals_frame(loaded, df)
    in_table = {task.file.file_path for task in loaded.scan().plan_files()}
    on_disk = {f"file://{p}" for p in Path(loaded.metadata.location.removeprefix("file://"), "data").rglob("*.parquet")}
    assert len(in_table) == result.files
    orphans = on_disk - in_table
    assert orphans, "the failed attempt's files stay on storage, unreferenced"
    assert all("-00000-0-" in path for path in orphans), sorted(orphans)  # task 0, attempt 0
    assert not any("-00000-0-" in path for path in in_table)


def test_writer_results_come_from_successful_attempts_only(spark: SparkSession, sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, "ns.events", EVENTS_SCHEMA)
    results = SparkWriter(table, job_id="j", task_hook=fail_first_attempt_of_task_zero).write(
        spark_events(spark, 0, 900), checkpoint_id=1
    )
    assert sorted(r.task_id for r in results) == [0, 1, 2]
    assert {r.task_id: r.attempt for r in results}[0] == 1
    assert sum(r.records for r in results) == 900
