"""Forgetting a table: every row the state database holds about it, gone in one transaction
(what ``icecommit demo --reset`` does after dropping the demo's table, so that a new table
of the same name starts with no memory of the old one's checkpoints)."""

from __future__ import annotations

from sqlalchemy import Engine, delete

from icecommit.state.database import retried
from icecommit.state.models import Base


class TableForgetter:
    """The state database's rows about tables, to delete (a store, so that transient
    connection failures are retried and the rest named like every state error)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def forget(self, table_name: str) -> int:
        """Delete every state row of ``table_name`` (checkpoints, their tasks, partitions
        and metrics, compactions and their lineage, reconciliation runs); the rows deleted."""
        deleted = 0
        with self._engine.begin() as connection:
            for table in reversed(Base.metadata.sorted_tables):
                if "table_name" in table.c:
                    deleted += connection.execute(delete(table).where(table.c.table_name == table_name)).rowcount
        return deleted

    forget = retried(forget)


def forget_table(engine: Engine, table_name: str) -> int:
    """Delete every state row of ``table_name``; the rows deleted (see :class:`TableForgetter`)."""
    return TableForgetter(engine).forget(table_name)


__all__ = ["TableForgetter", "forget_table"]
