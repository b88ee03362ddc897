"""What a table's writes showed about its data, for the next write to use."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from icecommit.state.database import retried, tried_once
from icecommit.state.models import WriteModelRow, utc_now


class WriteModelStore:
    """The shuffle-to-Parquet ratio per table that bin-packed writes learn."""

    def __init__(self, engine: Engine, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._engine = engine
        self._clock = clock

    def shuffle_ratio(self, table_name: str) -> float | None:
        """The ratio the table's last bin-packed write left, None before the first."""
        with Session(self._engine) as session:
            row = session.get(WriteModelRow, table_name)
            return float(row.shuffle_ratio) if row is not None else None

    shuffle_ratio = retried(shuffle_ratio)

    def record_shuffle_ratio(self, table_name: str, ratio: float) -> None:
        """Keep ``ratio`` for the table's next bin-packed write."""
        with Session(self._engine) as session, session.begin():
            row = session.get(WriteModelRow, table_name)
            if row is None:
                session.add(
                    WriteModelRow(table_name=table_name, shuffle_ratio=ratio, writes=1, updated_at=self._clock())
                )
            else:
                row.shuffle_ratio, row.writes, row.updated_at = ratio, row.writes + 1, self._clock()

    record_shuffle_ratio = tried_once(record_shuffle_ratio)
