"""icecommit's own snapshot producers: every added file keeps its partition spec.

pyiceberg 0.12 writes all files added by an append into one manifest under the table's
current spec, so a checkpoint prepared before a partition spec change would have its
partition tuples read under the new spec (wrong values, or an ``IndexError``). Iceberg
allows data files of several specs in one snapshot, one manifest per spec: this producer
writes the added files that way, and computes the snapshot's partition summaries with each
file's own spec. Existing manifests are kept or merged exactly as pyiceberg's merge append
does (its merge manager already groups manifests by spec).

pyiceberg 0.12 has no ``replace`` operation at all (its summaries refuse one); the
:class:`RewriteFiles` producer makes Iceberg's ``replace`` snapshot, which swaps data files
for others holding the same rows (compaction), summarised like an overwrite; the
:class:`OverwriteFiles` producer makes the ``overwrite`` snapshot of a partition overwrite
(the files it replaces leave, the checkpoint's join, each under its own spec).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from pyiceberg.exceptions import ValidationException
from pyiceberg.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.table import TableProperties
from pyiceberg.table.snapshots import Operation, SnapshotSummaryCollector, Summary, update_snapshot_summaries

from icecommit.committer.validators import Validation, require_rewritable
from icecommit.core import pyiceberg_internals as internals
from icecommit.core.pyiceberg_internals import (
    added_data_files,
    build_delete_files_partition_predicate,
    commit_window,
    deleted_data_files,
    deleted_entries,
    parent_snapshot_id,
    process_manifests,
    producer_io,
    producer_operation,
    producer_transaction,
    transaction_table,
)

if TYPE_CHECKING:
    from pyiceberg.table import Transaction


P = TypeVar("P", "SpecPreservingAppend", "RewriteFiles", "OverwriteFiles")


def _producer(
    cls: type[P], operation: Operation, transaction: Transaction, branch: str | None, properties: dict[str, str]
) -> P:
    """A producer of ``cls`` for one transaction (use it as a context manager)."""
    return cls(
        operation=operation,
        transaction=transaction,
        io=transaction_table(transaction).io,
        branch=branch,
        snapshot_properties=properties,
    )


def _added_manifests(
    producer: internals.MergeAppendFiles | internals.OverwriteFiles, data_sequence_number: int | None = None
) -> list[ManifestFile]:
    """The producer's added files, one manifest per partition spec id (newest spec first),
    with an explicit data sequence number where one is given (else the snapshot's)."""
    by_spec: dict[int, list[DataFile]] = defaultdict(list)
    for data_file in added_data_files(producer):
        by_spec[data_file.spec_id].append(data_file)
    manifests = []
    for spec_id in sorted(by_spec, reverse=True):
        with producer.new_manifest_writer(spec=producer.spec(spec_id)) as writer:
            for data_file in by_spec[spec_id]:
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED,
                        snapshot_id=producer.snapshot_id,
                        sequence_number=data_sequence_number,
                        file_sequence_number=None,
                        data_file=data_file,
                    )
                )
        manifests.append(writer.to_manifest_file())
    return manifests


def _summary(
    producer: internals.MergeAppendFiles | internals.OverwriteFiles,
    operation: Operation,
    snapshot_properties: dict[str, str],
) -> Summary:
    """The snapshot summary, each added and removed file summarised under its own spec."""
    metadata = producer_transaction(producer).table_metadata
    schema = metadata.schema()
    specs = metadata.specs()
    limit = int(
        metadata.properties.get(
            TableProperties.WRITE_PARTITION_SUMMARY_LIMIT, TableProperties.WRITE_PARTITION_SUMMARY_LIMIT_DEFAULT
        )
    )
    collector = SnapshotSummaryCollector(partition_summary_limit=limit)
    for data_file in added_data_files(producer):
        collector.add_file(data_file=data_file, partition_spec=specs[data_file.spec_id], schema=schema)
    for delete_file in getattr(producer, "_added_delete_files", ()):
        collector.add_file(data_file=delete_file, partition_spec=specs[delete_file.spec_id], schema=schema)
    for data_file in (*deleted_data_files(producer), *getattr(producer, "_removed_delete_files", ())):
        collector.remove_file(data_file=data_file, partition_spec=specs[data_file.spec_id], schema=schema)
    parent_id = parent_snapshot_id(producer)
    parent = metadata.snapshot_by_id(parent_id) if parent_id is not None else None
    # pyiceberg totals only appends, overwrites and deletes; a replace's totals move the same way
    totals = update_snapshot_summaries(
        summary=Summary(
            operation=Operation.OVERWRITE if operation == Operation.REPLACE else operation,
            **collector.build(),
            **snapshot_properties,
        ),
        previous_summary=parent.summary if parent is not None else None,
    )
    return Summary(operation=operation, **totals.additional_properties)


