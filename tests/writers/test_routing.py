"""One read, many tables: ``ic.write`` and the streaming sink with a routing column."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import icecommit as ic
from icecommit.committer import committed_checkpoints
from icecommit.errors import InvalidArgumentError, SchemaMismatchError, UnroutedRecordsError
from icecommit.writers.routing import RoutedSparkWriter
from tests.conftest import unique_table
from tests.fakes import CLICKS, VIEWS, ids_of_kinds, routed_source, sorted_ids
from tests.helpers import run_to_end

pytestmark = pytest.mark.spark

SOURCE = "id BIGINT, ts TIMESTAMP, kind STRING, x INT, page STRING"


@pytest.fixture
def tables(catalog: SqlCatalog) -> tuple[str, str, str]:
    clicks, views, dead = unique_table("clicks"), unique_table("views"), unique_table("unrouted")
    ic.create_table(catalog, clicks, CLICKS, partition_by=["hour(ts)"])
    ic.create_table(catalog, views, VIEWS, partition_by=["page"])
    return clicks, views, dead


def test_rows_go_to_their_tables_once_with_the_same_checkpoint(
    spark: SparkSession, catalog: SqlCatalog, tables: tuple[str, str, str]
) -> None:
    clicks, views, dead = tables
    routes = {"click": clicks, "tap": clicks, "view": views}
    df = routed_source(spark, 0, 500)
    result = ic.write(df, routes, catalog=catalog, job_id="router", checkpoint_id=4, route_by="kind", dead_letter=dead)
    assert result.committed and result.records == 500
    assert sorted_ids(catalog, clicks) == ids_of_kinds(0, 500, "click", "tap")
    assert sorted_ids(catalog, views) == ids_of_kinds(0, 500, "view")
    # unknown and null routes are kept, with every source column, in the dead-letter table
    letters = catalog.load_table(dead).scan().to_arrow()
    assert sorted(letters.column("id").to_pylist()) == ids_of_kinds(0, 500, "scroll", None)
    assert Counter(letters.column("kind").to_pylist()) == {"scroll": 100, None: 100}
    for name in (clicks, views, dead):
        found = committed_checkpoints(catalog.load_table(name).metadata, job_id="router")
        assert [c.checkpoint_id for c in found] == [4], name
        assert result[name].status == "committed"
    # tables hold only their own columns (the routing column is not written into them)
    assert catalog.load_table(views).scan().to_arrow().column_names == ["id", "ts", "page"]

    again = ic.write(df, routes, catalog=catalog, job_id="router", checkpoint_id=4, route_by="kind", dead_letter=dead)
    assert not again.committed
    assert {r.status for r in again.results.values()} == {"already-committed"}
    assert sorted_ids(catalog, clicks) == ids_of_kinds(0, 500, "click", "tap")
    report = ic.reconcile(catalog, clicks, job_id="router", deep=True)
    assert report.ok, report.to_markdown()


def test_unknown_routes_without_a_dead_letter_table_fail_and_commit_nothing(
    spark: SparkSession, catalog: SqlCatalog, tables: tuple[str, str, str]
) -> None:
    clicks, views, _ = tables
    with pytest.raises(UnroutedRecordsError) as raised:
        ic.write(
            routed_source(spark, 0, 100),
            {"click": clicks, "tap": clicks, "view": views},
            catalog=catalog,
            job_id="router",
            checkpoint_id=0,
            route_by="kind",
        )
    assert raised.value.records == 40 and raised.value.column == "kind"
    assert set(raised.value.values) == {"scroll", None}
    assert "40 row(s)" in str(raised.value) and "'scroll'" in str(raised.value)
    for name in (clicks, views):
        table = catalog.load_table(name)
        assert table.current_snapshot() is None
        assert ic.GlobalCommitter(catalog, name, job_id="router").store.get("router", name, 0) is None
        data_dir = Path(table.metadata.location.removeprefix("file://")) / "data"
        assert not list(data_dir.rglob("*.parquet")), "the refused checkpoint's files are removed"


def test_a_table_that_does_not_fit_refuses_the_whole_checkpoint(
    spark: SparkSession, catalog: SqlCatalog, tables: tuple[str, str, str]
) -> None:
    clicks, views, dead = tables
    df = routed_source(spark, 0, 50).withColumn("x", F.col("page"))  # x is now a string
    with pytest.raises(SchemaMismatchError) as raised:
        ic.write(df, {"click": clicks, "view": views}, catalog=catalog, job_id="r", checkpoint_id=0, route_by="kind")
    assert raised.value.column == "x" and raised.value.table == clicks
    with pytest.raises(SchemaMismatchError, match="routing column is missing"):
        ic.write(df, {"click": clicks}, catalog=catalog, job_id="r", checkpoint_id=0, route_by="type")
    bad = routed_source(spark, 0, 50).withColumnRenamed("page", "pgae")
    with pytest.raises(SchemaMismatchError, match="pgae"):  # a column no table has is a typo, not a route
        ic.write(
            bad, {"click": clicks}, catalog=catalog, job_id="r", checkpoint_id=0, route_by="kind", dead_letter=dead
        )
    assert not catalog.table_exists(dead), "refused input creates no dead-letter table"
    assert catalog.load_table(clicks).current_snapshot() is None
    assert catalog.load_table(views).current_snapshot() is None


def test_after_a_crash_between_tables_a_rerun_completes_each_table_once(
    spark: SparkSession, catalog: SqlCatalog, tables: tuple[str, str, str]
) -> None:
    """The driver died after the checkpoint was committed to clicks and only prepared for
    views, and before anything reached the dead-letter table."""
    clicks, views, dead = tables
    routes = {"click": clicks, "tap": clicks, "view": views}
    df = routed_source(spark, 0, 300)
    ic.create_table(catalog, dead, pa.schema([pa.field("id", pa.int64()), pa.field("kind", pa.string())]))
    loaded = {name: catalog.load_table(name) for name in (clicks, views, dead)}
    written = RoutedSparkWriter(loaded, routes, route_by="kind", dead_letter=dead, job_id="router").write(df, 9)
    first = ic.GlobalCommitter(catalog, clicks, job_id="router")
    first.prepare(9, written.results[clicks])
    first.commit(9)
    ic.GlobalCommitter(catalog, views, job_id="router").prepare(9, written.results[views])
    # ... crash: the dead-letter table's results are lost with the driver

    rerun = ic.write(df, routes, catalog=catalog, job_id="router", checkpoint_id=9, route_by="kind", dead_letter=dead)
    assert rerun[clicks].status == "already-committed"
    # views: committed by the recovery the rerun starts with, from its prepared files
    assert rerun[views].status == "already-committed"
    assert rerun[dead].status == "committed"
    assert rerun.skipped_records == {clicks: 120, views: 60}
    assert sorted_ids(catalog, clicks) == ids_of_kinds(0, 300, "click", "tap")
    assert sorted_ids(catalog, views) == ids_of_kinds(0, 300, "view")
    assert sorted_ids(catalog, dead) == ids_of_kinds(0, 300, "scroll", None)
    assert catalog.load_table(dead).scan().to_arrow().column_names == ["id", "kind"]
    for name in (clicks, views, dead):
        assert ic.reconcile(catalog, name, job_id="router", deep=True).ok, name


def test_integer_routes_and_the_streaming_sink(spark: SparkSession, sqlite_catalog: SqlCatalog, tmp_path: Path) -> None:
    a, b = "ns.a", "ns.b"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dept", pa.int32())])
    ic.create_table(sqlite_catalog, a, schema)
    ic.create_table(sqlite_catalog, b, schema)
    folder, checkpoints = tmp_path / "in", tmp_path / "chk"
    folder.mkdir()
    for n in range(3):
        rows = [json.dumps({"id": i, "dept": i % 3}) for i in range(n * 30, n * 30 + 30)]
        (folder / f"{n}.json").write_text("\n".join(rows) + "\n")
    results: list[object] = []
    sink = ic.streaming_sink(
        {1: a, 2: b},
        catalog=sqlite_catalog,
        job_id="depts",
        route_by="dept",
        dead_letter="ns.dead",
        on_commit=results.append,
    )
    stream = spark.readStream.schema("id BIGINT, dept INT").option("maxFilesPerTrigger", 1).json(str(folder))
    query = stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoints))
    run_to_end(query.trigger(availableNow=True).start())
    assert len(results) == 3
    assert sorted_ids(sqlite_catalog, a) == [i for i in range(90) if i % 3 == 1]
    assert sorted_ids(sqlite_catalog, b) == [i for i in range(90) if i % 3 == 2]
    assert sorted_ids(sqlite_catalog, "ns.dead") == [i for i in range(90) if i % 3 == 0]
    for name in (a, b, "ns.dead"):
        found = committed_checkpoints(sqlite_catalog.load_table(name).metadata, job_id="depts")
        assert sorted(c.checkpoint_id for c in found) == [0, 1, 2]


def test_the_source_is_read_once_by_one_spark_job(spark: SparkSession, sqlite_catalog: SqlCatalog) -> None:
    for name, schema in (("ns.clicks", CLICKS), ("ns.views", VIEWS)):
        ic.create_table(sqlite_catalog, name, schema)
    context = spark.sparkContext
    context.setJobGroup("icecommit-routed-once", "one routed checkpoint")
    try:
        ic.write(
            routed_source(spark, 0, 1000),
            {"click": "ns.clicks", "tap": "ns.clicks", "view": "ns.views"},
            catalog=sqlite_catalog,
            job_id="router",
            checkpoint_id=0,
            route_by="kind",
            dead_letter="ns.unrouted",
        )
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    tracker = context.statusTracker()
    jobs = tracker.getJobIdsForGroup("icecommit-routed-once")
    assert len(jobs) == 1, f"{len(jobs)} Spark jobs for one routed checkpoint"
    info = tracker.getJobInfo(jobs[0])
    assert info is not None and len(info.stageIds) == 1, "one stage: the source is scanned once, no shuffle"
    assert sum(len(sorted_ids(sqlite_catalog, n)) for n in ("ns.clicks", "ns.views", "ns.unrouted")) == 1000


def test_routing_arguments_go_together(spark: SparkSession, sqlite_catalog: SqlCatalog) -> None:
    df = routed_source(spark, 0, 10)
    with pytest.raises(InvalidArgumentError) as no_route:
        ic.write(df, {"click": "ns.clicks"}, catalog=sqlite_catalog, job_id="r", checkpoint_id=0)
    assert no_route.value.argument == "route_by" and isinstance(no_route.value, ValueError)
    with pytest.raises(InvalidArgumentError) as no_mapping:
        ic.write(df, "ns.clicks", catalog=sqlite_catalog, job_id="r", checkpoint_id=0, route_by="kind")
    assert no_mapping.value.argument == "table" and "mapping" in no_mapping.value.accepted
    with pytest.raises(InvalidArgumentError) as in_sink:  # when the sink is made, not at its first batch
        ic.streaming_sink({"click": "ns.clicks"}, catalog=sqlite_catalog, job_id="r")
    assert in_sink.value.argument == "route_by"
    assert not sqlite_catalog.table_exists("ns.clicks")


@pytest.mark.parametrize("preserves_rows", [False, True])
def test_a_routed_streams_source_count_is_checked_against_all_its_tables(
    spark: SparkSession, sqlite_catalog: SqlCatalog, tmp_path: Path, preserves_rows: bool
) -> None:
    a, b = "ns.a", "ns.b"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dept", pa.int32())])
    ic.create_table(sqlite_catalog, a, schema)
    ic.create_table(sqlite_catalog, b, schema)
    folder = tmp_path / "in"
    folder.mkdir()
    for n in range(2):
        rows = [json.dumps({"id": i, "dept": i % 3}) for i in range(n * 30, n * 30 + 30)]
        (folder / f"{n}.json").write_text("\n".join(rows) + "\n")
    sink = ic.streaming_sink(
        {1: a, 2: b}, catalog=sqlite_catalog, job_id="depts", route_by="dept", dead_letter="ns.dead",
        preserves_rows=preserves_rows,
    )  # fmt: skip

    def drop_some(batch: DataFrame, batch_id: int) -> None:  # loses 3 of every 30 rows
        sink(batch.filter("id % 10 != 0"), batch_id)

    stream = spark.readStream.schema("id BIGINT, dept INT").option("maxFilesPerTrigger", 1).json(str(folder))
    run_to_end(
        stream.writeStream.foreachBatch(drop_some).option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    deadline = time.monotonic() + 60  # the progress reports arrive on Spark's listener bus
    while True:
        report = ic.reconcile(sqlite_catalog, a)
        if all("routed:" in line.note for line in report.checkpoints) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert [line.note.split(";")[0] for line in report.checkpoints] == [
        "routed: query input 30, written to all its tables 27"
    ] * 2
    found = sorted((p.checkpoint_id, p.kind, p.severity) for p in report.problems if p.kind in ("loss", "query-input"))
    if preserves_rows:
        assert not report.ok and found == [(0, "loss", "error"), (1, "loss", "error")]
    else:
        assert report.ok and found == [(0, "query-input", "info"), (1, "query-input", "info")]
    message = next(p.message for p in report.problems if p.checkpoint_id == 0 and p.kind in ("loss", "query-input"))
    assert "reported 30 row(s)" in message and "they got 27" in message and "ns.dead" in message
