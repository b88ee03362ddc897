"""Checks through ``ic.write``: a batch that fails one waits on the job's audit branch and
the write raises ``CheckpointHeldError``; with ``on_check_failure="queue"`` the job goes on
and its next batch waits behind the held one; a routed write takes checks per table and
waits in all its tables when one fails; ``ic.publish`` brings them to main, once."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import DataFrame, SparkSession

import icecommit as ic
from icecommit import checks
from icecommit.errors import CheckpointHeldError, InvalidArgumentError

pytestmark = pytest.mark.spark

DDL = "id long, kind string, amount double"


def _rows(spark: SparkSession, ids: range, kind: str = "click", amount: float = 1.0) -> DataFrame:
    return spark.createDataFrame([(i, kind, amount) for i in ids], DDL)


def _ids(catalog: SqlCatalog, name: str, branch: str = "main") -> list[int]:
    table = catalog.load_table(name)
    ref = table.metadata.refs.get(branch)
    if ref is None:
        return []
    return sorted(table.scan(snapshot_id=ref.snapshot_id, selected_fields=("id",)).to_arrow().column("id").to_pylist())


def test_a_bad_batch_waits_on_the_audit_branch_and_the_queue_follows_it(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    catalog = sqlite_catalog
    name = f"{catalog.name}.events"
    gate = [checks.row_count(min=5), checks.unique("id"), checks.accepted_values("kind", ["click", "view"])]
    write = dict(catalog=catalog, job_id="j", create=True, checks=gate)
    ic.write(_rows(spark, range(0, 10)), name, checkpoint_id=1, **write)
    with pytest.raises(CheckpointHeldError, match="accepted_values") as held:
        ic.write(_rows(spark, range(10, 20), kind="bogus"), name, checkpoint_id=2, **write)
    assert held.value.failed[0][0].startswith("accepted_values(kind")
    assert _ids(catalog, name) == list(range(10))
    assert _ids(catalog, name, "icecommit-audit-j") == list(range(20))  # where a quality tool can look
    again = ic.write(_rows(spark, range(10, 20), kind="bogus"), name, checkpoint_id=2, on_check_failure="queue",
                     **write)  # fmt: skip
    assert again.status == "held"  # a replay: held, not written again
    queued = ic.write(_rows(spark, range(20, 30)), name, checkpoint_id=3, on_check_failure="queue", **write)
    assert queued.status == "held" and all(r.ok for r in queued.checks)
    with pytest.raises(InvalidArgumentError, match="checks"):
        ic.write(_rows(spark, range(30, 31)), name, checkpoint_id=4, catalog=catalog, job_id="j",
                 checks=[checks.not_null("no_such_column")])  # fmt: skip
    ic.publish(catalog, name, job_id="j", checkpoint_id=2, force=True, reason="bogus kind is a test label")
    assert _ids(catalog, name) == list(range(30))


def test_a_routed_write_checks_each_table_and_a_manual_release_holds_every_batch(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    catalog = sqlite_catalog
    routes = {"click": f"{catalog.name}.clicks", "view": f"{catalog.name}.views"}
    df = _rows(spark, range(0, 6)).union(_rows(spark, range(6, 8), kind="view", amount=-1.0))
    results = ic.write(
        df, routes, catalog=catalog, job_id="r", checkpoint_id=1, route_by="kind", create=True,
        checks={routes["view"]: [checks.in_range("amount", min=0)]}, on_check_failure="queue",
    )  # fmt: skip
    # one table's check failed: the checkpoint waits in all its tables, readers see it in none
    assert {name: r.status for name, r in results.results.items()} == {routes["click"]: "held", routes["view"]: "held"}
    assert _ids(catalog, routes["view"]) == [] and _ids(catalog, routes["click"]) == []
    ic.publish(catalog, routes["view"], job_id="r", checkpoint_id=1, force=True, reason="refunds are negative")
    assert _ids(catalog, routes["view"]) == [6, 7] and _ids(catalog, routes["click"]) == list(range(6))
    manual = ic.write(_rows(spark, range(100, 103)), f"{catalog.name}.daily", catalog=catalog, job_id="m",
                      checkpoint_id=1, create=True, publish="manual")  # fmt: skip
    assert manual.status == "held" and _ids(catalog, f"{catalog.name}.daily") == []
    assert [r.status for r in ic.publish(catalog, f"{catalog.name}.daily", job_id="m", checkpoint_id=1)] == [
        "committed"
    ]
    assert _ids(catalog, f"{catalog.name}.daily") == [100, 101, 102]