class _DeleteManifestWriter(internals.ManifestWriterV2):
    """A version 2 manifest of delete files (pyiceberg 0.12 writes data manifests only)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def key_value_metadata(self) -> dict[str, str]:
        return {**super().key_value_metadata, "content": "deletes"}


def _delete_manifest(
    producer: internals.MergeAppendFiles | internals.OverwriteFiles, spec_id: int, entries: Sequence[ManifestEntry]
) -> ManifestFile:
    """One delete manifest of ``entries`` under spec ``spec_id``."""
    writer = _DeleteManifestWriter(
        producer.spec(spec_id), producer.schema(), producer.new_manifest_output(), producer.snapshot_id, "deflate"
    )
    with writer:
        for entry in entries:
            writer.add_entry(entry)
    return writer.to_manifest_file()


class SpecPreservingAppend(internals.MergeAppendFiles):
    """A merge append (operation ``append``) that writes one added-files manifest per
    partition spec id of the files it adds. With ``deletes`` (an upsert's position delete
    files, format version 2), a row delta (operation ``overwrite``) that also adds them, in
    one delete manifest per spec. Use as ``with SpecPreservingAppend.of(tx, ...)``."""

    _added_delete_files: tuple[DataFile, ...] = ()

    @classmethod
    def of(
        cls,
        transaction: Transaction,
        *,
        branch: str | None,
        snapshot_properties: dict[str, str],
        deletes: Sequence[DataFile] = (),
    ) -> SpecPreservingAppend:
        operation = Operation.OVERWRITE if deletes else Operation.APPEND
        producer = _producer(cls, operation, transaction, branch, snapshot_properties)
        producer._added_delete_files = tuple(deletes)
        return producer

    def snapshot_manifests(self) -> list[ManifestFile]:
        # the added data manifests first (the merge manager treats the first manifest as the
        # new one), then the parent's; delete manifests are never merged into data ones
        return process_manifests(self, self._added_manifests() + self._delete_manifests() + self.existing_manifests())

    def _added_manifests(self) -> list[ManifestFile]:
        return _added_manifests(self)

    def _delete_manifests(self) -> list[ManifestFile]:
        by_spec: dict[int, list[ManifestEntry]] = defaultdict(list)
        for delete_file in self._added_delete_files:
            by_spec[delete_file.spec_id].append(
                ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED, snapshot_id=self.snapshot_id, data_file=delete_file
                )
            )
        return [_delete_manifest(self, spec_id, entries) for spec_id, entries in sorted(by_spec.items())]

    def snapshot_summary(self, snapshot_properties: dict[str, str]) -> Summary:
        # a row delta that only deletes is a ``delete`` snapshot (as Iceberg's RowDelta makes it)
        only_deletes = self._added_delete_files and not added_data_files(self)
        return _summary(self, Operation.DELETE if only_deletes else producer_operation(self), snapshot_properties)


class RewriteFiles(internals.OverwriteFiles):
    """A ``replace`` snapshot: the files given to :meth:`delete_data_file` leave the table,
    the files given to :meth:`append_data_file` (holding the same rows) join it, each under
    its own spec. Every file to delete must be live in the branch head, or the commit
    fails (``ValidationException``) and nothing changes.

    With ``data_sequence_number`` (Iceberg's ``RewriteFiles.dataSequenceNumber``), the
    added files take the sequence number of the snapshot the rewrite started from, so that
    equality deletes committed after it still apply to the rewritten rows.

    With ``removed_deletes``, those position delete files leave the table too (a
    compaction that applied them: every data file they point at is rewritten); each must
    be live in the branch head, or the commit fails and nothing changes.

    Use as ``with RewriteFiles.of(tx, ...) as rewrite:``."""

    #: what a retry must find unchanged since the snapshot the rewrite read (Iceberg's rules)
    validations: frozenset[Validation] = frozenset({Validation.DATA_REMOVED, Validation.DELETES_ADDED})
    _data_sequence_number: int | None = None
    _removed_delete_files: tuple[DataFile, ...] = ()

    @classmethod
    def of(
        cls,
        transaction: Transaction,
        *,
        branch: str | None,
        snapshot_properties: dict[str, str],
        data_sequence_number: int | None = None,
        removed_deletes: Sequence[DataFile] = (),
    ) -> RewriteFiles:
        producer = _producer(cls, Operation.REPLACE, transaction, branch, snapshot_properties)
        if data_sequence_number is not None and transaction.table_metadata.format_version >= 2:
            producer._data_sequence_number = data_sequence_number
        producer._removed_delete_files = tuple(removed_deletes)
        return producer

    def snapshot_manifests(self) -> list[ManifestFile]:
        build_delete_files_partition_predicate(self)
        leaving = deleted_entries(self)  # validates that every file to delete is live
        by_spec: dict[int, list[ManifestEntry]] = defaultdict(list)
        for entry in leaving:
            by_spec[entry.data_file.spec_id].append(entry)
        deleted = []
        for spec_id, entries in sorted(by_spec.items()):
            with self.new_manifest_writer(self.spec(spec_id)) as writer:
                for entry in entries:
                    writer.add_entry(entry)
            deleted.append(writer.to_manifest_file())
        return process_manifests(
            self, _added_manifests(self, self._data_sequence_number) + deleted + self.existing_manifests()
        )

    def existing_manifests(self) -> list[ManifestFile]:
        """The parent's manifests without the removed files: pyiceberg's for data files; a
        delete manifest that lists a removed delete file is written again without it, and
        the removed ones are listed as deleted in a delete manifest of their own."""
        kept = super().existing_manifests()
        gone = {f.file_path for f in self._removed_delete_files}
        if not gone:
            return kept
        manifests = []
        removed: dict[int, list[ManifestEntry]] = defaultdict(list)
        for manifest in kept:
            if manifest.content != ManifestContent.DELETES:
                manifests.append(manifest)
                continue
            entries = manifest.fetch_manifest_entry(producer_io(self), discard_deleted=True)
            if not any(e.data_file.file_path in gone for e in entries):
                manifests.append(manifest)
                continue
            rest = [e for e in entries if e.data_file.file_path not in gone]
            if rest:
                manifests.append(
                    _delete_manifest(
                        self,
                        manifest.partition_spec_id,
                        [_as(e, e.snapshot_id, ManifestEntryStatus.EXISTING) for e in rest],
                    )
                )
            removed[manifest.partition_spec_id].extend(
                _as(e, self.snapshot_id, ManifestEntryStatus.DELETED) for e in entries if e.data_file.file_path in gone
            )
        found = {e.data_file.file_path for entries in removed.values() for e in entries}
        if missing := sorted(gone - found):
            raise ValidationException(f"delete file {missing[0]} is no longer live; it cannot be removed")
        manifests.extend(_delete_manifest(self, spec_id, entries) for spec_id, entries in sorted(removed.items()))
        return manifests

    def snapshot_summary(self, snapshot_properties: dict[str, str]) -> Summary:
        return _summary(self, Operation.REPLACE, snapshot_properties)

    def validate_concurrency(self) -> None:
        """Iceberg's ``RewriteFiles`` rules when a retry finds other commits: the files it
        replaces must still be live and no delete file may have been added against them;
        data files appended meanwhile (into the same partitions too) do not conflict."""
        window = commit_window(self)
        leaving = deleted_data_files(self)
        if window is None or window.is_empty() or window.head is None or not leaving:
            return
        table = transaction_table(producer_transaction(self))
        require_rewritable(table, window.head, window.base, leaving, self.validations)


def _as(entry: ManifestEntry, snapshot_id: int | None, status: ManifestEntryStatus) -> ManifestEntry:
    """A copy of a manifest entry with another status and snapshot, its sequence numbers kept."""
    return ManifestEntry.from_args(
        status=status,
        snapshot_id=snapshot_id,
        sequence_number=entry.sequence_number,
        file_sequence_number=entry.file_sequence_number,
        data_file=entry.data_file,
    )


class OverwriteFiles(RewriteFiles):
    """An ``overwrite`` snapshot: the files given to :meth:`delete_data_file` (the live files
    of the partitions a checkpoint replaces) leave the table and the checkpoint's files join
    it, each under its own spec. The committer checks conflicts itself before each attempt
    (:mod:`icecommit.core.overwrite`); every file to delete must still be live in the branch
    head, or the commit fails and nothing changes.

    Use as ``with OverwriteFiles.of(tx, ...) as overwrite:``."""

    @classmethod
    def of(  # type: ignore[override]
        cls, transaction: Transaction, *, branch: str | None, snapshot_properties: dict[str, str]
    ) -> OverwriteFiles:
        return _producer(cls, Operation.OVERWRITE, transaction, branch, snapshot_properties)

    def snapshot_summary(self, snapshot_properties: dict[str, str]) -> Summary:
        return _summary(self, Operation.OVERWRITE, snapshot_properties)

    def validate_concurrency(self) -> None:
        return None  # an attempt runs on one branch head, checked by the committer before it
