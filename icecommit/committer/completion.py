"""Publishing complete time partitions after commits, and delivering their callbacks.

The decision is :func:`icecommit.core.completeness.newly_complete`; the record of it is the
partition-status table. A status row is inserted once. The callback is delivered after the
row exists and marked delivered when it returns, so a crash in between re-delivers it at
the next commit: the callback is at least once across crashes and once otherwise, and it
is never called before the partition is published.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from sqlalchemy.exc import SQLAlchemyError

from icecommit.catalog.tables import resolve_table
from icecommit.core.completeness import lateness, marker_path, records_per_partition, time_partition
from icecommit.core.datafiles import DataFileRecord
from icecommit.core.errors import InvalidArgumentError, StateDatabaseError
from icecommit.core.identifiers import table_name
from icecommit.core.tableprops import idle_timeout, partition_marker
from icecommit.state.database import state_engine, state_uri
from icecommit.state.models import utc_now
from icecommit.state.partitions import PartitionStatus, PartitionStatusStore

logger = logging.getLogger(__name__)

PartitionCallback = Callable[[PartitionStatus], None]


@dataclass(frozen=True)
class PartitionCompleteness:
    """When the committer publishes a time partition complete, and whom it tells.

    Attributes:
        writers: the jobs whose watermarks must all have passed a partition; None means
            the committing job alone. List every job that writes the table, so that a
            partition is never published while one of them may still add to it.
        lateness: how long after a partition's end to wait; None takes the table's
            ``icecommit.partition-lateness`` property (zero when unset).
        on_complete: called once per partition published complete (for example to
            trigger a scheduler); an exception is logged and the call is retried after the
            next commit.
        idle_timeout: a writer that has committed nothing for longer than this no longer
            holds partitions back, if it was live (its watermark near the clock when it last
            committed); None takes the table's ``icecommit.writer-idle-timeout`` property
            (no idleness when unset). See :func:`icecommit.core.completeness.closing`.
    """

    writers: tuple[str, ...] | None = None
    lateness: timedelta | None = None
    on_complete: PartitionCallback | None = None
    idle_timeout: timedelta | None = None

    def __post_init__(self) -> None:
        """Refuse a policy that cannot be used before any commit (a bad one found after a
        commit landed would look like a failed commit)."""
        if self.writers is not None:
            if isinstance(self.writers, str) or not isinstance(self.writers, Iterable):
                raise InvalidArgumentError("writers", self.writers, "a sequence of job ids, such as ('a', 'b')")
            writers = tuple(self.writers)
            if not all(isinstance(w, str) and w for w in writers):
                raise InvalidArgumentError("writers", self.writers, "a sequence of job ids, such as ('a', 'b')")
            if not writers:
                raise InvalidArgumentError("writers", self.writers, "at least one job id (None: the committing job)")
            object.__setattr__(self, "writers", writers)
        for name in ("lateness", "idle_timeout"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, timedelta) or value < timedelta(0)):
                raise InvalidArgumentError(name, value, "a timedelta of zero or more, or None")
        if self.on_complete is not None and not callable(self.on_complete):
            raise InvalidArgumentError("on_complete", self.on_complete, "a function of one PartitionStatus, or None")


class CompletionPublisher:
    """Publishes one table's complete partitions for one job's committer."""

    def __init__(
        self, store: PartitionStatusStore, table_name: str, job_id: str, policy: PartitionCompleteness
    ) -> None:
        self._store = store
        self._table_name = table_name
        self._job_id = job_id
        self._policy = policy

    @property
    def store(self) -> PartitionStatusStore:
        """The partition-status table."""
        return self._store

    @staticmethod
    def partition_records(metadata: TableMetadata, data_files: Sequence[DataFileRecord]) -> list[tuple[str, int, int]]:
        """(field, value, records) per time partition of a checkpoint's data files."""
        field = time_partition(metadata)
        if field is None:
            return []
        totals = records_per_partition(((f.partition, f.record_count) for f in data_files), field)
        return [(field.name, value, records) for value, records in sorted(totals.items())]

    def publish(self, table: Table) -> list[PartitionStatus]:
        """Publish what the watermarks have closed (with their markers, where the table
        asks for them), then deliver pending callbacks.

        A failure of the state database is logged, not raised: the commit it follows has
        landed, and the next commit publishes again (publishing is derived from the
        committed checkpoints, so nothing is lost by waiting).
        """
        metadata = table.metadata
        field = time_partition(metadata)
        if field is None:
            return []
        writers = self._policy.writers or (self._job_id,)
        allowed = self._policy.lateness if self._policy.lateness is not None else lateness(metadata)
        idle = self._policy.idle_timeout if self._policy.idle_timeout is not None else idle_timeout(metadata.properties)
        try:
            if self._policy.writers is not None or self._store.policy(self._table_name) is None:
                # a job without a policy of its own never replaces a recorded one
                self._store.record_policy(
                    self._table_name, writers=writers, lateness=allowed, idle_timeout=idle, recorded_by=self._job_id
                )
            published = self._store.publish(
                self._table_name, field, writers=writers, lateness=allowed, completed_by=self._job_id, idle_timeout=idle
            )
        except (SQLAlchemyError, StateDatabaseError):
            logger.exception(
                "publishing complete partitions of %s failed; retried after the next commit", self._table_name
            )
            return []
        for status in published:
            logger.info(
                "partition %s of %s is complete (%d records; watermark %s, lateness %s)",
                status.label,
                self._table_name,
                status.records_at_completion,
                status.watermark.isoformat(),
                status.lateness,
            )
        write_markers(table, published)
        try:
            self._deliver()
        except StateDatabaseError:
            logger.exception("delivering completions of %s failed; retried after the next commit", self._table_name)
        return published

    def _deliver(self) -> None:
        callback = self._policy.on_complete
        if callback is None:
            return
        for status in self._store.undelivered(self._table_name):
            try:
                callback(status)
            except Exception:  # a scheduler hiccup must not fail the commit that landed
                logger.exception(
                    "completion callback for %s of %s failed; retried after the next commit",
                    status.label,
                    self._table_name,
                )
                return
            self._store.mark_notified(status)


