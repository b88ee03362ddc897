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
from icecommit.committer.observed import observed
from icecommit.committer.results import CommitResult
from icecommit.core import telemetry
from icecommit.errors import (
    CheckpointRolledBackError,
    CommitConflictError,
    CommitStateUnknownError,
    DataFileMissingError,
    ValidationError,
)
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
    bounds = {
        tuple(p.explicit_bounds)  # type: ignore[attr-defined]
        for r in reader.get_metrics_data().resource_metrics  # type: ignore[union-attr]
        for s in r.scope_metrics
        for m in s.metrics
        if m.name == "icecommit.commit.duration"
        for p in m.data.data_points
    }
    assert bounds == {tuple(telemetry._SECONDS)}  # buckets in seconds, not the SDK's milliseconds
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


def test_recovery_refusals_and_failed_commits_are_counted_by_their_outcome(
    sqlite_catalog: SqlCatalog, reader: InMemoryMetricReader
) -> None:
    name = unique_table()
    ic.create_table(sqlite_catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    committer = ic.GlobalCommitter(sqlite_catalog, name, job_id="a")
    committer.prepare(0, [write_arrow(committer.load_table(), events(0, 10), job_id="a", checkpoint_id=0)])
    assert [r.status for r in ic.GlobalCommitter(sqlite_catalog, name, job_id="a").recover()] == ["committed"]
    bad = [write_arrow(committer.load_table(), events(10, 20), job_id="a", checkpoint_id=5)]
    with pytest.raises(ValidationError):
        committer.validate(4, bad)  # the results are checkpoint 5's: refused, once
    found = points(reader)
    job = {("table", name), ("job", "a")}
    assert found[("icecommit.checkpoints", frozenset({*job, ("outcome", "committed")}))] == 1  # by the recovery
    assert found[("icecommit.checkpoints", frozenset({*job, ("outcome", "refused")}))] == 1


class _Store:
    def __init__(self) -> None:
        self.refusals: list[tuple[str, str, int, str]] = []

    def record_refusal(self, job_id: str, table_name: str, checkpoint_id: int, kind: str) -> None:
        self.refusals.append((job_id, table_name, checkpoint_id, kind))


class _Failing:
    table_name, job_id = "ns.t", "j"

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.store = _Store()

    @observed
    def commit(self, checkpoint_id: int) -> CommitResult:
        raise self.error


@pytest.mark.parametrize(
    ("error", "outcome", "attempts", "conflicts"),
    [
        (CommitConflictError("ns.t", 3, 4, 1.0), "conflict", 4, 3),
        (CommitStateUnknownError("ns.t", 3, TimeoutError()), "unknown", 0, 0),
        (DataFileMissingError("f.parquet", checkpoint_id=3, expected=9, actual=None, bad=1, total=1), "failed", 0, 0),
        (CheckpointRolledBackError("j", 3, 7, "ns.t"), "refused", 0, 0),
    ],
)
def test_a_commit_that_raises_is_counted_by_the_errors_first_family(
    reader: InMemoryMetricReader, error: Exception, outcome: str, attempts: int, conflicts: int
) -> None:
    failing = _Failing(error)
    with pytest.raises(type(error)):
        failing.commit(3)
    # the state counts what the committer's decision refused, nothing else
    assert failing.store.refusals == ([("j", "ns.t", 3, type(error).__name__)] if outcome == "refused" else [])
    found = points(reader)
    job = {("table", "ns.t"), ("job", "j")}
    assert found[("icecommit.checkpoints", frozenset({*job, ("outcome", outcome)}))] == 1
    assert found.get(("icecommit.commit.attempts", frozenset(job)), 0) == attempts
    assert found.get(("icecommit.commit.conflicts", frozenset(job)), 0) == conflicts


def test_a_meter_provider_that_fails_never_fails_a_commit(
    sqlite_catalog: SqlCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    telemetry.use_meter_provider(object())  # get_meter raises AttributeError
    try:
        name = unique_table()
        ic.create_table(sqlite_catalog, name, EVENTS_SCHEMA, partition_by=["event"])
        small_checkpoints(sqlite_catalog, name, 2, job="a")
    finally:
        telemetry.use_meter_provider(None)
    assert sqlite_catalog.load_table(name).scan().to_arrow().num_rows == 120
    assert "could not record the commit metric" in caplog.text
