"""``write_arrow``: a task's step from any Python process, its rows fitted to the table or
refused with the column named, nothing left behind when it fails."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.errors import InvalidArgumentError, SchemaMismatchError
from icecommit.writers import write_arrow
from tests import processes
from tests.conftest import unique_table
from tests.helpers import EVENTS_SCHEMA, assert_same_rows, events


@pytest.fixture
def table_name(catalog: SqlCatalog) -> str:
    name = unique_table()
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    return name


def data_files(catalog: SqlCatalog, name: str) -> list[Path]:
    location = catalog.load_table(name).metadata.location.removeprefix("file://")
    return sorted(p for p in Path(location).rglob("*.parquet") if "/metadata/" not in str(p))


def _worker(catalog_name: str, uri: str, warehouse: str, name: str, task_id: int) -> str:
    """Another process's writer: loads the table itself and writes its share of the rows."""
    catalog = SqlCatalog(catalog_name, uri=uri, warehouse=warehouse)
    rows = events(task_id * 500, task_id * 500 + 500)
    return write_arrow(
        catalog.load_table(name), rows.to_batches(max_chunksize=128), job_id="other-engine", checkpoint_id=3,
        task_id=task_id,
    ).to_json()  # fmt: skip


def test_writers_in_other_processes_feed_one_checkpoint(catalog: SqlCatalog, table_name: str) -> None:
    uri, warehouse = catalog.properties["uri"], catalog.properties["warehouse"]
    # processes that share nothing with this one (forked from a server that only imported)
    with processes.CONTEXT.Pool(2) as pool:
        payloads = pool.starmap(_worker, [(catalog.name, uri, warehouse, table_name, t) for t in range(3)])
    results = [ic.WriteResult.from_json(p) for p in payloads]
    assert [r.task_id for r in results] == [0, 1, 2]
    names = [Path(f.path).name for r in results for f in r.data_files]
    assert len(names) == len(set(names))  # unique names across processes
    committer = ic.GlobalCommitter(catalog, table_name, job_id="other-engine")
    committer.prepare(3, results)
    committer.commit(3)
    assert_same_rows(catalog.load_table(table_name).scan().to_arrow(), events(0, 1500))
    report = ic.reconcile(catalog, table_name)
    assert report.ok and report.checkpoints[0].readable == 1500


@pytest.mark.database_independent
def test_rows_are_fitted_by_name_with_widening_casts_and_nulls_for_missing_optional_columns(
    catalog: SqlCatalog, table_name: str
) -> None:
    table = catalog.load_table(table_name)
    rows = pa.table(
        {
            "event": pa.array(["pv", "click", None], pa.string()),
            "id": pa.array([1, 2, 3], pa.int32()),  # widened to long
            "ts": pa.array([0, 1_000, 2_000], pa.timestamp("ms", tz="UTC")),  # another unit
        }
    )  # no score: optional, written as nulls
    result = write_arrow(table, rows, job_id="j", checkpoint_id=0)
    assert (result.records, result.source_records) == (3, 3)
    committer = ic.GlobalCommitter(catalog, table_name, job_id="j")
    committer.prepare(0, [result])
    committer.commit(0)
    read = catalog.load_table(table_name).scan().to_arrow().sort_by("id").to_pylist()
    assert [(r["id"], r["event"], r["score"]) for r in read] == [(1, "pv", None), (2, "click", None), (3, None, None)]
    assert [r["ts"] for r in read] == [
        dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=ms) for ms in (0, 1_000, 2_000)
    ]


@pytest.mark.database_independent
@pytest.mark.parametrize(
    ("rows", "column", "words"),
    [
        (events(0, 4).append_column("extra", pa.array([1, 2, 3, 4])), "extra", "unknown extra column"),
        (events(0, 4).drop_columns(["id"]), "id", "required column is missing"),
        (events(0, 4).set_column(2, "event", pa.array([1, 2, 3, 4])), "event", "cannot write int64"),
        (events(0, 4).set_column(0, "id", pa.array(["1", "2", "3", "4"])), "id", "cannot write string"),
        (events(0, 4).set_column(3, "score", pa.array([Decimal(1)] * 4, pa.decimal128(5, 2))), "score", "cannot"),
        (events(0, 4).set_column(1, "ts", pa.array([0] * 4, pa.timestamp("us"))), "ts", "without time zone"),
        (events(0, 4).set_column(1, "ts", pa.array([1_001] * 4, pa.timestamp("ns", tz="UTC"))), "ts", "does not fit"),
        (pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["id", "id"]), "id", "more than once"),
    ],
    ids=["extra", "missing-required", "int-to-string", "string-to-long", "decimal-to-double", "naive-ts",
         "ns-precision-lost", "duplicate"],
)  # fmt: skip
def test_rows_that_do_not_fit_are_refused_with_the_column_named_and_nothing_written(
    catalog: SqlCatalog, table_name: str, rows: pa.Table, column: str, words: str
) -> None:
    table = catalog.load_table(table_name)
    with pytest.raises(SchemaMismatchError, match=words) as caught:
        write_arrow(table, rows, job_id="j", checkpoint_id=0)
    assert caught.value.column == column and caught.value.table == table_name
    assert data_files(catalog, table_name) == []
    assert catalog.load_table(table_name).current_snapshot() is None


@pytest.mark.database_independent
def test_a_failure_while_writing_removes_the_files_already_written(catalog: SqlCatalog, table_name: str) -> None:
    table = catalog.load_table(table_name)

    written_before_failure = []

    def batches() -> Iterator[pa.RecordBatch]:
        yield from events(0, 300_000).to_batches(max_chunksize=100_000)
        written_before_failure.extend(data_files(catalog, table_name))
        raise RuntimeError("the source went away")

    with pytest.raises(RuntimeError, match="went away"):
        write_arrow(table, batches(), job_id="j", checkpoint_id=0, target_size=16 * 1024)
    assert len(written_before_failure) > 4  # files were closed and others open when it failed
    assert data_files(catalog, table_name) == []
    # a later write of the same checkpoint is unaffected
    result = write_arrow(table, events(0, 300_000), job_id="j", checkpoint_id=0, target_size=16 * 1024)
    assert result.records == 300_000 and len(data_files(catalog, table_name)) == len(result.data_files) > 4


@pytest.mark.database_independent
@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"checkpoint_id": -1}, "checkpoint_id"),
        ({"checkpoint_id": True}, "checkpoint_id"),
        ({"task_id": "0"}, "task_id"),
        ({"attempt": -2}, "attempt"),
        ({"job_id": " "}, "job_id"),
        ({"target_size": 0}, "target_file_size"),
    ],
)
def test_bad_arguments_are_named(
    catalog: SqlCatalog, table_name: str, kwargs: dict[str, object], argument: str
) -> None:
    table = catalog.load_table(table_name)
    arguments: dict[str, object] = {"job_id": "j", "checkpoint_id": 0, **kwargs}
    with pytest.raises(InvalidArgumentError) as caught:
        write_arrow(table, events(0, 2), **arguments)  # type: ignore[arg-type]
    assert caught.value.argument == argument
    with pytest.raises(InvalidArgumentError, match="pyiceberg Table"):
        write_arrow(table_name, events(0, 2), job_id="j", checkpoint_id=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="record batches"):
        write_arrow(table, "rows", job_id="j", checkpoint_id=0)
    assert data_files(catalog, table_name) == []
