"""The history of reconciliation runs, so scheduled runs can start where the last ended."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from icecommit.metrics.render import duration, summary_counts
from icecommit.metrics.report_model import ReconciliationReport
from icecommit.state.models import ReconcileRunRow, as_utc


@dataclass(frozen=True)
class ReconcileRun:
    """One stored run."""

    run_id: int
    table: str
    job_id: str | None
    ran_at: datetime
    since: datetime | None
    until: datetime
    ok: bool
    summary: dict[str, object]


def record_run(engine: Engine, report: ReconciliationReport) -> ReconcileRun:
    """Store a run: when, range, whether it held, and a summary of counts and problems."""
    counts = summary_counts(report)
    summary = {
        "checkpoints": len(report.checkpoints),
        "pending": len(report.pending),
        "problems": [f"{p.kind}: {p.message}" for p in report.problems][:50],
        "source": sum(c.source for c in report.checkpoints),
        "readable": sum(c.readable for c in report.checkpoints),
        "lag_p50_seconds": report.lag.p50_seconds,
        "lag_p99_seconds": report.lag.p99_seconds,
        # rows, over the committed checkpoints (as the report's summary counts them)
        "loss": counts["loss"],
        "duplicated": counts["duplicated"],
    }
    row = ReconcileRunRow(
        table_name=report.table,
        job_id=report.job_id,
        ran_at=report.generated_at,
        since=report.since,
        until=report.until,
        ok=report.ok,
        summary=json.dumps(summary),
    )
    with Session(engine) as session, session.begin():
        session.add(row)
        session.flush()
        return _to_run(row)


def last_successful_run(engine: Engine, table: str, job_id: str | None) -> ReconcileRun | None:
    """The latest run over ``table`` (and ``job_id``) that reconciled."""
    query = select(ReconcileRunRow).where(ReconcileRunRow.table_name == table, ReconcileRunRow.ok.is_(True))
    query = query.where(
        ReconcileRunRow.job_id.is_(None) if job_id is None else ReconcileRunRow.job_id == job_id
    ).order_by(ReconcileRunRow.until.desc(), ReconcileRunRow.id.desc())
    with Session(engine) as session:
        row = session.execute(query.limit(1)).scalar_one_or_none()
        return _to_run(row) if row is not None else None


def last_run(engine: Engine, table: str, job_id: str | None) -> ReconcileRun | None:
    """The latest stored run over ``table`` (and ``job_id``), whatever its verdict."""
    query = select(ReconcileRunRow).where(ReconcileRunRow.table_name == table)
    query = query.where(
        ReconcileRunRow.job_id.is_(None) if job_id is None else ReconcileRunRow.job_id == job_id
    ).order_by(ReconcileRunRow.ran_at.desc(), ReconcileRunRow.id.desc())
    with Session(engine) as session:
        row = session.execute(query.limit(1)).scalar_one_or_none()
        return _to_run(row) if row is not None else None


def changes_since(previous: ReconcileRun | None, report: ReconciliationReport) -> str:
    """One line on what changed since the last stored run (its verdict, checkpoints, rows
    and problem kinds), for the report's summary."""
    if previous is None:
        return "first stored run for this table"
    before = previous.summary

    def delta(now: int, then: object) -> str:
        return f"{now - int(then):+,}" if isinstance(then, int) else f"{now:,}"

    listed = before.get("problems")
    kinds_then = {str(p).split(":", 1)[0] for p in listed} if isinstance(listed, list) else set()
    kinds_now = {p.kind for p in report.problems}
    new, gone = sorted(kinds_now - kinds_then), sorted(kinds_then - kinds_now)
    verdict = "OK" if previous.ok else "MISMATCH"
    parts = [
        f"since the last run ({previous.ran_at:%Y-%m-%d %H:%M} UTC, {verdict})",
        f"checkpoints {delta(len(report.checkpoints), before.get('checkpoints'))}",
        f"source rows {delta(sum(c.source for c in report.checkpoints), before.get('source'))}",
        f"readable rows {delta(sum(c.readable for c in report.checkpoints), before.get('readable'))}",
    ]
    if new:
        parts.append("new problems: " + ", ".join(new))
    if gone:
        parts.append("resolved: " + ", ".join(gone))
    if not new and not gone:
        parts.append("same problem kinds" if kinds_now else "no problems then or now")
    return "; ".join(parts)


def history_points(engine: Engine, table: str, job_id: str | None, limit: int = 200) -> list[dict[str, object]]:
    """The latest ``limit`` stored runs over ``table`` (and ``job_id``), oldest first, as
    the HTML report's history view draws them: when, verdict, checkpoints, rows, lag and
    problems (a run stored before lag was kept shows it as n/a)."""
    query = select(ReconcileRunRow).where(ReconcileRunRow.table_name == table)
    query = query.where(
        ReconcileRunRow.job_id.is_(None) if job_id is None else ReconcileRunRow.job_id == job_id
    ).order_by(ReconcileRunRow.ran_at.desc(), ReconcileRunRow.id.desc())
    with Session(engine) as session:
        runs = [_to_run(row) for row in session.execute(query.limit(limit)).scalars()]
    points = []
    for run in reversed(runs):
        summary = run.summary
        problems = summary.get("problems")
        lag50, lag99 = summary.get("lag_p50_seconds"), summary.get("lag_p99_seconds")
        points.append({
            "ran_at": run.ran_at.isoformat(), "ok": run.ok, "checkpoints": _count(summary.get("checkpoints")),
            "source": _count(summary.get("source")), "readable": _count(summary.get("readable")),
            "lag_p50": duration(float(lag50)) if isinstance(lag50, (int, float)) else "n/a",
            "lag_p99": duration(float(lag99)) if isinstance(lag99, (int, float)) else "n/a",
            "problems": len(problems) if isinstance(problems, list) else 0,
        })  # fmt: skip
    return points


def _count(value: object) -> int:
    return value if isinstance(value, int) else 0


def _to_run(row: ReconcileRunRow) -> ReconcileRun:
    return ReconcileRun(
        run_id=row.id,
        table=row.table_name,
        job_id=row.job_id,
        ran_at=as_utc(row.ran_at),
        since=as_utc(row.since) if row.since else None,
        until=as_utc(row.until),
        ok=row.ok,
        summary=json.loads(row.summary),
    )
