"""A checkpoint's partition overwrite: the checkpoint's append, made an ``overwrite``
snapshot that also removes the live files of every partition its files touch (the rules
are :mod:`icecommit.core.overwrite`'s).

It is the append operation of the commit protocol with one more step before each attempt:
on the table the attempt runs on, the conflict check (a data or delete file added, or a
data file deleted, in a touched partition by a snapshot after the table the checkpoint's
writers were given refuses the commit, never retried) and then the files to remove, read
from the branch head. The compare-and-swap requires that head, so the files removed are
exactly the live files of the touched partitions when the snapshot lands. Its key check,
lost-response search and lifecycle are the append's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyiceberg.manifest import DataFile, ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from icecommit.committer import protocol
from icecommit.committer.append import AppendCheckpoint
from icecommit.core import ancestry
from icecommit.core.errors import OverwriteConflictError, OverwriteSpansFileError
from icecommit.core.overwrite import (
    OVERWRITE_PARTITIONS,
    REPLACED_PARTITIONS,
    WRITE_MODE_PROPERTY,
    Values,
    may_hold,
    partition_label,
    partition_under,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Replacement:
    """What an overwrite attempt replaces: the touched partitions (current spec) and the
    live files in them."""

    partitions: frozenset[Values]
    files: tuple[DataFile, ...]


class OverwriteCheckpoint(AppendCheckpoint):
    """Committing one prepared checkpoint as one ``overwrite`` snapshot (see the module)."""

    def __init__(self, *args: Any, base_sequence_number: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.base_sequence_number = base_sequence_number
        self.replacement: Replacement | None = None

    def check(self, table: Table, number: int) -> protocol.Found | None:
        found = super().check(table, number)
        if found is not None:
            return found
        self.replacement = replacement(
            table, self.data_files, branch=self.branch, base_sequence_number=self.base_sequence_number,
            job_id=self.job_id, checkpoint_id=self.checkpoint, table_name=self.table_name,
        )  # fmt: skip
        self.replacing = list(self.replacement.files)
        self.summary = {
            **self.summary,
            WRITE_MODE_PROPERTY: OVERWRITE_PARTITIONS,
            REPLACED_PARTITIONS: str(len(self.replacement.partitions)),
        }
        return None


def replacement(
    table: Table,
    data_files: Sequence[DataFile],
    *,
    branch: str,
    base_sequence_number: int,
    job_id: str,
    checkpoint_id: int,
    table_name: str,
) -> Replacement:
    """The partitions ``data_files`` touch under the table's current spec and the live
    files of the branch head in them.

    Raises:
        OverwriteConflictError: a data or delete file live in a touched partition was added
            after ``base_sequence_number`` (its file sequence number), or a retained snapshot
            after it deleted a data file there.
        OverwriteSpansFileError: a file (live, or one of the checkpoint's, written under an
            older spec) may hold rows both inside and outside a touched partition.
    """
    metadata = table.metadata
    spec, specs, schema = metadata.spec(), metadata.specs(), metadata.schema()

    def spans(path: str, spec_id: int, label: str, *, own: bool) -> OverwriteSpansFileError:
        return OverwriteSpansFileError(
            job_id, checkpoint_id, table_name, path=path, spec_id=spec_id, partition=label, own=own
        )

    touched: set[Values] = set()
    for data_file in data_files:
        values = partition_under(data_file, specs, schema, spec)
        if values is None:  # written under an older spec than the table's now: its partition is not one of ours
            raise spans(data_file.file_path, data_file.spec_id, f"of spec {spec.spec_id} (its rows span several)",
                        own=True)  # fmt: skip
        touched.add(values)
    head = ancestry.branch_head(metadata, branch)
    if head is None or not touched:
        return Replacement(frozenset(touched), ())
    added_by = {s.sequence_number: s for s in metadata.snapshots if s.sequence_number is not None}

    def conflict(entry: ManifestEntry, partition: Values, snapshot: Snapshot | None, what: str) -> None:
        raise OverwriteConflictError(
            table_name, checkpoint_id, job_id, partition=partition_label(spec, schema, partition),
            snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
            by=ancestry.checkpoint_of(snapshot) if snapshot is not None else None, path=entry.data_file.file_path,
            what=what,
        )  # fmt: skip

    # a file live in the head that was added after the writers' table (by its sequence
    # number: that holds when the snapshot that added it has been expired since)
    replaced = []
    for manifest in head.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            found = entry.data_file
            values = partition_under(found, specs, schema, spec)
            matched = values if values in touched else may_hold(found, specs, schema, spec, touched)
            if matched is None:
                continue
            added = entry.file_sequence_number
            if added is not None and added > base_sequence_number:
                conflict(entry, matched, added_by.get(added), "added")
            if manifest.content != ManifestContent.DATA:
                continue  # delete files of replaced rows stay; they apply to no live row (see the docs)
            if values is None:  # an older spec's file whose rows lie inside and outside
                raise spans(found.file_path, found.spec_id, partition_label(spec, schema, matched), own=False)
            replaced.append(found)
    # a data file of a touched partition deleted after the writers' table (as far as the
    # retained snapshots tell: its rows are gone either way, none is dropped by the overwrite)
    for snapshot in ancestry.branch_ancestry(metadata, branch):
        if snapshot.sequence_number is None or snapshot.sequence_number <= base_sequence_number:
            break
        for manifest in snapshot.manifests(table.io):
            if manifest.added_snapshot_id != snapshot.snapshot_id or manifest.content != ManifestContent.DATA:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                if entry.snapshot_id == snapshot.snapshot_id and entry.status == ManifestEntryStatus.DELETED:
                    matched = may_hold(entry.data_file, specs, schema, spec, touched)
                    if matched is not None:
                        conflict(entry, matched, snapshot, "removed")
    return Replacement(frozenset(touched), tuple(replaced))


__all__ = ["OverwriteCheckpoint", "Replacement", "replacement"]
