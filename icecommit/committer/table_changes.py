"""What one commit attempt changes in one table: the unit the commit protocol commits.

A write mode's planner (:mod:`icecommit.committer.modes`) turns a checkpoint and the
branch head an attempt runs on into :class:`TableChanges`: data files added and removed,
rows deleted by position, the snapshot summary and the table properties set in the same
catalog commit. The checkpoint operation commits them as one snapshot; a checkpoint of a
routed write is a set of them, one per table.

Rows to delete are given by position (:class:`RowDeletes`), not as delete files: the
commit writes them in the form the table's format version takes (position delete files
for version 2), so a mode never writes a file while it is planned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyiceberg.manifest import DataFile

from icecommit.core.ancestry import MAIN_BRANCH


@dataclass(frozen=True)
class RowDeletes:
    """Rows of one live data file to delete, by position (0-based, sorted)."""

    data_file: DataFile
    positions: tuple[int, ...]


@dataclass(frozen=True)
class TableChanges:
    """One table's changes in one snapshot.

    Attributes:
        table_name: the table changed.
        branch: the branch whose head the snapshot becomes.
        added: data files the snapshot adds (each under its own partition spec).
        removed: live data files the snapshot removes.
        row_deletes: rows of live data files the snapshot deletes by position.
        replaces: the snapshot is an ``overwrite`` that replaces ``removed`` (even none:
            a partition overwrite of nothing is still one); False, an append (a row delta
            with ``row_deletes``).
        summary: the snapshot summary's own properties (the checkpoint's key among them).
        properties: table properties set in the same catalog commit.
    """

    table_name: str
    branch: str = MAIN_BRANCH
    added: tuple[DataFile, ...] = ()
    removed: tuple[DataFile, ...] = ()
    row_deletes: tuple[RowDeletes, ...] = ()
    replaces: bool = False
    summary: Mapping[str, str] = field(default_factory=dict)
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def deleted_rows(self) -> int:
        """Rows the snapshot deletes by position."""
        return sum(len(d.positions) for d in self.row_deletes)


__all__ = ["RowDeletes", "TableChanges"]
