"""``ic.streaming_sink`` with Structured Streaming over a file source."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import DataFrame, SparkSession
from rich.console import Console

import icecommit as ic
from icecommit.cli.output import TextOutput
from icecommit.committer import committed_checkpoints
from icecommit.state.checkpoints import CheckpointStore
from icecommit.state.database import state_engine, state_uri
from tests.helpers import run_to_end

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.timestamp("us", tz="UTC"))])
SPARK_SCHEMA = "id BIGINT, ts TIMESTAMP"
T0 = datetime(2026, 5, 1, tzinfo=timezone.utc)


def _drop(folder: Path, name: str, ids: range) -> None:
    """A JSON file of ``ids`` in ``folder``, taken by Spark's file source after every file
    already there: the source orders files by modification time, and two files written
    within one millisecond (as on a tmpfs) tie, in no fixed order."""
    lines = [json.dumps({"id": i, "ts": f"2026-05-01T00:{i % 60:02d}:00Z"}) for i in ids]
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    before = [p.stat().st_mtime for p in folder.iterdir() if p != path]
    if before:
        at = max(max(before) + 1, path.stat().st_mtime)
        os.utime(path, (at, at))


def _run_query(spark: SparkSession, source: Path, checkpoints: Path, catalog: SqlCatalog, results: list[str]) -> None:
    sink = ic.streaming_sink(
        "ns.stream", catalog=catalog, job_id="stream", on_commit=lambda r: results.append(r.status)
    )
    stream = spark.readStream.schema(SPARK_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    query = stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoints))
    run_to_end(query.trigger(availableNow=True).start())


def test_each_batch_is_committed_once_across_restarts(
    spark: SparkSession, sqlite_catalog: SqlCatalog, tmp_path: Path
) -> None:
    ic.create_table(sqlite_catalog, "ns.stream", SCHEMA, partition_by=["hour(ts)"])
    source, checkpoints = tmp_path / "in", tmp_path / "chk"
    source.mkdir()
    _drop(source, "a.json", range(0, 50))
    _drop(source, "b.json", range(50, 120))
    results: list[str] = []
    _run_query(spark, source, checkpoints, sqlite_catalog, results)
    assert results == ["committed", "committed"]

    # a restarted query (same checkpoint location) only takes the new file
    _drop(source, "c.json", range(120, 130))
    _run_query(spark, source, checkpoints, sqlite_catalog, results)
    table = sqlite_catalog.load_table("ns.stream")
    ids = sorted(table.scan().to_arrow().column("id").to_pylist())
    assert ids == list(range(130))
    assert sorted(c.checkpoint_id for c in committed_checkpoints(table.metadata, job_id="stream")) == [0, 1, 2]

    # Spark replaying a batch after a crash hands the same batch id again: nothing is added
    sink = ic.streaming_sink(
        "ns.stream", catalog=sqlite_catalog, job_id="stream", on_commit=lambda r: results.append(r.status)
    )
    sink(spark.createDataFrame([(999, None)], SPARK_SCHEMA), 2)
    assert results[-1] == "already-committed"
    assert sqlite_catalog.load_table("ns.stream").scan().to_arrow().num_rows == 130


def test_a_batch_prepared_before_a_crash_is_committed_when_the_query_restarts(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    table = ic.create_table(sqlite_catalog, "ns.stream", SCHEMA)
    committer = ic.GlobalCommitter(sqlite_catalog, table, job_id="stream")
    results = ic.writers.SparkWriter(table, job_id="stream").write(
        spark.range(0, 10).selectExpr("id", "CAST(NULL AS TIMESTAMP) AS ts"), 0
    )
    committer.prepare(0, results)  # ... and the driver died before committing batch 0
    sink = ic.streaming_sink("ns.stream", catalog=sqlite_catalog, job_id="stream")
    sink(spark.range(10, 15).selectExpr("id", "CAST(NULL AS TIMESTAMP) AS ts"), 1)
    ids = sorted(sqlite_catalog.load_table("ns.stream").scan().to_arrow().column("id").to_pylist())
    assert ids == list(range(15))


def test_the_stream_publishes_each_hour_once_after_all_its_writers_closed_it(
    spark: SparkSession, sqlite_catalog: SqlCatalog, tmp_path: Path
) -> None:
    """Each file is one micro-batch, read by two tasks; file c holds hour c and a few rows
    of hour c + 1, and the last file brings late rows for hour 0."""
    lateness = {"icecommit.partition-lateness": "10m"}
    ic.create_table(sqlite_catalog, "ns.stream", SCHEMA, partition_by=["hour(ts)"], properties=lateness)
    source, checkpoints = tmp_path / "in", tmp_path / "chk"
    source.mkdir()

    def drop(name: str, rows: list[tuple[int, str]]) -> None:
        path = source / name
        path.write_text("".join(json.dumps({"id": i, "ts": ts}) + "\n" for i, ts in rows))
        # the file source takes files oldest first (by modification time, not by name)
        stamp = 1_700_000_000 + 60 * int(path.stem)
        os.utime(path, (stamp, stamp))

    drop("0.json", [(i, f"2026-05-01T00:{i % 60:02d}:00Z") for i in range(0, 100)] + [(100, "2026-05-01T01:05:00Z")])
    drop("1.json", [(i, f"2026-05-01T01:{i % 60:02d}:00Z") for i in range(101, 200)] + [(200, "2026-05-01T02:20:00Z")])
    drop("2.json", [(201, "2026-05-01T00:30:00Z"), (202, "2026-05-01T00:31:00Z"), (203, "2026-05-01T02:21:00Z")])
    completed: list[tuple[str, int]] = []
    sink = ic.streaming_sink(
        "ns.stream",
        catalog=sqlite_catalog,
        job_id="stream",
        completeness=ic.PartitionCompleteness(on_complete=lambda s: completed.append((s.label, s.records))),
    )
    stream = spark.readStream.schema(SPARK_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    query = stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoints))
    run_to_end(query.trigger(availableNow=True).start())

    # batch 0 reaches 01:05, short of 01:00 + 10m; batch 1 reaches 02:20 and closes hours 0 and 1,
    # hour 1 with the rows both batches wrote into it
    assert completed == [("ts_hour=2026-05-01-00", 100), ("ts_hour=2026-05-01-01", 100)]
    statuses = ic.catalog.partition_status(sqlite_catalog, "ns.stream")
    assert [(s.label, s.records_at_completion, s.late_records) for s in statuses] == [
        ("ts_hour=2026-05-01-00", 100, 2),
        ("ts_hour=2026-05-01-01", 100, 0),
    ]
    table = sqlite_catalog.load_table("ns.stream")
    assert table.scan().to_arrow().num_rows == 204, "late rows are committed too"
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary.get("icecommit.late-records") == "2"
    watermark = datetime(2026, 5, 1, 2, 21, tzinfo=timezone.utc)
    assert summary.get("icecommit.watermark-us") == str(int(watermark.timestamp()) * 1_000_000)


def test_a_query_with_a_new_checkpoint_location_and_the_same_job_id_is_refused_not_skipped(
    spark: SparkSession, sqlite_catalog: SqlCatalog, tmp_path: Path
) -> None:
    ic.create_table(sqlite_catalog, "ns.stream", SCHEMA, partition_by=["hour(ts)"])
    source = tmp_path / "in"
    source.mkdir()
    _drop(source, "a.json", range(0, 50))
    results: list[str] = []
    _run_query(spark, source, tmp_path / "chk", sqlite_catalog, results)
    assert results == ["committed"]
    table = sqlite_catalog.load_table("ns.stream")
    [first_query] = {(s.summary or {}).get("icecommit.query-id") for s in table.snapshots()} - {None}
    state = ic.GlobalCommitter(sqlite_catalog, "ns.stream", job_id="stream").store.get("stream", "ns.stream", 0)
    assert state is not None and state.query_id == first_query

    # a new checkpoint location: Spark starts a new query whose batch ids count from 0 again
    other = tmp_path / "in2"
    other.mkdir()
    _drop(other, "z.json", range(1000, 1040))
    before = sqlite_catalog.load_table("ns.stream").metadata_location
    with pytest.raises(Exception) as raised:
        sink = ic.streaming_sink("ns.stream", catalog=sqlite_catalog, job_id="stream")
        stream = spark.readStream.schema(SPARK_SCHEMA).json(str(other))
        run_to_end(stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "chk2"))
                   .trigger(availableNow=True).start())  # fmt: skip
    message = str(raised.value)
    assert "StreamingQueryMismatchError" in message
    assert first_query in message and "new job_id" in message
    assert sqlite_catalog.load_table("ns.stream").metadata_location == before  # nothing written, nothing skipped
    ids = sqlite_catalog.load_table("ns.stream").scan().to_arrow().column("id").to_pylist()
    assert sorted(ids) == list(range(50))


class Clock:
    """A settable clock for the committers' state (commit and publication times)."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def at(self, hour: int, minute: int) -> None:
        self.now = T0 + timedelta(hours=hour, minutes=minute)


