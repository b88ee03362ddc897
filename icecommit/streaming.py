"""``ic.streaming_sink``: Structured Streaming's ``foreachBatch`` with exactly-once commits.

The micro-batch id is the checkpoint id. A batch Spark replays after a restart (same id)
is found in the table's ancestry and not written again; a batch that was prepared and not
committed before a crash is committed by the recovery each batch starts with. Spark's
query id is recorded with each batch: a query restarted with a new checkpoint location but
the same job id counts its batches from 0 again, and is refused rather than skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyspark.sql import DataFrame

from icecommit.committer.completion import PartitionCompleteness
from icecommit.committer.results import CommitResult, RoutedCommitResult
from icecommit.identifiers import checked_job_id
from icecommit.pipeline import Routes, write

logger = logging.getLogger(__name__)

BatchSink = Callable[[DataFrame, int], None]


def streaming_sink(
    table: Table | str | Routes,
    *,
    catalog: Catalog | None = None,
    job_id: str,
    route_by: str | None = None,
    dead_letter: Table | str | None = None,
    branch: str = "main",
    target_file_size: int | None = None,
    completeness: PartitionCompleteness | None = None,
    on_commit: Callable[[CommitResult | RoutedCommitResult], None] | None = None,
) -> BatchSink:
    """A ``foreachBatch`` function that commits each micro-batch exactly once.

    Args:
        table: the target table, or, with ``route_by``, a mapping of routing values to
            tables (see :func:`icecommit.write`).
        catalog: its catalog (the default ``connect()`` when None).
        job_id: identifies the streaming query; keep it stable across restarts of the
            same query (its checkpoint location) and change it for a new query.
        route_by / dead_letter: route rows to several tables by a column; rows with an
            unknown route go to ``dead_letter``, or fail the batch when it is None.
        completeness: when time partitions are published complete, and the callback to
            tell a scheduler; every snapshot records the watermark the query reached.
        on_commit: called with each batch's commit result (committed, already committed
            or empty).

    Example:
        ``df.writeStream.foreachBatch(ic.streaming_sink("ns.events", job_id="events"))``
    """

    checked_job_id(job_id)

    def sink(batch: DataFrame, batch_id: int) -> None:
        result = write(
            batch,
            table,
            catalog=catalog,
            job_id=job_id,
            checkpoint_id=int(batch_id),
            route_by=route_by,
            dead_letter=dead_letter,
            branch=branch,
            target_file_size=target_file_size,
            completeness=completeness,
            query_id=_query_id(batch),
        )
        outcome = "committed" if result.committed else "nothing new to commit"
        logger.info("batch %d of %s: %d records, %s", batch_id, job_id, result.records, outcome)
        if on_commit is not None:
            on_commit(result)

    return sink


def _query_id(batch: DataFrame) -> str | None:
    """The id of the streaming query running this batch (stable across restarts from one
    checkpoint location; Spark sets it as a local property of the batch's thread); None
    where it cannot be read (Spark Connect runs the function in another process)."""
    try:
        value = batch.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
    except Exception:  # Spark Connect has no SparkContext
        logger.debug("no streaming query id for this batch", exc_info=True)
        return None
    return str(value) if value else None
