"""A checkpoint is decided about once: ``ic.write`` plans it once after recovery, prepare and
commit reuse the plan, and each commit attempt reads only what changed since the planned
head. Counted on the happy path, for a single table and for a routed write of two (a
single table is a route of one: the same orchestration, the same loads per table)."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

import icecommit as ic
from icecommit.options import WriteOptions
from tests.conftest import unique_table
from tests.fakes import CLICKS, VIEWS, Counted, routed_source

pytestmark = pytest.mark.spark


def test_a_single_table_write_decides_once_walks_the_lineage_at_most_three_times(
    spark: SparkSession, sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = unique_table("one")
    ic.create_table(sqlite_catalog, name, VIEWS, partition_by=["page"])
    df = routed_source(spark, 0, 200).where("kind = 'view'").select("id", "ts", "page")
    ic.write(df, name, catalog=sqlite_catalog, job_id="plan", checkpoint_id=1)  # the table's first commit and claim
    counted = Counted(sqlite_catalog, monkeypatch)
    result = ic.write(df, name, catalog=sqlite_catalog, job_id="plan", checkpoint_id=2)
    assert result.committed and result.attempts == 1
    assert counted.decisions == 1
    assert counted.walks <= 3, counted.walks
    assert set(counted.loads) == {name}
    single_loads = counted.loads[name]
    assert single_loads <= 2, counted.loads

    clicks, views = unique_table("clicks"), unique_table("views")
    ic.create_table(sqlite_catalog, clicks, CLICKS, partition_by=["hour(ts)"])
    ic.create_table(sqlite_catalog, views, VIEWS, partition_by=["page"])
    routes = {"click": clicks, "tap": clicks, "view": views, "scroll": views}
    source = routed_source(spark, 0, 400).where("kind IS NOT NULL")
    ic.write(source, routes, route_by="kind", catalog=sqlite_catalog, job_id="plan", checkpoint_id=1)
    counted.reset()
    routed = ic.write(source, routes, route_by="kind", catalog=sqlite_catalog, job_id="plan", checkpoint_id=2)
    assert routed.committed
    assert counted.decisions == 2  # one per table
    assert counted.walks <= 3 * 2, counted.walks
    assert counted.loads == {clicks: single_loads, views: single_loads}


def test_a_replay_of_a_committed_checkpoint_writes_nothing_and_decides_once(
    spark: SparkSession, sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = unique_table("replay")
    ic.create_table(sqlite_catalog, name, VIEWS, partition_by=["page"])
    df = routed_source(spark, 0, 100).where("kind = 'view'").select("id", "ts", "page")
    first = ic.write(df, name, catalog=sqlite_catalog, job_id="plan", checkpoint_id=1)
    counted = Counted(sqlite_catalog, monkeypatch)
    again = ic.write(df, name, catalog=sqlite_catalog, job_id="plan", checkpoint_id=1)
    assert (again.status, again.snapshot_id) == ("already-committed", first.snapshot_id)
    assert counted.decisions == 1 and counted.loads == {name: 1}


def test_options_given_as_one_value_route_and_commit_as_the_keywords_do(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    clicks, views, dead = unique_table("clicks"), unique_table("views"), unique_table("unrouted")
    ic.create_table(sqlite_catalog, clicks, CLICKS, partition_by=["hour(ts)"])
    ic.create_table(sqlite_catalog, views, VIEWS, partition_by=["page"])
    options = WriteOptions(route_by="kind", dead_letter=dead, distribution="none")
    routes = {"click": clicks, "tap": clicks, "view": views}
    source = routed_source(spark, 0, 250)
    result = ic.write(source, routes, catalog=sqlite_catalog, job_id="opts", checkpoint_id=3, options=options)
    assert result.committed and result.records == 250 and set(result.results) == {clicks, views, dead}
    again = ic.write(source, routes, catalog=sqlite_catalog, job_id="opts", checkpoint_id=3, route_by="kind",
                     dead_letter=dead, distribution="none")  # fmt: skip
    assert {r.status for r in again.results.values()} == {"already-committed"}
