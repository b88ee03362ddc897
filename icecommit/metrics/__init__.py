"""Checkpoint state, checkpoint-tagged metrics, and reconciliation reports (SQLAlchemy)."""

from icecommit.metrics.checkpoints import (
    COMMITTED,
    PREPARED,
    CheckpointState,
    CheckpointStore,
    MetricSample,
    PublishCounters,
)
from icecommit.metrics.database import state_engine, state_uri
from icecommit.metrics.reconcile import reconcile
from icecommit.metrics.report_model import (
    CheckpointLine,
    CommitHealth,
    Lag,
    Problem,
    ReconciliationReport,
    Thresholds,
    WindowLine,
)
from icecommit.metrics.runs import ReconcileRun, last_successful_run, record_run

__all__ = [
    "COMMITTED",
    "PREPARED",
    "CheckpointLine",
    "CheckpointState",
    "CheckpointStore",
    "CommitHealth",
    "Lag",
    "MetricSample",
    "Problem",
    "PublishCounters",
    "ReconcileRun",
    "ReconciliationReport",
    "Thresholds",
    "WindowLine",
    "last_successful_run",
    "reconcile",
    "record_run",
    "state_engine",
    "state_uri",
]
