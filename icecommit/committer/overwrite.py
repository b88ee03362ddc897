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

from pyiceberg.manifest import DataFile, ManifestContent, ManifestEntryStatus
from pyiceberg.table import Table

from icecommit.committer import protocol
from icecommit.committer.append import AppendCheckpoint
from icecommit.core import ancestry
from icecommit.core.errors import OverwriteConflictError, OverwriteSpansFileError
from icecommit.core.overwrite import (
    FEATURE_OVERWRITE_PARTITIONS,
    OVERWRITE_PARTITIONS,
    REPLACED_PARTITIONS,
    WRITE_MODE_PROPERTY,
    Values,
    may_hold,
    partition_label,
    partition_under,
)
from icecommit.state.checkpoints import CheckpointState

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


def checkpoint_operation(state: CheckpointState, *args: Any, **kwargs: Any) -> AppendCheckpoint:
    """The operation that commits prepared checkpoint ``state``: its partition overwrite
    when it recorded that feature, else its append (arguments: the append's)."""
    if FEATURE_OVERWRITE_PARTITIONS in state.features and state.base_sequence_number is not None:
        return OverwriteCheckpoint(*args, base_sequence_number=state.base_sequence_number, **kwargs)
    return AppendCheckpoint(*args, **kwargs)


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
        OverwriteConflictError: a snapshot after ``base_sequence_number`` added a data or
            delete file to a touched partition, or deleted a data file there.
        OverwriteSpansFileError: a file (live, or one of the checkpoint's, written under an
            older spec) may hold rows both inside and outside a touched partition.
    """
    metadata = table.metadata
    spec, specs, schema = metadata.spec(), metadata.specs(), metadata.schema()

    def spans(path: str, spec_id: int, label: str) -> OverwriteSpansFileError:
        return OverwriteSpansFileError(job_id, checkpoint_id, table_name, path=path, spec_id=spec_id, partition=label)

    touched: set[Values] = set()
    for data_file in data_files:
        values = partition_under(data_file, specs, schema, spec)
        if values is None:
            raise spans(data_file.file_path, data_file.spec_id, f"of spec {spec.spec_id} (its rows span several)")
        touched.add(values)
    head = ancestry.branch_head(metadata, branch)
    if head is None or not touched:
        return Replacement(frozenset(touched), ())
    for snapshot in ancestry.branch_ancestry(metadata, branch):
        if snapshot.sequence_number is None or snapshot.sequence_number <= base_sequence_number:
            break
        for manifest in snapshot.manifests(table.io):
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                if entry.snapshot_id != snapshot.snapshot_id or entry.status == ManifestEntryStatus.EXISTING:
                    continue
                found = entry.data_file
                if not may_hold(found, specs, schema, spec, touched):
                    continue
                values = partition_under(found, specs, schema, spec)
                raise OverwriteConflictError(
                    table_name, checkpoint_id, job_id,
                    partition=partition_label(spec, schema, values if values in touched else min(touched, key=repr)),
                    snapshot_id=snapshot.snapshot_id, by=ancestry.checkpoint_of(snapshot), path=found.file_path,
                )  # fmt: skip
    replaced = []
    for manifest in head.manifests(table.io):
        if manifest.content != ManifestContent.DATA:
            continue  # delete files of replaced rows stay; they apply to no live row (see the docs)
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            found = entry.data_file
            values = partition_under(found, specs, schema, spec)
            if values in touched:
                replaced.append(found)
            elif values is None and may_hold(found, specs, schema, spec, touched):
                raise spans(found.file_path, found.spec_id, partition_label(spec, schema, min(touched, key=repr)))
    return Replacement(frozenset(touched), tuple(replaced))


__all__ = ["OverwriteCheckpoint", "Replacement", "checkpoint_operation", "replacement"]
