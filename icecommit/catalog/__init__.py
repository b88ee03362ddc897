"""Catalog access and table creation."""

from icecommit.catalog.connect import connect, icecommit_home
from icecommit.catalog.inspect import CheckpointInfo, SnapshotInfo, list_checkpoints, list_snapshots
from icecommit.catalog.tables import create_table, parse_transform, resolve_table, table_name

__all__ = [
    "CheckpointInfo",
    "SnapshotInfo",
    "connect",
    "list_checkpoints",
    "list_snapshots", "create_table", "icecommit_home", "parse_transform", "resolve_table", "table_name"]
