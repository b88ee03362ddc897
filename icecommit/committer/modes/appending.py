"""``append``: the checkpoint's data files join the table. An append conflicts with
nothing (Iceberg's ``AppendFiles`` validates nothing either): whatever landed since, its
files add to it."""

from __future__ import annotations

from pyiceberg.table import Table

from icecommit.committer.modes.planner import CheckpointBase, Planner
from icecommit.committer.table_changes import TableChanges


class AppendPlanner(Planner):
    """Plans an append (see the module)."""

    def plan(self, head: Table, base: CheckpointBase) -> TableChanges:
        return base.changes()


__all__ = ["AppendPlanner"]
