"""The distribution step before the writers: none, hash and bin-pack."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import DataFrame, SparkSession

import icecommit as ic
from icecommit.errors import InvalidArgumentError
from icecommit.state.database import state_engine, state_uri
from icecommit.state.write_model import WriteModelStore
from icecommit.writers.distribution import DEFAULT_SHUFFLE_RATIO, distribution_mode, learned_ratio

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("local", pa.timestamp("us")),
        pa.field("event", pa.string()),
        pa.field("payload", pa.string()),
    ]
)


def frame(spark: SparkSession, rows: int, slices: int = 8) -> DataFrame:
    """``rows`` rows over 6 hours (about two days of local time) and 3 events, in ``slices``
    input partitions, so every input partition holds rows of every partition."""
    return spark.range(0, rows, numPartitions=slices).selectExpr(
        "id",
        "timestamp_micros(1777593600000000 + (id % 360) * 60000000) AS ts",  # 2026-05-01T00:00Z + id % 360 minutes
        "CAST(timestamp_micros(1777593600000000 + (id % 7) * 9 * 3600000000) AS TIMESTAMP_NTZ) AS local",
        "element_at(array('click', 'view', 'scroll'), CAST(id % 3 + 1 AS INT)) AS event",
        "repeat(sha2(CAST(id AS STRING), 256), 4) AS payload",
    )


def partitions_and_files(table_name: str, catalog: SqlCatalog) -> tuple[int, Counter[tuple[object, ...]]]:
    """(number of distinct partitions, files per partition) of the table's current snapshot."""
    files = catalog.load_table(table_name).inspect.files().to_pylist()
    per_partition = Counter(tuple(sorted(f["partition"].items())) for f in files)
    return len(per_partition), per_partition


# -- pure decisions -----------------------------------------------------------------------------


def test_the_mode_comes_from_the_argument_then_the_table_then_the_spec(sqlite_catalog: SqlCatalog) -> None:
    partitioned = ic.create_table(sqlite_catalog, "ns.p", SCHEMA, partition_by=["hour(ts)"])
    plain = ic.create_table(sqlite_catalog, "ns.u", SCHEMA)
    assert distribution_mode(partitioned.metadata) == "hash"  # as Iceberg's Spark writer
    assert distribution_mode(plain.metadata) == "none"
    assert distribution_mode(partitioned.metadata, "bin-pack") == "bin-pack"
    ranged = ic.create_table(sqlite_catalog, "ns.r", SCHEMA, properties={"write.distribution-mode": "range"})
    assert distribution_mode(ranged.metadata) == "hash"  # a range would need a second pass over the input
    packed = ic.create_table(sqlite_catalog, "ns.b", SCHEMA, properties={"write.distribution-mode": "Bin-Pack"})
    assert distribution_mode(packed.metadata) == "bin-pack"
    with pytest.raises(InvalidArgumentError) as wrong:
        distribution_mode(partitioned.metadata, "round-robin")
    assert wrong.value.argument == "distribution"
    odd = ic.create_table(sqlite_catalog, "ns.o", SCHEMA, properties={"write.distribution-mode": "spread"})
    with pytest.raises(InvalidArgumentError) as wrong_property:
        distribution_mode(odd.metadata)
    assert wrong_property.value.argument == "table property write.distribution-mode"


def test_the_ratio_is_learned_from_the_fuller_tasks_and_damped() -> None:
    assert learned_ratio([100], 1000, 2.0) is None  # one task: it got everything there was
    assert learned_ratio([0, 0], 1000, 2.0) is None
    # tasks given 1,000 shuffle bytes wrote about 250 Parquet bytes: the ratio moves from 2 toward 4
    ratio = learned_ratio([40, 240, 250, 260], 1000, 2.0)
    assert ratio is not None and 2.0 < ratio < 4.0 and ratio == pytest.approx((2.0 * 1000 / 260) ** 0.5)
    assert learned_ratio([1, 1, 1], 1000, None) == pytest.approx(
        (DEFAULT_SHUFFLE_RATIO * DEFAULT_SHUFFLE_RATIO * 4) ** 0.5
    )


# -- through Spark --------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize(
    "partition_by",
    [["hour(ts)", "event"], ["day(local)"], ["month(ts)"], ["year(local)"], ["truncate(1, event)"], ["bucket(4, id)"]],
)
def test_hash_sends_all_rows_of_a_partition_to_one_task(
    spark: SparkSession, sqlite_catalog: SqlCatalog, partition_by: list[str]
) -> None:
    name = "ns.hashed"
    ic.create_table(sqlite_catalog, name, SCHEMA, partition_by=partition_by)
    result = ic.write(frame(spark, 3000), name, catalog=sqlite_catalog, job_id="j", checkpoint_id=0)
    assert result.records == 3000
    partitions, per_partition = partitions_and_files(name, sqlite_catalog)
    if partition_by == ["bucket(4, id)"]:  # keyed by the id itself: a bucket's rows may reach several tasks
        assert partitions == 4 and sum(per_partition.values()) <= 8
    else:
        assert set(per_partition.values()) == {1}, per_partition  # one task, so one file, per partition
    assert sqlite_catalog.load_table(name).scan().to_arrow().num_rows == 3000


