"""Apache Iceberg's Java reader on a table icecommit overwrote: identity, ``day`` and
``hour`` partitions, before and after a spec change, read exactly as pyiceberg reads them.
It runs where the Java Iceberg environment is (CI's pyspark 3.5 pass) and skips saying
what is missing elsewhere."""

from __future__ import annotations

import datetime as dt
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.transforms import HourTransform

import icecommit as ic
from tests import java_iceberg
from tests.helpers import write_arrow

pytestmark = pytest.mark.spark

H0 = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("ts", pa.timestamp("us", tz="UTC")), ("page", pa.string())])


def _rows(first_id: int, page: str, hours: list[int]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(first_id, first_id + len(hours)), pa.int64()),
            "ts": pa.array([H0 + timedelta(hours=h) for h in hours], pa.timestamp("us", tz="UTC")),
            "page": pa.array([page] * len(hours)),
        },
        schema=SCHEMA,
    )


def test_java_iceberg_reads_what_overwrites_of_identity_day_and_hour_partitions_left(
    sqlite_catalog: SqlCatalog, tmp_path: Path
) -> None:
    java = java_iceberg.found_or_skip()
    catalog = sqlite_catalog
    name = f"{catalog.name}.overwritten"
    ic.create_table(catalog, name, SCHEMA, partition_by=["page", "day(ts)"])
    committer = ic.GlobalCommitter(catalog, name, job_id="j")

    def land(checkpoint: int, rows: pa.Table, mode: str) -> None:
        written = write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=checkpoint)
        committer.prepare(checkpoint, [written], mode=mode)
        committer.commit(checkpoint)

    first = pa.concat_tables([_rows(0, "a", [1, 5, 25, 30, 49]), _rows(10, "b", [2, 26, 49, 49])])
    land(1, first, "append")
    land(2, _rows(100, "a", [27]), "overwrite-partitions")  # (a, day 1) replaced
    with catalog.load_table(name).update_spec() as spec:
        spec.remove_field("ts_day")
        spec.add_field("ts", HourTransform(), "ts_hour")
    land(3, _rows(200, "b", [49]), "overwrite-partitions")  # (b, hour 49): the old (b, day 2) file lies inside
    land(4, _rows(300, "a", [70, 71]), "append")
    land(5, _rows(400, "a", [71]), "overwrite-partitions")  # (a, hour 71) of the new spec only
    expected = [0, 1, 4, 10, 11, 100, 200, 300]
    table = catalog.load_table(name)
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == sorted([*expected, 400])
    rows_file, _ = java.read(table.metadata_location, tmp_path / "java")
    assert sorted(pq.read_table(rows_file).column("id").to_pylist()) == sorted([*expected, 400])
