"""Apache Iceberg's Java implementation and icecommit's upserts on one table: a ``MERGE
INTO`` by Java Spark (merge-on-read: its own position delete files) followed by an
icecommit upsert of some of the same keys, then a compaction that applies both engines'
delete files, read back by Java's reader and pyiceberg alike.
It runs where the Java Iceberg environment is (CI's pyspark 3.5 pass) and skips saying
what is missing elsewhere."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.maintenance.compaction import compact
from tests import java_iceberg
from tests.committer.test_upserts import _live, _marked, _upsert
from tests.helpers import EVENTS_SCHEMA

pytestmark = pytest.mark.spark

MERGE = (
    "MERGE INTO {table} t USING (SELECT * FROM VALUES (2L, 'java'), (3L, 'java'), (20L, 'java') AS s(id, event)) s "
    "ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.event = s.event "
    "WHEN NOT MATCHED THEN INSERT (id, ts, event, score) VALUES (s.id, NULL, s.event, NULL)"
)


def test_a_java_merge_into_then_an_icecommit_upsert_of_the_same_keys(tmp_path: Path) -> None:
    java = java_iceberg.found_or_skip(sqlite_jdbc=True)
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog = SqlCatalog("shared", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=warehouse.as_uri())
    name = "ns.users"
    ic.create_table(catalog, name, EVENTS_SCHEMA, identifier_fields=["id"], properties={
        "write.merge.mode": "merge-on-read", "write.update.mode": "merge-on-read", "write.delete.mode": "merge-on-read",
    })  # fmt: skip
    _upsert(catalog, name, 1, _marked(0, 10, "a"))
    java.run(
        "alter", "--catalog-name", "shared", "--catalog-db", str(tmp_path / "catalog.db"), "--warehouse",
        warehouse.as_uri(), "--table", name, "--sql", MERGE, sqlite_jdbc=True,
    )  # fmt: skip
    table = catalog.load_table(name)
    java_deletes = [d for task in table.scan().plan_files() for d in task.delete_files]
    assert java_deletes, "Java's MERGE INTO wrote no position delete file (copy-on-write?)"
    assert _live(catalog, name) == {**{i: "a" for i in range(10)}, 2: "java", 3: "java", 20: "java"}
    _upsert(catalog, name, 2, _marked(3, 5, "b"), deleted=[20])  # 3 lives in Java's new file now
    expected = {**{i: "a" for i in range(10)}, 2: "java", 3: "b", 4: "b"}
    assert _live(catalog, name) == expected
    rows_file, _ = java.read(catalog.load_table(name).metadata_location, tmp_path / "java")
    java_rows = pq.read_table(rows_file).to_pylist()
    assert sorted((r["id"], r["event"]) for r in java_rows) == sorted(expected.items())
    # compaction applies both engines' delete files (2 of the 3 rows of Java's file are deleted)
    deletes = {d.file_path for task in catalog.load_table(name).scan().plan_files() for d in task.delete_files}
    assert len(deletes) == len(java_deletes) + 2  # icecommit's: one per data file it deleted rows of
    done = compact(catalog, name)
    assert done.committed == 1 and done.groups[0].removed_delete_files == len(deletes)
    compacted = catalog.load_table(name)
    assert [d for task in compacted.scan().plan_files() for d in task.delete_files] == []
    assert _live(catalog, name) == expected
    rows_file, _ = java.read(compacted.metadata_location, tmp_path / "java-compacted")
    assert sorted((r["id"], r["event"]) for r in pq.read_table(rows_file).to_pylist()) == sorted(expected.items())
    report = ic.reconcile(catalog, name)
    assert report.ok, report.problems
    catalog.engine.dispose()
