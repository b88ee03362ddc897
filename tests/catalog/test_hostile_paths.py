"""Deleting commands only delete what is the table's own: attack shapes from the careless
and hostile input issue, on SQLite and PostgreSQL catalogs. Each asserts that nothing
outside the table was deleted (or that the command refused, deleting nothing)."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC

import icecommit as ic
from icecommit.catalog.tables import to_iceberg_schema
from icecommit.core.paths import StorageKey, storage_key
from icecommit.errors import UnsafeLocationError
from icecommit.maintenance import apply_expire, find_orphans, plan_expire
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

# paths are decided before any database is asked
pytestmark = pytest.mark.database_independent

OLD = time.time() - 30 * 86400  # older than any sweep's age limit


def _aged(path: Path) -> Path:
    os.utime(path, (OLD, OLD))
    return path


def _victim(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("someone else's data")
    return _aged(path)


def _warehouse(catalog: SqlCatalog) -> Path:
    return Path(str(catalog.properties["warehouse"]).removeprefix("file://"))


def _land(catalog: SqlCatalog, name: str, checkpoint_id: int = 1) -> None:
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    results = [write_arrow(committer.load_table(), events(0, 20), job_id="j", checkpoint_id=checkpoint_id)]
    committer.prepare(checkpoint_id, results)
    committer.commit(checkpoint_id)


def test_every_spelling_of_one_file_is_one_key() -> None:
    same = ["/wh/ns/t/data/a.parquet", "file:/wh/ns/t/data/a.parquet", "file:///wh/ns/t/data/a.parquet",
            "file://localhost/wh/ns/t/data/a.parquet", "/wh//ns/./t/data/a.parquet"]  # fmt: skip
    assert {storage_key(p) for p in same} == {StorageKey("file", "", "/wh/ns/t/data/a.parquet")}
    assert storage_key("s3a://b/k") == storage_key("s3n://b/k") == storage_key("s3://b/k")
    assert storage_key("file:///wh/%2e%2e/x").path == "/wh/%2e%2e/x"  # never decoded
    assert storage_key("s3://b/a//k") != storage_key("s3://b/a/k")  # object keys are literal
    assert not storage_key("/wh/ns/t2/x").is_under(storage_key("/wh/ns/t"))
    assert storage_key("/wh/ns/t/x").is_under(storage_key("file:/wh/ns/t/"))


@pytest.mark.parametrize("name", ["ns.%2e%2e/%2e%2e/victim", "ns.a/sub", "ns.a\\sub", "ns..t", "ns.t\n", "t"])
def test_names_that_would_nest_or_escape_are_refused(catalog: SqlCatalog, name: str) -> None:
    with pytest.raises(ic.TableSpecError):
        ic.create_table(catalog, name, EVENTS_SCHEMA)
    assert catalog.list_namespaces() in ([], [("ns",)])
    assert all(not catalog.list_tables(ns) for ns in catalog.list_namespaces())


def test_locations_that_would_share_files_are_refused(catalog: SqlCatalog) -> None:
    warehouse = _warehouse(catalog)
    first = ic.create_table(catalog, "ns.first", EVENTS_SCHEMA)
    inside = first.metadata.location + "/data/nested"
    for location in (str(warehouse), f"file://{warehouse}", str(warehouse.parent), inside, first.metadata.location):
        with pytest.raises(UnsafeLocationError):
            ic.create_table(catalog, "ns.second", EVENTS_SCHEMA, location=location)
    assert catalog.list_tables("ns") == [("ns", "first")]


def test_a_percent_escaped_table_made_by_another_tool_sweeps_nothing_outside(catalog: SqlCatalog) -> None:
    warehouse = _warehouse(catalog)
    catalog.create_namespace("ns")
    # pyiceberg itself accepts the name and writes its location literally
    table = catalog.create_table("ns.%2e%2e", schema=to_iceberg_schema(EVENTS_SCHEMA))
    assert "%2e%2e" in table.metadata.location
    decoded = Path(table.metadata.location.removeprefix("file://").replace("%2e%2e", ".."))
    victim = _victim(decoded / "victim.txt")  # where a decoding sweep would look
    sweep = find_orphans(catalog, "ns.%2e%2e", older_than=timedelta(0), delete=True)
    assert victim.exists() and all("victim" not in o.path for o in sweep.orphans)
    assert victim.resolve().is_relative_to(warehouse.parent)


def test_a_table_whose_location_holds_another_refuses_to_sweep_or_expire(catalog: SqlCatalog) -> None:
    warehouse = _warehouse(catalog)
    catalog.create_namespace("ns")
    schema = to_iceberg_schema(EVENTS_SCHEMA)
    outer = catalog.create_table("ns.outer", schema=schema, location=f"file://{warehouse}/shared")
    catalog.create_table("ns.inner", schema=schema, location=f"file://{warehouse}/shared/inner")
    ic.create_table(catalog, "ns.elsewhere", EVENTS_SCHEMA)
    _land(catalog, "ns.inner")
    _land(catalog, "ns.elsewhere")
    outer.append(events(100, 110))
    before = sorted(p for p in warehouse.rglob("*") if p.is_file())
    for p in before:
        _aged(p)
    with pytest.raises(UnsafeLocationError) as sweep:
        find_orphans(catalog, "ns.outer", older_than=timedelta(0), delete=True)
    with pytest.raises(UnsafeLocationError) as expire:
        plan_expire(catalog, "ns.outer", older_than=timedelta(0))
    for refused in (sweep.value, expire.value):
        assert refused.table == "ns.outer" and "ns.inner" in refused.reason
    assert sorted(p for p in warehouse.rglob("*") if p.is_file()) == before
    # the tables it would have reached still read
    assert catalog.load_table("ns.inner").scan().to_arrow().num_rows == 20


def test_files_written_by_java_as_file_colon_slash_are_not_orphans(catalog: SqlCatalog, tmp_path: Path) -> None:
    table = ic.create_table(catalog, "ns.java", EVENTS_SCHEMA)
    _land(catalog, "ns.java")
    location = Path(table.metadata.location.removeprefix("file://"))
    # a data file added with a one-slash URI, as Apache Iceberg's Java implementation writes
    data = location / "data" / "from-java.parquet"
    pq.write_table(pa.Table.from_batches(events(500, 510).to_batches(), schema=EVENTS_SCHEMA), data)
    catalog.load_table("ns.java").add_files([f"file:{data}"])
    added = catalog.load_table("ns.java")
    assert any(task.file.file_path == f"file:{data}" for task in added.scan().plan_files()), (
        "the manifest holds the one-slash spelling"
    )
    for p in location.rglob("*"):
        if p.is_file():
            _aged(p)
    stray = _victim(location / "data" / "stray.parquet")
    sweep = find_orphans(catalog, "ns.java", older_than=timedelta(0), delete=True)
    assert [o.path for o in sweep.orphans] == [str(stray)]
    assert data.exists() and not stray.exists()
    assert catalog.load_table("ns.java").scan().to_arrow().num_rows == 30
    # reconciliation reads and checks the one-slash spelling too
    assert ic.reconcile(catalog, "ns.java", job_id="j", deep=True).ok
    data.unlink()
    report = ic.reconcile(catalog, "ns.java", job_id="j")
    assert [p.path for p in report.problems if p.kind == "missing-file"] == [f"file:{data}"]


def test_expire_deletes_nothing_another_table_references(catalog: SqlCatalog) -> None:
    ic.create_table(catalog, "ns.a", EVENTS_SCHEMA)
    _land(catalog, "ns.a", 1)
    a = catalog.load_table("ns.a")
    shared = next(iter(a.scan().plan_files())).file.file_path
    other = catalog.create_table("ns.b", schema=a.schema(), partition_spec=UNPARTITIONED_PARTITION_SPEC)
    other.add_files([shared.replace("file://", "file:")])  # another table references a's file
    committer = ic.GlobalCommitter(catalog, "ns.a", job_id="j")
    committer.load_table().delete()  # a's file is now referenced only by an old snapshot of a
    plan = plan_expire(catalog, "ns.a", older_than=timedelta(0))
    assert plan.expired_snapshot_ids and all(storage_key(p) != storage_key(shared) for p in plan.files_to_delete)
    apply_expire(catalog, plan)
    assert catalog.load_table("ns.b").scan().to_arrow().num_rows == 20


def test_a_warehouse_path_with_spaces_and_non_ascii_works_end_to_end(tmp_path: Path) -> None:
    home = tmp_path / "my wärehouse"
    catalog = ic.connect(uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=str(home))
    ic.create_table(catalog, "ns.events", EVENTS_SCHEMA, partition_by=["event"])
    _land(catalog, "ns.events")
    written = [p for p in home.rglob("*.parquet")]
    assert written, "the data files are under the folder the user named"
    assert not any("%20" in str(p) or "%C3" in str(p) for p in tmp_path.rglob("*"))
    for p in home.rglob("*"):
        if p.is_file():
            _aged(p)
    assert find_orphans(catalog, "ns.events", older_than=timedelta(0)).orphans == ()
    report = ic.reconcile(catalog, "ns.events", job_id="j", deep=True)
    assert report.ok, report.to_markdown()
    catalog.engine.dispose()  # type: ignore[attr-defined]
