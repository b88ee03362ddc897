"""``overwrite-partitions``: the checkpoint's data files replace every partition they
touch, in one ``overwrite`` snapshot (the rules are :mod:`icecommit.core.overwrite`'s).

On the head an attempt runs on: the partitions the checkpoint's files touch under the
table's current spec; the conflict validators (a data or delete file added in a touched
partition after the table the checkpoint's writers were given, or a data file removed
there since, refuses the commit, never retried); then the live files of those partitions,
which the snapshot removes. The compare-and-swap requires that head, so the files removed
are exactly the live files of the touched partitions when the snapshot lands.
"""

from __future__ import annotations

from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from icecommit.committer.modes.planner import CheckpointBase, Planner
from icecommit.committer.table_changes import TableChanges
from icecommit.committer.validators import Validation, first_conflict, live_files
from icecommit.core import ancestry
from icecommit.core.errors import OverwriteConflictError, OverwriteSpansFileError
from icecommit.core.overwrite import (
    OVERWRITE_PARTITIONS,
    REPLACED_PARTITIONS,
    Values,
    may_hold,
    partition_label,
    partition_under,
)
from icecommit.core.write_modes import WRITE_MODE_PROPERTY


class PartitionOverwritePlanner(Planner):
    """Plans a partition overwrite (see the module)."""

    validations = frozenset({Validation.DATA_ADDED, Validation.DELETES_ADDED, Validation.DATA_REMOVED})

    def plan(self, head: Table, base: CheckpointBase) -> TableChanges:
        """Raises:
        OverwriteConflictError: a validator found a change since the writers' table in a
            touched partition.
        OverwriteSpansFileError: a file (live, or one of the checkpoint's, written under an
            older spec) may hold rows both inside and outside a touched partition.
        """
        metadata = head.metadata
        spec, specs, schema = metadata.spec(), metadata.specs(), metadata.schema()

        def spans(path: str, spec_id: int, label: str, *, own: bool) -> OverwriteSpansFileError:
            return OverwriteSpansFileError(
                base.job_id, base.checkpoint_id, base.table_name, path=path, spec_id=spec_id, partition=label, own=own
            )

        touched: set[Values] = set()
        for data_file in base.data_files:
            values = partition_under(data_file, specs, schema, spec)
            if values is None:  # written under an older spec than the table's now: its partition is not one of ours
                raise spans(data_file.file_path, data_file.spec_id, f"of spec {spec.spec_id} (its rows span several)",
                            own=True)  # fmt: skip
            touched.add(values)
        summary = {WRITE_MODE_PROPERTY: OVERWRITE_PARTITIONS, REPLACED_PARTITIONS: str(len(touched))}
        if ancestry.branch_head(metadata, base.branch) is None or not touched:
            return base.changes(replaces=True, summary=summary)

        def where(found: DataFile) -> Values | None:
            values = partition_under(found, specs, schema, spec)
            return values if values in touched else may_hold(found, specs, schema, spec, touched)

        live = live_files(head, base.branch)
        conflict = first_conflict(
            head, base.branch, since=base.sequence_number, where=where, validations=self.validations, live=live
        )
        if conflict is not None:
            snapshot = conflict.snapshot
            raise OverwriteConflictError(
                base.table_name, base.checkpoint_id, base.job_id,
                partition=partition_label(spec, schema, conflict.matched),  # type: ignore[arg-type]
                snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
                by=ancestry.checkpoint_of(snapshot) if snapshot is not None else None,
                path=conflict.data_file.file_path, what=conflict.validation.verb,
            )  # fmt: skip
        replaced = []
        for found in live:
            if found.is_delete:
                continue  # delete files of replaced rows stay; they apply to no live row (see the docs)
            matched = where(found.data_file)
            if matched is None:
                continue
            if partition_under(found.data_file, specs, schema, spec) is None:  # rows inside and outside
                raise spans(found.data_file.file_path, found.data_file.spec_id,
                            partition_label(spec, schema, matched), own=False)  # fmt: skip
            replaced.append(found.data_file)
        return base.changes(removed=tuple(replaced), replaces=True, summary=summary)


__all__ = ["PartitionOverwritePlanner"]
