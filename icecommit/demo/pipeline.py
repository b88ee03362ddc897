"""The demo pipeline: a day of clickstream landed through Spark in several checkpoints."""

from __future__ import annotations

import time
from collections.abc import Callable

from pyiceberg.catalog import Catalog

from icecommit.catalog.inspect import list_snapshots
from icecommit.catalog.tables import create_table
from icecommit.committer.results import CommitResult
from icecommit.demo.clickstream import PARTITION_BY, SCHEMA, clickstream
from icecommit.demo.report import DEMO_JOB, DEMO_TABLE, DemoReport
from icecommit.pipeline import write
from icecommit.writers.session import local_session

#: Called with (checkpoint id, phase, result or None); phases: start, done.
ProgressHook = Callable[[int, str, CommitResult | None], None]


def run_demo(
    catalog: Catalog,
    *,
    rows: int = 1_000_000,
    checkpoints: int = 4,
    table: str = DEMO_TABLE,
    job_id: str = DEMO_JOB,
    progress: ProgressHook | None = None,
) -> DemoReport:
    """Land ``rows`` clickstream events in ``checkpoints`` checkpoints, exactly once.

    Re-running with the same arguments commits nothing new: every checkpoint is found in
    the table's ancestry and skipped.
    """
    if rows < 0 or checkpoints < 1:
        raise ValueError("rows must be >= 0 and checkpoints >= 1")
    started = time.monotonic()
    spark = local_session("icecommit-demo")
    create_table(catalog, table, SCHEMA, partition_by=list(PARTITION_BY))
    bounds = [rows * i // checkpoints for i in range(checkpoints + 1)]
    results = []
    for checkpoint_id in range(1, checkpoints + 1):
        if progress:
            progress(checkpoint_id, "start", None)
        df = clickstream(spark, bounds[checkpoint_id - 1], bounds[checkpoint_id])
        result = write(df, table, catalog=catalog, job_id=job_id, checkpoint_id=checkpoint_id)
        results.append(result)
        if progress:
            progress(checkpoint_id, "done", result)
    loaded = catalog.load_table(table)
    read_back = sum(batch.num_rows for batch in loaded.scan(selected_fields=("event_id",)).to_arrow_batch_reader())
    return DemoReport(
        table=table,
        rows=rows,
        checkpoints=tuple(results),
        snapshots=tuple(list_snapshots(catalog, table)),
        rows_read_back=read_back,
        seconds=time.monotonic() - started,
    )
