"""Bad input is refused before anything is committed, naming the column; timestamps map
deliberately and round-trip exactly."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.types import TimestampType, TimestamptzType
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import icecommit as ic

pytestmark = pytest.mark.spark

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("note", pa.string()),
    ]
)


def _base(spark: SparkSession) -> DataFrame:
    return spark.range(0, 20, numPartitions=2).select(
        F.col("id"),
        F.concat(F.lit("n"), F.col("id").cast("string")).alias("name"),
        (F.col("id") / 4).cast("decimal(10,2)").alias("amount"),
        F.lit("x").alias("note"),
    )


BAD_INPUTS = {
    "missing required column": (lambda df: df.drop("name"), "name", "required column is missing"),
    "unknown extra column": (lambda df: df.withColumn("extra", F.lit(1)), "extra", "unknown extra column"),
    "incompatible type": (
        lambda df: df.withColumn("id", F.col("id").cast("string")),
        "id",
        "Spark type string cannot be written to Iceberg type long",
    ),
    "nulls in a required column": (
        lambda df: df.withColumn("name", F.when(F.col("id") % 5 == 0, F.lit(None)).otherwise(F.col("name"))),
        "name",
        "4 null value",
    ),
    "schema that cannot be cast": (
        lambda df: df.withColumn("amount", F.col("amount").cast("decimal(14,2)")),
        "amount",
        "decimal\\(14,2\\) cannot be written to Iceberg type decimal\\(10, 2\\)",
    ),
    "two columns of one name": (
        lambda df: df.select("id", "name", "amount", "note", F.lit("y").alias("note")),
        "note",
        "the DataFrame has 2 columns of this name",
    ),
    "two names that differ only by case": (
        lambda df: df.select("*", F.lit("y").alias("NOTE")),
        "note",
        "also has 'NOTE', and Spark takes them for one column",
    ),
    "nested type for a primitive column": (
        lambda df: df.withColumn("note", F.array(F.lit("a"))),
        "note",
        "array<string> cannot be written",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=[c.replace(" ", "-") for c in BAD_INPUTS])
def test_bad_input_is_refused_naming_the_column(spark: SparkSession, catalog: SqlCatalog, case: str) -> None:
    table = ic.create_table(catalog, f"{catalog.name}.strict", SCHEMA)
    ic.write(_base(spark), table, catalog=catalog, job_id="ingest", checkpoint_id=1)
    before = catalog.load_table(f"{catalog.name}.strict")
    change, column, reason = BAD_INPUTS[case]
    with pytest.raises(ic.SchemaMismatchError, match=reason) as info:
        ic.write(change(_base(spark)), table, catalog=catalog, job_id="ingest", checkpoint_id=2)
    assert info.value.column == column
    assert f"column {column!r}" in str(info.value)
    after = catalog.load_table(f"{catalog.name}.strict")
    assert after.metadata.snapshots == before.metadata.snapshots
    assert after.scan().to_arrow().num_rows == 20
    committer = ic.GlobalCommitter(catalog, table, job_id="ingest")
    assert committer.store.get("ingest", committer.table_name, 2) is None
    # files a refused write produced are removed (they were never staged)
    data_dir = Path(after.metadata.location.removeprefix("file://"), "data")
    assert len(list(data_dir.rglob("*.parquet"))) == len(list(after.scan().plan_files()))


def test_missing_optional_column_is_filled_with_nulls(spark: SparkSession, sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, "ns.strict", SCHEMA)
    ic.write(_base(spark).drop("note"), table, catalog=sqlite_catalog, job_id="ingest", checkpoint_id=1)
    notes = sqlite_catalog.load_table("ns.strict").scan().to_arrow().column("note")
    assert notes.null_count == 20


def test_widening_casts_are_applied(spark: SparkSession, sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, "ns.strict", SCHEMA)
    df = (
        _base(spark)
        .withColumn("id", F.col("id").cast("int"))
        .withColumn("amount", F.col("amount").cast("decimal(8,2)"))
    )
    result = ic.write(df, table, catalog=sqlite_catalog, job_id="ingest", checkpoint_id=1)
    assert result.records == 20


TS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("instant", pa.timestamp("us", tz="UTC")),
        pa.field("wall", pa.timestamp("us")),
    ]
)
MICROS = [0, 1, -1, 1_700_000_000_123_457, -86_400_000_001, 253_402_300_799_999_999, 1_767_225_600_999_999]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def test_timestamps_map_deliberately_and_round_trip_exactly(spark: SparkSession, catalog: SqlCatalog) -> None:
    table = ic.create_table(catalog, f"{catalog.name}.times", TS_SCHEMA)
    assert isinstance(table.schema().find_field("instant").field_type, TimestamptzType)
    assert isinstance(table.schema().find_field("wall").field_type, TimestampType)
    values = spark.createDataFrame([(i, m) for i, m in enumerate(MICROS)], "id long, m long")
    df = values.select(
        "id",
        F.timestamp_micros("m").alias("instant"),  # Spark TIMESTAMP
        F.timestamp_micros("m").cast("timestamp_ntz").alias("wall"),  # Spark TIMESTAMP_NTZ (session zone is UTC)
    )
    assert dict(df.dtypes) == {"id": "bigint", "instant": "timestamp", "wall": "timestamp_ntz"}
    ic.write(df, table, catalog=catalog, job_id="times", checkpoint_id=1)
    loaded = catalog.load_table(f"{catalog.name}.times")
    rows = sorted(loaded.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    for row, micros in zip(rows, MICROS, strict=True):
        instant, wall = row["instant"], row["wall"]
        assert instant.tzinfo is not None and wall.tzinfo is None
        assert (instant - EPOCH) // dt.timedelta(microseconds=1) == micros
        assert (wall.replace(tzinfo=dt.timezone.utc) - EPOCH) // dt.timedelta(microseconds=1) == micros
    # stored as INT64 microseconds, never INT96
    data_file = next(iter(loaded.scan().plan_files())).file.file_path.removeprefix("file://")
    parquet = pq.ParquetFile(data_file).schema
    for name, adjusted in (("instant", "true"), ("wall", "false")):
        column = parquet.column(parquet.names.index(name))
        assert column.physical_type == "INT64"
        assert f"isAdjustedToUTC={adjusted}, timeUnit=microseconds" in str(column.logical_type)


def test_crossing_timestamp_kinds_is_refused_with_a_hint(spark: SparkSession, sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, "ns.times", TS_SCHEMA)
    base = spark.range(0, 3).select(
        "id", F.timestamp_micros("id").alias("instant"), F.timestamp_micros("id").cast("timestamp_ntz").alias("wall")
    )
    with pytest.raises(ic.SchemaMismatchError, match="cast it to TIMESTAMP_NTZ first") as info:
        ic.write(base.withColumn("wall", F.col("instant")), table, catalog=sqlite_catalog, job_id="t", checkpoint_id=1)
    assert info.value.column == "wall"
    with pytest.raises(ic.SchemaMismatchError, match="cast it to TIMESTAMP \\(an instant\\) first"):
        ic.write(base.withColumn("instant", F.col("wall")), table, catalog=sqlite_catalog, job_id="t", checkpoint_id=1)
    assert sqlite_catalog.load_table("ns.times").current_snapshot() is None


ODD = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("a.b", pa.string()),
        pa.field("with space", pa.string()),
        pa.field("x`y", pa.int32()),
        pa.field("ünï-côdé", pa.string()),
        pa.field(
            "point",
            pa.struct([pa.field("x", pa.float64(), nullable=False), pa.field("label", pa.string())]),
            nullable=False,
        ),
    ]
)


def test_column_names_spark_would_parse_and_required_nested_fields_are_written(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    table = ic.create_table(sqlite_catalog, "ns.odd", ODD)
    rows = [
        {"id": i, "a.b": f"ab{i}", "with space": f"s{i}", "x`y": i * 3, "ünï-côdé": "é" * (i % 3),
         "point": {"x": i / 2, "label": None if i % 2 else f"p{i}"}}
        for i in range(12)
    ]  # fmt: skip
    ddl = (
        "id long, `a.b` string, `with space` string, `x``y` int, `ünï-côdé` string, point struct<x:double,label:string>"
    )
    tuples = [
        (r["id"], r["a.b"], r["with space"], r["x`y"], r["ünï-côdé"], (r["point"]["x"], r["point"]["label"]))
        for r in rows
    ]
    df = spark.createDataFrame(tuples, ddl).repartition(2)  # no pandas: pyspark 3.5 warns on its dtypes
    result = ic.write(df, table, catalog=sqlite_catalog, job_id="odd", checkpoint_id=1)
    assert result.status == "committed" and result.records == 12
    back = sqlite_catalog.load_table("ns.odd").scan().to_arrow().sort_by("id")
    assert back.column_names == ODD.names
    assert back.select(["id", "a.b", "with space", "x`y", "ünï-côdé"]).to_pylist() == [
        {k: r[k] for k in ("id", "a.b", "with space", "x`y", "ünï-côdé")} for r in rows
    ]
    assert back.column("point").to_pylist() == [r["point"] for r in rows]
    # the routed writer too, routing by a column whose name has a space
    ic.create_table(sqlite_catalog, "ns.odd2", ODD)
    routes = {f"s{i}": "ns.odd2" for i in range(12)}
    routed = ic.write(df, routes, route_by="with space", catalog=sqlite_catalog, job_id="odd-routed", checkpoint_id=1)
    assert routed["ns.odd2"].records == 12
    again = sqlite_catalog.load_table("ns.odd2").scan().to_arrow().sort_by("id")
    assert again.to_pylist() == back.to_pylist()
    # a null in the required nested field is refused, naming it
    bad = spark.createDataFrame(
        [(99, None, None, None, None, (None, "z"))],
        "id long, `a.b` string, `with space` string, `x``y` int, `ünï-côdé` string, "
        "point struct<x:double,label:string>",
    )
    with pytest.raises(ic.SchemaMismatchError) as refused:
        ic.write(bad, table, catalog=sqlite_catalog, job_id="odd", checkpoint_id=2)
    assert refused.value.column.startswith("point")
    assert sqlite_catalog.load_table("ns.odd").scan().to_arrow().num_rows == 12
