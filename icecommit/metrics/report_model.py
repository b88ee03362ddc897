"""The typed reconciliation report, and its Markdown, JSON and HTML forms.

JSON schema (``schema_version`` 4): stable; fields are only ever added, and each
addition bumps the version.

```
{
  "schema_version": 4, "table": str, "job_id": str|null, "ok": bool,
  "summary": {"verdict": "ok"|"mismatch", "errors": int, "findings": int,
              "rows": {"source", "written", "committed", "readable", "removed", "consumed"},
              "readable_from": "table metadata"|"data files", "loss": int, "duplicated": int,
              "checkpoints": {status: count},
              "held": {"checkpoints": int, "rows": int, "failed_checks": int}},
  "changes": str|null,
  "since": iso|null, "until": iso, "generated_at": iso, "deep": bool,
  "thresholds": {"max_loss_pct": float, "max_duplication_pct": float, "max_pending": seconds},
  "checkpoints": [{"job_id", "checkpoint_id", "status", "snapshot_id", "snapshot_id_str",
                   "committed_at", "source", "written", "committed", "readable", "loss_pct",
                   "duplication_pct", "ok", "note", "removed", "consumed", "checks": [{"check", "ok",
                   "observed", "detail"}], "audit_branch", "hold_reason", "published_by",
                   "publish_forced"}],
  "held": [same shape, status "held"],
  "pending": [same shape, status "pending"],
  "windows": [{"window_start": iso|null, "closed", "source", "written", "committed",
               "readable": int|null, "loss_pct", "duplication_pct", "ok"}],
  "problems": [{"kind", "message", "job_id", "checkpoint_id", "path", "severity", "stage"}],
  "health": {"checkpoints", "attempts", "retries", "conflicts", "unknown_outcomes", "files_missing"},
  "lag": {"p50_seconds": float|null, "p99_seconds": float|null},
  "partitions": [{"label", "end", "completed_at", "records_at_completion", "records", "late_records"}]
}
```

Version 2 added ``summary`` (what the Markdown and HTML open with), ``changes`` (what
changed since the last stored run, when the CLI knows it) and ``snapshot_id_str``: snapshot
ids are 64-bit and JSON tools that read numbers as doubles (jq 1.6, JavaScript) round those
above 2^53; the string form is exact, and ``rollback --to-snapshot`` takes either.
Version 3 added ``consumed`` (to the summary's rows and to each checkpoint): the rows of an
upsert's source that were by design not written (a row per key deleted by its change type,
and the rows a later row of their key superseded in the checkpoint); a checkpoint's source
less its consumed rows is what it should have written; and each problem's ``stage``: for a
checkpoint's loss or duplication, the first stage where its counts part (``source-written``,
``written-committed``, ``committed-readable``), which says what to look at.
Version 4 added checks and holding: ``held`` (the checkpoints committed to their job's
audit branch and waiting for a release: not on the branch reconciled by design, so neither
loss nor pending; their rows are in no stage's sum), the summary's ``held`` (those
checkpoints, their rows, and how many of them failed a check), and to each checkpoint line
its ``checks`` (its checks' results; empty without checks), its ``audit_branch`` and
``hold_reason`` (``checks``, ``manual``, ``queued``; null unless it was held), and for one
published from there ``published_by`` and ``publish_forced`` (a failed check overridden).
"""

from __future__ import annotations

import dataclasses
import html as html_escape
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from icecommit.core.check_values import CheckResult
from icecommit.core.errors import InvalidArgumentError
from icecommit.metrics import render

SCHEMA_VERSION = 4


