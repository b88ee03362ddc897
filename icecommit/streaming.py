"""``ic.streaming_sink``: Structured Streaming's ``foreachBatch`` with exactly-once commits.

The micro-batch id is the checkpoint id. A batch Spark replays after a restart (same id)
is found in the table's ancestry and not written again; a batch that was prepared and not
committed before a crash is committed by the recovery each batch starts with. Spark's
query id is recorded with each batch: a query restarted with a new checkpoint location but
the same job id counts its batches from 0 again, and is refused rather than skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyspark.sql import DataFrame

from icecommit.catalog.connect import connect
from icecommit.catalog.loading import load_table
from icecommit.committer.completion import publish_complete_partitions
from icecommit.committer.results import CommitResult, RoutedCommitResult
from icecommit.core.errors import InvalidArgumentError
from icecommit.core.identifiers import checked_job_id, table_name
from icecommit.options import WriteOptions
from icecommit.pipeline import Routes, write
from icecommit.state.checkpoints import CheckpointStore
from icecommit.state.database import state_engine, state_uri
from icecommit.state.samples import SourceRange

logger = logging.getLogger(__name__)

BatchSink = Callable[[DataFrame, int], None]


def streaming_sink(
    table: Table | str | Routes,
    *,
    catalog: Catalog | None = None,
    job_id: str,
    options: WriteOptions | None = None,
    on_commit: Callable[[CommitResult | RoutedCommitResult], None] | None = None,
    preserves_rows: bool = False,
    store: CheckpointStore | None = None,
    **keywords: Any,
) -> BatchSink:
    """A ``foreachBatch`` function that commits each micro-batch exactly once.

    Args:
        table: the target table, or, with ``route_by``, a mapping of routing values to
            tables (see :func:`icecommit.write`).
        catalog: its catalog (the default ``connect()`` when None).
        job_id: identifies the streaming query; keep it stable across restarts of the
            same query (its checkpoint location) and change it for a new query.
        options: the write options of every batch (:class:`~icecommit.WriteOptions`);
            each field may also be given as a keyword, as with :func:`icecommit.write`:
            ``route_by`` / ``dead_letter`` route rows to several tables by a column (rows
            with an unknown route go to ``dead_letter``, or fail the batch when it is
            None); ``completeness`` says when time partitions are published complete, and
            whom to tell (every snapshot records the watermark the query reached);
            ``distribution`` says how each batch's rows reach the writer tasks
            (``bin-pack`` learns the table's shuffle ratio from batch to batch and keeps
            it in icecommit's state); ``maintenance`` runs compaction and expiry after the
            batches' commits (one query's sink at a time per table, within the policy's
            budget).
        on_commit: called with each batch's commit result (committed, already committed
            or empty).
        preserves_rows: declare that every row the query's source reads must land (no
            filter, no aggregation in the query): reconciliation then reports a shortfall
            against the source's count as loss; without it, as rows the query did not write
            (information). Either way each batch's source count (Spark's progress,
            ``numInputRows``) is recorded as the checkpoint's source count, with the
            offset range each source reported (Kafka: offsets per topic partition).
        store: icecommit's state (the checkpoint table); defaults to the state database
            the catalog names.

    Example:
        ``df.writeStream.foreachBatch(ic.streaming_sink("ns.events", job_id="events"))``
    """

    opts = WriteOptions.of(options, **keywords)
    checked_job_id(job_id)
    if catalog is not None and not isinstance(catalog, Catalog):
        raise InvalidArgumentError("catalog", catalog, "a pyiceberg Catalog (ic.connect(...)), or None for the default")
    if isinstance(table, Mapping):
        if opts.route_by is None:
            raise InvalidArgumentError(
                "route_by", None, "the column whose value picks the table, with a mapping of tables"
            )
        for target in table.values():
            table_name(target)
    else:
        load_table(catalog or connect(), table)  # a typo fails here, not in the first batch
    progress = _SourceCounts(table, catalog, job_id, preserves_rows, store, opts.dead_letter)

    def sink(batch: DataFrame, batch_id: int) -> None:
        query_id = _query_id(batch)
        progress.listen(query_id)
        result = write(
            batch,
            table,
            catalog=catalog,
            job_id=job_id,
            checkpoint_id=int(batch_id),
            options=opts,
            query_id=query_id,
            store=store,
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


class _SourceCounts:
    """Records each batch's source count (Spark's ``numInputRows``, reported in the query's
    progress after the batch function returned) as the checkpoint's source count, through
    a ``StreamingQueryListener`` registered on the first batch of each query. A routed
    sink records the batch's count with every table it routes to (and its dead-letter
    table), marked as the count for all of them together."""

    def __init__(
        self,
        table: Table | str | Routes,
        catalog: Catalog | None,
        job_id: str,
        preserves: bool,
        store: CheckpointStore | None,
        dead_letter: Table | str | None = None,
    ) -> None:
        if isinstance(table, (str, Table)):
            self._routed, self._tables = False, [table_name(table)]
        else:
            self._routed = True
            self._tables = sorted({table_name(t) for t in table.values()})
            if dead_letter is not None:
                self._tables.append(table_name(dead_letter))
        self._catalog = catalog
        self._store = store
        self._job_id = job_id
        self._preserves = preserves
        self._queries: set[str] = set()

    def listen(self, query_id: str | None) -> None:
        if query_id is None or query_id in self._queries or not self._tables:
            return
        from pyspark.sql import SparkSession
        from pyspark.sql.streaming.listener import StreamingQueryListener

        # the batch runs in a clone of the session that started the query, and only that
        # session's stream manager reports the query's progress
        session = SparkSession.builder.getOrCreate()
        if session.streams.get(query_id) is None:
            logger.warning(
                "streaming query %s was not started from the default Spark session; its source counts are not recorded",
                query_id,
            )
            self._queries.add(query_id)
            return
        counts, mine = self, query_id

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: object) -> None:
                pass

            def onQueryProgress(self, event: object) -> None:
                counts.progress(event.progress, mine)  # type: ignore[attr-defined]

            def onQueryIdle(self, event: object) -> None:
                if str(event.id) == mine:  # type: ignore[attr-defined]
                    counts.idle()

            def onQueryTerminated(self, event: object) -> None:
                if str(event.id) == mine:  # type: ignore[attr-defined]
                    session.streams.removeListener(self)

        session.streams.addListener(Listener())
        self._queries.add(query_id)

    def idle(self) -> None:
        """The query found no new data: publish what the recorded policy deems complete now
        (an idle writer's partitions need no commit to be published)."""
        try:
            catalog = self._catalog or connect()
            clock = self._store.clock if self._store is not None else None
            for name in self._tables:
                try:
                    published = publish_complete_partitions(catalog, name, clock=clock)
                except InvalidArgumentError:
                    continue  # no time partition, or no policy recorded yet
                if published:
                    logger.info("%s: published %s while the query is idle", name, [p.label for p in published])
        except Exception:  # a listener must never fail the query
            logger.exception("could not publish complete partitions of job %s while idle", self._job_id)

    def progress(self, progress: object, query_id: str) -> None:
        """Record one progress report of ``query_id`` (others are ignored)."""
        try:
            if str(progress.id) != query_id:  # type: ignore[attr-defined]
                return
            batch_id = int(progress.batchId)  # type: ignore[attr-defined]
            records = int(progress.numInputRows)  # type: ignore[attr-defined]
            offsets = source_ranges(progress)
            store = self._store or CheckpointStore(state_engine(state_uri(self._catalog or connect())))
            for name in self._tables:
                store.record_query_input(
                    self._job_id,
                    name,
                    batch_id,
                    records,
                    preserves_rows=self._preserves,
                    offsets=offsets,
                    routed=self._routed,
                )
        except Exception:  # a listener must never fail the query; reconciliation shows it as not recorded
            logger.exception("could not record the source count of a batch of job %s", self._job_id)


def source_ranges(progress: object) -> list[SourceRange]:
    """The offset range each source of a query's progress report read (Kafka: offsets per
    topic partition; a file source: its log offset), as the source reports them."""
    ranges = []
    for source in getattr(progress, "sources", None) or []:
        start, end = getattr(source, "startOffset", None), getattr(source, "endOffset", None)
        ranges.append(
            SourceRange(
                source=str(getattr(source, "description", "") or "source"),
                start=str(start) if start is not None else None,
                end=str(end) if end is not None else None,
                records=int(getattr(source, "numInputRows", 0) or 0),
            )
        )
    return ranges
