"""A routed write that crashes at every step boundary of every table, then runs again (its
tables committed in one catalog commit: ``atomic="auto"`` on a SQL catalog)."""

from __future__ import annotations

from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

import icecommit as ic
import icecommit.pipeline
from icecommit.committer import FAULT_POINTS, GlobalCommitter, committed_checkpoints
from tests.fakes import CLICKS, VIEWS, ids_of_kinds, routed_source, sorted_ids

pytestmark = pytest.mark.spark

ROUTES = {"click": "ns.clicks", "tap": "ns.clicks", "view": "ns.views"}
TABLES = ("ns.clicks", "ns.views", "ns.unrouted")
#: Fault calls one routed checkpoint makes: after-stage and after-prepare for each of the
#: three tables, then before-commit-attempt and after-commit for each.
FAULT_CALLS = 4 * len(TABLES)


class InjectedCrash(BaseException):
    """The driver dies here (a BaseException, so nothing in icecommit catches it)."""


def crashing_committer(crash_at: int, seen: list[str]) -> type[GlobalCommitter]:
    class Crashing(GlobalCommitter):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            def fault(point: str, checkpoint_id: int) -> None:
                seen.append(f"{self.table_name}:{point}")
                if len(seen) == crash_at:
                    raise InjectedCrash(seen[-1])

            super().__init__(*args, fault=fault, **kwargs)

    return Crashing


def setup_tables(catalog: SqlCatalog) -> None:
    ic.create_table(catalog, "ns.clicks", CLICKS, partition_by=["hour(ts)"])
    ic.create_table(catalog, "ns.views", VIEWS)


def routed_write(spark: SparkSession, catalog: SqlCatalog, checkpoint_id: int) -> ic.RoutedCommitResult:
    """Checkpoint c carries ids c*200 .. c*200+199 (the same rows whenever it is replayed)."""
    return ic.write(
        routed_source(spark, checkpoint_id * 200, checkpoint_id * 200 + 200),
        ROUTES,
        catalog=catalog,
        job_id="router",
        checkpoint_id=checkpoint_id,
        route_by="kind",
        dead_letter="ns.unrouted",
    )


@pytest.mark.parametrize("crash_at", range(1, FAULT_CALLS + 1))
def test_a_crash_anywhere_in_a_routed_checkpoint_leaves_each_table_with_its_rows_once(
    spark: SparkSession, sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch, crash_at: int
) -> None:
    setup_tables(sqlite_catalog)
    routed_write(spark, sqlite_catalog, 0)  # a clean checkpoint first: the crash is not in a first commit
    seen: list[str] = []
    with monkeypatch.context() as patch:
        patch.setattr(icecommit.pipeline, "GlobalCommitter", crashing_committer(crash_at, seen))
        with pytest.raises(InjectedCrash):
            routed_write(spark, sqlite_catalog, 1)
    # the tables commit in one catalog commit, side by side: the others may pass a point or
    # two of their own before they stop on the crashed one (none of them lands without it)
    assert len(seen) >= crash_at
    crashed = seen[crash_at - 1]

    rerun = routed_write(spark, sqlite_catalog, 1)  # the restarted driver replays checkpoint 1
    assert set(rerun.results) == set(TABLES)
    assert routed_write(spark, sqlite_catalog, 1).committed is False, "a third run changes nothing"
    for name, kinds in (("ns.clicks", ("click", "tap")), ("ns.views", ("view",)), ("ns.unrouted", ("scroll", None))):
        assert sorted_ids(sqlite_catalog, name) == ids_of_kinds(0, 400, *kinds), f"{name} after a crash at {crashed}"
        found = committed_checkpoints(sqlite_catalog.load_table(name).metadata, job_id="router")
        assert sorted(c.checkpoint_id for c in found) == [0, 1], name
        report = ic.reconcile(sqlite_catalog, name, job_id="router")
        assert report.ok, report.to_markdown()


def test_a_routed_checkpoint_passes_every_fault_point_of_every_table(
    spark: SparkSession, sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keeps the crash test above covering every boundary if the committer gains some."""
    setup_tables(sqlite_catalog)
    seen: list[str] = []
    monkeypatch.setattr(icecommit.pipeline, "GlobalCommitter", crashing_committer(-1, seen))
    routed_write(spark, sqlite_catalog, 0)
    assert len(seen) == FAULT_CALLS
    assert {s.split(":")[1] for s in seen} == set(FAULT_POINTS)
    assert {s.split(":")[0] for s in seen} == set(TABLES)
