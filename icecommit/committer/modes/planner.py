"""A write mode's planner: what one checkpoint changes in a table, planned again on every
commit attempt against the branch head it runs on.

A planner is pure in the sense that matters to the commit protocol: it reads the head (its
manifests, the files it must look into) and returns :class:`TableChanges`; it writes
nothing and keeps no state between attempts, so an attempt after a conflict plans from
scratch on the table as it is then. What every mode shares (the checkpoint's key in the
snapshot, the job's high-water mark, the state database, unknown outcomes) is the
checkpoint operation's (:mod:`icecommit.committer.checkpoint_commit`), not a planner's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from icecommit.committer.table_changes import RowDeletes, TableChanges
from icecommit.committer.validators import Validation


@dataclass(frozen=True)
class CheckpointBase:
    """What every attempt of one checkpoint's commit plans from (the same on each).

    Attributes:
        job_id, checkpoint_id, table_name, branch: the checkpoint and where it commits.
        data_files: its staged data files.
        summary: the snapshot summary every mode writes (the key, counts, event time).
        sequence_number: the table's last sequence number when the checkpoint's writers
            were given it (0 when not recorded: then every file of the table is newer).
        recommit: the caller asked to commit a rolled-back checkpoint again.
        highest_committed: the job's highest checkpoint in the table when planned.
    """

    job_id: str
    checkpoint_id: int
    table_name: str
    branch: str
    data_files: tuple[DataFile, ...]
    summary: Mapping[str, str]
    sequence_number: int = 0
    recommit: bool = False
    highest_committed: int | None = None

    def changes(
        self,
        *,
        removed: tuple[DataFile, ...] = (),
        row_deletes: tuple[RowDeletes, ...] = (),
        replaces: bool = False,
        summary: Mapping[str, str] | None = None,
    ) -> TableChanges:
        """The changes that add this checkpoint's files under its summary, with a mode's
        removals, row deletes and own summary keys."""
        return TableChanges(
            table_name=self.table_name, branch=self.branch, added=self.data_files, removed=removed,
            row_deletes=row_deletes, replaces=replaces, summary={**self.summary, **(summary or {})},
        )  # fmt: skip


class Planner(ABC):
    """One write mode's planning (see the module)."""

    #: the conflict validators the mode needs (:mod:`icecommit.committer.validators`)
    validations: ClassVar[frozenset[Validation]] = frozenset()

    @abstractmethod
    def plan(self, head: Table, base: CheckpointBase) -> TableChanges:
        """The changes the checkpoint makes on ``head`` (the table an attempt runs on).

        Raises:
            IcecommitError: the checkpoint must not be committed on this head (a conflict
                the mode's validators found, or a rule of the mode); nothing is sent.
        """


__all__ = ["CheckpointBase", "Planner"]
