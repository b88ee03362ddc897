"""What the demo did (no Spark here, so the CLI can show it without loading Spark)."""

from __future__ import annotations

from dataclasses import dataclass

from icecommit.catalog.inspect import SnapshotInfo
from icecommit.committer.results import CommitResult

DEMO_TABLE = "demo.clickstream"
DEMO_JOB = "clickstream-demo"


@dataclass(frozen=True)
class DemoReport:
    """What the demo did: one result per checkpoint, the snapshots, the rows read back."""

    table: str
    rows: int
    checkpoints: tuple[CommitResult, ...]
    snapshots: tuple[SnapshotInfo, ...]
    rows_read_back: int
    seconds: float
