"""Catalog access and table creation."""

from icecommit.catalog.connect import connect
from icecommit.catalog.inspect import CheckpointInfo, SnapshotInfo, list_checkpoints, list_snapshots
from icecommit.catalog.tables import create_table, parse_transform, resolve_table, table_name
from icecommit.settings import icecommit_home

__all__ = [
    "CheckpointInfo",
    "SnapshotInfo",
    "connect",
    "create_table",
    "icecommit_home",
    "list_checkpoints",
    "list_snapshots",
    "parse_transform",
    "resolve_table",
    "table_name",
]
