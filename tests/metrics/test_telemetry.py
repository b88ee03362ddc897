"""The in-job metrics (OpenTelemetry's API): what a job's commits, writers, maintenance and
reconciliation record, read back from the SDK's in-memory reader."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import timedelta

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.catalog.inspect import list_checkpoints
from icecommit.core import telemetry
from icecommit.errors import CheckpointRolledBackError, ValidationError
from icecommit.maintenance.compaction import compact
from icecommit.maintenance.expire import apply_expire, plan_expire
from icecommit.maintenance.rollback import apply_rollback, plan_rollback
from tests.conftest import unique_table
from tests.fakes import TARGET, small_checkpoints
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

Points = dict[tuple[str, frozenset[tuple[str, object]]], object]


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    found = InMemoryMetricReader()
    telemetry.use_meter_provider(MeterProvider(metric_readers=[found]))
    yield found
    telemetry.use_meter_provider(None)


def points(reader: InMemoryMetricReader) -> Points:
    """Each data point by (instrument, attributes): a sum's value, a histogram's count."""
    data = reader.get_metrics_data()
    found: Points = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    found[(metric.name, frozenset(point.attributes.items()))] = (
                        value if value is not None else point.count  # type: ignore[attr-defined]
                    )
    return found


def test_a_jobs_commits_writes_maintenance_and_reconciliation_are_recorded(
    sqlite_catalog: SqlCatalog, reader: InMemoryMetricReader
) -> None:
    name = unique_table()
    ic.create_table(sqlite_catalog, name, EVENTS_SCHEMA, partition_by=["event"],
                    properties={"write.target-file-size-bytes": str(TARGET)})  # fmt: skip
    small_checkpoints(sqlite_catalog, name, 3, job="a")
    committer = ic.GlobalCommitter(sqlite_catalog, name, job_id="a")
    assert committer.commit(2).status == "already-committed"  # a replay: skipped
    with pytest.raises(ValidationError):
        committer.prepare(9, [write_arrow(committer.load_table(), events(0, 5), job_id="a", checkpoint_id=8)])
    compact(sqlite_catalog, name, min_input_files=2)
    apply_expire(sqlite_catalog, plan_expire(sqlite_catalog, name, older_than=timedelta(0), retain_last=1))
    ic.reconcile(sqlite_catalog, name, job_id="a")

    found = points(reader)
    job = {("table", name), ("job", "a")}
    assert found[("icecommit.commit.duration", frozenset({*job, ("outcome", "committed")}))] == 3
    assert found[("icecommit.checkpoints", frozenset({*job, ("outcome", "committed")}))] == 3
    assert found[("icecommit.checkpoints", frozenset({*job, ("outcome", "already-committed")}))] == 1
    assert found[("icecommit.checkpoints", frozenset({*job, ("outcome", "refused")}))] == 1  # at prepare
    assert found[("icecommit.commit.attempts", frozenset(job))] == 3
    assert ("icecommit.commit.conflicts", frozenset(job)) not in found  # no commit retried
    assert found[("icecommit.written.rows", frozenset(job))] == 180
    assert found[("icecommit.written.files", frozenset(job))] == sum(
        s.files for s in list_checkpoints(sqlite_catalog, name, job_id="a")
    )
    for kind in ("compaction", "expiry"):
        assert found[("icecommit.maintenance.duration", frozenset({("table", name), ("kind", kind)}))] == 1
    files_rewritten = ("icecommit.maintenance.work", frozenset({("table", name), ("kind", "compaction"),
                                                                ("work", "files_rewritten")}))  # fmt: skip
    assert isinstance(found[files_rewritten], int) and found[files_rewritten] >= 2
    assert found[("icecommit.reconcile.duration", frozenset({*job, ("ok", "true")}))] == 1
    assert found[("icecommit.reconcile.lost_rows", frozenset(job))] == 0


def test_a_refused_checkpoint_is_counted_as_refused(sqlite_catalog: SqlCatalog, reader: InMemoryMetricReader) -> None:
    name = unique_table()
    ic.create_table(sqlite_catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    small_checkpoints(sqlite_catalog, name, 2, job="a")
    apply_rollback(sqlite_catalog, plan_rollback(sqlite_catalog, name, to_checkpoint=0, job_id="a"))
    committer = ic.GlobalCommitter(sqlite_catalog, name, job_id="a")
    with pytest.raises(CheckpointRolledBackError):
        committer.commit(1)
    refused = ("icecommit.checkpoints", frozenset({("table", name), ("job", "a"), ("outcome", "refused")}))
    assert points(reader)[refused] == 1


def test_nothing_is_recorded_and_nothing_fails_without_opentelemetry(
    sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if not installed
    telemetry.use_meter_provider(None)
    name = unique_table()
    ic.create_table(sqlite_catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    small_checkpoints(sqlite_catalog, name, 1, job="a")
    assert telemetry._instruments() is None
    monkeypatch.undo()
    telemetry.use_meter_provider(None)
