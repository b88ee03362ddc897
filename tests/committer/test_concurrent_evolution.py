"""Two jobs evolving one table at once, as real processes started together (SQLite and
PostgreSQL): the catalog's compare-and-swap on the schema id gives each new column one
field id, whoever wins. Each job evolves with ``evolve_schema`` (the driver-side step
``ic.write`` takes), writes its rows with ``write_arrow`` and commits its checkpoint."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer import RetryPolicy, evolve_schema
from icecommit.committer.schema_change import create_for_checkpoint
from icecommit.errors import SchemaMismatchError
from icecommit.writers import write_arrow
from tests import processes

POLICY = RetryPolicy(max_attempts=50, max_seconds=120, min_wait_s=0.001, max_wait_s=0.02)
BASE = pa.schema([pa.field("id", pa.int64())])
MISMATCH_EXIT = 23


def _job(uri: str, warehouse: str, name: str, table: str, job: str, column: str, kind: str, start: float) -> None:
    """One job: wait for the common start, evolve, write its two rows, commit checkpoint 1.
    Exits MISMATCH_EXIT, having committed nothing, when the evolution is refused."""
    catalog = SqlCatalog(name, uri=uri, warehouse=warehouse)
    arrow_type = {"string": pa.string(), "long": pa.int64(), "double": pa.float64()}[kind]
    ids = [100, 101] if job == "a" else [200, 201]
    rows = pa.table({"id": pa.array(ids, pa.int64()), column: pa.array([f"{job}0", f"{job}1"] if kind == "string"
                                                                       else [1, 2], arrow_type)})  # fmt: skip
    time.sleep(max(0.0, start - time.time()))
    try:
        evolved = evolve_schema(catalog, table, rows.schema, job_id=job, checkpoint_id=1, schema_mode="add-columns",
                                retry_policy=POLICY)  # fmt: skip
    except SchemaMismatchError as e:
        print(e)
        os._exit(MISMATCH_EXIT)
    committer = ic.GlobalCommitter(catalog, table, job_id=job, retry_policy=POLICY)
    committer.prepare(1, [write_arrow(evolved, rows, job_id=job, checkpoint_id=1)])
    committer.commit(1)
    catalog.engine.dispose()


def _race(catalog: SqlCatalog, table: str, jobs: Sequence[tuple[str, str, str]]) -> dict[str, tuple[int, str]]:
    """Each job's exit code and output (stdout then stderr)."""
    start = time.time() + 1.0
    uri, warehouse = catalog.properties["uri"], catalog.properties["warehouse"]
    children = {
        job: processes.Child(_job, uri, warehouse, catalog.name, table, job, column, kind, start)
        for job, column, kind in jobs
    }
    ended = {}
    for job, child in children.items():
        out, err = child.communicate(timeout=120)
        assert child.returncode is not None
        ended[job] = (child.returncode, out + err[-3000:])
    return ended


def _table(catalog: SqlCatalog, suffix: str = "") -> str:
    name = f"{catalog.name}.events{suffix}"
    ic.create_table(catalog, name, BASE)
    return name


def test_two_jobs_adding_the_same_column_both_land_with_one_column(catalog: SqlCatalog) -> None:
    for round_ in range(3):  # the race goes either way: a few rounds, each on a new table
        name = _table(catalog, f"_{round_}")
        children = _race(catalog, name, [("a", "city", "string"), ("b", "city", "string")])
        assert [code for code, _ in children.values()] == [0, 0], children
        table = catalog.load_table(name)
        assert table.schema().column_names == ["id", "city"]
        rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
        assert [r["city"] for r in rows] == ["a0", "a1", "b0", "b1"]


def test_two_jobs_adding_different_columns_land_with_distinct_ids_and_their_own_values(
    catalog: SqlCatalog,
) -> None:
    name = _table(catalog)
    children = _race(catalog, name, [("a", "city", "string"), ("b", "amount", "double")])
    assert [code for code, _ in children.values()] == [0, 0], children
    schema = catalog.load_table(name).schema()
    assert sorted(schema.column_names) == ["amount", "city", "id"]
    assert len({schema.find_field(c).field_id for c in schema.column_names}) == 3
    rows = sorted(catalog.load_table(name).scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["city"], r["amount"]) for r in rows] == [
        (100, "a0", None), (101, "a1", None), (200, None, 1.0), (201, None, 2.0)
    ]  # fmt: skip


