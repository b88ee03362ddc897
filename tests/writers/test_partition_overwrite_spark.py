"""Partition overwrite through Spark: ``ic.write``, a routed write and the streaming sink
with ``mode="overwrite-partitions"`` (a daily job rerun after a fix, a backfill), and a
driver's own ``SparkWriter`` that evolves the schema (``schema_mode=``, ``evolve=``)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import DataFrame, SparkSession

import icecommit as ic
from icecommit.committer import GlobalCommitter, SchemaEvolver
from icecommit.errors import InvalidArgumentError
from icecommit.writers import SparkWriter
from tests.helpers import drop_json, run_to_end

pytestmark = pytest.mark.spark

DDL = "id long, ts timestamp, page string"


def _day(spark: SparkSession, day: int, ids: range, page: str = "home") -> DataFrame:
    rows = [(i, f"2026-11-{day:02d} {i % 24:02d}:00:00", page) for i in ids]
    return spark.createDataFrame(rows, "id long, ts string, page string").selectExpr(
        "id", "to_timestamp(ts) as ts", "page"
    )


def _ids(catalog: SqlCatalog, name: str) -> list[int]:
    return sorted(catalog.load_table(name).scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def test_a_daily_job_rerun_replaces_its_day_and_a_backfill_its_days(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    catalog = sqlite_catalog
    name = f"ns_{uuid.uuid4().hex[:8]}.daily"
    run = 0  # a run number (or the run's start time), never the data's date: reruns are new checkpoints
    for day in (24, 25, 26):
        run += 1
        ic.write(_day(spark, day, range(day * 100, day * 100 + 10)), name, catalog=catalog, job_id="daily",
                 checkpoint_id=run, create=True, partition_by=["day(ts)"], mode="overwrite-partitions")  # fmt: skip
    # the fix: yesterday (the 25th) recomputed with 4 rows instead of 10
    run += 1
    fixed = ic.write(_day(spark, 25, range(9000, 9004)), name, catalog=catalog, job_id="daily", checkpoint_id=run,
                     mode="overwrite-partitions")  # fmt: skip
    assert fixed.committed
    assert _ids(catalog, name) == [*range(2400, 2410), *range(2600, 2610), *range(9000, 9004)]
    # a replay of the same run changes nothing
    again = ic.write(_day(spark, 25, range(9000, 9004)), name, catalog=catalog, job_id="daily", checkpoint_id=run,
                     mode="overwrite-partitions")  # fmt: skip
    assert not again.committed
    # a backfill of the 24th and the 26th, as one checkpoint of its own job
    backfill = _day(spark, 24, range(7000, 7002)).unionByName(_day(spark, 26, range(7100, 7102)))
    ic.write(backfill, name, catalog=catalog, job_id="backfill", checkpoint_id=1, mode="overwrite-partitions")
    assert _ids(catalog, name) == [7000, 7001, 7100, 7101, *range(9000, 9004)]
    assert ic.reconcile(catalog, name).ok


def test_a_routed_overwrite_replaces_per_table_and_the_dead_letter_only_gains(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    catalog = sqlite_catalog
    ns = f"ns_{uuid.uuid4().hex[:8]}"
    routes = {"home": f"{ns}.home", "cart": f"{ns}.cart"}
    options: dict[str, Any] = dict(catalog=catalog, job_id="r", route_by="page", dead_letter=f"{ns}.unrouted",
                                   create=True, partition_by=["day(ts)"], mode="overwrite-partitions")  # fmt: skip
    first = _day(spark, 24, range(0, 6), "home").unionByName(_day(spark, 24, range(10, 13), "cart"))
    ic.write(first.unionByName(_day(spark, 24, range(20, 22), "other")), routes, checkpoint_id=1, **options)
    rerun = _day(spark, 24, range(100, 102), "home").unionByName(_day(spark, 24, range(30, 31), "other"))
    ic.write(rerun, routes, checkpoint_id=2, **options)
    assert _ids(catalog, routes["home"]) == [100, 101]  # replaced
    assert _ids(catalog, routes["cart"]) == [10, 11, 12]  # got no rows: untouched
    assert _ids(catalog, f"{ns}.unrouted") == [20, 21, 30]  # only ever gains


def test_a_stream_whose_batches_overwrite_the_partitions_they_bring(
    spark: SparkSession, sqlite_catalog: SqlCatalog, tmp_path: Path
) -> None:
    catalog = sqlite_catalog
    name = f"ns_{uuid.uuid4().hex[:8]}.latest"
    source, checkpoints = tmp_path / "in", tmp_path / "chk"
    source.mkdir()
    drop_json(source, "1.json", [{"id": 1, "page": "a"}, {"id": 2, "page": "b"}])
    drop_json(source, "2.json", [{"id": 3, "page": "a"}])
    sink = ic.streaming_sink(name, catalog=catalog, job_id="s", mode="overwrite-partitions", create=True,
                             partition_by=["page"])  # fmt: skip
    query = (
        spark.readStream.schema("id long, page string").option("maxFilesPerTrigger", 1).json(str(source))
        .writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoints))
    )  # fmt: skip
    run_to_end(query.trigger(availableNow=True).start())
    assert _ids(catalog, name) == [2, 3]
    run_to_end(query.trigger(availableNow=True).start())  # restarted: nothing again
    assert _ids(catalog, name) == [2, 3]


def test_a_drivers_own_spark_writer_evolves_the_schema_before_its_tasks_write(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    catalog = sqlite_catalog
    name = f"ns_{uuid.uuid4().hex[:8]}.own"
    ic.write(spark.createDataFrame([(1,)], "id long"), name, catalog=catalog, job_id="own", checkpoint_id=1,
             create=True)  # fmt: skip
    wider = spark.createDataFrame([(2, "x")], "id long, city string")
    with pytest.raises(InvalidArgumentError, match=r"evolve=.*add city"):
        SparkWriter(catalog.load_table(name), job_id="own", schema_mode="add-columns").write(wider, 2)
    assert catalog.load_table(name).schema().column_names == ["id"]  # nothing changed
    writer = SparkWriter(catalog.load_table(name), job_id="own", schema_mode="add-columns",
                         evolve=SchemaEvolver(catalog))  # fmt: skip
    results = writer.write(wider, 2)
    assert writer.table.schema().column_names == ["id", "city"]
    committer = GlobalCommitter(catalog, name, job_id="own")
    state = committer.prepare(2, results)
    assert state.features == ("schema-change",) and state.schema_id == writer.table.metadata.current_schema_id
    committer.commit(2)
    rows = sorted(catalog.load_table(name).scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "city": None}, {"id": 2, "city": "x"}]
