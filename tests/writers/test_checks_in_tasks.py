"""A large checkpoint's checks read its rows in Spark tasks (``SparkRowChecks``): the same
results as the driver's reading, duplicates found across files (the keys meet by hash),
and ``ic.write`` sending them there once the staged files reach the table's
``icecommit.checks.cluster-min-bytes``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import DataFrame, SparkSession

import icecommit as ic
from icecommit import checks
from icecommit.core.tableprops import CLUSTER_CHECKS_PROPERTY
from icecommit.errors import InvalidArgumentError
from icecommit.writers.spark_checks import SparkRowChecks

pytestmark = pytest.mark.spark

GATE = [
    checks.unique("id"),
    checks.unique("id", "kind", against_table=True),
    checks.accepted_values("kind", ["click", "view"]),
    checks.in_range("kind", max="u"),  # a string bound above it may be truncated: the rows decide
    checks.custom("even_rows", lambda batches: sum(b.num_rows for b in batches) % 2 == 0),
]


def _batch(spark: SparkSession, ids: list[int]) -> DataFrame:
    # two partitions, so two tasks write two files; ids 10..14 are in both
    rows = [(i, ("click", "view", "bogus")[i % 3] if i < 300 else "click", float(i)) for i in ids]
    return spark.createDataFrame(rows, "id long, kind string, amount double").repartition(2, "amount")


def _written(spark: SparkSession, catalog: SqlCatalog, name: str, properties: dict[str, str]) -> Any:
    schema = pa.schema([("id", pa.int64()), ("kind", pa.string()), ("amount", pa.float64())])
    ic.create_table(catalog, name, schema, properties=properties)
    first = ic.write(_batch(spark, [1000, 1001]), name, catalog=catalog, job_id="j", checkpoint_id=1)
    assert first.committed  # live keys for against_table
    ids = [*range(400), *range(10, 15), 1000]
    return ic.write(_batch(spark, ids), name, catalog=catalog, job_id="j", checkpoint_id=2, checks=GATE,
                    on_check_failure="queue")  # fmt: skip


def test_checks_read_in_tasks_find_what_the_driver_finds(
    spark: SparkSession, sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    summarized: list[list[str]] = []
    run = SparkRowChecks.__call__

    def spied(self: SparkRowChecks, table: Any, files: Any, checks_: Any) -> dict[str, Any]:
        found = run(self, table, files, checks_)
        summarized.append(sorted(found))
        return found

    monkeypatch.setattr(SparkRowChecks, "__call__", spied)
    catalog = sqlite_catalog
    in_tasks = _written(spark, catalog, f"{catalog.name}.tasks", {CLUSTER_CHECKS_PROPERTY: "0"})
    here = _written(spark, catalog, f"{catalog.name}.here", {})
    # every check that reads rows and splits went to the tasks; the user's function did not
    assert summarized[0] == sorted(c.name for c in GATE[:4]) and summarized[1] == []
    assert in_tasks.status == here.status == "held"
    assert in_tasks.checks == here.checks
    results = {r.check: r for r in in_tasks.checks}
    assert results["unique(id)"].observed == 5 and "10 (2 times)" in results["unique(id)"].detail
    assert results["unique(id, kind, against_table=True)"].observed == 5 + 1  # 1000 is live already
    assert not results["accepted_values(kind, [click, view])"].ok
    assert results["even_rows"].ok is (406 % 2 == 0)


def test_a_small_checkpoint_is_read_on_the_driver(spark: SparkSession, sqlite_catalog: SqlCatalog) -> None:
    name = f"{sqlite_catalog.name}.small"
    ic.write(_batch(spark, list(range(20))), name, catalog=sqlite_catalog, job_id="s", checkpoint_id=1, create=True)
    table = sqlite_catalog.load_table(name)
    files = [task.file for task in table.scan().plan_files()]
    assert SparkRowChecks(spark)(table, files, GATE[:1]) == {}  # below 256 MiB
    found = SparkRowChecks(spark, min_bytes=0, tasks=3)(table, files, GATE[:1])
    assert found["unique(id)"].keys == 20 and found["unique(id)"].repeated == 0
    with sqlite_catalog.load_table(name).transaction() as tx:
        tx.set_properties({CLUSTER_CHECKS_PROPERTY: "lots"})
    with pytest.raises(InvalidArgumentError, match=CLUSTER_CHECKS_PROPERTY):
        SparkRowChecks(spark)(sqlite_catalog.load_table(name), files, GATE[:1])