def test_two_streaming_writers_one_goes_idle_every_hour_is_published_once_in_order(
    spark: SparkSession, sqlite_catalog: SqlCatalog, tmp_path: Path
) -> None:
    """Two queries write one hourly table; b goes quiet (no new input files) for longer
    than the idle timeout and stops holding hours back; a quiet hour is published with 0
    records; a far-future row publishes nothing early; the last hour is published by a
    scheduler once the whole stream went quiet."""
    ic.create_table(sqlite_catalog, "ns.stream", SCHEMA, partition_by=["hour(ts)"])
    clock = Clock()
    store = CheckpointStore(state_engine(state_uri(sqlite_catalog)), clock=clock)
    published: list[tuple[str, int]] = []
    policy = ic.PartitionCompleteness(
        writers=("a", "b"),
        idle_timeout=timedelta(minutes=15),
        on_complete=lambda s: published.append((s.label, s.records)),
    )

    def run(job: str, name: str, rows: list[tuple[int, str]]) -> None:
        source = tmp_path / f"in-{job}"
        source.mkdir(exist_ok=True)
        (source / name).write_text("".join(json.dumps({"id": i, "ts": ts}) + "\n" for i, ts in rows))
        sink = ic.streaming_sink("ns.stream", catalog=sqlite_catalog, job_id=job, completeness=policy, store=store)
        stream = spark.readStream.schema(SPARK_SCHEMA).json(str(source))
        query = stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / f"chk-{job}"))
        run_to_end(query.trigger(availableNow=True).start())

    clock.at(0, 55)
    run("a", "0.json", [(i, f"2026-05-01T00:{10 + i:02d}:00Z") for i in range(40)])  # a reaches 00:49
    run("b", "0.json", [(100 + i, f"2026-05-01T00:{20 + i:02d}:00Z") for i in range(31)])  # b: 00:50, live
    assert published == []
    clock.at(1, 20)  # b has committed nothing for 25 minutes, more than the idle timeout
    run("a", "1.json", [(200 + i, f"2026-05-01T01:{i:02d}:00Z") for i in range(16)])  # a reaches 01:15
    assert published == [("ts_hour=2026-05-01-00", 71)]
    clock.at(3, 40)  # nothing arrives in hour 2; a's next file reaches 03:30, with a row from 2099
    run("a", "2.json", [(300, "2026-05-01T03:30:00Z"), (301, "2099-01-01T00:00:00Z")])
    assert published == [("ts_hour=2026-05-01-00", 71), ("ts_hour=2026-05-01-01", 16), ("ts_hour=2026-05-01-02", 0)]
    # the whole stream is quiet now: hour 3, the last the data reached, is published by a
    # scheduler once it is over by the idle timeout, and nothing after it
    clock.at(4, 10)
    assert ic.publish_complete_partitions(sqlite_catalog, "ns.stream", clock=clock) == []
    clock.at(4, 16)
    [last] = ic.publish_complete_partitions(sqlite_catalog, "ns.stream", clock=clock)
    assert (last.label, last.records_at_completion) == ("ts_hour=2026-05-01-03", 1)
    clock.at(9, 0)
    assert ic.publish_complete_partitions(sqlite_catalog, "ns.stream", clock=clock) == []
    statuses = ic.catalog.partition_status(sqlite_catalog, "ns.stream")
    assert [(s.label, s.records_at_completion) for s in statuses] == [
        ("ts_hour=2026-05-01-00", 71),
        ("ts_hour=2026-05-01-01", 16),
        ("ts_hour=2026-05-01-02", 0),
        ("ts_hour=2026-05-01-03", 1),
    ]
    assert sqlite_catalog.load_table("ns.stream").scan().to_arrow().num_rows == 89  # the 2099 row too


