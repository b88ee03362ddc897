"""Checkpoint state and metrics tables (SQLAlchemy)."""

from icecommit.metrics.checkpoints import (
    COMMITTED,
    PREPARED,
    CheckpointState,
    CheckpointStore,
    PublishCounters,
)
from icecommit.metrics.database import state_engine, state_uri

__all__ = [
    "COMMITTED",
    "PREPARED",
    "CheckpointState",
    "CheckpointStore",
    "PublishCounters",
    "state_engine",
    "state_uri",
]
