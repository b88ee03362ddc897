"""Snapshot expiry with file cleanup.

pyiceberg expires snapshots but deletes no file; Iceberg's ``remove_orphan_files`` has no
pyiceberg counterpart. Both live here, both plan before acting, and both keep every file
that a retained snapshot or a prepared checkpoint still needs. This is the only place in
icecommit that lists a directory (the sweep), and it never runs on the write path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table, TableProperties
from pyiceberg.table.metadata import TableMetadata

from icecommit.catalog.loading import load_table
from icecommit.catalog.storage import (
    checkpoint_files,
    footprint_of_others,
    keys_of,
    refuse_shared_location,
    union_of_snapshots,
)
from icecommit.catalog.tables import resolve_table
from icecommit.committer import protocol
from icecommit.core import ancestry, progress
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.errors import InvalidArgumentError, PlanChangedError, TableSpecError, UnreadableTablesError
from icecommit.core.identifiers import checked_count, checked_duration, table_name
from icecommit.state.compactions import CompactionStore, resolve_landed_groups
from icecommit.state.identity import table_state
from icecommit.state.maintenance_runs import EXPIRY, MaintenanceRunStore

logger = logging.getLogger(__name__)

#: Iceberg's defaults for ``history.expire.max-snapshot-age-ms`` and
#: ``history.expire.min-snapshots-to-keep``: where neither the branch, the call nor the table
#: says otherwise, a branch keeps its head and every snapshot younger than five days
DEFAULT_SNAPSHOT_AGE = timedelta(milliseconds=TableProperties.MAX_SNAPSHOT_AGE_MS_DEFAULT)
DEFAULT_SNAPSHOTS_TO_KEEP = TableProperties.MIN_SNAPSHOTS_TO_KEEP_DEFAULT
#: Iceberg's switch for deleting a table's files (default true); pyiceberg has no constant
GC_ENABLED = "gc.enabled"


@dataclass(frozen=True)
class BranchRetention:
    """What expiry keeps of one branch: its newest ``min_snapshots_to_keep`` snapshots and
    every one of its snapshots younger than ``max_snapshot_age_ms``."""

    branch: str
    min_snapshots_to_keep: int
    max_snapshot_age_ms: int
    #: where the rules came from: ``branch`` (set on the branch itself, which wins, as in
    #: Iceberg), ``argument`` (the call's ``older_than`` / ``retain_last``), ``table`` (the
    #: table's ``history.expire.*`` properties) or ``default`` (Iceberg's: 1 and 5 days); one
    #: word per rule, age first
    source: str


@dataclass(frozen=True)
class RefHead:
    """A branch or tag and the snapshot it pointed at when the expiry was planned."""

    name: str
    snapshot_id: int


@dataclass(frozen=True)
class ExpirePlan:
    """Snapshots to expire, the ones kept on purpose, and the files only they referenced."""

    table: str
    #: The head of the branch expired (main's where every branch is) when planned (None: no
    #: snapshot yet).
    current_snapshot_id: int | None
    expired_snapshot_ids: tuple[int, ...]
    #: (job, checkpoint) of expiring snapshots that a rollback had already taken off the
    #: branch: recorded as rolled back in the state before their snapshots go.
    rolled_back_checkpoints: tuple[tuple[str, int], ...]
    files_to_delete: tuple[str, ...]
    applied: bool = False
    deleted_files: int = 0
    #: the rules each branch was kept by
    retention: tuple[BranchRetention, ...] = ()
    #: every branch and tag when planned; applying refuses if any moved, appeared or went (a
    #: rollback, a commit or a new tag in between could make a planned snapshot one that the
    #: rules keep)
    refs: tuple[RefHead, ...] = ()
    #: other tables of the catalog that could not be read (name -> why) and were not named
    #: in ``ignore_unreadable``: applying a plan that deletes files refuses while any is left
    unreadable_tables: dict[str, str] = field(default_factory=dict)
    #: unreadable tables the caller named in ``ignore_unreadable`` (the plan went on without them)
    ignored_tables: tuple[str, ...] = ()
    #: the one branch whose snapshots the plan expires (None: every branch's, and those on none)
    branch: str | None = None


def plan_expire(
    catalog: Catalog,
    table: Table | str,
    *,
    older_than: timedelta | None = None,
    retain_last: int | None = None,
    now: datetime | None = None,
    ignore_unreadable: Sequence[str] = (),
    branch: str | None = None,
) -> ExpirePlan:
    """Which snapshots expire and which files go with them; changes nothing.

    Kept, by Apache Iceberg's rules: every branch and tag head; on every branch, its newest
    ``min-snapshots-to-keep`` snapshots and those younger than its ``max-snapshot-age``; and
    any other snapshot (on no branch) younger than the default age. A branch's own settings
    (on its ref) win; otherwise ``older_than`` and ``retain_last`` where given, else the
    table's ``history.expire.max-snapshot-age-ms`` and ``history.expire.min-snapshots-to-keep``,
    else five days and one. A file is planned for deletion only when no other table of the
    catalog references it; a table that cannot be read is listed in the plan
    (``unreadable_tables``), and applying a plan that deletes files refuses while one is
    left (``ignore_unreadable`` names those to go on without). Unlike Iceberg, no branch or tag is ever removed (its
    ``max-ref-age-ms`` is not applied). No snapshot is kept for a job's sake: the committer
    finds what a job committed to a branch in the table property every commit sets (one per
    branch and job, :func:`icecommit.core.ancestry.job_checkpoint_property`), which expiry
    does not touch, so a retired job pins nothing, on main or on any other branch.

    ``branch``: expire only that branch's snapshots that its rules leave and that no other
    branch or tag holds (its ancestors shared with main stay while main has them); snapshots
    on no branch are left alone. None (the default) expires every branch's, as Iceberg does.

    Raises:
        InvalidArgumentError: ``older_than`` is not a duration of zero or more,
            ``retain_last`` is not a whole number of at least 1, or ``branch`` is not a
            branch of the table (a tag, or a name it lacks).
        TableSpecError: a ``history.expire.*`` property of the table is not a whole number
            in range (named, with its value), or the table's ``gc.enabled`` is not
            ``true`` (as Iceberg, which refuses then); nothing is planned.
    """
    checked_count(retain_last, "retain_last", optional=True)
    name = table_name(table)
    loaded = resolve_table(catalog, table)
    refuse_without_gc(name, loaded.metadata, "expire snapshots")
    table_state(catalog, loaded)  # the table's own state database, or refuse before planning
    now = now or datetime.now(timezone.utc)
    if older_than is not None:
        age_limit(now, older_than)  # refuses a bad age before anything else is read
    metadata = loaded.metadata
    if branch is not None:
        ancestry.require_branch(metadata, branch)
    default = _default_rule(name, metadata, older_than, retain_last)
    retention = _retention(metadata, default)
    now_ms = int(now.timestamp() * 1000)
    keep = {ref.snapshot_id for ref in metadata.refs.values()}
    branches = [rule.branch for rule in retention]
    for rule in retention:
        cutoff_ms = now_ms - rule.max_snapshot_age_ms
        for number, snapshot in enumerate(ancestry.branch_ancestry(metadata, rule.branch)):
            if number >= rule.min_snapshots_to_keep and snapshot.timestamp_ms < cutoff_ms:
                break  # as Iceberg: older ancestors go too, whatever their (skewed) clocks say
            keep.add(snapshot.snapshot_id)
    every_lineage = [s for ref in branches for s in ancestry.branch_ancestry(metadata, ref)]
    on_branch = {s.snapshot_id for s in every_lineage}
    default_cutoff_ms = now_ms - default.max_snapshot_age_ms
    expired = [
        s
        for s in metadata.snapshots
        if s.snapshot_id not in keep
        # on a branch: its rules decided; on none (a rollback took it off): the default age
        and (s.snapshot_id in on_branch or s.timestamp_ms < default_cutoff_ms)
    ]
    if branch is not None:  # what that branch alone still holds: every other lineage is kept whole
        held_elsewhere = {
            s.snapshot_id for ref in branches if ref != branch for s in ancestry.branch_ancestry(metadata, ref)
        }
        own = {s.snapshot_id for s in ancestry.branch_ancestry(metadata, branch)} - held_elsewhere
        expired = [s for s in expired if s.snapshot_id in own]
        retention = tuple(rule for rule in retention if rule.branch == branch)
    # a checkpoint is taken off by a rollback only when no branch holds it: one committed to
    # another branch than main is on that branch's ancestry, not rolled back
    off = ancestry.rolled_back_snapshots(metadata, lineage=every_lineage)
    rolled_back = tuple(key for s in expired if (key := off.get(s.snapshot_id)) is not None)
    retained = [s for s in loaded.metadata.snapshots if s not in expired]
    root = keys_of([loaded.metadata.location], name).pop()
    others = footprint_of_others(catalog, name)
    refuse_shared_location(name, root, others)
    still_needed = keys_of(
        union_of_snapshots(loaded, retained) | checkpoint_files(catalog, loaded, also=rolled_back), name
    ) | set(others.referenced)
    # only files under the table's own location that nothing else references
    doomed = sorted(
        path
        for path in union_of_snapshots(loaded, expired)
        if (stored := keys_of([path], name).pop()) not in still_needed and stored.is_under(root)
    )
    head = loaded.metadata.refs.get(branch or MAIN_BRANCH)
    ignored = set(ignore_unreadable)
    return ExpirePlan(
        table=name,
        current_snapshot_id=head.snapshot_id if head is not None else None,
        expired_snapshot_ids=tuple(s.snapshot_id for s in expired),
        rolled_back_checkpoints=rolled_back,
        files_to_delete=tuple(doomed),
        retention=retention,
        refs=_ref_heads(metadata),
        unreadable_tables={n: why for n, why in others.unreadable.items() if n not in ignored},
        ignored_tables=tuple(sorted(n for n in others.unreadable if n in ignored)),
        branch=branch,
    )


def refuse_without_gc(table: str, metadata: TableMetadata, action: str) -> None:
    """Refuse, as Iceberg does, where the table says ``gc.enabled`` is not ``true`` (its files
    may be shared with another table, in another catalog: a snapshot of a table, Nessie).

    Raises:
        TableSpecError: gc is disabled; names the property and its value.
    """
    value = metadata.properties.get(GC_ENABLED)
    if value is not None and value.strip().lower() != "true":
        raise TableSpecError(
            table,
            f"cannot {action}: table property gc.enabled is {value!r} (its files may be shared with another "
            "table; deleting them could corrupt it); nothing was changed",
        )


def _ref_heads(metadata: TableMetadata) -> tuple[RefHead, ...]:
    return tuple(RefHead(name, metadata.refs[name].snapshot_id) for name in sorted(metadata.refs))


def _table_setting(table: str, metadata: TableMetadata, key: str, least: int) -> int | None:
    """A whole-number ``history.expire.*`` property of the table (None: not set).

    Raises:
        TableSpecError: set, but not a whole number of at least ``least``.
    """
    raw = metadata.properties.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = least - 1
    if value < least:
        raise TableSpecError(
            table, f"table property {key} is {raw!r}, not a whole number of at least {least}; nothing was expired"
        )
    return value


def _default_rule(
    table: str, metadata: TableMetadata, older_than: timedelta | None, retain_last: int | None
) -> BranchRetention:
    """The rules of a branch that sets none of its own (``branch`` left empty), and the age
    after which a snapshot on no branch goes: the call's, else the table's, else Iceberg's."""
    table_age = _table_setting(table, metadata, TableProperties.MAX_SNAPSHOT_AGE_MS, 0)
    table_keep = _table_setting(table, metadata, TableProperties.MIN_SNAPSHOTS_TO_KEEP, 1)
    if older_than is not None:
        age, age_source = older_than // timedelta(milliseconds=1), "argument"
    elif table_age is not None:
        age, age_source = table_age, "table"
    else:
        age, age_source = DEFAULT_SNAPSHOT_AGE // timedelta(milliseconds=1), "default"
    if retain_last is not None:
        keep, keep_source = retain_last, "argument"
    elif table_keep is not None:
        keep, keep_source = table_keep, "table"
    else:
        keep, keep_source = DEFAULT_SNAPSHOTS_TO_KEEP, "default"
    return BranchRetention("", keep, age, f"{age_source} {keep_source}")


