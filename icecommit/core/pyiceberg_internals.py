"""pyiceberg's private names, in this one module and nowhere else in icecommit.

pyiceberg 0.12 has no public way to write a snapshot with one manifest per partition spec,
a ``replace`` snapshot or a delete manifest, to plan a scan with a manifest-entry filter,
or to convert an Arrow schema without field ids; icecommit uses its private classes,
functions and attributes for these. Each one is re-exported here under a public name, or
read through a small function, so that the next pyiceberg release is this file's work:
``tests/test_pyiceberg_internals.py`` lists every private name used here, checks that the
installed pyiceberg still has each, and that no other module of icecommit spells one.

The producer classes route the private hooks pyiceberg's commit calls (``_manifests``,
``_summary``, ``_existing_manifests``, ``_validate_concurrency``) to public methods, which
do what pyiceberg does until a subclass overrides them. Nothing here does I/O of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyiceberg.io.pyarrow import (
    PyArrowSchemaVisitor,
    _ConvertToIcebergWithoutIDs,
    _get_parquet_writer_kwargs,
)
from pyiceberg.manifest import ManifestWriterV2 as _ManifestWriterV2
from pyiceberg.partitioning import _to_partition_representation
from pyiceberg.table.update.snapshot import _MergeAppendFiles, _OverwriteFiles, _SnapshotProducer
from pyiceberg.table.update.validate import (
    _validate_data_files_exist,
    _validate_no_new_deletes_for_data_files,
)
from pyiceberg.typedef import EMPTY_DICT

if TYPE_CHECKING:
    from pyiceberg.avro.file import AvroFile, AvroFileHeader
    from pyiceberg.avro.reader import ListReader, MapReader
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile, ManifestEntry, ManifestFile
    from pyiceberg.schema import Schema
    from pyiceberg.table import DataScan, ManifestGroupPlanner, Table, Transaction
    from pyiceberg.table.snapshots import Operation, Summary
    from pyiceberg.table.update.snapshot import CommitWindow
    from pyiceberg.typedef import Properties
    from pyiceberg.types import IcebergType
    from requests import Session

__all__ = [
    "ManifestWriterV2",
    "MergeAppendFiles",
    "OverwriteFiles",
    "added_data_files",
    "arrow_to_iceberg_without_ids",
    "avro_header",
    "build_delete_files_partition_predicate",
    "commit_window",
    "deleted_data_files",
    "deleted_entries",
    "field_ids",
    "int_bytes_map",
    "int_int_map",
    "int_list",
    "manifest_planner",
    "parent_snapshot_id",
    "parquet_writer_kwargs",
    "partition_representation",
    "process_manifests",
    "producer_io",
    "producer_operation",
    "producer_transaction",
    "rest_endpoints",
    "rest_session",
    "transaction_table",
    "validate_data_files_exist",
    "validate_no_new_deletes_for_data_files",
]

#: ``pyiceberg.table.update.validate._validate_data_files_exist``.
validate_data_files_exist = _validate_data_files_exist
#: ``pyiceberg.table.update.validate._validate_no_new_deletes_for_data_files``.
validate_no_new_deletes_for_data_files = _validate_no_new_deletes_for_data_files


class _PublicHooks(_SnapshotProducer[Any]):
    """The commit hooks pyiceberg's producers share, under public names: pyiceberg calls its
    private hook, which calls the public method, which (unless a subclass overrides it) does
    what pyiceberg's own hook does. Mixed in before a pyiceberg producer class."""

    def _manifests(self) -> list[ManifestFile]:
        return self.snapshot_manifests()

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        return self.snapshot_summary(snapshot_properties)

    def _existing_manifests(self) -> list[ManifestFile]:
        return self.existing_manifests()

    def snapshot_manifests(self) -> list[ManifestFile]:
        """The manifests of the new snapshot (pyiceberg's ``_manifests``)."""
        return super()._manifests()

    def snapshot_summary(self, snapshot_properties: dict[str, str]) -> Summary:
        """The new snapshot's summary (pyiceberg's ``_summary``)."""
        return super()._summary(snapshot_properties)

    def existing_manifests(self) -> list[ManifestFile]:
        """The parent's manifests the new snapshot keeps (pyiceberg's ``_existing_manifests``)."""
        return super()._existing_manifests()  # type: ignore[safe-super]  # the producer mixed in has it


class MergeAppendFiles(_PublicHooks, _MergeAppendFiles):
    """pyiceberg's merge append (``_MergeAppendFiles``), its commit hooks under public names."""


class OverwriteFiles(_PublicHooks, _OverwriteFiles):
    """pyiceberg's overwrite (``_OverwriteFiles``), its commit hooks under public names."""

    def _validate_concurrency(self) -> None:
        self.validate_concurrency()

    def validate_concurrency(self) -> None:
        """Checks, on a retry, what committed meanwhile (pyiceberg's ``_validate_concurrency``)."""
        super()._validate_concurrency()


