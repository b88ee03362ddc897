"""The demo pipeline: a few hours of clickstream landed through Spark in checkpoints that
each cover a stretch of event time (with a few late rows), so that complete hourly
partitions, late records, ``rollback --to-event-time`` and the report's windows all have
something to show."""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog

from icecommit.catalog.inspect import list_snapshots, partition_status
from icecommit.committer.results import CommitResult
from icecommit.committer.table_creation import create_table
from icecommit.core.errors import CheckpointRolledBackError, InvalidArgumentError
from icecommit.core.eventtime import EVENT_TIME_PROPERTY
from icecommit.core.tableprops import LATENESS_PROPERTY
from icecommit.demo.clickstream import DEMO_PARTITION_BY, SCHEMA, clickstream
from icecommit.demo.report import DEMO_JOB, DEMO_TABLE, DemoReport
from icecommit.pipeline import write
from icecommit.state.database import shown_uri, state_engine, state_uri
from icecommit.state.forget import forget_table
from icecommit.writers.session import local_session

#: Called with (checkpoint id, phase, result or None); phases: start, done.
ProgressHook = Callable[[int, str, CommitResult | None], None]


#: The stretch of event time the demo covers: hours from 2026-11-20 00:00 UTC.
DEMO_DAY = date(2026, 11, 20)
#: Share of a checkpoint's rows that arrive late (their event time in the previous stretch).
LATE_FRACTION = 0.005
#: How long after an hour ends its partition is published complete.
DEMO_LATENESS = "5m"
#: The table property holding the demo arguments the table was made with.
DEMO_ARGUMENTS_PROPERTY = "icecommit.demo.arguments"


def run_demo(
    catalog: Catalog,
    *,
    rows: int = 1_000_000,
    checkpoints: int = 4,
    hours: int = 6,
    table: str = DEMO_TABLE,
    job_id: str = DEMO_JOB,
    progress: ProgressHook | None = None,
    command: str = "icecommit",
    reset: bool = False,
    recommit: bool = False,
) -> DemoReport:
    """Land ``rows`` clickstream events in ``checkpoints`` checkpoints, exactly once.

    The events span ``hours`` hours of 2026-11-20 from midnight UTC; checkpoint ``i`` holds
    the ``i``-th stretch of them, and (after the first) a few rows of the previous stretch
    that arrived late. Re-running with the same arguments continues the existing table:
    every checkpoint already committed is found and skipped. ``reset`` drops the table (its
    files too) and what the state database holds about it first; ``recommit`` commits again
    the checkpoints a rollback removed. ``command``: how the CLI is invoked (with its
    catalog options), for the commands the report suggests.

    Raises:
        InvalidArgumentError: the table was made by the demo with other arguments (the
            message names them, and ``--reset``).
        CheckpointRolledBackError: a rollback removed a checkpoint the run would replay
            (the message names ``--recommit`` and ``--reset``).
    """
    if rows < 0 or checkpoints < 1 or hours < 1:
        raise ValueError("rows must be >= 0, checkpoints >= 1 and hours >= 1")
    started = time.monotonic()
    arguments = f"--rows {rows} --checkpoints {checkpoints} --hours {hours}"
    if reset and catalog.table_exists(table):
        catalog.purge_table(table)
        forget_table(state_engine(state_uri(catalog)), table)
    continued = catalog.table_exists(table)
    if continued:
        made_with = catalog.load_table(table).properties.get(DEMO_ARGUMENTS_PROPERTY)
        if made_with is not None and made_with != arguments:
            raise InvalidArgumentError(
                "demo arguments", arguments, f"those {table} was made with ({made_with}); run `{command} demo "
                f"--reset {arguments}` to start over with these",
            )  # fmt: skip
    spark = local_session("icecommit-demo")
    create_table(
        catalog, table, SCHEMA, partition_by=list(DEMO_PARTITION_BY),
        properties={EVENT_TIME_PROPERTY: "ts", LATENESS_PROPERTY: DEMO_LATENESS, DEMO_ARGUMENTS_PROPERTY: arguments},
    )  # fmt: skip
    bounds = [rows * i // checkpoints for i in range(checkpoints + 1)]
    stretch = [hours * i / checkpoints for i in range(checkpoints + 1)]
    results = []
    for checkpoint_id in range(1, checkpoints + 1):
        if progress:
            progress(checkpoint_id, "start", None)
        df = clickstream(
            spark, bounds[checkpoint_id - 1], bounds[checkpoint_id], day=DEMO_DAY,
            hours=(stretch[checkpoint_id - 1], stretch[checkpoint_id]),
            late=(stretch[checkpoint_id - 2], stretch[checkpoint_id - 1]) if checkpoint_id > 1 else None,
            late_fraction=LATE_FRACTION,
        )  # fmt: skip
        try:
            result = write(df, table, catalog=catalog, job_id=job_id, checkpoint_id=checkpoint_id, recommit=recommit)
        except CheckpointRolledBackError as e:  # say how to go on with the demo's own flags
            raise CheckpointRolledBackError(
                e.job_id, e.checkpoint_id, e.snapshot_id, e.table,
                remedy=f"run `{command} demo {arguments} --recommit` to commit it again, or `{command} demo --reset "
                f"{arguments}` to start over",
            ) from None  # fmt: skip
        results.append(result)
        if progress:
            progress(checkpoint_id, "done", result)
    loaded = catalog.load_table(table)
    ids = loaded.scan(selected_fields=("event_id", "ts")).to_arrow()
    day_start = datetime(DEMO_DAY.year, DEMO_DAY.month, DEMO_DAY.day, tzinfo=timezone.utc)
    late = 0
    if ids.num_rows:
        # a row is late when its event time lies before its checkpoint's stretch
        starts = pa.array([day_start + timedelta(hours=h) for h in stretch[:-1]], pa.timestamp("us", tz="UTC"))
        slot = pa.array(
            [min(bisect.bisect_right(bounds, int(i)) - 1, checkpoints - 1) for i in ids.column("event_id").to_pylist()]
        )
        late = pc.sum(pc.less(ids.column("ts"), pc.take(starts, slot))).as_py() or 0
    # the boundary between the stretch of the second-to-last checkpoint and the last one:
    # rolling back to it hides the checkpoints after it (dry run: nothing changes)
    rollback_to = day_start + timedelta(hours=stretch[max(1, checkpoints - 1)])
    return DemoReport(
        table=table,
        rows=rows,
        checkpoints=tuple(results),
        snapshots=tuple(list_snapshots(catalog, table)),
        rows_read_back=ids.num_rows,
        seconds=time.monotonic() - started,
        distinct_read_back=pc.count_distinct(ids.column("event_id")).as_py() if ids.num_rows else 0,
        late_rows=late,
        late_after_published=sum(status.late_records for status in partition_status(catalog, table)),
        event_time_from=day_start,
        event_time_to=day_start + timedelta(hours=hours),
        catalog=shown_uri(str(catalog.properties.get("uri", ""))) or catalog.name,
        location=loaded.metadata.location,
        continued=continued,
        reset_command=f"{command} demo --reset {arguments}",
        try_next=(
            f"{command} partitions {table}",
            f"{command} reconcile {table} --job {job_id} --format html --out demo-report.html",
            f"{command} rollback {table} --to-event-time {rollback_to:%Y-%m-%dT%H:%M:%SZ} --dry-run",
        ),
    )