def write_markers(table: Table, statuses: Sequence[PartitionStatus]) -> int:
    """Write the ``_SUCCESS`` marker of each published partition when the table's
    ``icecommit.partition-marker`` is true (an empty object, overwritten if present, never
    read back by icecommit; the orphan sweep keeps it). A storage failure is logged:
    ``icecommit partitions TABLE --publish`` writes the markers that are missing. Returns
    how many were written."""
    if not statuses or not partition_marker(table.metadata.properties):
        return 0
    written = 0
    for status in statuses:
        path = marker_path(table.metadata, status.label)
        try:
            with table.io.new_output(path).create(overwrite=True) as out:
                out.write(b"")
        except OSError:
            logger.exception("could not write the marker of partition %s (%s)", status.label, path)
            continue
        written += 1
        logger.info("wrote the marker of partition %s: %s", status.label, path)
    return written


def publish_complete_partitions(
    catalog: Catalog, table: Table | str, *, clock: Callable[[], datetime] | None = None
) -> list[PartitionStatus]:
    """Publish the time partitions that the table's recorded completeness policy (writers,
    lateness, idle timeout; recorded by the committers that use it) deems complete now, as
    a committer does after each commit; returns those published by this call. For a
    scheduler: an idle writer's partitions need no commit to be published. Completion
    callbacks are delivered by the next commit of a committer that has one. Where the
    table asks for markers (``icecommit.partition-marker``), every published partition
    whose marker is missing gets it.

    Raises:
        NoSuchTableError: the table does not exist.
        InvalidArgumentError: the table has no time partition, or no committer has recorded
            a completeness policy for it yet.
    """
    published = publish_if_recorded(catalog, table, clock=clock)
    if isinstance(published, str):
        raise InvalidArgumentError("table", table_name(table), published)
    return published


def publish_if_recorded(
    catalog: Catalog, table: Table | str, *, clock: Callable[[], datetime] | None = None
) -> list[PartitionStatus] | str:
    """:func:`publish_complete_partitions`, for a caller to whom a table with nothing to
    publish yet is no error (the streaming listener while the query is idle): where the
    table has no time partition, or no committer has recorded a completeness policy for it
    yet, returns what the table would have to be instead, and publishes nothing."""
    loaded = resolve_table(catalog, table)
    name = table_name(table)
    field = time_partition(loaded.metadata)
    if field is None:
        return "a table partitioned by a time transform of its event-time column"
    store = PartitionStatusStore(state_engine(state_uri(catalog)), clock=clock or utc_now)
    policy = store.policy(name)
    if policy is None:
        return "a table whose committers have recorded a completeness policy (none has committed yet)"
    writers, lateness, idle = policy
    published = store.publish(
        name, field, writers=writers, lateness=lateness, idle_timeout=idle, completed_by="publish"
    )
    if partition_marker(loaded.metadata.properties):  # those of this call, and any a failure left out
        missing = [
            s for s in store.statuses(name) if not loaded.io.new_input(marker_path(loaded.metadata, s.label)).exists()
        ]
        write_markers(loaded, missing)
    return published
