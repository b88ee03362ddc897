"""Durable staging of a checkpoint's data files as an Iceberg manifest (Avro)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    write_manifest,
)
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from icecommit.core.datafiles import DataFileRecord

#: The snapshot id stamped on staged entries; they are read back as data files only.
STAGED_SNAPSHOT_ID = 0
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def to_data_file(record: DataFileRecord, format_version: int) -> DataFile:
    """A pyiceberg DataFile from a task's record (its spec id set: ``from_args`` keeps it
    out of the struct, and a producer groups added files by it). A v1 table's file is
    built in the v2 layout, as pyiceberg builds its own: its accessors read fields by v2
    position and its v1 manifest writer projects from that layout (the v1 layout shifted
    every field by one, and writing a partitioned v1 table's manifest failed)."""
    data_file = DataFile.from_args(
        _table_format_version=max(format_version, 2),  # type: ignore[arg-type]
        content=DataFileContent.DATA,
        file_path=record.path,
        file_format=FileFormat.PARQUET,
        partition=Record(*record.partition),
        record_count=record.record_count,
        file_size_in_bytes=record.file_size_in_bytes,
        column_sizes=dict(record.column_sizes),
        value_counts=dict(record.value_counts),
        null_value_counts=dict(record.null_value_counts),
        nan_value_counts=dict(record.nan_value_counts),
        lower_bounds={k: bytes.fromhex(v) for k, v in record.lower_bounds.items()},
        upper_bounds={k: bytes.fromhex(v) for k, v in record.upper_bounds.items()},
        split_offsets=list(record.split_offsets),
        sort_order_id=None,
        spec_id=record.spec_id,
        equality_ids=None,
        key_metadata=None,
    )
    data_file.spec_id = record.spec_id
    return data_file


def staged_manifest_path(table: Table, job_id: str, checkpoint_id: int) -> str:
    """A new, unique location for a staged manifest under the table's metadata folder."""
    job = _UNSAFE.sub("_", job_id)[:64] or "job"
    name = f"icecommit-staged-{job}-{checkpoint_id:08d}-{uuid.uuid4().hex}.avro"
    return table.location_provider().new_metadata_location(name)


def write_staged_manifest(table: Table, path: str, records: Sequence[DataFileRecord]) -> None:
    """Write the checkpoint's data files into a manifest at ``path``."""
    spec = table.spec()
    version = table.metadata.format_version
    with write_manifest(
        format_version=version,
        spec=spec,
        schema=table.schema(),
        output_file=table.io.new_output(path),
        snapshot_id=STAGED_SNAPSHOT_ID,
        avro_compression="deflate",
    ) as writer:
        for record in records:
            writer.add(
                ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED,
                    snapshot_id=STAGED_SNAPSHOT_ID,
                    data_file=to_data_file(record, version),
                )
            )


def staged_spec_id(io: FileIO, path: str) -> int | None:
    """The partition spec a staged manifest was written under (its Avro header's
    ``partition-spec-id``), or None when the header does not say."""
    with io.new_input(path).open() as stream:
        head = stream.read()  # the header holds the schema first: a wide table's runs past any fixed prefix
    if head[:4] != b"Obj\x01":
        return None
    position = 4

    def varint() -> int:
        nonlocal position
        shift = value = 0
        while True:
            byte = head[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (value >> 1) ^ -(value & 1)

    def blob() -> bytes:
        nonlocal position
        size = varint()
        position += size
        return head[position - size : position]

    try:
        while (count := varint()) != 0:
            if count < 0:
                count = -count
                varint()  # the block's size in bytes
            for _ in range(count):
                key, value = blob().decode(), blob()
                if key == "partition-spec-id":
                    return int(value.decode())
    except (IndexError, ValueError, UnicodeDecodeError):
        return None
    return None


def read_staged_manifest(io: FileIO, path: str, spec_id: int) -> list[DataFile]:
    """The data files of a staged manifest (read under the spec it was written with, when
    its header says; ``spec_id`` otherwise)."""
    recorded = staged_spec_id(io, path)
    if recorded is not None:
        spec_id = recorded
    manifest = ManifestFile.from_args(
        manifest_path=path,
        manifest_length=len(io.new_input(path)),
        partition_spec_id=spec_id,
        content=ManifestContent.DATA,
        sequence_number=0,
        min_sequence_number=0,
        added_snapshot_id=STAGED_SNAPSHOT_ID,
    )
    return [entry.data_file for entry in manifest.fetch_manifest_entry(io, discard_deleted=True)]


def staged_keys_path(table: Table, job_id: str, checkpoint_id: int) -> str:
    """A new, unique location for an upsert checkpoint's staged keys (Parquet)."""
    job = _UNSAFE.sub("_", job_id)[:64] or "job"
    name = f"icecommit-staged-{job}-{checkpoint_id:08d}-{uuid.uuid4().hex}-keys.parquet"
    return table.location_provider().new_metadata_location(name)


def write_staged_keys(io: FileIO, path: str, keys: pa.Table) -> None:
    """Write an upsert's keys (one column per key column, one row per key) to ``path``."""
    with io.new_output(path).create(overwrite=False) as stream:
        pq.write_table(keys, stream)


def read_staged_keys(io: FileIO, path: str) -> pa.Table:
    """An upsert's staged keys, as written by :func:`write_staged_keys`."""
    with io.new_input(path).open() as stream:
        return pq.read_table(pa.BufferReader(stream.read()))
