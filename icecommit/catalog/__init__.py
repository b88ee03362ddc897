"""Catalog access: connecting the pyiceberg way, what a new table is and loading tables, and
read-only views of snapshots, checkpoints and partitions, and of a table's files (manifest
entries, position deletes, the snapshots that removed files, an upsert's keys in data
files). What changes a table after it was written lives in :mod:`icecommit.maintenance`."""

from icecommit.catalog.connect import connect
from icecommit.catalog.inspect import (
    CheckpointInfo,
    SnapshotInfo,
    list_checkpoints,
    list_snapshots,
    partition_status,
)
from icecommit.catalog.loading import load_table
from icecommit.catalog.tables import parse_transform, resolve_table
from icecommit.core.identifiers import table_name
from icecommit.state.home import icecommit_home

__all__ = [
    "CheckpointInfo",
    "SnapshotInfo",
    "connect",
    "icecommit_home",
    "list_checkpoints",
    "list_snapshots",
    "load_table",
    "parse_transform",
    "partition_status",
    "resolve_table",
    "table_name",
]
