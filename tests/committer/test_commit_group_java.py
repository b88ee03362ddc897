"""Other engines agree on a checkpoint committed to several tables in one catalog commit:
Apache Iceberg's Java (Spark 3.5, Iceberg 1.10.2) reads every table through the same
catalog (its JdbcCatalog on pyiceberg's SQLite catalog database, and the REST test server
that made the commit with transactions/commit), snapshot for snapshot, row for row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer.checkpoint_tables import commit_to_tables
from tests import java_iceberg
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

pytestmark = pytest.mark.spark

JOB = "orders"


def _two_checkpoints(catalog: Catalog, names: list[str]) -> dict[str, list[int]]:
    for name in names:
        ic.create_table(catalog, name, EVENTS_SCHEMA)
    for checkpoint in (1, 2):
        committers = {n: ic.GlobalCommitter(catalog, n, job_id=JOB, sleep=lambda _: None) for n in names}
        plans = {}
        for i, (name, committer) in enumerate(committers.items()):
            rows = events(checkpoint * 100 + i * 10, checkpoint * 100 + i * 10 + 4)
            results = [write_arrow(committer.load_table(), rows, job_id=JOB, checkpoint_id=checkpoint)]
            plans[name] = committer.prepare_planned(checkpoint, results)
        results = commit_to_tables(committers, checkpoint, plans, together_in=catalog)
        assert {r.status for r in results.values()} == {"committed"}
    return {n: sorted(catalog.load_table(n).scan().to_arrow().column("id").to_pylist()) for n in names}


def _agree(catalog: Catalog, names: list[str], ours: dict[str, list[int]], java_heads: dict[str, dict]) -> None:  # type: ignore[type-arg]
    for name in names:
        table = catalog.load_table(name)
        assert java_heads[name]["snapshot_id"] == table.metadata.refs["main"].snapshot_id
        assert java_heads[name]["ids"] == ours[name]
        assert table.current_snapshot().summary["icecommit.tables-in-commit"] == "2"  # type: ignore[union-attr]


def test_java_reads_every_table_of_a_checkpoint_committed_together_on_sql(tmp_path: Path) -> None:
    java = java_iceberg.found_or_skip(sqlite_jdbc=True)
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog = SqlCatalog("shared", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=warehouse.as_uri())
    catalog.create_namespace("shop")
    names = ["shop.orders", "shop.lines"]
    ours = _two_checkpoints(catalog, names)
    printed = java.run(
        "heads", "--catalog-name", "shared", "--catalog-db", str(tmp_path / "catalog.db"),
        "--warehouse", warehouse.as_uri(), *(a for n in names for a in ("--table", n)), sqlite_jdbc=True,
    )  # fmt: skip
    _agree(catalog, names, ours, json.loads(printed.strip().splitlines()[-1]))
    catalog.engine.dispose()


@pytest.mark.parametrize("catalog", ["rest"], indirect=True)
@pytest.mark.over_rest
def test_java_reads_every_table_of_a_checkpoint_committed_together_over_rest(catalog: Catalog) -> None:
    java = java_iceberg.found_or_skip()
    names = [f"{catalog.name}.orders", f"{catalog.name}.lines"]
    ours = _two_checkpoints(catalog, names)
    printed = java.run(
        "heads", "--catalog-name", "rest", "--rest-uri", catalog.properties["uri"],
        *(a for n in names for a in ("--table", n)),
    )  # fmt: skip
    _agree(catalog, names, ours, json.loads(printed.strip().splitlines()[-1]))
