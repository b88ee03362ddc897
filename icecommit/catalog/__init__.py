"""Catalog access, table creation, and the operations behind the CLI (views, rollback,
expiry, orphan sweep), each returning typed results."""

from icecommit.catalog.abandon import abandon_checkpoint, acknowledge_checkpoint
from icecommit.catalog.connect import connect
from icecommit.catalog.inspect import (
    CheckpointInfo,
    SnapshotInfo,
    list_checkpoints,
    list_snapshots,
    partition_status,
    publish_complete_partitions,
)
from icecommit.catalog.maintenance import (
    ExpirePlan,
    OrphanFile,
    OrphanSweep,
    apply_expire,
    find_orphans,
    plan_expire,
)
from icecommit.catalog.rollback import RollbackPlan, apply_rollback, plan_rollback
from icecommit.catalog.tables import create_table, parse_transform, resolve_table
from icecommit.identifiers import table_name
from icecommit.settings import icecommit_home

__all__ = [
    "CheckpointInfo",
    "ExpirePlan",
    "OrphanFile",
    "OrphanSweep",
    "RollbackPlan",
    "SnapshotInfo",
    "abandon_checkpoint",
    "acknowledge_checkpoint",
    "apply_expire",
    "apply_rollback",
    "connect",
    "create_table",
    "find_orphans",
    "icecommit_home",
    "list_checkpoints",
    "list_snapshots",
    "parse_transform",
    "partition_status",
    "plan_expire",
    "plan_rollback",
    "publish_complete_partitions",
    "resolve_table",
    "table_name",
]
