"""Snapshot expiry with file cleanup, and the orphan-file sweep.

pyiceberg expires snapshots but deletes no file; Iceberg's ``remove_orphan_files`` has no
pyiceberg counterpart. Both live here, both plan before acting, and both keep every file
that a retained snapshot or a prepared checkpoint still needs. This is the only place in
icecommit that lists a directory (the sweep), and it never runs on the write path.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icecommit import ancestry
from icecommit.catalog.storage import (
    checkpoint_files,
    footprint_of_others,
    keys_of,
    list_location,
    referenced_files,
    refuse_foreign_stores,
    refuse_shared_location,
    union_of_snapshots,
)
from icecommit.catalog.tables import resolve_table
from icecommit.errors import InvalidArgumentError, TableSpecError
from icecommit.identifiers import checked_duration, table_name
from icecommit.state.identity import table_state

logger = logging.getLogger(__name__)

DEFAULT_SNAPSHOT_AGE = timedelta(days=5)  # Iceberg's history.expire.max-snapshot-age-ms
DEFAULT_ORPHAN_AGE = timedelta(days=3)  # Iceberg's remove_orphan_files


@dataclass(frozen=True)
class ExpirePlan:
    """Snapshots to expire, the ones kept on purpose, and the files only they referenced."""

    table: str
    #: The branch head when planned; applying refuses if it moved (a rollback or a commit
    #: in between could have put a planned snapshot back on the branch).
    current_snapshot_id: int | None
    expired_snapshot_ids: tuple[int, ...]
    #: (job, checkpoint) of expiring snapshots that a rollback had already taken off the
    #: branch: recorded as rolled back in the state before their snapshots go.
    rolled_back_checkpoints: tuple[tuple[str, int], ...]
    files_to_delete: tuple[str, ...]
    applied: bool = False
    deleted_files: int = 0


@dataclass(frozen=True)
class OrphanFile:
    """A file under the table's location that nothing references."""

    path: str
    size: int
    modified: datetime


@dataclass(frozen=True)
class OrphanSweep:
    """What the sweep found, and what it deleted."""

    table: str
    older_than: datetime
    orphans: tuple[OrphanFile, ...]
    deleted: bool = False


def plan_expire(
    catalog: Catalog,
    table: Table | str,
    *,
    older_than: timedelta = DEFAULT_SNAPSHOT_AGE,
    retain_last: int = 1,
    now: datetime | None = None,
) -> ExpirePlan:
    """Which snapshots expire and which files go with them; changes nothing.

    Kept: snapshots younger than ``older_than``, the newest ``retain_last`` of the main
    branch, and every branch and tag head. No snapshot is kept for a job's sake: the
    committer finds what a job committed in the table property every commit sets
    (``icecommit.job.<job>.checkpoint``), which expiry does not touch, so a retired job
    pins nothing.
    """
    if retain_last < 1:
        raise InvalidArgumentError("retain_last", retain_last, "a whole number of at least 1")
    name = table_name(table)
    loaded = resolve_table(catalog, table)
    table_state(catalog, loaded)  # the table's own state database, or refuse before planning
    now = now or datetime.now(timezone.utc)
    cutoff_ms = int(_before(now, older_than).timestamp() * 1000)
    lineage = list(ancestry.branch_ancestry(loaded.metadata))
    keep = {s.snapshot_id for s in lineage[:retain_last]}
    keep |= {ref.snapshot_id for ref in loaded.metadata.refs.values()}
    expired = [s for s in loaded.metadata.snapshots if s.snapshot_id not in keep and s.timestamp_ms < cutoff_ms]
    # a checkpoint is taken off by a rollback only when no branch holds it: one committed to
    # another branch than main is on that branch's ancestry, not rolled back
    branches = [ref for ref, target in loaded.metadata.refs.items() if target.snapshot_ref_type == "branch"]
    every_lineage = [s for ref in branches for s in ancestry.branch_ancestry(loaded.metadata, ref)]
    on_branch = {s.snapshot_id for s in every_lineage}
    landed = {key for s in every_lineage if (key := ancestry.checkpoint_of(s)) is not None}
    rolled_back = tuple(
        key
        for s in expired
        if s.snapshot_id not in on_branch
        and (key := ancestry.checkpoint_of(s)) is not None
        and key not in landed  # re-committed since: on the branch in another snapshot
    )
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
    head = loaded.metadata.refs.get("main")
    return ExpirePlan(
        table=name,
        current_snapshot_id=head.snapshot_id if head is not None else None,
        expired_snapshot_ids=tuple(s.snapshot_id for s in expired),
        rolled_back_checkpoints=rolled_back,
        files_to_delete=tuple(doomed),
    )


