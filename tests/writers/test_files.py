"""The task-side file writer, without Spark: metrics, rolling, naming, partitions."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.core.datafiles import WriteResult
from icecommit.writers.files import DICTIONARY_MIN_ROWS, dictionary_columns
from tests.helpers import EVENTS_SCHEMA, events, write_arrow


def _local(path: str) -> str:
    return path.removeprefix("file://")


def test_metrics_match_the_data_of_each_file(sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, "ns.t", EVENTS_SCHEMA, partition_by=["event"])
    result = write_arrow(table, events(0, 5000), job_id="j", checkpoint_id=1)
    ids = {f.name: f.field_id for f in table.schema().fields}
    assert result.records == result.source_records == 5000
    for data_file in result.data_files:
        data = pq.read_table(_local(data_file.path))
        assert data.num_rows == data_file.record_count
        score = data.column("score")
        assert data_file.value_counts[ids["score"]] == data.num_rows
        assert data_file.null_value_counts[ids["score"]] == score.null_count
        assert data_file.nan_value_counts[ids["score"]] == pc.sum(pc.is_nan(score)).as_py()
        low = struct.unpack("<q", bytes.fromhex(data_file.lower_bounds[ids["id"]]))[0]
        high = struct.unpack("<q", bytes.fromhex(data_file.upper_bounds[ids["id"]]))[0]
        assert (low, high) == (pc.min(data.column("id")).as_py(), pc.max(data.column("id")).as_py())
        finite = pc.filter(score, pc.invert(pc.is_nan(score)))
        upper = struct.unpack("<d", bytes.fromhex(data_file.upper_bounds[ids["score"]]))[0]
        assert upper == pc.max(finite).as_py() and not math.isnan(upper)
        assert data_file.file_size_in_bytes == Path(_local(data_file.path)).stat().st_size


def test_parquet_carries_iceberg_field_ids(sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, "ns.t", EVENTS_SCHEMA)
    result = write_arrow(table, events(0, 10), job_id="j", checkpoint_id=1)
    schema = pq.read_schema(_local(result.data_files[0].path))
    for field in table.schema().fields:
        assert schema.field(field.name).metadata[b"PARQUET:field_id"] == str(field.field_id).encode()


def _dictionary_encoded(path: str) -> dict[str, bool]:
    chunk = pq.ParquetFile(_local(path)).metadata.row_group(0)
    return {
        chunk.column(i).path_in_schema: any("DICTIONARY" in e for e in chunk.column(i).encodings)
        for i in range(chunk.num_columns)
    }


def test_columns_that_repeat_values_get_a_dictionary_and_unique_ones_do_not(sqlite_catalog: SqlCatalog) -> None:
    """The dictionary is chosen per column from a sample of a file's first rows: ``event``
    (three values) and ``score`` (a value per 4 rows, repeated) repeat; ``id`` and ``ts``
    (every row its own) are written plain. The rows and statistics are those of any file."""
    table = ic.create_table(sqlite_catalog, "ns.t", EVENTS_SCHEMA)
    rows = events(0, 20_000)
    rows = rows.set_column(3, "score", pa.array([float(i % 50) for i in range(20_000)]))
    [data_file] = write_arrow(table, rows, job_id="j", checkpoint_id=1).data_files
    assert _dictionary_encoded(data_file.path) == {"id": False, "ts": False, "event": True, "score": True}
    assert pq.read_table(_local(data_file.path)).equals(rows.cast(pq.read_schema(_local(data_file.path))))
    ids = {f.name: f.field_id for f in table.schema().fields}
    assert data_file.null_value_counts[ids["event"]] == rows.column("event").null_count


def test_every_column_keeps_parquets_dictionary_where_too_few_rows_tell(sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, "ns.t", EVENTS_SCHEMA)
    [data_file] = write_arrow(table, events(0, DICTIONARY_MIN_ROWS - 1), job_id="j", checkpoint_id=1).data_files
    assert set(_dictionary_encoded(data_file.path).values()) == {True}


def test_dictionary_choice_of_a_sample_and_of_nested_columns() -> None:
    many = pa.table({"u": pa.array(range(10_000)), "r": pa.array([i % 7 for i in range(10_000)])})
    assert dictionary_columns(many) == ["r"]
    # the sample spreads over the rows: a column that repeats from its middle on is seen to
    repeats_later = pa.table({"h": pa.array([i if i < 4_000 else 0 for i in range(20_000)])})
    assert dictionary_columns(repeats_later) == ["h"]
    assert dictionary_columns(pa.table({"x": pa.array(range(DICTIONARY_MIN_ROWS - 1))})) is True
    nested = pa.table({"u": pa.array(range(1_000)), "s": pa.array([{"a": i} for i in range(1_000)])})
    assert dictionary_columns(nested) is True
    nulls = pa.table({"n": pa.nulls(1_000, pa.int64()), "u": pa.array(range(1_000))})
    assert dictionary_columns(nulls) == ["n"]


def test_files_roll_at_the_target_size(sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(
        sqlite_catalog,
        "ns.t",
        EVENTS_SCHEMA,
        properties={"write.target-file-size-bytes": "40000", "write.parquet.row-group-limit": "2000"},
    )
    result = write_arrow(table, events(0, 60_000), job_id="j", checkpoint_id=1, batch_rows=2000)
    assert len(result.data_files) > 3
    assert sum(f.record_count for f in result.data_files) == 60_000
    # every file but the last stops at the first row group that crosses the target
    for data_file in result.data_files[:-1]:
        assert data_file.file_size_in_bytes >= 40_000
        assert data_file.file_size_in_bytes < 40_000 + 60_000


def test_table_property_target_size_defaults_to_512_mib(sqlite_catalog: SqlCatalog) -> None:
    from icecommit.writers.files import target_file_size

    table = ic.create_table(sqlite_catalog, "ns.t", EVENTS_SCHEMA)
    assert target_file_size(table.metadata) == 512 * 1024 * 1024


def test_file_names_are_unique_and_say_who_wrote_them(sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, "ns.t", EVENTS_SCHEMA, partition_by=["event"])
    first = write_arrow(table, events(0, 300), job_id="my job/1", checkpoint_id=42, task_id=3, attempt=1)
    second = write_arrow(table, events(0, 300), job_id="my job/1", checkpoint_id=42, task_id=3, attempt=1)
    names = [f.path.rsplit("/", 1)[1] for f in first.data_files + second.data_files]
    assert len(set(names)) == len(names)
    assert all(n.startswith("my_job_1-00000042-00003-1-") and n.endswith(".parquet") for n in names)
    assert all(f.path.startswith(table.metadata.location + "/data/") for f in first.data_files)


@pytest.mark.parametrize(
    ("partition_by", "expected_partitions"),
    [
        (["event"], {("pv",), ("show",), ("click",), (None,)}),
        (["day(ts)"], {(20454,), (20455,), (20456,)}),
        (["bucket(4, id)"], {(0,), (1,), (2,), (3,)}),
        (["truncate(2, event)"], {("pv",), ("sh",), ("cl",), (None,)}),
        (["day(ts)", "event"], None),
    ],
)
def test_rows_land_in_their_partition(
    sqlite_catalog: SqlCatalog, partition_by: list[str], expected_partitions: set[tuple[object, ...]] | None
) -> None:
    table = ic.create_table(sqlite_catalog, "ns.t", EVENTS_SCHEMA, partition_by=partition_by)
    result = write_arrow(table, events(0, 3000), job_id="j", checkpoint_id=1)
    partitions = {f.partition for f in result.data_files}
    if expected_partitions is not None:
        assert partitions == expected_partitions
    else:
        assert len(partitions) == 6  # day and event both follow id % 3, plus nulls
    assert len(partitions) == len(result.data_files)
    spec = table.spec()
    for data_file in result.data_files:
        data = pq.read_table(_local(data_file.path))
        for position, field in enumerate(spec.fields):
            source = table.schema().find_field(field.source_id)
            values = data.column(source.name)
            transformed = field.transform.pyarrow_transform(source.field_type)(values.combine_chunks())
            assert set(transformed.to_pylist()) == {data_file.partition[position]}


def test_required_nulls_stop_the_task_and_are_reported(sqlite_catalog: SqlCatalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string(), nullable=False)])
    table = ic.create_table(sqlite_catalog, "ns.t", schema)
    data = pa.table({"id": pa.array(range(10), pa.int64()), "v": pa.array(["a", None, "b", None] + ["c"] * 6)})
    result = write_arrow(table, data, job_id="j", checkpoint_id=1)
    assert [(v.column, v.null_count) for v in result.violations] == [("v", 2)]
    assert result.data_files == ()


def test_write_result_round_trips_through_json(sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, "ns.t", EVENTS_SCHEMA, partition_by=["day(ts)", "event"])
    result = write_arrow(table, events(0, 500), job_id="j", checkpoint_id=9)
    assert WriteResult.from_json(result.to_json()) == result
    assert isinstance(pa.scalar(result.to_json()), pa.StringScalar)


def test_nulls_in_required_nested_fields_are_violations_only_where_the_parent_is_present(
    sqlite_catalog: SqlCatalog,
) -> None:
    nested = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("s", pa.struct([pa.field("x", pa.float64(), nullable=False), pa.field("y", pa.string())])),
        ]
    )
    table = ic.create_table(sqlite_catalog, "ns.nested", nested)
    kind = nested.field("s").type
    absent_parent = pa.table(
        {"id": pa.array([1, 2], pa.int64()), "s": pa.array([None, {"x": 1.0, "y": None}], kind)}, schema=nested
    )
    result = write_arrow(table, absent_parent, job_id="j", checkpoint_id=1)
    assert result.violations == () and result.records == 2
    child_null = pa.table(
        {
            "id": pa.array([3, 4, 5], pa.int64()),
            "s": pa.array([{"x": None, "y": "a"}, None, {"x": None, "y": None}], kind),
        },
        schema=nested,
    )
    refused = write_arrow(table, child_null, job_id="j", checkpoint_id=2)
    assert [(v.column, v.null_count) for v in refused.violations] == [("s.x", 2)] and refused.data_files == ()


def test_nulls_in_required_list_elements_and_map_values_are_violations_by_path(sqlite_catalog: SqlCatalog) -> None:
    """Only elements of lists that are present, and values of maps that are present, count;
    a required struct field inside a list element is checked too."""
    point = pa.struct([pa.field("x", pa.int64(), nullable=False)])
    nested = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("tags", pa.list_(pa.field("element", pa.int64(), nullable=False))),
            pa.field("attrs", pa.map_(pa.string(), pa.field("value", pa.string(), nullable=False))),
            pa.field("points", pa.list_(pa.field("element", point))),
        ]
    )
    table = ic.create_table(sqlite_catalog, "ns.lists", nested)
    tags, attrs, points = pa.list_(pa.int64()), pa.map_(pa.string(), pa.string()), pa.list_(point)
    good = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "tags": pa.array([[1, 2], None], tags),
            "attrs": pa.array([[("a", "x")], None], attrs),
            "points": pa.array([[{"x": 1}, None], None], points),
        }
    )
    written = write_arrow(table, good, job_id="j", checkpoint_id=1)
    assert written.violations == () and written.records == 2
    read = table.io.new_input(written.data_files[0].path)
    with read.open() as stream:
        import pyarrow.parquet as pq

        back = pq.read_table(stream)
    assert back.column("tags").to_pylist() == [[1, 2], None]
    bad = pa.table(
        {
            "id": pa.array([3, 4, 5], pa.int64()),
            "tags": pa.array([[1, None, None], [None], None], tags),
            "attrs": pa.array([[("a", None)], [("b", "y"), ("c", None)], None], attrs),
            "points": pa.array([[{"x": None}], [{"x": 2}], None], points),
        }
    )
    refused = write_arrow(table, bad, job_id="j", checkpoint_id=2)
    assert [(v.column, v.null_count) for v in refused.violations] == [
        ("attrs.value", 2),
        ("points.element.x", 1),
        ("tags.element", 3),
    ]
    assert refused.data_files == ()
