"""An upsert's keys looked up by Spark tasks: the same positions and keys as the driver's
look-up, errors named the same way, and ``ic.write`` committing through it."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record
from pyspark.sql import SparkSession

import icecommit as ic
import icecommit.writers.spark_key_lookup
from icecommit.catalog.data_file_keys import look_up_here
from icecommit.committer.modes.upserting import resolve_positions
from icecommit.core.tableprops import CLUSTER_LOOKUP_PROPERTY
from icecommit.core.upsert import UPSERT
from icecommit.errors import InvalidArgumentError, ValidationError
from icecommit.writers.spark_key_lookup import SparkKeyLookup
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

pytestmark = pytest.mark.spark


def _table(catalog: SqlCatalog, files: int) -> str:
    name = f"ns_{uuid.uuid4().hex[:8]}.users"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"], identifier_fields=["id"])
    committer = ic.GlobalCommitter(catalog, name, job_id="seed")
    for checkpoint in range(files):
        rows = events(checkpoint * 40, checkpoint * 40 + 40)
        committer.prepare(checkpoint, [write_arrow(committer.load_table(), rows, job_id="seed",
                                                   checkpoint_id=checkpoint)])  # fmt: skip
        committer.commit(checkpoint)
    return name


def _resolved(found: list[tuple[Any, list[int], pa.Table]]) -> dict[str, tuple[list[int], list[int]]]:
    return {f.file_path: (positions, sorted(keys.column("id").to_pylist())) for f, positions, keys in found}


def test_spark_tasks_find_the_same_rows_as_the_driver(spark: SparkSession, sqlite_catalog: SqlCatalog) -> None:
    name = _table(sqlite_catalog, 4)
    # an upsert first, so that some rows of the keys are already deleted by position
    committer = ic.GlobalCommitter(sqlite_catalog, name, job_id="cdc", key_lookup=SparkKeyLookup(spark, min_bytes=0))
    rows = events(10, 30)
    committer.prepare(1, [write_arrow(committer.load_table(), rows, job_id="cdc", checkpoint_id=1)], mode=UPSERT,
                      keys=rows.select(["id"]))  # fmt: skip
    assert committer.commit(1).committed
    table = sqlite_catalog.load_table(name)
    keys = pa.table({"id": pa.array([*range(0, 160, 3), 999], pa.int64())})
    args: dict[str, Any] = dict(branch="main", job_id="cdc", checkpoint_id=2, table_name=name)
    here = resolve_positions(table, keys, lookup=look_up_here, **args)
    there = resolve_positions(table, keys, lookup=SparkKeyLookup(spark, min_bytes=0, tasks=3), **args)
    assert _resolved(there) == _resolved(here) and len(here) > 4
    found = sorted(k for _, _, ks in there for k in ks.column("id").to_pylist())
    assert found == [k for k in range(0, 160, 3)]  # each key once: the rows the first upsert replaced are left out
    live = table.scan().to_arrow()
    assert sorted(live.column("id").to_pylist()) == list(range(160))


def test_a_file_the_tasks_cannot_read_keys_from_is_named_as_on_the_driver(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    name = f"ns_{uuid.uuid4().hex[:8]}.seeded"
    ic.create_table(sqlite_catalog, name, EVENTS_SCHEMA, identifier_fields=["id"])
    table = sqlite_catalog.load_table(name)
    seed = f"{table.location()}/data/seed.parquet"
    plain = events(0, 5).rename_columns(["key", "ts", "event", "score"])  # no field ids, no column "id"
    with table.io.new_output(seed).create() as stream:
        pq.write_table(plain.cast(pa.schema([f.with_metadata(None) for f in plain.schema])), stream)
    data_file = DataFile.from_args(
        _table_format_version=table.metadata.format_version, content=DataFileContent.DATA, file_path=seed,
        file_format=FileFormat.PARQUET, partition=Record(), record_count=5,
        file_size_in_bytes=len(table.io.new_input(seed)),
    )  # fmt: skip
    data_file.spec_id = table.spec().spec_id
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(data_file)
    table = sqlite_catalog.load_table(name)
    keys = pa.table({"id": pa.array([1], pa.int64())})
    args: dict[str, Any] = dict(branch="main", job_id="cdc", checkpoint_id=1, table_name=name)
    with pytest.raises(ValidationError) as here:
        resolve_positions(table, keys, lookup=look_up_here, **args)
    with pytest.raises(ValidationError) as there:
        resolve_positions(table, keys, lookup=SparkKeyLookup(spark, min_bytes=0), **args)
    assert str(there.value) == str(here.value) and "no column named 'id'" in str(there.value)


def test_ic_write_upserts_through_spark_tasks_past_the_tables_threshold(
    spark: SparkSession, sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _table(sqlite_catalog, 3)
    with sqlite_catalog.load_table(name).transaction() as tx:
        tx.set_properties({CLUSTER_LOOKUP_PROPERTY: "0"})  # every look-up on the cluster

    def not_here(*args: Any) -> Any:
        raise AssertionError("the keys were looked up on the driver")

    monkeypatch.setattr(icecommit.writers.spark_key_lookup, "look_up_here", not_here)
    changes = spark.createDataFrame([(5, "u"), (50, "u"), (200, "c"), (7, "d")], "id long, op string")
    frame = changes.selectExpr("id", "CAST(NULL AS TIMESTAMP) AS ts", "'changed' AS event", "1.0D AS score", "op")
    result = ic.write(frame, name, catalog=sqlite_catalog, job_id="cdc", checkpoint_id=1, mode="upsert",
                      change_column="op")  # fmt: skip
    assert result.committed
    live = {r["id"]: r["event"] for r in sqlite_catalog.load_table(name).scan().to_arrow().to_pylist()}
    assert len(live) == 120 and 7 not in live  # 120 rows, one deleted, one inserted
    assert (live[5], live[50], live[200]) == ("changed", "changed", "changed")
    assert ic.reconcile(sqlite_catalog, name).ok
    with sqlite_catalog.load_table(name).transaction() as tx:
        tx.set_properties({CLUSTER_LOOKUP_PROPERTY: "lots"})
    with pytest.raises(InvalidArgumentError, match=CLUSTER_LOOKUP_PROPERTY):
        ic.write(frame, name, catalog=sqlite_catalog, job_id="cdc", checkpoint_id=2, mode="upsert",
                 change_column="op")  # fmt: skip
    assert len(sqlite_catalog.load_table(name).snapshots()) == 4  # three seeds and one upsert: nothing more