class ManifestWriterV2(_ManifestWriterV2):
    """pyiceberg's version 2 manifest writer, its key-value metadata (``_meta``) under a public name."""

    @property
    def _meta(self) -> dict[str, str]:
        return self.key_value_metadata

    @property
    def key_value_metadata(self) -> dict[str, str]:
        """The key-value metadata written into the manifest file (pyiceberg's ``_meta``)."""
        return super()._meta


def added_data_files(producer: _SnapshotProducer[Any]) -> list[DataFile]:
    """The data files the producer adds (``_added_data_files``)."""
    return producer._added_data_files


def deleted_data_files(producer: _SnapshotProducer[Any]) -> set[DataFile]:
    """The data files the producer removes (``_deleted_data_files``)."""
    return producer._deleted_data_files


def producer_transaction(producer: _SnapshotProducer[Any]) -> Transaction:
    """The transaction the producer commits into (``_transaction``)."""
    return producer._transaction


def producer_io(producer: _SnapshotProducer[Any]) -> FileIO:
    """The file IO the producer writes manifests with (``_io``)."""
    return producer._io


def producer_operation(producer: _SnapshotProducer[Any]) -> Operation:
    """The operation of the snapshot the producer makes (``_operation``)."""
    return producer._operation


def parent_snapshot_id(producer: _SnapshotProducer[Any]) -> int | None:
    """The snapshot the producer's snapshot follows (``_parent_snapshot_id``)."""
    return producer._parent_snapshot_id


def commit_window(producer: _SnapshotProducer[Any]) -> CommitWindow | None:
    """On a retry, the snapshots committed since the producer's base (``_commit_window``)."""
    return producer._commit_window


def process_manifests(producer: _SnapshotProducer[Any], manifests: list[ManifestFile]) -> list[ManifestFile]:
    """The producer's manifests as it writes them (merged, for a merge append; ``_process_manifests``)."""
    return producer._process_manifests(manifests)


def deleted_entries(producer: _SnapshotProducer[Any]) -> list[ManifestEntry]:
    """The entries of the files the producer removes, each checked live (``_deleted_entries``)."""
    return producer._deleted_entries()


def build_delete_files_partition_predicate(producer: _SnapshotProducer[Any]) -> None:
    """Prepares the producer's filter of the partitions it removes files from
    (``_build_delete_files_partition_predicate``)."""
    producer._build_delete_files_partition_predicate()


def transaction_table(transaction: Transaction) -> Table:
    """The table a transaction was begun on (``_table``)."""
    return transaction._table


def manifest_planner(scan: DataScan) -> ManifestGroupPlanner:
    """The scan's planner of manifests and files (``_manifest_planner``)."""
    return scan._manifest_planner


def parquet_writer_kwargs(properties: Properties) -> dict[str, Any]:
    """The Parquet writer's arguments that table properties ask for (``_get_parquet_writer_kwargs``)."""
    return _get_parquet_writer_kwargs(properties)


def partition_representation(field_type: IcebergType, value: Any) -> Any:
    """A partition value in Iceberg's internal form (``_to_partition_representation``)."""
    return _to_partition_representation(field_type, value)


def arrow_to_iceberg_without_ids() -> PyArrowSchemaVisitor[IcebergType | Schema]:
    """A visitor converting an Arrow schema whose fields have no ids (``_ConvertToIcebergWithoutIDs``)."""
    return _ConvertToIcebergWithoutIDs()


def field_ids(schema: Schema) -> set[int]:
    """The ids of every field of a schema, nested ones included (``_lazy_id_to_field``)."""
    return set(schema._lazy_id_to_field)


def int_int_map(reader: MapReader) -> bool:
    """Whether a map reader reads a map of ints to ints with its compiled reader (``_is_int_int``)."""
    return reader._is_int_int


def int_bytes_map(reader: MapReader) -> bool:
    """Whether a map reader reads a map of ints to bytes with its compiled reader (``_is_int_bytes``)."""
    return reader._is_int_bytes


def int_list(reader: ListReader) -> bool:
    """Whether a list reader reads a list of ints with its compiled reader (``_is_int_list``)."""
    return reader._is_int_list


def rest_session(catalog: RestCatalog) -> Session:
    """The HTTP session a REST catalog sends its requests with, its credentials set
    (``_session``): for the endpoints pyiceberg has no client for."""
    return catalog._session


def rest_endpoints(catalog: RestCatalog) -> set[str]:
    """The endpoints a REST server listed in its ``/v1/config`` (pyiceberg's defaults where
    it listed none), as ``METHOD /v1/{prefix}/path`` (``_supported_endpoints``)."""
    return {str(endpoint) for endpoint in catalog._supported_endpoints}


def avro_header(file: AvroFile[Any]) -> AvroFileHeader:
    """The header of an open Avro file, read from its decoder (``_read_header``)."""
    return file._read_header()