def apply_expire(catalog: Catalog, plan: ExpirePlan) -> ExpirePlan:
    """Expire the plan's snapshots, then delete the files only they referenced.

    Checkpoints whose snapshots a rollback had taken off the branch are recorded as
    rolled back in the state once the expiry landed (their data files were kept, so they
    can still be re-committed). Files are deleted only after the catalog accepted the
    expiry; if that commit fails, nothing is deleted.

    Raises:
        TableSpecError: the branch moved since the plan was made.
        StateDatabaseError: the table's state database cannot be reached or is not the
            one opened; nothing was expired.
    """
    loaded = catalog.load_table(plan.table)
    store = table_state(catalog, loaded)
    head = loaded.metadata.refs.get("main")
    if (head.snapshot_id if head is not None else None) != plan.current_snapshot_id:
        raise TableSpecError(plan.table, "changed since the expiry was planned; plan again")
    present = {s.snapshot_id for s in loaded.metadata.snapshots}
    ids = [i for i in plan.expired_snapshot_ids if i in present]
    removed = {  # (job, checkpoint) -> the expiring snapshot that holds it
        key: snapshot.snapshot_id
        for i in ids
        if (snapshot := loaded.metadata.snapshot_by_id(i)) is not None
        and (key := ancestry.checkpoint_of(snapshot)) is not None
    }
    if ids:
        loaded.maintenance.expire_snapshots().by_ids(ids).commit()
    if plan.rolled_back_checkpoints:
        # after the expiry landed: until then the snapshots themselves show the rollback
        store.mark_rolled_back(plan.table, plan.rolled_back_checkpoints, snapshots=removed)
    deleted = 0
    for path in plan.files_to_delete:
        try:
            loaded.io.delete(path)
            deleted += 1
        except FileNotFoundError:
            continue
    logger.warning("expired %d snapshot(s) of %s and deleted %d file(s)", len(ids), plan.table, deleted)
    return ExpirePlan(**{**plan.__dict__, "applied": True, "deleted_files": deleted})


def find_orphans(
    catalog: Catalog,
    table: Table | str,
    *,
    older_than: timedelta = DEFAULT_ORPHAN_AGE,
    delete: bool = False,
    now: datetime | None = None,
) -> OrphanSweep:
    """Files under the table's location that nothing references and that are older than
    ``older_than``; deleted only when ``delete`` is True.

    "Nothing" is every table of the catalog and every prepared checkpoint of any table,
    with paths compared by storage key (``file:/x``, ``file:///x`` and ``/x`` are one
    file). The location is listed through the table's FileIO, literally.

    Raises:
        UnsafeLocationError: the location contains another table's location, the table
            references files in another file system, or a path cannot be compared;
            nothing is deleted.
        StateDatabaseError: the table's state database cannot be reached or is not the
            one opened (its prepared checkpoints would look like orphans); nothing is deleted.
    """
    name = table_name(table)
    loaded = resolve_table(catalog, table)
    table_state(catalog, loaded)  # the table's own state database, or refuse before listing
    now = now or datetime.now(timezone.utc)
    limit = _before(now, older_than)
    root = keys_of([loaded.metadata.location], name).pop()
    own = keys_of(referenced_files(catalog, loaded), name)
    refuse_foreign_stores(name, root, own)
    others = footprint_of_others(catalog, name)
    refuse_shared_location(name, root, others)
    referenced = own | others.referenced
    filesystem, stored = list_location(loaded, name, root)
    orphans = []
    natives = {}
    for file in stored:
        if file.key in referenced:
            continue
        modified = file.modified if file.modified is not None else now
        if modified < limit:
            shown = file.key.path if file.key.scheme == "file" else file.key.uri()
            natives[shown] = file.native_path
            orphans.append(OrphanFile(shown, file.size, modified))
    orphans.sort(key=lambda o: o.path)
    if delete:
        for orphan in orphans:
            filesystem.delete_file(natives[orphan.path])
        logger.warning("deleted %d orphan file(s) under %s", len(orphans), loaded.metadata.location)
    return OrphanSweep(name, limit, tuple(orphans), deleted=delete)


def _before(now: datetime, older_than: object) -> datetime:
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