def _retention(metadata: TableMetadata, default: BranchRetention) -> tuple[BranchRetention, ...]:
    """Each branch's rules: its own where set on its ref (as in Iceberg), else ``default``'s."""
    age_source, keep_source = default.source.split()
    rules = []
    for name, ref in sorted(metadata.refs.items()):
        if ref.snapshot_ref_type != "branch":
            continue
        own_age, own_keep = ref.max_snapshot_age_ms, ref.min_snapshots_to_keep
        rules.append(
            BranchRetention(
                branch=name,
                min_snapshots_to_keep=own_keep if own_keep is not None else default.min_snapshots_to_keep,
                max_snapshot_age_ms=own_age if own_age is not None else default.max_snapshot_age_ms,
                source=f"{'branch' if own_age is not None else age_source} "
                f"{'branch' if own_keep is not None else keep_source}",
            )
        )
    return tuple(rules)


class _Expiry(protocol.Operation):
    """Removing the planned snapshots: one compare-and-swap; a conflict means the plan may
    no longer hold (refused: plan again)."""

    conflict = "refuse"
    kind = "expiry"
    remedy = "nothing was deleted; look at the table's snapshots and plan the expiry again"

    def __init__(self, table: str, snapshot_ids: list[int]) -> None:
        self.table_name = table
        self.snapshot_ids = snapshot_ids

    @property
    def label(self) -> str:
        return f"expiry of {len(self.snapshot_ids)} snapshot(s) of {self.table_name}"

    def apply(self, table: Table) -> protocol.Applied:
        table.maintenance.expire_snapshots().by_ids(self.snapshot_ids).commit()
        return protocol.Applied(None, None)

    def find(self, table: Table) -> protocol.Found | None:
        present = {s.snapshot_id for s in table.metadata.snapshots}
        return protocol.Found(None) if present.isdisjoint(self.snapshot_ids) else None


