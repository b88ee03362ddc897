"""icecommit's own append snapshot producer: every added file keeps its partition spec.

pyiceberg 0.12 writes all files added by an append into one manifest under the table's
current spec, so a checkpoint prepared before a partition spec change would have its
partition tuples read under the new spec (wrong values, or an ``IndexError``). Iceberg
allows data files of several specs in one snapshot, one manifest per spec: this producer
writes the added files that way, and computes the snapshot's partition summaries with each
file's own spec. Existing manifests are kept or merged exactly as pyiceberg's merge append
does (its merge manager already groups manifests by spec).
"""

from __future__ import annotations

from collections import defaultdict

from pyiceberg.manifest import DataFile, ManifestEntry, ManifestEntryStatus, ManifestFile
from pyiceberg.table import TableProperties
from pyiceberg.table.snapshots import Operation, SnapshotSummaryCollector, Summary, update_snapshot_summaries
from pyiceberg.table.update.snapshot import _MergeAppendFiles
from pyiceberg.typedef import EMPTY_DICT


class SpecPreservingAppend(_MergeAppendFiles):
    """A merge append (operation ``append``) that writes one added-files manifest per
    partition spec id of the files it adds. Use as ``with SpecPreservingAppend.of(tx, ...)``."""

    @classmethod
    def of(cls, transaction, *, branch: str | None, snapshot_properties: dict[str, str]) -> SpecPreservingAppend:  # type: ignore[no-untyped-def]
        return cls(
            operation=Operation.APPEND,
            transaction=transaction,
            io=transaction._table.io,
            branch=branch,
            snapshot_properties=snapshot_properties,
        )

    def _manifests(self) -> list[ManifestFile]:
        # an append deletes nothing: the added manifests first (the merge manager treats
        # the first manifest as the new one), then the parent's
        return self._process_manifests(self._added_manifests() + self._existing_manifests())

    def _added_manifests(self) -> list[ManifestFile]:
        by_spec: dict[int, list[DataFile]] = defaultdict(list)
        for data_file in self._added_data_files:
            by_spec[data_file.spec_id].append(data_file)
        manifests = []
        for spec_id in sorted(by_spec, reverse=True):  # the newest spec's manifest first
            with self.new_manifest_writer(spec=self.spec(spec_id)) as writer:
                for data_file in by_spec[spec_id]:
                    writer.add(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=None,
                            file_sequence_number=None,
                            data_file=data_file,
                        )
                    )
            manifests.append(writer.to_manifest_file())
        return manifests

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        metadata = self._transaction.table_metadata
        schema = metadata.schema()
        specs = metadata.specs()
        limit = int(
            metadata.properties.get(
                TableProperties.WRITE_PARTITION_SUMMARY_LIMIT, TableProperties.WRITE_PARTITION_SUMMARY_LIMIT_DEFAULT
            )
        )
        collector = SnapshotSummaryCollector(partition_summary_limit=limit)
        for data_file in self._added_data_files:
            collector.add_file(data_file=data_file, partition_spec=specs[data_file.spec_id], schema=schema)
        parent = metadata.snapshot_by_id(self._parent_snapshot_id) if self._parent_snapshot_id is not None else None
        return update_snapshot_summaries(
            summary=Summary(operation=self._operation, **collector.build(), **snapshot_properties),
            previous_summary=parent.summary if parent is not None else None,
        )
