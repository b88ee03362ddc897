"""``ic.streaming_sink``: Structured Streaming's ``foreachBatch`` with exactly-once commits.

The micro-batch id is the checkpoint id. A batch Spark replays after a restart (same id)
is found in the table's ancestry and not written again; a batch that was prepared and not
committed before a crash is committed by the recovery each batch starts with. Spark's
query id is recorded with each batch: a query restarted with a new checkpoint location but
the same job id counts its batches from 0 again, and is refused rather than skipped.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow.fs as pafs
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from icecommit.catalog.connect import connect
from icecommit.catalog.loading import load_table
from icecommit.committer.completion import publish_if_recorded
from icecommit.committer.results import CommitResult, RoutedCommitResult
from icecommit.core.errors import CatalogUnavailableError, InvalidArgumentError
from icecommit.core.identifiers import checked_job_id, table_name
from icecommit.options import WriteOptions
from icecommit.pipeline import Routes, write
from icecommit.state import source_counts
from icecommit.state.checkpoints import CheckpointStore
from icecommit.state.database import shown_uri, state_engine, state_uri
from icecommit.state.samples import SourceRange

logger = logging.getLogger(__name__)


def streaming_sink(
    table: Table | str | Routes,
    *,
    catalog: Catalog | None = None,
    job_id: str,
    options: WriteOptions | None = None,
    on_commit: Callable[[CommitResult | RoutedCommitResult], None] | None = None,
    preserves_rows: bool = False,
    store: CheckpointStore | None = None,
    checkpoint_location: str | None = None,
    **keywords: Any,
) -> StreamingSink:
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
        checkpoint_location: the query's ``checkpointLocation``: where the batch cannot
            see its query (Spark Connect), the query id is read from its ``metadata``, so a
            query restarted under the same job id with a new location is still refused.

    Returns:
        A picklable :class:`StreamingSink` (it works as a Spark Connect ``foreachBatch``
        function): it holds configuration, and opens the catalog and the state where the
        batch runs.

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
        targets: str | dict[Any, str] = {value: table_name(target) for value, target in table.items()}
    else:
        if not opts.create:  # a typo fails here, not in the first batch (create: the first batch makes it)
            load_table(catalog or connect(), table)
        targets = table_name(table)
    return StreamingSink(
        targets,
        catalog=catalog,
        job_id=job_id,
        options=opts,
        on_commit=on_commit,
        preserves_rows=preserves_rows,
        store=store,
        checkpoint_location=checkpoint_location,
    )


#: Parts of catalog property names whose values are secrets: never shown (a sink's repr).
_SECRET = (
    "secret", "password", "token", "credential", "session-key", "access-key", "account-key", "connection-string",
    "auth", "header.", "sas", "private",
)  # fmt: skip


def _shown(properties: Mapping[str, Any]) -> dict[str, str]:
    """Catalog properties as they may be printed: secrets hidden, URLs without passwords."""
    shown = {}
    for key, value in properties.items():
        if any(s in key.lower() for s in _SECRET) or not isinstance(value, str):
            shown[key] = "***"
        elif "://" in value and "@" in value:
            shown[key] = shown_uri(value)
        else:
            shown[key] = value
    return shown


class StreamingSink:
    """The ``foreachBatch`` function :func:`streaming_sink` returns: a small picklable
    object that holds configuration only (the tables, the catalog's name and properties,
    the job, the write options) and opens what it needs in the process that runs the batch.

    On Spark Connect the function is pickled and runs in a Python process beside the
    server: the catalog (from the properties it held, or the default ``connect()`` and
    ``~/.pyiceberg.yaml`` of that process), the state database and ``on_commit`` /
    completion callbacks are resolved and run there, and icecommit must be installed in the
    server's Python. Where the batch cannot see its query (Connect), the query id is read
    from ``<checkpoint_location>/metadata``, so a reused job id is still refused.
    """

    def __init__(
        self,
        targets: str | dict[Any, str],
        *,
        catalog: Catalog | None,
        job_id: str,
        options: WriteOptions,
        on_commit: Callable[[CommitResult | RoutedCommitResult], None] | None,
        preserves_rows: bool,
        store: CheckpointStore | None,
        checkpoint_location: str | None,
    ) -> None:
        self.targets = targets
        self.job_id = job_id
        self.options = options
        self.on_commit = on_commit
        self.preserves_rows = preserves_rows
        self.checkpoint_location = checkpoint_location
        self.catalog_name = catalog.name if catalog is not None else None
        self.catalog_properties = dict(catalog.properties) if catalog is not None else None
        # how to open it again: an existing SQL catalog through icecommit (never created
        # afresh where the batch runs), any other by its class
        self.catalog_impl = (
            None
            if catalog is None or isinstance(catalog, SqlCatalog)
            else f"{type(catalog).__module__}.{type(catalog).__name__}"
        )
        self.state_uri = store.engine.url.render_as_string(hide_password=False) if store is not None else None
        # what the process running the batches opened (never pickled)
        self._catalog = catalog
        self._store = store
        self._progress: _SourceCounts | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_catalog=None, _store=None, _progress=None, _lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        catalog = (
            "the default connect()"
            if self.catalog_name is None
            else f"{self.catalog_name} {_shown(self.catalog_properties or {})}"
        )
        return f"StreamingSink({self.targets!r}, job_id={self.job_id!r}, catalog={catalog})"

    def catalog(self) -> Catalog:
        """The catalog, opened in this process on first use."""
        with self._lock:
            if self._catalog is None:
                self._catalog = self._open_catalog()
            return self._catalog

    def _open_catalog(self) -> Catalog:
        if self.catalog_properties is None:
            return connect()
        properties = dict(self.catalog_properties)
        if self.catalog_impl is None:  # a SQL catalog: the existing one, or a named error
            uri, warehouse = str(properties.pop("uri", "")), properties.pop("warehouse", None)
            return connect(self.catalog_name, uri=uri or None, warehouse=warehouse, create=False, **properties)
        properties.pop("type", None)  # pyiceberg takes a type or a class, never both
        try:
            return load_catalog(self.catalog_name, **{**properties, "py-catalog-impl": self.catalog_impl})
        except Exception as e:  # its message may hold a URL with a password: only its type is shown
            raise CatalogUnavailableError(
                f"catalog {self.catalog_name}", f"cannot be opened where the batch runs ({type(e).__name__})"
            ) from e

    def store(self) -> CheckpointStore | None:
        """The state the sink was given (None: the catalog's), opened in this process."""
        with self._lock:
            if self._store is None and self.state_uri is not None:
                self._store = CheckpointStore(state_engine(self.state_uri))
            return self._store

    def query_id(self, batch: DataFrame) -> str | None:
        """The streaming query running this batch: from the batch's session, else from the
        query's checkpoint location (Spark Connect)."""
        return _query_id(batch) or query_id_at(self.checkpoint_location)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        catalog, store = self.catalog(), self.store()
        query_id = self.query_id(batch)
        if self._progress is None:
            self._progress = _SourceCounts(
                self.targets, catalog, self.job_id, self.preserves_rows, store, self.options.dead_letter
            )
        self._progress.listen(query_id, batch)
        self._progress.catch_up(last_only=True)  # the batch before this one has reported its count
        try:
            result = write(
                batch,
                self.targets,
                catalog=catalog,
                job_id=self.job_id,
                checkpoint_id=int(batch_id),
                options=self.options,
                query_id=query_id,
                store=store,
            )
        except Exception as e:
            # Spark reports it as the query's failure, under its own wrapper and traces: say
            # it first, in one line (Python prints an error log line even where logging is
            # not configured)
            logger.error("batch %d of job %s failed: %s: %s", batch_id, self.job_id, type(e).__name__, e)
            raise
        outcome = "committed" if result.committed else "nothing new to commit"
        logger.info("batch %d of %s: %d records, %s", batch_id, self.job_id, result.records, outcome)
        if self.on_commit is not None:
            self.on_commit(result)


def query_id_at(checkpoint_location: str | None) -> str | None:
    """The id of the streaming query whose checkpoint location this is (Spark writes it to
    ``<location>/metadata`` when the query first starts); None without a location.

    Raises:
        InvalidArgumentError: the location holds no query metadata (not a checkpoint
            location, or the query has not started).
    """
    if checkpoint_location is None:
        return None
    path = checkpoint_location.rstrip("/") + "/metadata"
    try:
        filesystem, inner = pafs.FileSystem.from_uri(path if "://" in path else os.path.abspath(path))
        with filesystem.open_input_stream(inner) as stream:
            first = stream.read().decode().splitlines()[0]
        return str(json.loads(first)["id"])
    except (OSError, ValueError, KeyError, IndexError) as e:
        raise InvalidArgumentError(
            "checkpoint_location", checkpoint_location, "the streaming query's checkpoint location (with its metadata)"
        ) from e


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


#: Seconds a stopped query's listener waits for Spark's last event before it is removed.
TERMINATION_WAIT_S = 20.0
#: Seconds the listener's return from that last event takes to reach Spark (at most).
_REPLY_S = 0.05


class _SourceCounts:
    """Records each batch's source count (Spark's ``numInputRows``) as the checkpoint's
    source count. Spark reports a batch's progress after the batch function returned, so
    the count of batch N is taken from the query's own progress when batch N+1 starts; the
    last batch's, when the query is seen to have stopped: by the sink's listener (on
    Spark's listener bus), by a reconciliation of the table in this process, or when the
    process exits, whichever comes first. A routed sink records the batch's count with
    every table it routes to (and its dead-letter table), marked as the count for all of
    them together."""

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
        # the queries whose progress this process can read, and their listeners
        self._running: dict[str, tuple[StreamingQuery, SparkSession, Any, threading.Event]] = {}
        self._recorded: dict[tuple[str, int], int] = {}
        self._lock = threading.RLock()

    def listen(self, query_id: str | None, batch: DataFrame) -> None:
        if query_id is None or query_id in self._queries or not self._tables:
            return
        if _query_id(batch) is None:  # Spark Connect: no listener reaches this process
            logger.info(
                "streaming query %s runs on Spark Connect: its source counts are not recorded (reconciliation "
                "shows them as not recorded)",
                query_id,
            )
            self._queries.add(query_id)
            return
        from pyspark.sql.streaming.listener import StreamingQueryListener

        # the batch runs in a clone of the session that started the query, and only that
        # session's stream manager reports the query's progress
        session = SparkSession.builder.getOrCreate()
        query = session.streams.get(query_id)
        if query is None:
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
                if str(event.id) != mine:  # type: ignore[attr-defined]
                    return
                try:
                    counts.catch_up()
                finally:  # the last event Spark sends about the query: it may be removed now
                    terminated.set()

        listener, terminated = Listener(), threading.Event()
        session.streams.addListener(listener)
        with self._lock:
            self._running[query_id] = (query, session, listener, terminated)
            self._queries.add(query_id)
        source_counts.register(self._tables, self.settle)

    def catch_up(self, *, last_only: bool = False) -> None:
        """Record the counts the running queries reported and were not recorded yet: the
        batch before the one starting now (``last_only``: its report is the query's last,
        read at the cost of one), or every report the query keeps."""
        with self._lock:
            running = list(self._running.items())
        for query_id, (query, _, _, _) in running:
            try:
                reports = [query.lastProgress] if last_only else query.recentProgress
            except Exception:  # the session is gone: nothing more can be read
                logger.debug("cannot read the progress of streaming query %s", query_id, exc_info=True)
                continue
            for report in reports:
                if report is not None:
                    self.progress(report, query_id)

    def settle(self) -> None:
        """Record what the queries reported; stop listening to those that stopped (so that
        Spark never calls into a process that has gone)."""
        self.catch_up()
        with self._lock:
            stopped = []
            for query_id, (query, session, listener, terminated) in list(self._running.items()):
                try:
                    active = query.isActive
                except Exception:
                    active = False
                if not active:
                    stopped.append((session, listener, terminated))
                    del self._running[query_id]
        for session, listener, terminated in stopped:
            # Spark delivers the query's last events a moment after it stopped: a listener
            # removed while one is on its way has Spark call into a process that may be gone
            if SparkContext._active_spark_context is None:  # Spark stopped: it sends nothing more
                continue
            if terminated.wait(TERMINATION_WAIT_S):
                time.sleep(_REPLY_S)  # the listener's reply to that event, on its way to Spark
            else:
                logger.info("Spark did not report the end of a streaming query within %.0fs", TERMINATION_WAIT_S)
            try:
                session.streams.removeListener(listener)
            except Exception:
                logger.debug("could not remove a streaming listener", exc_info=True)

    def idle(self) -> None:
        """The query found no new data: publish what the recorded policy deems complete now
        (an idle writer's partitions need no commit to be published)."""
        try:
            catalog = self._catalog or connect()
            clock = self._store.clock if self._store is not None else None
            for name in self._tables:
                published = publish_if_recorded(catalog, name, clock=clock)
                if isinstance(published, str):
                    continue  # no time partition, or no policy recorded yet
                if published:
                    logger.info("%s: published %s while the query is idle", name, [p.label for p in published])
        except Exception:  # a listener must never fail the query
            logger.exception("could not publish complete partitions of job %s while idle", self._job_id)

    def progress(self, progress: object, query_id: str) -> None:
        """Record one progress report of ``query_id`` (others, and reports already
        recorded, are skipped)."""
        try:
            if str(_field(progress, "id")) != query_id:
                return
            batch_id = int(_field(progress, "batchId"))
            records = int(_field(progress, "numInputRows"))
            with self._lock:
                if self._recorded.get((query_id, batch_id)) == records:
                    return
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
                self._recorded[(query_id, batch_id)] = records
        except Exception:  # a listener must never fail the query; reconciliation shows it as not recorded
            logger.exception("could not record the source count of a batch of job %s", self._job_id)


def _field(report: object, name: str) -> Any:
    """A field of a progress report: an object's attribute, or a key of its JSON form."""
    if isinstance(report, Mapping):
        return report[name]
    return getattr(report, name)


def source_ranges(progress: object) -> list[SourceRange]:
    """The offset range each source of a query's progress report read (Kafka: offsets per
    topic partition; a file source: its log offset), as the source reports them."""

    def get(value: object, name: str) -> Any:
        return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)

    ranges = []
    for source in get(progress, "sources") or []:
        start, end = get(source, "startOffset"), get(source, "endOffset")
        ranges.append(
            SourceRange(
                source=str(get(source, "description") or "source"),
                start=str(start) if start is not None else None,
                end=str(end) if end is not None else None,
                records=int(get(source, "numInputRows") or 0),
            )
        )
    return ranges
