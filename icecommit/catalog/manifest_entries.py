"""A manifest's entries as the few facts icecommit's read paths use, decoded fast.

Reconciliation, orphan sweeps and lineage need of each manifest entry only its status,
the snapshot that added the file, its data sequence number, the file's content kind, path
and record count. pyiceberg's :meth:`ManifestFile.fetch_manifest_entry` decodes every
field, the per-column statistics maps included, into full objects: on a table of 100,000
data files that was most of a reconciliation's time. This module reads the same Avro
files with a projection (pyiceberg's own decoder and schema resolution, with the fields
not asked for skipped: maps and lists of integers are skipped with the same compiled
routines that read them) and applies the inheritance rules of the Iceberg spec that
``fetch_manifest_entry`` applies: an entry without a snapshot id takes the manifest's,
and an ADDED entry without a sequence number takes the manifest's (as does every entry
of a v1 manifest, whose sequence number is 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyiceberg.avro.decoder import new_decoder
from pyiceberg.avro.file import AvroFile
from pyiceberg.avro.reader import ListReader, MapReader, OptionReader, Reader
from pyiceberg.avro.resolver import ReadSchemaResolver, SchemaPartnerAccessor
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    MANIFEST_ENTRY_SCHEMAS,
    DataFileContent,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.schema import Schema, visit_with_partner
from pyiceberg.types import IcebergType, ListType, MapType

from icecommit.core.pyiceberg_internals import avro_header, int_bytes_map, int_int_map, int_list

#: The projection read: entry status, snapshot id, data sequence number, and of the data
#: file its content kind, path and record count (positions below follow this order).
_PROJECTION: Schema = MANIFEST_ENTRY_SCHEMAS[DEFAULT_READ_VERSION].select(
    "status", "snapshot_id", "sequence_number", "data_file.content", "data_file.file_path", "data_file.record_count"
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One manifest entry, after inheritance from its manifest."""

    status: ManifestEntryStatus
    snapshot_id: int | None
    sequence_number: int | None
    content: DataFileContent
    file_path: str
    record_count: int

    @property
    def live(self) -> bool:
        return self.status != ManifestEntryStatus.DELETED


class _SkipMap(MapReader):
    """A map reader whose skip of an int-keyed map of ints or bytes is the compiled read
    (pyiceberg's generic skip steps through every key and value in Python)."""

    def skip(self, decoder: Any) -> None:
        if int_int_map(self) or int_bytes_map(self):
            self.read(decoder)
        else:
            super().skip(decoder)


class _SkipList(ListReader):
    def skip(self, decoder: Any) -> None:
        if int_list(self):
            self.read(decoder)
        else:
            super().skip(decoder)


class _Resolver(ReadSchemaResolver):
    def map(
        self, map_type: MapType, expected_map: IcebergType | None, key_reader: Reader, value_reader: Reader
    ) -> Reader:
        return _SkipMap(key_reader, value_reader if map_type.value_required else OptionReader(value_reader))

    def list(self, list_type: ListType, expected_list: IcebergType | None, element_reader: Reader) -> Reader:
        return _SkipList(element_reader if list_type.element_required else OptionReader(element_reader))


class _Partners(SchemaPartnerAccessor):
    """Lets a map or list of the file that the projection leaves out be skipped (the
    stock accessor refuses a projection without them), and a struct left out (the
    partition tuple) be skipped field by field."""

    def field_partner(self, partner: IcebergType | None, field_id: int, field_name: str) -> IcebergType | None:
        return None if partner is None else super().field_partner(partner, field_id, field_name)

    def map_key_partner(self, partner_map: IcebergType | None) -> IcebergType | None:
        return None if partner_map is None else super().map_key_partner(partner_map)

    def map_value_partner(self, partner_map: IcebergType | None) -> IcebergType | None:
        return None if partner_map is None else super().map_value_partner(partner_map)

    def list_element_partner(self, partner_list: IcebergType | None) -> IcebergType | None:
        return None if partner_list is None else super().list_element_partner(partner_list)


class _ProjectedAvroFile(AvroFile[Any]):
    def __enter__(self) -> _ProjectedAvroFile:
        with self.input_file.open() as f:
            self.decoder = new_decoder(f.read())
        self.header = avro_header(self)
        self.schema = self.header.get_schema()
        self.reader = visit_with_partner(self.schema, _PROJECTION, _Resolver(), _Partners())  # type: ignore[misc]
        return self


def read_entries(io: FileIO, manifest: ManifestFile, *, discard_deleted: bool = True) -> list[Entry]:
    """The entries of one manifest (DELETED ones left out unless ``discard_deleted`` is
    False), with snapshot id and sequence number inherited as the spec says."""
    entries = []
    manifest_sequence = manifest.sequence_number
    added_by = manifest.added_snapshot_id
    with _ProjectedAvroFile(io.new_input(manifest.manifest_path)) as reader:
        for record in reader:
            status = ManifestEntryStatus(record[0])
            if discard_deleted and status == ManifestEntryStatus.DELETED:
                continue
            snapshot_id = record[1] if record[1] is not None else added_by
            sequence = record[2]
            if sequence is None and (manifest_sequence == 0 or status == ManifestEntryStatus.ADDED):
                sequence = manifest_sequence
            data_file = record[3]
            content = DataFileContent(data_file[0]) if data_file[0] is not None else DataFileContent.DATA
            entries.append(Entry(status, snapshot_id, sequence, content, data_file[1], data_file[2]))
    return entries


__all__ = ["Entry", "read_entries"]
