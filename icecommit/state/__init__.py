"""The committer's durable memory: checkpoints, accepted task attempts, checkpoint-tagged
counts, time-partition status and staged manifests, in SQL tables (SQLAlchemy).

Written by the committer and by the operations that change a checkpoint's fate (rollback,
abandon); read by everything else. Imports nothing above it (no committer, catalog,
metrics, writers or Spark).
"""

from icecommit.state.checkpoints import COMMITTED, PREPARED, CheckpointState, CheckpointStore, PublishCounters
from icecommit.state.database import dispose_state_engines, state_engine, state_uri
from icecommit.state.manifests import read_staged_manifest, staged_manifest_path, write_staged_manifest
from icecommit.state.partitions import PartitionStatus, PartitionStatusStore
from icecommit.state.samples import MetricSample, SourceRange

__all__ = [
    "COMMITTED",
    "PREPARED",
    "CheckpointState",
    "CheckpointStore",
    "MetricSample",
    "PartitionStatus",
    "PartitionStatusStore",
    "PublishCounters",
    "SourceRange",
    "dispose_state_engines",
    "read_staged_manifest",
    "staged_manifest_path",
    "state_engine",
    "state_uri",
    "write_staged_manifest",
]
