"""Maintenance runs that changed a table (an expiry, an orphan sweep, a compaction): what
they did and how long they took, kept so that metrics read after the process that ran them
has exited (``icecommit metrics``) still say when a table was last maintained and how much
work that took."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from icecommit.core import telemetry
from icecommit.state.database import counted_or_logged, retried
from icecommit.state.models import MaintenanceRunRow, as_utc, utc_now

EXPIRY = "expiry"
ORPHANS = "orphans"
COMPACTION = "compaction"


@dataclass(frozen=True)
class MaintenanceTotals:
    """Every recorded run of one kind on one table, summed."""

    table: str
    kind: str
    runs: int
    seconds: float
    last_finished_at: datetime
    counts: dict[str, int]


class MaintenanceRunStore:
    """The maintenance runs table of a state database."""

    def __init__(self, engine: Engine, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._engine = engine
        self._clock = clock

    def record(self, table_name: str, kind: str, seconds: float, counts: Mapping[str, int]) -> None:
        """Store one finished run of ``kind`` on ``table_name``, once (not retried: a lost
        reply could store it twice), and record it in the in-job metrics. The run's work
        has landed by then: a state database that cannot store it is logged, never raised."""
        telemetry.record_maintenance(table_name, kind, seconds=seconds, counts=counts)
        row = MaintenanceRunRow(table_name=table_name, kind=kind, finished_at=self._clock(), seconds=seconds,
                                counts=json.dumps(dict(counts), sort_keys=True))  # fmt: skip
        with counted_or_logged(f"the {kind} of {table_name}"), Session(self._engine) as session, session.begin():
            session.add(row)

    def totals(self, tables: set[str] | None = None) -> list[MaintenanceTotals]:
        """Per table and kind: the runs, their seconds and counts summed, the last finish."""
        query = select(MaintenanceRunRow.table_name, MaintenanceRunRow.kind, MaintenanceRunRow.finished_at,
                       MaintenanceRunRow.seconds, MaintenanceRunRow.counts)  # fmt: skip
        if tables is not None:
            query = query.where(MaintenanceRunRow.table_name.in_(sorted(tables)))
        found: dict[tuple[str, str], MaintenanceTotals] = {}
        with Session(self._engine) as session:
            for table, kind, finished, seconds, counts in session.execute(query.order_by(MaintenanceRunRow.id)):
                before = found.get((table, kind))
                summed = dict(before.counts) if before is not None else {}
                for name, n in json.loads(counts).items():
                    summed[name] = summed.get(name, 0) + int(n)
                found[(table, kind)] = MaintenanceTotals(
                    table, kind, (before.runs if before else 0) + 1, (before.seconds if before else 0.0) + seconds,
                    max(as_utc(finished), before.last_finished_at) if before else as_utc(finished), summed,
                )  # fmt: skip
        return [found[k] for k in sorted(found)]

    totals = retried(totals)

    def count(self, table_name: str, kind: str) -> int:
        """How many runs of ``kind`` on ``table_name`` are recorded."""
        with Session(self._engine) as session:
            query = select(func.count()).where(MaintenanceRunRow.table_name == table_name,
                                               MaintenanceRunRow.kind == kind)  # fmt: skip
            return int(session.execute(query).scalar_one())

    count = retried(count)
