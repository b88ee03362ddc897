from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

import icecommit as ic
from icecommit.catalog.tables import parse_transform
from icecommit.writers import write_arrow

ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("name", pa.string()),
    ]
)


@pytest.mark.parametrize(
    ("expression", "column", "transform", "field"),
    [
        ("name", "name", IdentityTransform(), "name"),
        ("identity(name)", "name", IdentityTransform(), "name"),
        ("year(ts)", "ts", YearTransform(), "ts_year"),
        ("month(ts)", "ts", MonthTransform(), "ts_month"),
        ("day(ts)", "ts", DayTransform(), "ts_day"),
        ("hour( ts )", "ts", HourTransform(), "ts_hour"),
        ("bucket(16, id)", "id", BucketTransform(16), "id_bucket"),
        ("truncate(4,name)", "name", TruncateTransform(4), "name_trunc"),
    ],
)
def test_parse_transform(expression: str, column: str, transform: object, field: str) -> None:
    assert parse_transform(expression) == (column, transform, field)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("week(ts)", "unknown partition transform 'week'"),
        ("bucket(id)", "bucket() takes a positive integer and a column"),
        ("bucket(0, id)", "bucket() takes a positive integer"),
        ("day()", "day() takes one column"),
        ("nope", "partition column 'nope' is not in the schema"),
        ("day(name)", "cannot apply day to column 'name'"),
    ],
)
def test_bad_partition_expressions_are_named(sqlite_catalog: SqlCatalog, expression: str, message: str) -> None:
    with pytest.raises(ic.TableSpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ic.create_table(sqlite_catalog, "ns.bad", ARROW, partition_by=[expression])
    assert not sqlite_catalog.table_exists("ns.bad")


def test_create_from_pyarrow_schema_with_every_transform(sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(
        sqlite_catalog, "ns.t", ARROW, partition_by=["day(ts)", "bucket(8, id)", "truncate(2, name)"]
    )
    assert [f.name for f in table.spec().fields] == ["ts_day", "id_bucket", "name_trunc"]
    assert table.schema().find_field("id").required
    assert isinstance(table.schema().find_field("ts").field_type, TimestamptzType)


def test_the_codec_icecommit_writes_is_recorded_for_other_engines_unless_one_is_given(
    sqlite_catalog: SqlCatalog,
) -> None:
    table = ic.create_table(sqlite_catalog, "ns.t", ARROW)
    assert table.properties["write.parquet.compression-codec"] == "zstd"
    rows = pa.Table.from_pylist([{"id": 1, "ts": None, "name": "a"}], schema=ARROW)
    written = write_arrow(table, rows, job_id="j", checkpoint_id=0)
    parquet = pq.ParquetFile(written.data_files[0].path.removeprefix("file://"))
    assert parquet.metadata.row_group(0).column(0).compression == "ZSTD"
    chosen = ic.create_table(sqlite_catalog, "ns.u", ARROW, properties={"write.parquet.compression-codec": "snappy"})
    assert chosen.properties["write.parquet.compression-codec"] == "snappy"


def test_create_from_pyiceberg_schema(sqlite_catalog: SqlCatalog) -> None:
    schema = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "name", StringType()))
    table = ic.create_table(sqlite_catalog, "ns.t", schema, partition_by=["name"])
    assert table.spec().fields[0].source_id == table.schema().find_field("name").field_id


def test_creating_an_existing_table_returns_it_or_refuses(sqlite_catalog: SqlCatalog) -> None:
    first = ic.create_table(sqlite_catalog, "ns.t", ARROW, partition_by=["day(ts)"])
    again = ic.create_table(sqlite_catalog, "ns.t", ARROW, partition_by=["day(ts)"])
    assert again.metadata.table_uuid == first.metadata.table_uuid
    with pytest.raises(ic.TableSpecError, match="different partition spec"):
        ic.create_table(sqlite_catalog, "ns.t", ARROW, partition_by=["hour(ts)"])
    other = ARROW.append(pa.field("extra", pa.int32()))
    with pytest.raises(ic.TableSpecError, match="different schema"):
        ic.create_table(sqlite_catalog, "ns.t", other, partition_by=["day(ts)"])
