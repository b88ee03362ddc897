"""A routed write with ``atomic``: one catalog commit for all its tables where the catalog
can (``True``, ``"auto"``), table by table with ``False``; ``atomic=True`` on a catalog
that cannot is refused before any data file is written, naming the catalog's class."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import DataFrame, SparkSession

import icecommit as ic
import icecommit.pipeline
from icecommit.errors import InvalidArgumentError
from tests.fakes import tables_committed_together

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("kind", pa.string())])


def _events(spark: SparkSession, start: int) -> DataFrame:
    return spark.createDataFrame([(start + i, ("click", "view")[i % 2]) for i in range(6)], "id long, kind string")


@pytest.mark.parametrize("atomic", [True, "auto", False])
def test_a_routed_checkpoint_is_one_catalog_commit_unless_asked_otherwise(
    spark: SparkSession, sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch, atomic: bool | str
) -> None:
    catalog = sqlite_catalog
    routes = {"click": f"{catalog.name}.clicks", "view": f"{catalog.name}.views"}
    together = tables_committed_together(monkeypatch)
    for checkpoint in (1, 2):
        result = ic.write(_events(spark, checkpoint * 10), routes, catalog=catalog, job_id="r",
                          checkpoint_id=checkpoint, route_by="kind", create=True, atomic=atomic)  # fmt: skip
        assert {r.status for r in result.results.values()} == {"committed"}
    expected = sorted(routes.values())
    assert together == ([] if atomic is False else [expected, expected])
    again = ic.write(_events(spark, 10), routes, catalog=catalog, job_id="r", checkpoint_id=1, route_by="kind",
                     atomic=atomic)  # fmt: skip
    assert {r.status for r in again.results.values()} == {"already-committed"}
    cut = ic.consistent_cut(catalog, list(routes.values()), job_id="r")
    assert cut.checkpoint_id == 2 and all(s is not None for s in cut.snapshots.values())


def test_atomic_on_a_catalog_that_cannot_is_refused_before_anything_is_written(
    spark: SparkSession, sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = sqlite_catalog
    routes = {"click": f"{catalog.name}.clicks", "view": f"{catalog.name}.views"}
    for name in routes.values():
        ic.create_table(catalog, name, SCHEMA)
    monkeypatch.setattr(icecommit.pipeline, "can_commit_together", lambda catalog: False)
    with pytest.raises(InvalidArgumentError, match="a SqlCatalog cannot commit several tables at once"):
        ic.write(_events(spark, 0), routes, catalog=catalog, job_id="r", checkpoint_id=1, route_by="kind",
                 atomic=True)  # fmt: skip
    for name in routes.values():
        table = catalog.load_table(name)
        assert table.metadata.snapshots == []
        assert not list(Path(table.metadata.location.removeprefix("file://")).glob("data/**/*.parquet"))
    result = ic.write(_events(spark, 0), routes, catalog=catalog, job_id="r", checkpoint_id=1, route_by="kind")
    assert {r.status for r in result.results.values()} == {"committed"}  # "auto": table by table there


class _Crash(BaseException):
    """The job dies (nothing in icecommit catches a BaseException)."""


def test_a_checkpoint_prepared_before_a_crash_is_recovered_in_one_catalog_commit(
    spark: SparkSession, sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = sqlite_catalog
    routes = {"click": f"{catalog.name}.clicks", "view": f"{catalog.name}.views"}

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise _Crash("after every table was prepared, before the commit")

    with monkeypatch.context() as patched:
        patched.setattr(icecommit.pipeline, "commit_to_tables", crash)
        with pytest.raises(_Crash):
            ic.write(_events(spark, 0), routes, catalog=catalog, job_id="r", checkpoint_id=1, route_by="kind",
                     create=True, atomic=True)  # fmt: skip
    assert all(catalog.load_table(n).metadata.snapshots == [] for n in routes.values())
    together = tables_committed_together(monkeypatch)
    again = ic.write(_events(spark, 0), routes, catalog=catalog, job_id="r", checkpoint_id=1, route_by="kind",
                     atomic=True)  # fmt: skip
    assert together == [sorted(routes.values())]  # the run's recovery: both tables at once
    assert {r.status for r in again.results.values()} == {"already-committed"}
    assert all(len(catalog.load_table(n).scan().to_arrow()) == 3 for n in routes.values())
