"""icecommit: land data from parallel Spark writers into Apache Iceberg tables exactly once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from icecommit.catalog import connect
from icecommit.catalog.event_time_versions import EventTimeVersion, scan_at_event_time, snapshot_at_event_time
from icecommit.catalog.multi_table import consistent_cut
from icecommit.committer import (
    CommitResult,
    GlobalCommitter,
    PartitionCompleteness,
    RetryPolicy,
    RoutedCommitResult,
    publish_complete_partitions,
)
from icecommit.committer.release import discard_checkpoint as discard
from icecommit.committer.release import publish_checkpoint as publish
from icecommit.committer.table_creation import create_table
from icecommit.core.cuts import Cut
from icecommit.core.datafiles import DataFileRecord, WriteResult
from icecommit.core.errors import (
    CheckpointHeldError,
    CheckpointNotFoundError,
    CheckpointRolledBackError,
    CommitConflictError,
    CommitStateUnknownError,
    CompletenessNotReachedError,
    IcecommitError,
    SchemaMismatchError,
    SnapshotNotFoundError,
    TableSpecError,
    UnroutedRecordsError,
    ValidationError,
)
from icecommit.core.extras import lazily
from icecommit.metrics import ReconciliationReport, Thresholds, reconcile

if TYPE_CHECKING:
    from icecommit.maintenance.compaction import compact, plan_compaction
    from icecommit.maintenance.policy import MaintenancePolicy, MaintenanceRun, maintain
    from icecommit.options import WriteOptions
    from icecommit.pipeline import write, write_many
    from icecommit.streaming import streaming_sink

__version__ = "0.1.0"

#: Names that need Spark; they are imported on first use, so that the committer, the
#: catalog commands and schedulers can ``import icecommit`` without loading pyspark.
_SPARK_NAMES = {
    "write": "icecommit.pipeline",
    "write_many": "icecommit.pipeline",
    "streaming_sink": "icecommit.streaming",
    # compaction runs in the local process, but its writer lives beside the Spark tasks'
    "compact": "icecommit.maintenance.compaction",
    "plan_compaction": "icecommit.maintenance.compaction",
    "MaintenancePolicy": "icecommit.maintenance.policy",
    "MaintenanceRun": "icecommit.maintenance.policy",
    "maintain": "icecommit.maintenance.policy",
    "WriteOptions": "icecommit.options",
}


def __getattr__(name: str) -> Any:
    module = _SPARK_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'icecommit' has no attribute {name!r}")
    return lazily(module, name, f"icecommit.{name}")


def __dir__() -> list[str]:
    """The public API only (not the submodules and names imported to re-export)."""
    return sorted(__all__)


__all__ = [
    "CheckpointHeldError",
    "CheckpointNotFoundError",
    "CheckpointRolledBackError",
    "CommitConflictError",
    "CommitResult",
    "CommitStateUnknownError",
    "CompletenessNotReachedError",
    "Cut",
    "DataFileRecord",
    "EventTimeVersion",
    "GlobalCommitter",
    "IcecommitError",
    "MaintenancePolicy",
    "MaintenanceRun",
    "PartitionCompleteness",
    "ReconciliationReport",
    "RetryPolicy",
    "RoutedCommitResult",
    "SchemaMismatchError",
    "SnapshotNotFoundError",
    "TableSpecError",
    "Thresholds",
    "UnroutedRecordsError",
    "ValidationError",
    "WriteOptions",
    "WriteResult",
    "__version__",
    "compact",
    "connect",
    "consistent_cut",
    "create_table",
    "discard",
    "maintain",
    "plan_compaction",
    "publish",
    "publish_complete_partitions",
    "reconcile",
    "scan_at_event_time",
    "snapshot_at_event_time",
    "streaming_sink",
    "write",
    "write_many",
]
