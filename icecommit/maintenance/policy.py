"""Maintenance beside the writes: compaction and expiry run after commits, by one process
per table at a time.

``ic.write(..., maintenance=MaintenancePolicy(...))`` and the streaming sink run
:func:`maintain` after a checkpoint has committed (so it never holds a commit back; it
delays the next one by at most the policy's ``budget``). It takes the table's maintenance
lease in the state database first: when another process holds it, this run is skipped.
A holder that dies (a SIGKILL, a lost machine) stops renewing it and the lease lapses after
``lease``; the next writer then takes over. What a dead holder left half done is safe as it
is: a compaction group that did not commit changed nothing in the table (its files are
orphans for the sweep), and an expiry is a single catalog commit.

What it does, within the budget:

- compacts each partition that holds more than ``compact_min_files`` small files, or a data
  file of which position delete files delete at least ``compact_delete_ratio`` of the rows
  (the deleted rows are left out of the rewrite and the delete files dropped; and, with
  ``only_complete``, whose time partition has been published complete, so that a partition
  still being written is not compacted again and again; a table that is not time-partitioned
  has every partition eligible);
- expires snapshots older than ``expire_older_than``, keeping the newest ``retain_last``
  (the committer finds what it committed in table properties, so expiry never costs it
  its exactly-once memory).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from pyiceberg.catalog import Catalog
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform, HourTransform, MonthTransform, YearTransform

from icecommit.catalog.loading import load_table
from icecommit.core.errors import InvalidArgumentError
from icecommit.core.identifiers import checked_count, checked_file_size, table_name
from icecommit.maintenance.compaction import (
    DEFAULT_DELETE_RATIO,
    DEFAULT_MIN_INPUT_FILES,
    CompactionPlan,
    PartitionGroup,
    StepHook,
    checked_delete_ratio,
    compact,
)
from icecommit.maintenance.expire import apply_expire, plan_expire
from icecommit.state.identity import table_state
from icecommit.state.leases import LeaseStore
from icecommit.state.models import utc_now
from icecommit.state.partitions import PartitionStatusStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MaintenancePolicy:
    """What to maintain after commits, and how much time it may take.

    Attributes:
        compact_min_files: compact a partition once it holds more than this many small
            files (None: no compaction).
        compact_delete_ratio: also compact a partition once position delete files delete
            at least this share of one of its data files' rows (None: deletes alone never
            make a partition a candidate). Upserts and row-level deletes leave them.
        only_complete: compact only time partitions published complete (see the module).
        target_file_size: the size compaction writes (default: the table's).
        max_bytes_per_commit: input bytes per compaction commit group (bounds how long
            one group, which always finishes once started, can take).
        expire_older_than: expire snapshots older than this (None: no expiry).
        retain_last: the newest snapshots of each branch that expiry always keeps (None: the
            table's ``history.expire.min-snapshots-to-keep``, else 1; a branch's own
            setting wins, as in Iceberg).
        budget: the most one run may take; compaction starts no group after it, and expiry
            is skipped once it is spent.
        every: run after every ``every``-th checkpoint (checkpoint ids divisible by it).
        lease: how long the lease lasts; a dead holder's lapses after it. Longer than
            ``budget``, so that a live holder never loses it mid-run.
    """

    compact_min_files: int | None = DEFAULT_MIN_INPUT_FILES
    compact_delete_ratio: float | None = DEFAULT_DELETE_RATIO
    only_complete: bool = True
    target_file_size: int | None = None
    max_bytes_per_commit: int = 1024**3
    expire_older_than: timedelta | None = None
    retain_last: int | None = None
    budget: timedelta = timedelta(seconds=60)
    every: int = 1
    lease: timedelta = timedelta(minutes=10)

    def __post_init__(self) -> None:
        if self.compact_min_files is not None and (
            isinstance(self.compact_min_files, bool)
            or not isinstance(self.compact_min_files, int)
            or self.compact_min_files < 1
        ):
            raise InvalidArgumentError("compact_min_files", self.compact_min_files, "a whole number >= 1, or None")
        checked_delete_ratio(self.compact_delete_ratio, "compact_delete_ratio")
        checked_file_size(self.target_file_size)
        checked_count(self.max_bytes_per_commit, "max_bytes_per_commit")
        checked_count(self.every, "every")
        checked_count(self.retain_last, "retain_last", optional=True)
        if self.expire_older_than is not None and (
            not isinstance(self.expire_older_than, timedelta) or self.expire_older_than < timedelta(0)
        ):
            raise InvalidArgumentError("expire_older_than", self.expire_older_than, "a timedelta >= 0, or None")
        if not isinstance(self.budget, timedelta) or self.budget < timedelta(0):
            raise InvalidArgumentError("budget", self.budget, "a timedelta of zero or more")
        if not isinstance(self.lease, timedelta) or self.lease <= self.budget:
            raise InvalidArgumentError("lease", self.lease, f"a timedelta longer than the budget ({self.budget})")

    def due(self, checkpoint_id: int) -> bool:
        """Whether a run is due after this checkpoint."""
        return checkpoint_id % self.every == 0


@dataclass(frozen=True)
class MaintenanceRun:
    """What one :func:`maintain` call did.

    Attributes:
        ran: False when another holder had the lease (``reason`` says who, until when).
        compaction: the compaction's plan and outcome (None when not compacting).
        expired_snapshots: snapshots expired.
        seconds: how long it took.
    """

    table: str
    holder: str
    ran: bool
    reason: str | None = None
    compaction: CompactionPlan | None = None
    expired_snapshots: int = 0
    seconds: float = 0.0


def default_holder() -> str:
    """This process, as a lease holder: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def maintain(
    catalog: Catalog,
    table: Table | str,
    policy: MaintenancePolicy,
    *,
    holder: str | None = None,
    clock: Callable[[], datetime] = utc_now,
    on_step: StepHook | None = None,
) -> MaintenanceRun:
    """Run the policy on ``table`` if this process can take its maintenance lease.

    Raises:
        TableNotFoundError, StateDatabaseError: the table or its state cannot be reached.
        InvalidArgumentError: ``policy`` is not a :class:`MaintenancePolicy`.
    """
    if not isinstance(policy, MaintenancePolicy):
        raise InvalidArgumentError("policy", policy, "an icecommit MaintenancePolicy")
    name = table_name(table)
    loaded = load_table(catalog, name)
    engine = table_state(catalog, loaded).engine
    leases = LeaseStore(engine, clock=clock)
    holder = holder or default_holder()
    lease = f"maintenance:{name}"
    if not leases.acquire(lease, holder, policy.lease):
        current = leases.current(lease)
        who = f"{current.holder} until {current.expires_at.isoformat()}" if current else "another process"
        logger.info("maintenance of %s skipped: the lease is held by %s", name, who)
        return MaintenanceRun(name, holder, ran=False, reason=f"the maintenance lease is held by {who}")
    started = time.monotonic()
    try:
        compaction = None
        if policy.compact_min_files is not None:
            complete = (
                _complete_partitions(PartitionStatusStore(engine), name, loaded.spec())
                if policy.only_complete
                else None
            )
            compaction = compact(
                catalog,
                name,
                min_input_files=policy.compact_min_files + 1,
                target_file_size=policy.target_file_size,
                max_bytes_per_commit=policy.max_bytes_per_commit,
                partition_filter=complete,
                delete_ratio=policy.compact_delete_ratio,
                time_budget=policy.budget,
                on_step=on_step,
            )
        expired = 0
        spent = timedelta(seconds=time.monotonic() - started)
        if policy.expire_older_than is not None and spent < policy.budget:
            plan = plan_expire(catalog, name, older_than=policy.expire_older_than, retain_last=policy.retain_last)
            if plan.expired_snapshot_ids:
                expired = len(apply_expire(catalog, plan).expired_snapshot_ids)
    finally:
        leases.release(lease, holder)
    run = MaintenanceRun(
        name, holder, ran=True, compaction=compaction, expired_snapshots=expired, seconds=time.monotonic() - started
    )
    logger.info(
        "maintenance of %s: %d compaction group(s) committed, %d deferred, %d snapshot(s) expired in %.1f s",
        name,
        compaction.committed if compaction else 0,
        compaction.deferred if compaction else 0,
        expired,
        run.seconds,
    )
    return run


def _complete_partitions(
    store: PartitionStatusStore, name: str, spec: PartitionSpec
) -> Callable[[PartitionGroup], bool]:
    """Partitions eligible under ``only_complete``: on a time-partitioned table (an hour,
    day, month or year field), those whose time partition was published complete; on any
    other table, all of them."""
    timed = {f.name for f in spec.fields if isinstance(f.transform, (HourTransform, DayTransform, MonthTransform,
                                                                      YearTransform))}  # fmt: skip
    published = {status.label for status in store.statuses(name)} if timed else set()

    def eligible(group: PartitionGroup) -> bool:
        return all(part in published for part in group.label.split("/") if part.split("=", 1)[0] in timed)

    return eligible


__all__ = ["MaintenancePolicy", "MaintenanceRun", "default_holder", "maintain"]
