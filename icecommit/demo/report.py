"""What the demo did (no Spark here, so the CLI can show it without loading Spark)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from icecommit.catalog.inspect import SnapshotInfo
from icecommit.committer.results import CommitResult

DEMO_TABLE = "demo.clickstream"
DEMO_JOB = "clickstream-demo"


@dataclass(frozen=True)
class DemoReport:
    """What the demo did: one result per checkpoint, the snapshots, the rows read back,
    where the table lives, and what to try next."""

    table: str
    rows: int
    checkpoints: tuple[CommitResult, ...]
    snapshots: tuple[SnapshotInfo, ...]
    rows_read_back: int
    seconds: float
    #: distinct event ids read back: equal to ``rows`` and to ``rows_read_back`` when every
    #: row landed exactly once
    distinct_read_back: int = 0
    #: rows whose event time lies in an earlier checkpoint's stretch (late records)
    late_rows: int = 0
    #: those of them committed into an hour already published complete: the sum of the
    #: late records column of ``icecommit partitions`` (the others arrived within the
    #: table's lateness, before their hour was published)
    late_after_published: int = 0
    event_time_from: datetime | None = None
    event_time_to: datetime | None = None
    catalog: str = ""
    location: str = ""
    try_next: tuple[str, ...] = ()
    #: the run continued a table an earlier run made (its committed checkpoints skipped)
    continued: bool = False
    #: the command that starts the demo over
    reset_command: str = ""