@pytest.mark.spark
def test_none_writes_a_file_per_task_and_partition_and_bin_pack_packs_them(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    counts = {}
    for mode in ("none", "hash", "bin-pack"):
        name = f"ns.m_{mode.replace('-', '_')}"
        ic.create_table(sqlite_catalog, name, SCHEMA, partition_by=["hour(ts)", "event"])
        result = ic.write(
            frame(spark, 6000), name, catalog=sqlite_catalog, job_id="j", checkpoint_id=0, distribution=mode
        )
        partitions, per_partition = partitions_and_files(name, sqlite_catalog)
        assert (partitions, result.records) == (18, 6000)
        counts[mode] = (sum(per_partition.values()), result)
    assert counts["none"][0] == 8 * 18  # every one of the 8 input tasks wrote into every partition
    assert counts["hash"][0] == 18 and counts["bin-pack"][0] == 18
    # bin-pack: the 18 small partitions (about 60 KB each) share a task or two, not one task each
    table = sqlite_catalog.load_table("ns.m_bin_pack")
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and summary["added-data-files"] == "18"
    learned = WriteModelStore(state_engine(state_uri(sqlite_catalog))).shuffle_ratio("ns.m_bin_pack")
    assert learned is None or learned > 0  # one task tells nothing; several tell a ratio


@pytest.mark.spark
def test_bin_pack_splits_a_large_partition_and_learns_the_tables_ratio(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    """One partition holds nearly all rows and is several target sizes large: bin-pack
    splits it across tasks (hash would give it one task), and the ratio the write showed
    is kept for the next one."""
    name = "ns.skewed"
    target = 256 * 1024
    ic.create_table(sqlite_catalog, name, SCHEMA, partition_by=["event"])
    skewed = frame(spark, 40_000).selectExpr(
        "id", "ts", "local", "CASE WHEN id % 50 = 0 THEN event ELSE 'click' END AS event", "payload"
    )
    table = sqlite_catalog.load_table(name)
    writing_click = {}
    for mode in ("hash", "bin-pack"):
        results = ic.writers.SparkWriter(table, job_id=mode, distribution=mode, target_file_size=target).write(
            skewed, 0
        )
        assert sum(r.records for r in results) == 40_000
        writing_click[mode] = [r for r in results if any(f.partition == ("click",) for f in r.data_files)]
        for r in results:  # these files are not committed: remove them
            for f in r.data_files:
                table.io.delete(f.path)
    assert len(writing_click["hash"]) == 1  # one task holds the whole partition, its files one after the other
    assert len(writing_click["bin-pack"]) >= 2, "bin-pack split the large partition across tasks"

    model = WriteModelStore(state_engine(state_uri(sqlite_catalog)))
    assert model.shuffle_ratio(name) is None
    for checkpoint in (0, 1):
        result = ic.write(
            skewed, name, catalog=sqlite_catalog, job_id="packed", checkpoint_id=checkpoint,
            distribution="bin-pack", target_file_size=target,
        )  # fmt: skip
        assert result.records == 40_000
        ratio = model.shuffle_ratio(name)
        assert ratio is not None and ratio > 0, "the bin-packed write kept what it showed"
    assert sqlite_catalog.load_table(name).scan().to_arrow().num_rows == 80_000


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["hash", "bin-pack"])
def test_routed_writes_distribute_over_table_and_partition_pairs(
    spark: SparkSession, sqlite_catalog: SqlCatalog, mode: str
) -> None:
    routes = {"click": "ns.clicks", "view": "ns.views", "scroll": "ns.views"}
    for name in ("ns.clicks", "ns.views"):
        ic.create_table(sqlite_catalog, name, SCHEMA, partition_by=["hour(ts)"])
    source = frame(spark, 6000)
    result = ic.write(
        source, routes, route_by="event", catalog=sqlite_catalog, job_id="r", checkpoint_id=0, distribution=mode
    )
    assert sum(r.records for r in result.results.values()) == 6000
    for name in ("ns.clicks", "ns.views"):
        partitions, per_partition = partitions_and_files(name, sqlite_catalog)
        assert partitions == 6 and set(per_partition.values()) == {1}, (name, per_partition)  # not 8 per hour
    assert sqlite_catalog.load_table("ns.views").scan().to_arrow().num_rows == 4000


@pytest.mark.spark
def test_bin_pack_on_an_unpartitioned_table_evens_out_the_tasks(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    ic.create_table(sqlite_catalog, "ns.plain", SCHEMA)
    result = ic.write(
        frame(spark, 3000), "ns.plain", catalog=sqlite_catalog, job_id="j", checkpoint_id=0, distribution="bin-pack"
    )
    assert result.records == 3000 and sqlite_catalog.load_table("ns.plain").scan().to_arrow().num_rows == 3000


@pytest.mark.spark
def test_partition_keys_find_columns_whose_names_hold_dots_and_nested_fields(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("user.id", pa.int64()),
            pa.field("point", pa.struct([pa.field("x", pa.int32())])),
        ]
    )
    ic.create_table(sqlite_catalog, "ns.dotted", schema, partition_by=["user.id"])
    source = spark.range(0, 600, numPartitions=4).selectExpr(
        "id", "id % 3 AS `user.id`", "named_struct('x', CAST(id % 2 AS INT)) AS point"
    )
    ic.write(source, "ns.dotted", catalog=sqlite_catalog, job_id="j", checkpoint_id=0)
    partitions, per_partition = partitions_and_files("ns.dotted", sqlite_catalog)
    assert partitions == 3 and set(per_partition.values()) == {1}
    ic.create_table(sqlite_catalog, "ns.nested", schema, partition_by=["point.x"])
    ic.write(source, "ns.nested", catalog=sqlite_catalog, job_id="j", checkpoint_id=0, distribution="bin-pack")
    partitions, per_partition = partitions_and_files("ns.nested", sqlite_catalog)
    assert partitions == 2 and sum(per_partition.values()) == 2
