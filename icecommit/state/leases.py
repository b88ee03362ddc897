"""Leases: at most one holder of a named duty at a time (a table's maintenance), safe if the
holder dies, because a lease that is not renewed lapses.

Taking a lease is one conditional ``UPDATE`` (it is free, lapsed, or already ours) or, for
a name never leased, one ``INSERT`` that only one process can win: atomic on SQLite and
PostgreSQL alike, with no lock held between the statements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import Engine, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from icecommit.state.database import retried
from icecommit.state.models import LeaseRow, utc_now


@dataclass(frozen=True)
class Lease:
    """A lease as the state holds it."""

    name: str
    holder: str
    acquired_at: datetime
    expires_at: datetime


def _us(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


def _at(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, timezone.utc)


class LeaseStore:
    """The lease table of a state database."""

    def __init__(self, engine: Engine, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._engine = engine
        self._clock = clock

    def acquire(self, name: str, holder: str, duration: timedelta) -> bool:
        """Take (or renew) the lease for ``duration``: True when ``holder`` has it now,
        False when another holder's lease has not lapsed."""
        now = self._clock()
        values = {"holder": holder, "acquired_us": _us(now), "expires_us": _us(now + duration)}
        with Session(self._engine) as session, session.begin():
            taken = session.execute(
                update(LeaseRow)
                .where(LeaseRow.name == name, or_(LeaseRow.holder == holder, LeaseRow.expires_us <= _us(now)))
                .values(**values)
            )
            if taken.rowcount == 1:  # type: ignore[attr-defined]
                return True
        try:
            with Session(self._engine) as session, session.begin():
                if session.get(LeaseRow, name) is not None:
                    return False  # held by another, and not lapsed
                session.execute(insert(LeaseRow).values(name=name, **values))
            return True
        except IntegrityError:  # another process inserted it first
            return False

    acquire = retried(acquire)

    def release(self, name: str, holder: str) -> None:
        """Give the lease up, if ``holder`` still has it."""
        with Session(self._engine) as session, session.begin():
            session.execute(delete(LeaseRow).where(LeaseRow.name == name, LeaseRow.holder == holder))

    release = retried(release)

    def current(self, name: str) -> Lease | None:
        """The lease as it stands (lapsed or not), None when nobody holds it."""
        with Session(self._engine) as session:
            row = session.scalars(select(LeaseRow).where(LeaseRow.name == name)).one_or_none()
            if row is None:
                return None
            return Lease(row.name, row.holder, _at(row.acquired_us), _at(row.expires_us))

    current = retried(current)


__all__ = ["Lease", "LeaseStore"]
