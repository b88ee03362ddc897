"""What the deleting commands may touch: every file any table of the catalog (and any
prepared checkpoint) references, every table's location, and the listing of a table's
location through the table's own FileIO.

Paths are compared as :class:`icecommit.core.paths.StorageKey` values, never as strings, so
``file:/x`` (Java Iceberg), ``file:///x`` (pyiceberg) and ``/x`` are one file, and
percent-escapes are never decoded into path segments.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pyarrow.fs as pafs
from pyiceberg.catalog import Catalog
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from icecommit.core.completeness import marker_path
from icecommit.core.errors import UnreadableTablesError, UnsafeLocationError
from icecommit.core.paths import StorageKey, UnsupportedPathError, storage_key
from icecommit.state.checkpoints import ABANDONED, CheckpointStore
from icecommit.state.database import briefly, state_engine, state_uri
from icecommit.state.manifests import read_staged_manifest
from icecommit.state.partitions import PartitionStatusStore

logger = logging.getLogger(__name__)


def snapshot_files(table: Table, snapshot: Snapshot) -> set[str]:
    """Every file one snapshot needs: its manifest list, manifests and live data files."""
    files = {snapshot.manifest_list}
    for manifest in snapshot.manifests(table.io):
        files.add(manifest.manifest_path)
        files.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True))
    return files


def checkpoint_files(catalog: Catalog, table: Table, also: Iterable[tuple[str, int]] = ()) -> set[str]:
    """Staged manifests of every checkpoint in the state table, and the data files of the
    prepared and rolled-back ones, and of the (job, checkpoint) pairs in ``also`` (a
    prepared or rolled-back checkpoint's files are never orphans: it may still commit)."""
    store = CheckpointStore(state_engine(state_uri(catalog)))
    extra = set(also)
    files: set[str] = set()
    for state in store.list(".".join(table.name())):
        if state.keys_path is not None and state.status != ABANDONED:
            files.add(state.keys_path)  # an upsert's keys: needed again whenever it commits
        if state.manifest_path is None or state.status == ABANDONED:
            continue
        files.add(state.manifest_path)
        keep_data = not state.committed or (state.job_id, state.checkpoint_id) in extra
        if keep_data and table.io.new_input(state.manifest_path).exists():
            files.update(f.file_path for f in read_staged_manifest(table.io, state.manifest_path, table.spec().spec_id))
    return files


def union_of_snapshots(table: Table, snapshots: Iterable[Snapshot]) -> set[str]:
    files: set[str] = set()
    for snapshot in snapshots:
        files |= snapshot_files(table, snapshot)
    return files


def referenced_files(catalog: Catalog, table: Table) -> set[str]:
    """Every file a table needs: its metadata files, every snapshot's manifest list,
    manifests and data files, its statistics, its checkpoints' staged files, and the
    markers of its published partitions."""
    files = union_of_snapshots(table, table.metadata.snapshots) | checkpoint_files(catalog, table)
    files.add(table.metadata_location)
    files.update(entry.metadata_file for entry in table.metadata.metadata_log)
    files.update(s.statistics_path for s in table.metadata.statistics)
    name = ".".join(table.name())
    files.update(
        marker_path(table.metadata, s.label)
        for s in PartitionStatusStore(state_engine(state_uri(catalog))).statuses(name)
    )
    return files


def keys_of(paths: Iterable[str], table: str) -> set[StorageKey]:
    """Storage keys of paths; a path that cannot be compared safely refuses the command."""
    keys = set()
    for path in paths:
        try:
            keys.add(storage_key(path))
        except UnsupportedPathError as e:
            raise UnsafeLocationError(table, path, f"a referenced path cannot be compared safely: {e}") from e
    return keys


def catalog_table_names(catalog: Catalog) -> Iterator[str]:
    """Every table name of the catalog, in every namespace (nested ones included)."""
    pending = list(catalog.list_namespaces())
    seen: set[tuple[str, ...]] = set()
    while pending:
        namespace = tuple(pending.pop())
        if namespace in seen:
            continue
        seen.add(namespace)
        with contextlib.suppress(Exception):  # catalogs without nested namespaces say so their own way
            pending.extend(catalog.list_namespaces(namespace))
        for identifier in catalog.list_tables(namespace):
            yield ".".join(identifier)


def catalog_tables(catalog: Catalog) -> Iterator[tuple[str, Table]]:
    """Every table of the catalog, loaded, in every namespace (nested ones included)."""
    for name in catalog_table_names(catalog):
        yield name, catalog.load_table(name)


@dataclass(frozen=True)
class Footprint:
    """What the other tables of a catalog hold: their locations and referenced files, and
    which of them could not be read (name -> why; left out of the two others)."""

    locations: dict[str, StorageKey]
    referenced: frozenset[StorageKey]
    unreadable: dict[str, str] = field(default_factory=dict)

    def refuse_unreadable(self, table: str, action: str, ignore: Iterable[str] = ()) -> None:
        """Raise before a deletion that needs every other table's files, unless each
        unreadable one is named in ``ignore``.

        Raises:
            UnreadableTablesError: names the unreadable tables and the ways forward.
        """
        left = {name: why for name, why in self.unreadable.items() if name not in set(ignore)}
        if left:
            raise UnreadableTablesError(table, action, left)


def footprint_of_others(catalog: Catalog, name: str) -> Footprint:
    """The locations and referenced files of every table of the catalog but ``name``;
    a table that cannot be read (its metadata or a manifest gone, cut short or unreachable)
    is listed as unreadable instead of failing the whole footprint."""
    locations: dict[str, StorageKey] = {}
    referenced: set[StorageKey] = set()
    unreadable: dict[str, str] = {}
    for other in catalog_table_names(catalog):
        if other == name:
            continue
        try:
            table = catalog.load_table(other)
            location = keys_of([table.metadata.location], other).pop()
            files = keys_of(referenced_files(catalog, table), other)
        except UnsafeLocationError:
            raise
        except Exception as e:  # any failure to read it: it cannot vouch for its files
            unreadable[other] = briefly(e)
            continue
        locations[other] = location
        referenced |= files
    if unreadable:
        logger.warning("tables of the catalog that cannot be read: %s", ", ".join(sorted(unreadable)))
    return Footprint(locations, frozenset(referenced), unreadable)


def refuse_shared_location(name: str, root: StorageKey, others: Footprint) -> None:
    """Raise when another table's location is this location or lies inside it: a sweep or
    cleanup of this location would reach that table's files."""
    for other, location in sorted(others.locations.items()):
        if location == root or location.is_under(root):
            raise UnsafeLocationError(
                name, root.uri(), f"its location contains table {other}'s location ({location.uri()})"
            )


def refuse_foreign_stores(name: str, root: StorageKey, files: Iterable[StorageKey]) -> None:
    """Raise when the table references files in another file system than its location's
    (another scheme or authority): Iceberg's DeleteOrphanFiles refuses the same way."""
    for key in sorted(files):
        if not key.same_store(root):
            raise UnsafeLocationError(
                name,
                key.uri(),
                f"references a file outside its location's file system ({root.scheme}://{root.authority})",
            )


@dataclass(frozen=True)
class StoredFile:
    """A file found under a table's location."""

    key: StorageKey
    native_path: str
    size: int
    modified: datetime | None


def list_location(table: Table, name: str, root: StorageKey) -> tuple[pafs.FileSystem, list[StoredFile]]:
    """Every file under ``root``, listed through the table's own FileIO (its endpoint and
    credentials), with the path taken literally (never percent-decoded)."""
    if root.scheme == "file":
        filesystem: pafs.FileSystem = pafs.LocalFileSystem()
        base = root.path
    elif isinstance(table.io, PyArrowFileIO):
        filesystem = table.io.fs_by_scheme(root.scheme, root.authority)
        base = f"{root.authority}{root.path}"
    else:
        raise UnsafeLocationError(name, root.uri(), f"cannot list through {type(table.io).__name__}")
    found = []
    for info in filesystem.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        if root.scheme == "file":
            key = StorageKey("file", "", info.path if info.path.startswith("/") else "/" + info.path)
        else:
            key = StorageKey(root.scheme, root.authority, "/" + info.path.split("/", 1)[1])
        if not key.is_under(root):
            raise UnsafeLocationError(name, info.path, "the listing returned a file outside the location")
        modified = info.mtime
        if modified is not None and modified.tzinfo is None:
            modified = modified.replace(tzinfo=timezone.utc)
        found.append(StoredFile(key, info.path, info.size or 0, modified))
    return filesystem, found
