"""Prometheus metrics read from the state database: what must outlive the job that
produced it (``icecommit metrics``, ``icecommit metrics serve``).

Every scrape reads the state afresh (a few grouped queries), so the numbers are those of
the moment, whichever process committed, compacted or reconciled. Labels are the table and,
where a job did it, the job: counts and times only, never row values, paths or URIs.

Metrics, per table and job unless said otherwise (``_total`` ones only grow, unless the
state forgets a table: ``icecommit demo --reset``, which Prometheus reads as a reset):

- ``icecommit_last_commit_timestamp_seconds``, ``icecommit_seconds_since_last_commit``:
  the newest commit (of a checkpoint still committed, or later rolled back; one held on an
  audit branch counts when it is published);
- ``icecommit_checkpoints{status}``: checkpoints by state (committed, prepared,
  rolled-back, abandoned, held); ``icecommit_checkpoints_stuck``: prepared longer than the
  ``stuck_after`` given (a job that died between its two phases); and
  ``icecommit_oldest_prepared_age_seconds``;
- ``icecommit_checkpoints_held``: checkpoints that wait on their job's audit branch (held
  or queued there, or prepared for it); ``icecommit_checks_failed_total{check}``:
  checkpoints whose check of that name failed (each counted once, whatever became of it);
- ``icecommit_rows_committed_total``, ``icecommit_files_committed_total``,
  ``icecommit_bytes_committed_total`` (of every checkpoint that ever landed on the branch
  its job writes, rolled back since or not; a held one once it is published);
  ``icecommit_commit_attempts_total``, ``icecommit_commit_retries_total``,
  ``icecommit_unknown_outcomes_total`` (commits whose response was lost),
  ``icecommit_replays_skipped_total`` (commit calls of checkpoints already committed),
  ``icecommit_checkpoints_refused_total{kind}`` (checkpoints the committer's decision
  refused: a replay of a rolled-back one, an id below the job's last, another query's
  batch, a reused id; bad input is not counted, it leaves the state as it was); the gauges
  ``icecommit_files_skipped`` (replays: files already in the table) and
  ``icecommit_files_missing``, of each checkpoint's last commit try;
- ``icecommit_event_time_max_timestamp_seconds`` (the newest event time committed),
  ``icecommit_event_time_lag_seconds`` (now minus it), ``icecommit_watermark_timestamp_seconds``,
  ``icecommit_future_rows_total``;
- per table: ``icecommit_partitions_published``, ``icecommit_late_rows`` (rows committed
  into partitions after they were published), ``icecommit_last_partition_published_timestamp_seconds``;
- per table and the job a reconciliation covered (``""`` for the whole table): the last
  run's ``icecommit_reconcile_ok`` (1 or 0), ``icecommit_reconcile_last_run_timestamp_seconds``,
  ``icecommit_reconcile_lost_rows``, ``icecommit_reconcile_duplicated_rows`` (absent for
  runs recorded before these were), ``icecommit_reconcile_problems``;
- per table: ``icecommit_compaction_groups{status}``, and per kind of maintenance
  (``compaction``, ``expiry``, ``orphans``): ``icecommit_maintenance_runs_total``,
  ``icecommit_maintenance_seconds_total``, ``icecommit_maintenance_last_run_timestamp_seconds``,
  ``icecommit_maintenance_work_total{work}`` (snapshots expired, files deleted, files
  rewritten, ...);
- ``icecommit_state_up``: 1 when the state database answered this scrape, else 0 (and no
  other metric).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Engine, and_, case, func, or_, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from icecommit.core.errors import IcecommitError, MissingExtraError
from icecommit.metrics.render import duration
from icecommit.state.checkpoints import COMMITTED, HELD, PREPARED, ROLLED_BACK
from icecommit.state.maintenance_runs import MaintenanceRunStore
from icecommit.state.models import (
    CheckpointRow,
    CompactionRow,
    MaintenanceRunRow,
    ReconcileRunRow,
    RefusalRow,
    as_utc,
)
from icecommit.state.partitions import PartitionStatusStore

logger = logging.getLogger(__name__)

#: A prepared checkpoint older than this is reported stuck (the committer died between its
#: two phases, or its commit keeps failing), unless the caller says otherwise.
DEFAULT_STUCK_AFTER = timedelta(minutes=15)
#: The port ``icecommit metrics serve`` listens on unless told otherwise.
DEFAULT_PORT = 9473

_PREFIX = "icecommit_"


@dataclass
class _Family:
    """One metric family being gathered: its kind, help and samples."""

    name: str
    kind: str  # "gauge" or "counter"
    help: str
    labels: tuple[str, ...]
    samples: list[tuple[tuple[str, ...], float]] = field(default_factory=list)


class StateMetrics:
    """The metrics of one state database, read at each call of :meth:`families` (the
    tables in ``tables`` only, when given)."""

    def __init__(
        self,
        engine: Engine,
        *,
        tables: Sequence[str] = (),
        stuck_after: timedelta = DEFAULT_STUCK_AFTER,
        clock: Any = None,
    ) -> None:
        self._engine = engine
        self._tables = set(tables) or None
        self._stuck_after = stuck_after
        self._clock = clock or (lambda: datetime.now(timezone.utc))

    def known_tables(self) -> set[str]:
        """Every table the state database holds something of (checkpoints, compactions,
        reconciliation or maintenance runs)."""
        with Session(self._engine) as session:
            found: set[str] = set()
            for column in (CheckpointRow.table_name, CompactionRow.table_name, ReconcileRunRow.table_name,
                           MaintenanceRunRow.table_name):  # fmt: skip
                found |= {t for (t,) in session.execute(select(column).distinct())}
        return found

    def families(self) -> list[_Family]:
        """Every family, read now; only ``icecommit_state_up`` 0 when the state database
        cannot be read (the reason is logged)."""
        up = _Family("state_up", "gauge", "1 when the state database answered this scrape, else 0", ())
        try:
            found = self._read(self._clock())
        except (SQLAlchemyError, IcecommitError) as e:
            logger.warning("metrics: the state database could not be read: %s", str(e).splitlines()[0])
            up.samples.append(((), 0.0))
            return [up]
        up.samples.append(((), 1.0))
        return [up, *found]

    def _where(self, column: Any) -> Any:
        return column.in_(sorted(self._tables)) if self._tables is not None else True

    def _read(self, now: datetime) -> list[_Family]:
        families: list[_Family] = []
        with Session(self._engine) as session:
            families += self._checkpoints(session, now)
            families += self._reconciliation(session)
            families += self._compactions(session)
            tables = {t for (t,) in session.execute(select(CheckpointRow.table_name).distinct())}
        families += self._partitions(sorted(t for t in tables if self._tables is None or t in self._tables))
        families += self._maintenance()
        families += self._refusals()
        families += self._holding()
        return families

    def _holding(self) -> list[_Family]:
        tj = ("table", "job")
        waiting_help = "Checkpoints waiting on their job's audit branch (held, queued, or prepared for it)"
        held = _Family("checkpoints_held", "gauge", waiting_help, tj)
        failed_help = "Checkpoints whose check of this name failed (held on the audit branch for it)"
        failed = _Family("checks_failed_total", "counter", failed_help, (*tj, "check"))
        c = CheckpointRow
        waiting = or_(c.status == HELD, and_(c.status == PREPARED, c.audit_branch.isnot(None)))
        with Session(self._engine) as session:
            counts = {
                (table, job): float(n)
                for table, job, n in session.execute(
                    select(c.table_name, c.job_id, func.sum(case((waiting, 1), else_=0)))
                    .where(self._where(c.table_name))
                    .group_by(c.table_name, c.job_id)
                )
            }
            # a failed check holds its checkpoint for that reason (recorded once, at prepare)
            by_check: Counter[tuple[str, str, str]] = Counter()
            for table, job, results in session.execute(
                select(c.table_name, c.job_id, c.check_results).where(
                    self._where(c.table_name), c.hold_reason == "checks", c.check_results.isnot(None)
                )
            ):
                for name in {r.get("check") for r in json.loads(results or "[]") if not r.get("ok")}:
                    by_check[(table, job, str(name))] += 1
        held.samples.extend(sorted(counts.items()))
        failed.samples.extend((key, float(n)) for key, n in sorted(by_check.items()))
        return [held, failed]

    def _refusals(self) -> list[_Family]:
        refused = _Family("checkpoints_refused_total", "counter",
                          "Checkpoints the committer refused (not bad input), by the error's kind",
                          ("table", "job", "kind"))  # fmt: skip
        r = RefusalRow
        with Session(self._engine) as session:
            for table, job, kind, count in session.execute(
                select(r.table_name, r.job_id, r.kind, r.count).where(self._where(r.table_name))
                .order_by(r.table_name, r.job_id, r.kind)
            ):  # fmt: skip
                refused.samples.append(((table, job, kind), float(count)))
        return [refused]

    def _checkpoints(self, session: Session, now: datetime) -> list[_Family]:
        tj = ("table", "job")
        last = _Family("last_commit_timestamp_seconds", "gauge", "When the job last committed a checkpoint", tj)
        since = _Family("seconds_since_last_commit", "gauge", "Seconds since the job last committed a checkpoint", tj)
        states = _Family("checkpoints", "gauge", "Checkpoints by state", (*tj, "status"))
        stuck = _Family("checkpoints_stuck", "gauge",
                        f"Checkpoints prepared more than {duration(self._stuck_after.total_seconds())} ago "
                        "and not committed", tj)  # fmt: skip
        oldest = _Family("oldest_prepared_age_seconds", "gauge", "Age of the oldest prepared checkpoint", tj)
        sums = {
            "records": _Family("rows_committed_total", "counter", "Rows committed", tj),
            "files": _Family("files_committed_total", "counter", "Data files committed", tj),
            "bytes": _Family("bytes_committed_total", "counter", "Bytes of data files committed", tj),
            "future_records": _Family("future_rows_total", "counter",
                                      "Rows committed with an event time ahead of the committer's clock", tj),
        }  # fmt: skip
        every = {
            "attempts": _Family("commit_attempts_total", "counter", "Catalog commit attempts", tj),
            "retries": _Family("commit_retries_total", "counter", "Commit attempts retried after a conflict", tj),
            "unknown_outcomes": _Family("unknown_outcomes_total", "counter",
                                        "Commits whose response was lost (resolved from the table)", tj),
            "replays": _Family("replays_skipped_total", "counter",
                               "Commit calls of checkpoints already committed (replays: nothing written twice)", tj),
            # the last commit try's, per checkpoint (a later try overwrites them): gauges
            "files_skipped": _Family("files_skipped", "gauge",
                                     "Files of replayed checkpoints found already in the table", tj),
            "files_missing": _Family("files_missing", "gauge",
                                     "Staged files found missing at the checkpoints' last commit try", tj),
        }  # fmt: skip
        event = _Family("event_time_max_timestamp_seconds", "gauge", "The newest event time committed", tj)
        lag = _Family("event_time_lag_seconds", "gauge", "Seconds from the newest event time committed to now", tj)
        mark = _Family("watermark_timestamp_seconds", "gauge", "The newest watermark committed", tj)
        c = CheckpointRow
        # committed once: still, or rolled back or abandoned since; one held on its job's audit
        # branch only once it was published from there (held or discarded: never landed)
        landed = and_(
            c.committed_at.isnot(None), c.status != HELD, or_(c.audit_branch.is_(None), c.published_at.isnot(None))
        )
        grouped = session.execute(
            select(c.table_name, c.job_id, c.status, landed, func.count(),
                   func.max(func.coalesce(c.published_at, c.committed_at)),
                   *(func.sum(getattr(c, n)) for n in (*sums, *every)),
                   func.max(c.max_event_time_us), func.max(c.watermark_us), func.min(c.prepared_at))
            .where(self._where(c.table_name))
            .group_by(c.table_name, c.job_id, c.status, landed)
        )  # fmt: skip
        totals: dict[tuple[str, str], dict[str, float]] = {}
        newest: dict[tuple[str, str], datetime] = {}
        counts: dict[tuple[str, str, str], float] = {}
        names = [*sums, *every]
        for table, job, status, was_landed, count, committed_at, *rest in grouped:
            key = (table, job)
            counts[(table, job, status)] = counts.get((table, job, status), 0.0) + float(count)
            values = totals.setdefault(key, {})
            for name, value in zip(names, rest[: len(names)], strict=True):
                if name in every or was_landed:  # what a commit added counts once it landed, for good
                    values[name] = values.get(name, 0.0) + float(value or 0)
            event_us, watermark_us, first_prepared = rest[len(names) :]
            if was_landed and committed_at is not None:
                newest[key] = max(as_utc(committed_at), newest.get(key, as_utc(committed_at)))
            if status in (COMMITTED, ROLLED_BACK):
                if event_us is not None:
                    values["event_us"] = max(values.get("event_us", event_us), event_us)
                if watermark_us is not None:
                    values["watermark_us"] = max(values.get("watermark_us", watermark_us), watermark_us)
            if status == PREPARED and first_prepared is not None:
                oldest.samples.append((key, (now - as_utc(first_prepared)).total_seconds()))
        states.samples.extend(sorted(counts.items()))
        stuck_counts = dict.fromkeys(totals, 0.0)
        for table, job, count in session.execute(
            select(c.table_name, c.job_id, func.count())
            .where(self._where(c.table_name), c.status == PREPARED, c.prepared_at < now - self._stuck_after)
            .group_by(c.table_name, c.job_id)
        ):
            stuck_counts[(table, job)] = float(count)
        stuck.samples.extend(sorted(stuck_counts.items()))
        for key, values in sorted(totals.items()):
            for name, family in (*sums.items(), *every.items()):
                family.samples.append((key, values.get(name, 0.0)))
            if "event_us" in values:
                event.samples.append((key, values["event_us"] / 1e6))
                lag.samples.append((key, max(0.0, now.timestamp() - values["event_us"] / 1e6)))
            if "watermark_us" in values:
                mark.samples.append((key, values["watermark_us"] / 1e6))
        for key, when in sorted(newest.items()):
            last.samples.append((key, when.timestamp()))
            since.samples.append((key, max(0.0, (now - when).total_seconds())))
        return [last, since, states, stuck, oldest, *sums.values(), *every.values(), event, lag, mark]

    def _reconciliation(self, session: Session) -> list[_Family]:
        tj = ("table", "job")
        ok = _Family("reconcile_ok", "gauge", "1 when the last reconciliation held, else 0", tj)
        ran = _Family("reconcile_last_run_timestamp_seconds", "gauge", "When the last reconciliation ran", tj)
        lost = _Family("reconcile_lost_rows", "gauge", "Rows the last reconciliation found lost", tj)
        dup = _Family("reconcile_duplicated_rows", "gauge", "Rows the last reconciliation found duplicated", tj)
        problems = _Family("reconcile_problems", "gauge", "Problems the last reconciliation listed", tj)
        r = ReconcileRunRow
        latest = (
            select(func.max(r.id)).where(self._where(r.table_name)).group_by(r.table_name, r.job_id).scalar_subquery()
        )
        for row in session.execute(select(r).where(r.id.in_(latest)).order_by(r.table_name, r.job_id)).scalars():
            key = (row.table_name, row.job_id or "")
            summary = json.loads(row.summary)
            ok.samples.append((key, 1.0 if row.ok else 0.0))
            ran.samples.append((key, as_utc(row.ran_at).timestamp()))
            problems.samples.append((key, float(len(summary.get("problems") or ()))))
            if "loss" in summary:
                lost.samples.append((key, float(summary["loss"])))
                dup.samples.append((key, float(summary["duplicated"])))
        return [ok, ran, lost, dup, problems]

    def _compactions(self, session: Session) -> list[_Family]:
        groups = _Family("compaction_groups", "gauge", "Compaction commit groups by state", ("table", "status"))
        cr = CompactionRow
        for table, status, count in session.execute(
            select(cr.table_name, cr.status, func.count())
            .where(self._where(cr.table_name))
            .group_by(cr.table_name, cr.status)
            .order_by(cr.table_name, cr.status)
        ):
            groups.samples.append(((table, status), float(count)))
        return [groups]

    def _partitions(self, tables: Iterable[str]) -> list[_Family]:
        published = _Family("partitions_published", "gauge", "Time partitions published complete", ("table",))
        late = _Family("late_rows", "gauge", "Rows committed into partitions after they were published", ("table",))
        last = _Family("last_partition_published_timestamp_seconds", "gauge",
                       "When the newest partition was published", ("table",))  # fmt: skip
        store = PartitionStatusStore(self._engine)
        for table in tables:
            statuses = store.statuses(table)
            if not statuses:
                continue
            published.samples.append(((table,), float(len(statuses))))
            late.samples.append(((table,), float(sum(max(s.late_records, 0) for s in statuses))))
            last.samples.append(((table,), max(s.completed_at for s in statuses).timestamp()))
        return [published, late, last]

    def _maintenance(self) -> list[_Family]:
        tk = ("table", "kind")
        runs = _Family("maintenance_runs_total", "counter", "Maintenance runs that changed the table", tk)
        seconds = _Family("maintenance_seconds_total", "counter", "Seconds spent in maintenance runs", tk)
        last = _Family("maintenance_last_run_timestamp_seconds", "gauge", "When the last run of the kind ended", tk)
        work = _Family("maintenance_work_total", "counter", "What maintenance did, by work", (*tk, "work"))
        for totals in MaintenanceRunStore(self._engine).totals(self._tables):
            key = (totals.table, totals.kind)
            runs.samples.append((key, float(totals.runs)))
            seconds.samples.append((key, totals.seconds))
            last.samples.append((key, totals.last_finished_at.timestamp()))
            for name, n in sorted(totals.counts.items()):
                work.samples.append(((*key, name), float(n)))
        return [runs, seconds, last, work]


def _prometheus() -> Any:
    try:
        import prometheus_client
        from prometheus_client import core
    except ImportError as e:
        raise MissingExtraError("icecommit's Prometheus metrics", "prometheus-client", "metrics") from e
    return prometheus_client, core


class _Collector:
    """A prometheus-client collector over :class:`StateMetrics`."""

    def __init__(self, metrics: StateMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Any]:
        _, core = _prometheus()
        for family in self._metrics.families():
            kind = core.CounterMetricFamily if family.kind == "counter" else core.GaugeMetricFamily
            name = _PREFIX + (family.name.removesuffix("_total") if family.kind == "counter" else family.name)
            built = kind(name, family.help, labels=list(family.labels))
            for labels, value in family.samples:
                built.add_metric(list(labels), value)
            yield built


def registry_of(metrics: StateMetrics) -> Any:
    """A prometheus-client registry holding only these metrics."""
    prometheus_client, _ = _prometheus()
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(_Collector(metrics))
    return registry


def exposition(metrics: StateMetrics) -> str:
    """The metrics now, in the Prometheus text format."""
    prometheus_client, _ = _prometheus()
    return str(prometheus_client.generate_latest(registry_of(metrics)).decode())


def serve(metrics: StateMetrics, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> tuple[Any, int]:
    """Serve the metrics at ``http://host:port/metrics`` in a thread; returns the server
    (``shutdown()`` stops it) and the port it listens on (``port`` 0: one the system chose)."""
    prometheus_client, _ = _prometheus()
    server, _thread = prometheus_client.start_http_server(port, addr=host, registry=registry_of(metrics))
    return server, int(server.server_address[1])
