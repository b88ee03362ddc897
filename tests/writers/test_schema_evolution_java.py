"""Apache Iceberg's Java implementation on tables icecommit evolved and created: its Spark
reader reads old and new files' values, nested columns included, and a column its Spark
added is followed by an icecommit write under ``add-columns``. They run where the Java
Iceberg environment is (CI's pyspark 3.5 pass) and skip saying what is missing elsewhere."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

import icecommit as ic
from tests import java_iceberg
from tests.writers.test_schema_evolution import BASE, _base_table, _frame, _rows

pytestmark = pytest.mark.spark


def test_java_iceberg_reads_evolved_and_created_tables_with_the_values_of_old_and_new_files(
    spark: SparkSession, sqlite_catalog: SqlCatalog, tmp_path: Path
) -> None:
    java = java_iceberg.found_or_skip()
    catalog = sqlite_catalog
    name = _base_table(spark, catalog)  # created by checkpoint 1
    ddl = "id long, n long, point struct<x: double, y: double>, tags array<struct<k: string, w: int>>, c string"
    later = _frame(spark, [(3, 2**40, (3.0, 4.0), [("a", 1)], "fr")], ddl)
    ic.write(later, name, catalog=catalog, job_id="j", checkpoint_id=2, schema_mode="merge")
    table = catalog.load_table(name)
    rows_file, _ = java.read(table.metadata_location, tmp_path / "java")
    java_rows = sorted(pq.read_table(rows_file).to_pylist(), key=lambda r: r["id"])
    assert (
        java_rows
        == _rows(catalog, name)
        == [
            {"id": 1, "n": 10, "point": {"x": 1.0, "y": None}, "tags": None, "c": None},
            {"id": 2, "n": 20, "point": {"x": 2.0, "y": None}, "tags": None, "c": None},
            {"id": 3, "n": 2**40, "point": {"x": 3.0, "y": 4.0}, "tags": [{"k": "a", "w": 1}], "c": "fr"},
        ]
    )


def test_a_column_java_spark_added_then_an_icecommit_write_under_add_columns(
    spark: SparkSession, tmp_path: Path
) -> None:
    java = java_iceberg.found_or_skip(sqlite_jdbc=True)
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog = SqlCatalog("shared", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=warehouse.as_uri())
    name = _base_table(spark, catalog)
    java.run(
        "alter", "--catalog-name", "shared", "--catalog-db", str(tmp_path / "catalog.db"), "--warehouse",
        warehouse.as_uri(), "--table", name, "--sql", "ALTER TABLE {table} ADD COLUMN region string",
        sqlite_jdbc=True,
    )  # fmt: skip
    assert "region" in catalog.load_table(name).schema().column_names
    ddl = f"{BASE}, region string, c string"
    later = _frame(spark, [(3, 30, (3.0,), "eu", "fr")], ddl)
    assert ic.write(later, name, catalog=catalog, job_id="j", checkpoint_id=2, schema_mode="add-columns").committed
    assert [f.name for f in catalog.load_table(name).schema().fields] == ["id", "n", "point", "region", "c"]
    assert [(r["region"], r["c"]) for r in _rows(catalog, name)] == [(None, None), (None, None), ("eu", "fr")]
    catalog.engine.dispose()
