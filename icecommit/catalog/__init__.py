"""Catalog access: connecting the pyiceberg way, creating and loading tables, and
read-only views of snapshots, checkpoints and partitions. What changes a table after it
was written lives in :mod:`icecommit.maintenance`."""

from icecommit.catalog.connect import connect
from icecommit.catalog.inspect import (
    CheckpointInfo,
    SnapshotInfo,
    list_checkpoints,
    list_snapshots,
    partition_status,
)
from icecommit.catalog.loading import load_table
from icecommit.catalog.tables import create_table, parse_transform, resolve_table
from icecommit.core.identifiers import table_name
from icecommit.core.settings import icecommit_home

__all__ = [
    "CheckpointInfo",
    "SnapshotInfo",
    "connect",
    "create_table",
    "icecommit_home",
    "list_checkpoints",
    "list_snapshots",
    "load_table",
    "parse_transform",
    "partition_status",
    "resolve_table",
    "table_name",
]
