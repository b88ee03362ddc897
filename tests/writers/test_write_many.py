"""``ic.write_many``: one checkpoint of several DataFrames, one per table, committed to all
of them in one catalog commit; its options per table where they differ (``mode``,
``checks``); a replay writes nothing; bad input in one table leaves every table as it was."""

from __future__ import annotations

from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

import icecommit as ic
from icecommit import checks
from icecommit.errors import InvalidArgumentError, SchemaMismatchError
from tests.fakes import tables_committed_together

pytestmark = pytest.mark.spark


def _ids(catalog: SqlCatalog, name: str) -> list[Any]:
    return sorted(catalog.load_table(name).scan().to_arrow().column("id").to_pylist())


def test_orders_and_their_lines_land_in_one_catalog_commit(
    spark: SparkSession, sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = sqlite_catalog
    orders, lines = f"{catalog.name}.orders", f"{catalog.name}.lines"
    together = tables_committed_together(monkeypatch)

    def frames(start: int, state: str) -> dict[str, Any]:
        order_rows = [(start + i, state) for i in range(3)]
        line_rows = [(start * 10 + i, start + i % 3, 1.5) for i in range(6)]
        return {
            orders: spark.createDataFrame(order_rows, "id long, state string"),
            lines: spark.createDataFrame(line_rows, "id long, order_id long, price double"),
        }

    first = ic.write_many(frames(0, "new"), catalog=catalog, job_id="shop", checkpoint_id=1, create=True,
                          identifier_fields=["id"])  # fmt: skip
    assert {r.status for r in first.results.values()} == {"committed"} and together == [sorted([orders, lines])]
    # the orders are upserted (their state changes), the lines appended: one commit again
    second = ic.write_many(frames(0, "paid"), catalog=catalog, job_id="shop", checkpoint_id=2,
                           mode={orders: "upsert"}, checks={lines: [checks.row_count(min=6)]})  # fmt: skip
    assert {r.status for r in second.results.values()} == {"committed"} and len(together) == 2
    rows = catalog.load_table(orders).scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["state"]) for r in rows) == [(0, "paid"), (1, "paid"), (2, "paid")]
    assert len(_ids(catalog, lines)) == 12
    cut = ic.consistent_cut(catalog, [orders, lines], job_id="shop")
    assert cut.checkpoint_id == 2
    replay = ic.write_many(frames(0, "paid"), catalog=catalog, job_id="shop", checkpoint_id=2)
    assert {r.status for r in replay.results.values()} == {"already-committed"} and len(together) == 2


def test_bad_input_in_one_table_leaves_every_table_as_it_was(spark: SparkSession, sqlite_catalog: SqlCatalog) -> None:
    catalog = sqlite_catalog
    a, b = f"{catalog.name}.a", f"{catalog.name}.b"
    good = spark.createDataFrame([(1, "x")], "id long, kind string")
    ic.write_many({a: good, b: good}, catalog=catalog, job_id="j", checkpoint_id=1, create=True)
    wrong = spark.createDataFrame([("not a number", "x")], "id string, kind string")
    with pytest.raises(SchemaMismatchError, match="id"):
        ic.write_many({a: good, b: wrong}, catalog=catalog, job_id="j", checkpoint_id=2)
    assert _ids(catalog, a) == [1] and _ids(catalog, b) == [1]
    with pytest.raises(InvalidArgumentError, match="route_by"):
        ic.write_many({a: good}, catalog=catalog, job_id="j", checkpoint_id=2, route_by="kind")
    with pytest.raises(InvalidArgumentError, match="frames"):
        ic.write_many({}, catalog=catalog, job_id="j", checkpoint_id=2)
    again = ic.write_many({a: good, b: good}, catalog=catalog, job_id="j", checkpoint_id=2)
    assert {r.status for r in again.results.values()} == {"committed"}
