"""Checkpoint-tagged metrics read from the committer's state, and reconciliation reports."""

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
    "CheckpointLine",
    "CommitHealth",
    "Lag",
    "Problem",
    "ReconcileRun",
    "ReconciliationReport",
    "Thresholds",
    "WindowLine",
    "last_successful_run",
    "reconcile",
    "record_run",
]