@dataclass(frozen=True)
class Thresholds:
    """Tolerated loss and duplication, in percent of the source count, and how long a
    checkpoint may stay prepared before it is reported as stuck."""

    max_loss_pct: float = 0.0
    max_duplication_pct: float = 0.0
    max_pending: timedelta = timedelta(hours=1)

    def __post_init__(self) -> None:
        for name in ("max_loss_pct", "max_duplication_pct"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
                raise InvalidArgumentError(name, value, "a percentage from 0 to 100")
        if not isinstance(self.max_pending, timedelta) or self.max_pending < timedelta(0):
            raise InvalidArgumentError("max_pending", self.max_pending, "a timedelta of zero or more")


@dataclass(frozen=True)
class CheckpointLine:
    """Counts of one checkpoint through every stage."""

    job_id: str
    checkpoint_id: int
    status: str
    snapshot_id: int | None
    committed_at: datetime | None
    source: int
    written: int
    committed: int
    readable: int
    loss_pct: float
    duplication_pct: float
    ok: bool
    note: str
    #: rows of its that left the table on purpose: superseded by an overwrite or an upsert,
    #: removed by row-level deletes (not counted as loss)
    removed: int = 0
    #: rows of an upsert's source that by design were not written: a row per key deleted by
    #: its change type, and every row a later row of its key superseded in the checkpoint
    consumed: int = 0
    #: its checks' results (empty: it had none)
    checks: tuple[CheckResult, ...] = ()
    #: the audit branch it was held on (None: it never was) and why: ``checks``,
    #: ``manual`` or ``queued``
    audit_branch: str | None = None
    hold_reason: str | None = None
    #: who published it from the audit branch, and whether past a failed check
    published_by: str | None = None
    publish_forced: bool = False


@dataclass(frozen=True)
class WindowLine:
    """Counts of one one-minute event-time window (None: rows without an event time)."""

    window_start: datetime | None
    closed: bool
    source: int
    written: int
    committed: int
    readable: int | None
    loss_pct: float
    duplication_pct: float
    ok: bool


@dataclass(frozen=True)
class Problem:
    """Something that does not reconcile, named."""

    kind: str
    message: str
    job_id: str | None = None
    checkpoint_id: int | None = None
    path: str | None = None
    severity: str = "error"
    #: for a checkpoint's loss or duplication, the first stage where its counts part:
    #: ``source-written``, ``written-committed`` or ``committed-readable``
    stage: str | None = None


@dataclass(frozen=True)
class CommitHealth:
    """How the commits went."""

    checkpoints: int
    attempts: int
    retries: int
    conflicts: int
    unknown_outcomes: int
    files_missing: int


@dataclass(frozen=True)
class Lag:
    """Event time to commit, weighted by records (seconds)."""

    p50_seconds: float | None
    p99_seconds: float | None


@dataclass(frozen=True)
class PartitionLine:
    """A time partition published complete, and the records committed into it since."""

    label: str
    end: datetime
    completed_at: datetime
    records_at_completion: int
    records: int
    late_records: int


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


@dataclass(frozen=True)
class ReconciliationReport:
    """Source = written = committed = readable, per checkpoint and window, or where not."""

    table: str
    job_id: str | None
    since: datetime | None
    until: datetime
    generated_at: datetime
    deep: bool
    thresholds: Thresholds
    ok: bool
    checkpoints: tuple[CheckpointLine, ...]
    pending: tuple[CheckpointLine, ...]
    windows: tuple[WindowLine, ...]
    problems: tuple[Problem, ...]
    health: CommitHealth
    lag: Lag
    partitions: tuple[PartitionLine, ...] = ()
    #: checkpoints held on their job's audit branch (not on the branch by design)
    held: tuple[CheckpointLine, ...] = ()

    def to_dict(self, *, changes: str | None = None) -> dict[str, Any]:
        """The JSON document as a dict (see the module docstring for the schema)."""
        data = _plain(self)
        assert isinstance(data, dict)
        lag = data.pop("lag")
        data["lag"] = {"p50_seconds": lag["p50_seconds"], "p99_seconds": lag["p99_seconds"]}
        for line in (*data["checkpoints"], *data["held"], *data["pending"]):
            snapshot = line["snapshot_id"]
            line["snapshot_id_str"] = str(snapshot) if snapshot is not None else None
        # the verdict and the summary first, as in the Markdown and the HTML
        head = {
            "schema_version": SCHEMA_VERSION,
            "table": data.pop("table"),
            "job_id": data.pop("job_id"),
            "ok": data.pop("ok"),
            "summary": render.summary_counts(self),
            "changes": changes,
        }
        return {**head, **data}

    def to_json(self, *, changes: str | None = None) -> str:
        """The report as JSON (stable schema, ``schema_version`` 4); ``changes``: the line on
        what changed since the last stored run (:func:`icecommit.metrics.runs.changes_since`)."""
        return json.dumps(self.to_dict(changes=changes), indent=2)

    def to_markdown(self, *, all_windows: bool = False, changes: str | None = None) -> str:
        """The report for a terminal or a ticket: verdict and summary first, problems
        grouped by kind, then details (passing windows summarised unless ``all_windows``);
        ``changes``: a line on what changed since the last stored run, for the summary
        (:func:`icecommit.metrics.runs.changes_since`)."""
        return render.markdown(self, all_windows=all_windows, changes=changes)

    def to_html(self, *, changes: str | None = None, history: Sequence[dict[str, object]] = ()) -> str:
        """A self-contained HTML page: verdict and summary first, charts of every stage per
        checkpoint and per window with the problems marked, and the stored runs over time
        (``history``, from :func:`icecommit.metrics.runs.history_points`)."""
        return render.html(self, changes=changes, history=history)

    def _repr_html_(self) -> str:
        """The page inside an ``iframe``, so that a notebook shows it (chart included) with
        its styles and element ids kept apart from the notebook's and other reports'."""
        page = html_escape.escape(self.to_html(), quote=True)
        return f'<div><iframe srcdoc="{page}" width="100%" height="820" style="border:0"></iframe></div>'
