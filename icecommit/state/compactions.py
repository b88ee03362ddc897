"""What compactions did to a table's rows: each commit group, and for each file it wrote,
how many rows of which input file it holds.

A compaction records its group (``prepared``) and the group's lineage in one transaction
before it commits the ``replace`` snapshot, then marks it ``committed`` (with the
snapshot) or ``aborted`` (the lineage is deleted in the same transaction). Reconciliation
follows a checkpoint's own files through this lineage to the files that hold its rows now,
exactly and without needing the compaction's snapshot (which expiry may have removed).
Paths are stored as the caller gives them (callers store path keys: one spelling per file).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pyiceberg.table import Table
from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from icecommit.core.lineage import landed_compactions
from icecommit.state.database import is_retry, retried
from icecommit.state.models import CompactionRow, RewrittenRowsRow, utc_now

logger = logging.getLogger(__name__)

PREPARED = "prepared"
COMMITTED = "committed"
ABORTED = "aborted"

#: Input path -> the output files holding its rows, with how many: [(output path, rows)].
Lineage = Mapping[str, list[tuple[str, int]]]


@dataclass(frozen=True)
class CompactionRecord:
    """One compaction commit group as the state has it."""

    compaction_id: str
    table_name: str
    status: str
    snapshot_id: int | None
    input_files: int
    output_files: int
    records: int
    prepared_at: datetime
    finished_at: datetime | None


class CompactionStore:
    """The compaction tables of a state database."""

    def __init__(self, engine: Engine, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._engine = engine
        self._clock = clock

    def prepare(
        self,
        table_name: str,
        compaction_id: str,
        rewritten: Iterable[tuple[str, str, int]],
        *,
        input_files: int,
        output_files: int,
    ) -> None:
        """Record a group about to be committed and its lineage, ``(input path, output path,
        rows)`` triples, in one transaction."""
        rows = [
            {"compaction_id": compaction_id, "table_name": table_name, "input_path": i, "output_path": o, "records": n}
            for i, o, n in rewritten
        ]
        try:
            self._insert_group(table_name, compaction_id, rows, input_files=input_files, output_files=output_files)
        except IntegrityError:
            if not is_retry() or not self._recorded(compaction_id):
                raise  # a retry finds the group its lost try recorded; anything else is a bug

    prepare = retried(prepare)

    def _recorded(self, compaction_id: str) -> bool:
        with Session(self._engine) as session:
            return session.get(CompactionRow, compaction_id) is not None

    def _insert_group(
        self, table_name: str, compaction_id: str, rows: list[dict[str, Any]], *, input_files: int, output_files: int
    ) -> None:
        with Session(self._engine) as session, session.begin():
            session.add(
                CompactionRow(
                    compaction_id=compaction_id,
                    table_name=table_name,
                    status=PREPARED,
                    snapshot_id=None,
                    input_files=input_files,
                    output_files=output_files,
                    records=sum(r["records"] for r in rows),
                    prepared_at=self._clock(),
                    finished_at=None,
                )
            )
            if rows:
                session.execute(insert(RewrittenRowsRow), rows)

    def committed(self, compaction_id: str, snapshot_id: int) -> None:
        """The group's snapshot landed."""
        with Session(self._engine) as session, session.begin():
            session.execute(
                update(CompactionRow)
                .where(CompactionRow.compaction_id == compaction_id)
                .values(status=COMMITTED, snapshot_id=snapshot_id, finished_at=self._clock())
            )

    committed = retried(committed)

    def aborted(self, compaction_id: str) -> None:
        """The group was not committed and never will be: its lineage goes with it."""
        with Session(self._engine) as session, session.begin():
            session.execute(delete(RewrittenRowsRow).where(RewrittenRowsRow.compaction_id == compaction_id))
            session.execute(
                update(CompactionRow)
                .where(CompactionRow.compaction_id == compaction_id)
                .values(status=ABORTED, finished_at=self._clock())
            )

    aborted = retried(aborted)

    def groups(self, table_name: str) -> list[CompactionRecord]:
        """The table's compaction groups, oldest first."""
        with Session(self._engine) as session:
            rows = session.scalars(
                select(CompactionRow)
                .where(CompactionRow.table_name == table_name)
                .order_by(CompactionRow.prepared_at, CompactionRow.compaction_id)
            ).all()
            return [
                CompactionRecord(
                    r.compaction_id,
                    r.table_name,
                    r.status,
                    r.snapshot_id,
                    r.input_files,
                    r.output_files,
                    r.records,
                    r.prepared_at,
                    r.finished_at,
                )
                for r in rows
            ]

    groups = retried(groups)

    def resolve_landed(self, table_name: str, landed: Mapping[str, int]) -> list[str]:
        """Mark committed every group of the table still ``prepared`` whose snapshot the
        table shows (``landed``: compaction id to the snapshot carrying it): its process
        died, or lost the state database, after the swap and before it could say so. The
        ids marked."""
        with Session(self._engine) as session, session.begin():
            prepared = session.scalars(
                select(CompactionRow.compaction_id).where(
                    CompactionRow.table_name == table_name, CompactionRow.status == PREPARED
                )
            ).all()
            marked = sorted(group for group in prepared if group in landed)
            for group in marked:
                session.execute(
                    update(CompactionRow)
                    .where(CompactionRow.compaction_id == group, CompactionRow.status == PREPARED)
                    .values(status=COMMITTED, snapshot_id=landed[group], finished_at=self._clock())
                )
        return marked

    resolve_landed = retried(resolve_landed)

    def group_lineage(self, table_name: str) -> dict[str, dict[str, list[tuple[str, int]]]]:
        """Each group's own lineage (group id to input path to the outputs holding its rows),
        aborted groups left out: what a snapshot carrying a group's id did to its inputs."""
        by_group: dict[str, dict[str, list[tuple[str, int]]]] = defaultdict(lambda: defaultdict(list))
        for input_path, output_path, records, group, _, _ in self._lineage_rows(table_name):
            by_group[group][input_path].append((output_path, records))
        return {group: dict(inputs) for group, inputs in by_group.items()}

    group_lineage = retried(group_lineage)

    def lineage(self, table_name: str) -> dict[str, list[tuple[str, int]]]:
        """Where each rewritten input file's rows went. An input that several groups list
        (a group that crashed, or was rolled back, then a later one) takes the latest
        committed group's lineage, else the latest prepared one's (:func:`resolve_landed_groups`
        records a group that landed unrecorded before its snapshot can be expired)."""
        by_input: dict[str, dict[str, list[tuple[str, int]]]] = defaultdict(lambda: defaultdict(list))
        rank: dict[str, tuple[bool, datetime, str]] = {}
        for input_path, output_path, records, group, status, prepared_at in self._lineage_rows(table_name):
            by_input[input_path][group].append((output_path, records))
            rank[group] = (status == COMMITTED, prepared_at, group)
        return {path: groups[max(groups, key=lambda g: rank[g])] for path, groups in by_input.items()}

    lineage = retried(lineage)

    def _lineage_rows(self, table_name: str) -> list[tuple[str, str, int, str, str, datetime]]:
        """(input, output, rows, group, status, prepared at) of every group not aborted, in
        the order they were written."""
        query = (
            select(
                RewrittenRowsRow.input_path,
                RewrittenRowsRow.output_path,
                RewrittenRowsRow.records,
                CompactionRow.compaction_id,
                CompactionRow.status,
                CompactionRow.prepared_at,
            )
            .join(CompactionRow, CompactionRow.compaction_id == RewrittenRowsRow.compaction_id)
            .where(RewrittenRowsRow.table_name == table_name, CompactionRow.status != ABORTED)
            .order_by(RewrittenRowsRow.id)  # an input's runs in the order they were written
        )
        with Session(self._engine) as session:
            return [(i, o, int(n), g, st, at) for i, o, n, g, st, at in session.execute(query)]


def resolve_landed_groups(store: CompactionStore, table_name: str, table: Table) -> None:
    """Record as committed the groups still ``prepared`` whose snapshot the table shows (a
    compaction that died after its swap): reconciliation then prefers their lineage over
    an older group's that listed the same files, also after their snapshots are expired."""
    marked = store.resolve_landed(table_name, landed_compactions(table.metadata))
    if marked:
        logger.warning("compaction group(s) %s of %s landed but were not recorded: recorded now", marked, table_name)


__all__ = [
    "ABORTED",
    "COMMITTED",
    "PREPARED",
    "CompactionRecord",
    "CompactionStore",
    "Lineage",
    "resolve_landed_groups",
]
