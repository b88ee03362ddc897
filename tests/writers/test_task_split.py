"""A task's rows split by partition: chunks of one partition value (as a hash distribution
delivers them) take a path of their own; every row lands in its own partition's file either
way, nulls in the null partition."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.writers import write_arrow
from icecommit.writers.files import PARTITION_CHUNK_ROWS, _single_value
from tests.conftest import unique_table
from tests.helpers import EVENTS_SCHEMA, events


@pytest.mark.parametrize(
    ("values", "single"),
    [
        (["a", "a", "a"], True),
        ([None, None], True),
        (["a", None], False),
        ([None, "a"], False),
        (["a", "b"], False),
    ],
)
def test_single_value_means_one_partition(values: list[str | None], single: bool) -> None:
    assert _single_value([pa.array(values, pa.string())]) is single
    assert _single_value([pa.array(values, pa.string()), pa.array([1] * len(values))]) is single
    assert not _single_value([pa.array(["a"] * len(values)), pa.array(range(len(values)))]) or len(values) == 1


@pytest.mark.parametrize("grouped", [True, False], ids=["one-value-chunks", "mixed-chunks"])
def test_every_row_lands_in_its_partitions_file(sqlite_catalog: SqlCatalog, grouped: bool) -> None:
    name = unique_table()
    ic.create_table(sqlite_catalog, name, EVENTS_SCHEMA, partition_by=["day(ts)", "event"])
    table = sqlite_catalog.load_table(name)
    rows = events(0, 3 * PARTITION_CHUNK_ROWS // 2)
    if grouped:  # rows sorted by partition: most chunks hold one value of each key
        rows = rows.sort_by([("event", "ascending"), ("ts", "ascending")])
    result = write_arrow(table, rows.to_batches(max_chunksize=10_000), job_id="j", checkpoint_id=1)
    assert result.records == result.source_records == rows.num_rows
    expected: dict[tuple[int, str | None], int] = {}
    days = pc.divide(rows.column("ts").cast(pa.int64()), 86_400_000_000).to_pylist()
    for day, event in zip(days, rows.column("event").to_pylist(), strict=True):
        expected[(day, event)] = expected.get((day, event), 0) + 1
    found: dict[tuple[int, str | None], int] = {}
    for data_file in result.data_files:
        day, event = data_file.partition
        content = pq.read_table(data_file.path.removeprefix("file://"))
        assert set(content.column("event").to_pylist()) == {event}
        file_days = pc.divide(content.column("ts").cast(pa.int64()), 86_400_000_000).to_pylist()
        assert set(file_days) == {day}
        found[(day, event)] = found.get((day, event), 0) + content.num_rows
        assert content.num_rows == data_file.record_count
    assert found == expected
