"""Conflict validators shared by every operation, as Iceberg's ``MergingSnapshotProducer``
has them: what changed in a branch since a base (the table a checkpoint's writers were
given, or the snapshot a compaction read) that the operation must not commit over.

- :attr:`Validation.DATA_ADDED`: a data file added since the base;
- :attr:`Validation.DELETES_ADDED`: a delete file added since the base;
- :attr:`Validation.DATA_REMOVED`: a data file removed since the base.

Each is scoped by a filter over files (``where``: the partition set an overwrite touches,
say) that returns what the file matched, or None. "Since the base" is read from the files'
sequence numbers where that holds after expiry (a live file keeps its own), and from the
retained snapshots of the branch for removals (a removed file is only in them).

An operation declares the validations it needs (a mode's planner, the compaction's
rewrite); inside :mod:`icecommit.committer`, this module and the snapshot producer are
the only readers of manifests.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from pyiceberg.manifest import DataFile, ManifestContent, ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from icecommit.core import ancestry
from icecommit.core.pyiceberg_internals import validate_data_files_exist, validate_no_new_deletes_for_data_files


class Validation(enum.Enum):
    """What changed since a base that conflicts with an operation."""

    DATA_ADDED = "added"
    DELETES_ADDED = "deletes added"
    DATA_REMOVED = "removed"

    @property
    def verb(self) -> str:
        """How an error names it: ``added`` (a data or delete file) or ``removed``."""
        return "removed" if self is Validation.DATA_REMOVED else "added"


#: A scope: what a file matched (a partition, a value), or None when it is out of scope.
Where = Callable[[DataFile], object | None]


@dataclass(frozen=True)
class LiveFile:
    """A file live in a branch head: a data file or a delete file, with the sequence
    number it was added at and the snapshot that added it."""

    data_file: DataFile
    is_delete: bool
    sequence_number: int | None
    snapshot_id: int | None


@dataclass(frozen=True)
class Conflict:
    """A change since the base that the operation must not commit over."""

    validation: Validation
    data_file: DataFile
    matched: object
    snapshot: Snapshot | None


def live_files(table: Table, branch: str) -> tuple[LiveFile, ...]:
    """Every file live in ``branch``'s head, data files and delete files, in manifest order
    (nothing when the branch has no snapshot)."""
    head = ancestry.branch_head(table.metadata, branch)
    if head is None:
        return ()
    return tuple(
        LiveFile(
            entry.data_file, manifest.content != ManifestContent.DATA, entry.file_sequence_number, entry.snapshot_id
        )
        for manifest in head.manifests(table.io)
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    )


def first_conflict(
    table: Table,
    branch: str,
    *,
    since: int,
    where: Where,
    validations: Collection[Validation],
    live: Sequence[LiveFile] | None = None,
) -> Conflict | None:
    """The first change of ``validations`` in scope ``where`` that ``branch`` holds after
    sequence number ``since``; None when there is none.

    Files added are judged by their own sequence number among the head's live files
    (``live`` when the caller read them already), so a snapshot expired since still
    conflicts; files removed, by the retained snapshots of the branch after ``since``.
    """
    added = {Validation.DATA_ADDED, Validation.DELETES_ADDED} & set(validations)
    if added:
        by_sequence = {s.sequence_number: s for s in table.metadata.snapshots if s.sequence_number is not None}
        for found in live if live is not None else live_files(table, branch):
            kind = Validation.DELETES_ADDED if found.is_delete else Validation.DATA_ADDED
            number = found.sequence_number
            if kind not in added or number is None or number <= since:
                continue
            matched = where(found.data_file)
            if matched is not None:
                return Conflict(kind, found.data_file, matched, by_sequence.get(number))
    if Validation.DATA_REMOVED in validations:
        return _first_removal(table, branch, since, where)
    return None


def _first_removal(table: Table, branch: str, since: int, where: Where) -> Conflict | None:
    """A data file in scope that a retained snapshot of the branch after ``since`` removed."""
    for snapshot in ancestry.branch_ancestry(table.metadata, branch):
        if snapshot.sequence_number is None or snapshot.sequence_number <= since:
            break
        for manifest in snapshot.manifests(table.io):
            if manifest.added_snapshot_id != snapshot.snapshot_id or manifest.content != ManifestContent.DATA:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                if entry.snapshot_id == snapshot.snapshot_id and entry.status == ManifestEntryStatus.DELETED:
                    matched = where(entry.data_file)
                    if matched is not None:
                        return Conflict(Validation.DATA_REMOVED, entry.data_file, matched, snapshot)
    return None


def files_added_by(table: Table, snapshot: Snapshot) -> set[str]:
    """The paths of the data files ``snapshot`` added (from its manifests)."""
    return {
        entry.data_file.file_path
        for manifest in snapshot.manifests(table.io)
        for entry in manifest.fetch_manifest_entry(table.io)
        if entry.snapshot_id == snapshot.snapshot_id
    }


def snapshot_that_added(table: Table, paths: Iterable[str], branch: str) -> int | None:
    """The snapshot that added one of ``paths``, read from the live entries of the branch
    head (they keep it after the snapshot itself was expired); None when no live entry
    holds one of them."""
    wanted = set(paths)
    for found in live_files(table, branch):
        if found.data_file.file_path in wanted and found.snapshot_id is not None:
            return found.snapshot_id
    return None


def require_rewritable(
    table: Table, head: Snapshot, base: Snapshot | None, files: set[DataFile], validations: Collection[Validation]
) -> None:
    """A rewrite's validations between ``base`` (the snapshot it read) and ``head``, as
    Iceberg's ``RewriteFiles`` makes them: with :attr:`Validation.DATA_REMOVED`, every file
    it replaces must still be live; with :attr:`Validation.DELETES_ADDED`, no delete file
    may have been added against them.

    Raises:
        ValidationException: the rewrite must not be committed over what changed.
    """
    if Validation.DATA_REMOVED in validations:
        validate_data_files_exist(table, head, files, base)
    if Validation.DELETES_ADDED in validations:
        validate_no_new_deletes_for_data_files(table, head, None, files, base)


__all__ = [
    "Conflict",
    "LiveFile",
    "Validation",
    "Where",
    "files_added_by",
    "first_conflict",
    "live_files",
    "require_rewritable",
    "snapshot_that_added",
]
