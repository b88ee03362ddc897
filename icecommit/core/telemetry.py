"""Metrics inside a job, through OpenTelemetry's metrics API: commit latency, attempts and
conflicts, checkpoints by outcome, what the writers wrote (summed on the driver from their
write results), maintenance and reconciliation work.

A no-op unless the application configures a meter provider (OpenTelemetry's SDK with an
exporter: OTLP, Prometheus, ...), and when ``opentelemetry-api`` is not installed at all
(``pip install 'icecommit[metrics]'`` installs it). Every instrument is named
``icecommit.*`` and carries the attributes ``table`` and, where a job did it, ``job``:
counts and times only, never row values, paths or URIs.

Instruments:

- ``icecommit.commit.duration`` (histogram, s; ``outcome``: committed, already-committed,
  empty, rolled-back, abandoned, refused, conflict, unknown, failed): one checkpoint's
  commit call, from its start to its outcome;
- ``icecommit.commit.attempts``, ``icecommit.commit.conflicts`` (counters): catalog commit
  attempts, and those that lost a compare-and-swap and were retried;
- ``icecommit.checkpoints`` (counter; ``outcome``): checkpoints by what their commit call
  ended in (``already-committed`` is a replay skipped; ``refused`` a checkpoint the committer
  refused, at prepare, bad input included, or at commit);
- ``icecommit.written.files``, ``icecommit.written.bytes``, ``icecommit.written.rows``
  (counters): what the writers of a prepared checkpoint wrote;
- ``icecommit.maintenance.duration`` (histogram, s; ``kind``: compaction, expiry, orphans)
  and ``icecommit.maintenance.work`` (counter; ``kind``, ``work``: files rewritten,
  snapshots expired, files deleted, ...);
- ``icecommit.reconcile.duration`` (histogram, s; ``ok``), ``icecommit.reconcile.lost_rows``
  and ``icecommit.reconcile.duplicated_rows`` (counters: rows each run found).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

_SCOPE = "icecommit"
#: Histogram buckets in seconds (the SDK's default ones, 0 to 10,000, suit milliseconds: a
#: 0.3 s commit would fall in the first)
_SECONDS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0]


@dataclass(frozen=True)
class _Instruments:
    commit_duration: Any
    attempts: Any
    conflicts: Any
    checkpoints: Any
    files: Any
    bytes: Any
    rows: Any
    maintenance_duration: Any
    maintenance_work: Any
    reconcile_duration: Any
    lost: Any
    duplicated: Any


_provider: Any = None  # a meter provider set by :func:`use_meter_provider`; None: OpenTelemetry's global one
_made: tuple[Any, _Instruments | None] | None = None  # (the provider they were made from, the instruments)


def use_meter_provider(provider: Any) -> None:
    """Record into ``provider`` (None: OpenTelemetry's global meter provider, the default),
    for an application that keeps its own or a test that reads what was recorded."""
    global _provider, _made
    _provider, _made = provider, None


def _instruments() -> _Instruments | None:
    global _made
    if _made is not None and _made[0] is _provider:
        return _made[1]
    try:
        from opentelemetry import metrics
    except ImportError:
        _made = (_provider, None)
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("icecommit")
    except PackageNotFoundError:  # a source tree that is not installed
        release = None
    meter = (_provider or metrics.get_meter_provider()).get_meter(_SCOPE, release)

    def seconds_histogram(name: str, description: str) -> Any:
        return meter.create_histogram(name, unit="s", description=description,
                                      explicit_bucket_boundaries_advisory=_SECONDS)  # fmt: skip

    made = _Instruments(
        commit_duration=seconds_histogram(
            "icecommit.commit.duration", "One checkpoint's commit call, start to outcome"
        ),
        attempts=meter.create_counter("icecommit.commit.attempts", description="Catalog commit attempts"),
        conflicts=meter.create_counter(
            "icecommit.commit.conflicts", description="Commit attempts that lost a compare-and-swap and were retried"
        ),
        checkpoints=meter.create_counter("icecommit.checkpoints", description="Checkpoints by commit outcome"),
        files=meter.create_counter("icecommit.written.files", description="Data files the writers wrote"),
        bytes=meter.create_counter("icecommit.written.bytes", unit="By", description="Bytes the writers wrote"),
        rows=meter.create_counter("icecommit.written.rows", description="Rows the writers wrote"),
        maintenance_duration=seconds_histogram(
            "icecommit.maintenance.duration", "Maintenance runs (compaction, expiry, orphans)"
        ),
        maintenance_work=meter.create_counter("icecommit.maintenance.work", description="What maintenance did"),
        reconcile_duration=seconds_histogram("icecommit.reconcile.duration", "Reconciliation runs"),
        lost=meter.create_counter("icecommit.reconcile.lost_rows", description="Rows reconciliation found lost"),
        duplicated=meter.create_counter(
            "icecommit.reconcile.duplicated_rows", description="Rows reconciliation found duplicated"
        ),
    )
    _made = (_provider, made)
    return made


def _attributes(table: str, job: str | None, **more: str) -> dict[str, str]:
    found = {"table": table, **more}
    if job is not None:
        found["job"] = job
    return found


def _safely(what: str, record: Callable[[_Instruments], None]) -> None:
    """Record with the instruments (none: OpenTelemetry is not installed), never failing
    the work measured: a provider, SDK or exporter error is logged instead."""
    try:
        made = _instruments()
        if made is not None:
            record(made)
    except Exception as e:  # a metric is never worth a failed commit
        logger.warning("could not record the %s metric: %s", what, e)


def record_commit(table: str, job: str, *, seconds: float, outcome: str, attempts: int = 0, retries: int = 0) -> None:
    """One commit call: its time and outcome, the attempts it made and how many retried."""

    def record(made: _Instruments) -> None:
        made.commit_duration.record(seconds, {**_attributes(table, job), "outcome": outcome})
        _checkpoint(made, table, job, outcome, attempts, retries)

    _safely("commit", record)


def record_checkpoint(table: str, job: str, *, outcome: str, attempts: int = 0, retries: int = 0) -> None:
    """A checkpoint's outcome outside a timed commit call: refused at prepare or
    validation, or settled by a recovery."""
    _safely("checkpoint", lambda made: _checkpoint(made, table, job, outcome, attempts, retries))


def _checkpoint(made: _Instruments, table: str, job: str, outcome: str, attempts: int, retries: int) -> None:
    by_job = _attributes(table, job)
    made.checkpoints.add(1, {**by_job, "outcome": outcome})
    if attempts:
        made.attempts.add(attempts, by_job)
    if retries:
        made.conflicts.add(retries, by_job)


def record_written(table: str, job: str | None, *, files: int, bytes_: int, rows: int) -> None:
    """What the writers of one prepared checkpoint wrote."""

    def record(made: _Instruments) -> None:
        by_job = _attributes(table, job)
        made.files.add(files, by_job)
        made.bytes.add(bytes_, by_job)
        made.rows.add(rows, by_job)

    _safely("written", record)


def record_maintenance(table: str, kind: str, *, seconds: float, counts: Mapping[str, int]) -> None:
    """One maintenance run."""

    def record(made: _Instruments) -> None:
        made.maintenance_duration.record(seconds, {"table": table, "kind": kind})
        for work, n in counts.items():
            made.maintenance_work.add(n, {"table": table, "kind": kind, "work": work})

    _safely("maintenance", record)


def record_reconcile(table: str, job: str | None, *, seconds: float, ok: bool, lost: int, duplicated: int) -> None:
    """One reconciliation run: its time and verdict, and the rows it found lost or duplicated."""

    def record(made: _Instruments) -> None:
        by_job = _attributes(table, job)
        made.reconcile_duration.record(seconds, {**by_job, "ok": str(ok).lower()})
        made.lost.add(lost, by_job)
        made.duplicated.add(duplicated, by_job)

    _safely("reconcile", record)