def test_two_jobs_adding_one_name_with_incompatible_types_one_lands_the_other_is_refused(
    catalog: SqlCatalog,
) -> None:
    name = _table(catalog)
    children = _race(catalog, name, [("a", "code", "string"), ("b", "code", "long")])
    codes = {job: code for job, (code, _) in children.items()}
    assert sorted(codes.values()) == [0, MISMATCH_EXIT], codes
    loser = next(job for job, code in codes.items() if code == MISMATCH_EXIT)
    winner = "a" if loser == "b" else "b"
    out = children[loser][1]
    assert "column 'code'" in out and "cannot be written to the table's type" in out
    assert "string" in out and "long" in out, out
    table = catalog.load_table(name)
    assert table.schema().column_names == ["id", "code"]
    ids = sorted(table.scan().to_arrow().column("id").to_pylist())
    assert ids == ([100, 101] if winner == "a" else [200, 201])  # the loser committed nothing
    committer = ic.GlobalCommitter(catalog, name, job_id=loser)
    assert committer.store.get(loser, committer.table_name, 1) is None


def test_a_checkpoint_prepared_under_the_older_schema_commits_after_another_job_evolved_it(
    catalog: SqlCatalog,
) -> None:
    name = _table(catalog)
    old = ic.GlobalCommitter(catalog, name, job_id="old", retry_policy=POLICY)
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    old.prepare(1, [write_arrow(catalog.load_table(name), rows, job_id="old", checkpoint_id=1)])
    children = _race(catalog, name, [("a", "city", "string")])
    assert children["a"][0] == 0, children["a"][1]
    assert old.commit(1).committed
    rows_now = sorted(catalog.load_table(name).scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows_now == [
        {"id": 1, "city": None}, {"id": 2, "city": None}, {"id": 100, "city": "a0"}, {"id": 101, "city": "a1"}
    ]  # fmt: skip


def _creator(uri: str, warehouse: str, name: str, table: str, job: str, column: str, start: float) -> None:
    """A job whose table does not exist yet: create it from its rows' columns (or take the
    one another creator made), evolve it under add-columns, write and commit."""
    catalog = SqlCatalog(name, uri=uri, warehouse=warehouse)
    rows = pa.table({"id": pa.array([1 if job == "a" else 2], pa.int64()), column: pa.array([job])})
    time.sleep(max(0.0, start - time.time()))
    create_for_checkpoint(catalog, table, rows.schema, job_id=job, checkpoint_id=1, partition_by=None,
                          properties={}, identifier_fields=None)  # fmt: skip
    evolved = evolve_schema(catalog, table, rows.schema, job_id=job, checkpoint_id=1, schema_mode="add-columns",
                            retry_policy=POLICY)  # fmt: skip
    committer = ic.GlobalCommitter(catalog, table, job_id=job, retry_policy=POLICY)
    committer.prepare(1, [write_arrow(evolved, rows, job_id=job, checkpoint_id=1)])
    committer.commit(1)
    catalog.engine.dispose()


def test_two_jobs_creating_one_table_from_different_columns_race_safely(catalog: SqlCatalog) -> None:
    table = f"{catalog.name}.created"
    uri, warehouse = catalog.properties["uri"], catalog.properties["warehouse"]
    for round_ in range(3):  # either may win the creation
        name = f"{table}_{round_}"
        start = time.time() + 1.0
        children = [processes.Child(_creator, uri, warehouse, catalog.name, name, job, column, start)
                    for job, column in (("a", "city"), ("b", "device"))]  # fmt: skip
        for child in children:
            _, err = child.communicate(timeout=120)
            assert child.returncode == 0, err[-3000:]
        loaded = catalog.load_table(name)
        assert sorted(f.name for f in loaded.schema().fields) == ["city", "device", "id"]
        rows = sorted(loaded.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
        assert rows == [{"id": 1, "city": "a", "device": None}, {"id": 2, "city": None, "device": "b"}] or rows == [
            {"id": 1, "device": None, "city": "a"}, {"id": 2, "device": "b", "city": None}
        ]  # fmt: skip
        creator = loaded.metadata.properties["icecommit.created-by"]
        assert creator in ("a:1", "b:1")