def apply_expire(catalog: Catalog, plan: ExpirePlan) -> ExpirePlan:
    """Expire the plan's snapshots, then delete the files only they referenced.

    Checkpoints whose snapshots a rollback had taken off the branch are recorded as
    rolled back in the state once the expiry landed (their data files were kept, so they
    can still be re-committed). Files are deleted only after the catalog accepted the
    expiry; if that commit fails, nothing is deleted.

    Raises:
        PlanChangedError: a branch or tag moved since the plan was made, or another commit
            landed during the expiry's own; nothing was expired or deleted: plan again.
        StateDatabaseError: the table's state database cannot be reached or is not the
            one opened; nothing was expired.
        UnreadableTablesError: the plan deletes files and other tables of the catalog could
            not be read (not named in ``ignore_unreadable``); nothing was expired.
    """
    if plan.files_to_delete and plan.unreadable_tables:  # before anything is expired
        raise UnreadableTablesError(plan.table, "expire snapshots and delete their files", plan.unreadable_tables)
    began = time.perf_counter()
    loaded = load_table(catalog, plan.table)
    store = table_state(catalog, loaded)
    if _ref_heads(loaded.metadata) != plan.refs:  # main's head among them
        raise PlanChangedError(plan.table, "expiry", since="a branch or tag moved")
    present = {s.snapshot_id for s in loaded.metadata.snapshots}
    ids = [i for i in plan.expired_snapshot_ids if i in present]
    removed = {  # (job, checkpoint) -> the expiring snapshot that holds it
        key: snapshot.snapshot_id
        for i in ids
        if (snapshot := loaded.metadata.snapshot_by_id(i)) is not None
        and (key := ancestry.checkpoint_of(snapshot)) is not None
    }
    if ids:
        # a compaction that died after its swap: recorded while its snapshot still says so
        resolve_landed_groups(CompactionStore(store.engine), plan.table, loaded)
        protocol.run(
            _Expiry(plan.table, ids), base=loaded, load=lambda: load_table(catalog, plan.table), policy=protocol.ONCE
        )
    if plan.rolled_back_checkpoints:
        # after the expiry landed: until then the snapshots themselves show the rollback
        store.mark_rolled_back(plan.table, plan.rolled_back_checkpoints, snapshots=removed)
    deleted = 0
    with progress.step(f"expiry of {plan.table}: deleting files", len(plan.files_to_delete), "file(s)") as advance:
        for path in plan.files_to_delete:
            try:
                loaded.io.delete(path)
                deleted += 1
            except FileNotFoundError:
                pass
            advance(1)
    logger.warning("expired %d snapshot(s) of %s and deleted %d file(s)", len(ids), plan.table, deleted)
    if ids or deleted:  # an expiry that found nothing to do is no maintenance work
        MaintenanceRunStore(store.engine).record(plan.table, EXPIRY, time.perf_counter() - began, {
            "snapshots_expired": len(ids), "files_deleted": deleted,
            "checkpoints_rolled_back": len(plan.rolled_back_checkpoints),
        })  # fmt: skip
    return ExpirePlan(**{**plan.__dict__, "applied": True, "deleted_files": deleted})


def age_limit(now: datetime, older_than: object) -> datetime:
    """``now - older_than``, for an age that is a duration of zero or more.

    Raises:
        InvalidArgumentError: not a timedelta, negative (an age in the future would take
            files being written now), or reaching before year 1.
    """
    age = checked_duration(older_than, "older_than")
    try:
        return now - age
    except OverflowError:
        raise InvalidArgumentError("older_than", older_than, "a duration that ends after year 1") from None