def _source_counted(catalog: SqlCatalog, checkpoints: int) -> ic.ReconciliationReport:
    """The report once the query's progress reports (delivered after each batch, on
    Spark's listener bus) have recorded every batch's source count."""
    deadline = time.monotonic() + 60
    while True:
        report = ic.reconcile(catalog, "ns.stream")
        recorded = [line for line in report.checkpoints if "source count not recorded" not in line.note]
        if len(recorded) == checkpoints or time.monotonic() > deadline:
            return report
        time.sleep(0.5)


@pytest.mark.parametrize("preserves_rows", [False, True])
def test_source_counts_come_from_the_querys_progress(
    spark: SparkSession, sqlite_catalog: SqlCatalog, tmp_path: Path, preserves_rows: bool
) -> None:
    ic.create_table(sqlite_catalog, "ns.stream", SCHEMA, partition_by=["hour(ts)"])
    source = tmp_path / "in"
    source.mkdir()
    _drop(source, "a.json", range(0, 40))
    _drop(source, "b.json", range(40, 100))
    sink = ic.streaming_sink("ns.stream", catalog=sqlite_catalog, job_id="stream", preserves_rows=preserves_rows)

    def drop_odd_ids(batch: DataFrame, batch_id: int) -> None:  # a batch function that loses rows
        sink(batch.filter("id % 2 = 0"), batch_id)

    stream = spark.readStream.schema(SPARK_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    run_to_end(
        stream.writeStream.foreachBatch(drop_odd_ids)
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True)
        .start()
    )
    report = _source_counted(sqlite_catalog, 2)
    state = ic.GlobalCommitter(sqlite_catalog, "ns.stream", job_id="stream").store.get("stream", "ns.stream", 1)
    assert state is not None
    [offsets] = state.source_offsets  # the file source's log offsets, kept beside its count
    assert ("FileStreamSource" in offsets.source, offsets.records) == (True, 60)
    assert offsets.end is not None and "1" in offsets.end
    [info] = [c for c in ic.catalog.list_checkpoints(sqlite_catalog, "ns.stream") if c.checkpoint_id == 1]
    assert info.source_offsets == state.source_offsets
    console = Console(record=True, width=400)
    TextOutput(console).checkpoints("ns.stream", ic.catalog.list_checkpoints(sqlite_catalog, "ns.stream"))
    shown = console.export_text()
    assert "source offsets" in shown and f"{offsets.start} -> {offsets.end}" in shown
    lines = {line.checkpoint_id: line for line in report.checkpoints}
    assert [(lines[n].written, lines[n].committed) for n in (0, 1)] == [(20, 20), (30, 30)]
    if preserves_rows:
        assert not report.ok
        assert [(lines[n].source, lines[n].ok) for n in (0, 1)] == [(40, False), (60, False)]
        assert sorted(p.checkpoint_id for p in report.problems if p.kind == "loss") == [0, 1]
    else:
        assert report.ok, report.problems
        infos = sorted((p.checkpoint_id, p.severity) for p in report.problems if p.kind == "query-input")
        assert infos == [(0, "info"), (1, "info")]
        assert "reported 60 row(s) and it wrote 30" in next(
            p.message for p in report.problems if p.kind == "query-input" and p.checkpoint_id == 1
        )
