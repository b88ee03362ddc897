"""The orphan-file sweep: files under a table's location that nothing references.

Iceberg's ``remove_orphan_files`` has no pyiceberg counterpart. The sweep keeps every file
that a retained snapshot of any table of the catalog or a prepared checkpoint still needs.
This is the only place in icecommit that lists a directory, and it never runs on the write
path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icecommit.catalog.storage import (
    footprint_of_others,
    keys_of,
    list_location,
    referenced_files,
    refuse_foreign_stores,
    refuse_shared_location,
)
from icecommit.catalog.tables import resolve_table
from icecommit.core import progress
from icecommit.core.identifiers import table_name
from icecommit.maintenance.expire import age_limit, refuse_without_gc
from icecommit.state.identity import table_state
from icecommit.state.maintenance_runs import ORPHANS, MaintenanceRunStore

logger = logging.getLogger(__name__)

DEFAULT_ORPHAN_AGE = timedelta(days=3)  # Iceberg's remove_orphan_files


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
    #: other tables of the catalog that could not be read (name -> why; a listing still
    #: works, a deletion refuses while any is left) and those the caller chose to go on without
    unreadable_tables: dict[str, str] = field(default_factory=dict)
    ignored_tables: tuple[str, ...] = ()


def find_orphans(
    catalog: Catalog,
    table: Table | str,
    *,
    older_than: timedelta = DEFAULT_ORPHAN_AGE,
    delete: bool = False,
    now: datetime | None = None,
    ignore_unreadable: Sequence[str] = (),
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
        TableSpecError: ``delete`` where the table's ``gc.enabled`` is not ``true`` (as
            Iceberg); listing alone is allowed.
        UnreadableTablesError: ``delete`` while other tables of the catalog cannot be read
            (one of them might reference a file here) and are not named in
            ``ignore_unreadable``; nothing is deleted. A listing says which they are.
    """
    name = table_name(table)
    loaded = resolve_table(catalog, table)
    if delete:  # listing deletes nothing
        refuse_without_gc(name, loaded.metadata, "delete orphan files")
    store = table_state(catalog, loaded)  # the table's own state database, or refuse before listing
    began = time.perf_counter()
    now = now or datetime.now(timezone.utc)
    limit = age_limit(now, older_than)
    root = keys_of([loaded.metadata.location], name).pop()
    own = keys_of(referenced_files(catalog, loaded), name)
    refuse_foreign_stores(name, root, own)
    others = footprint_of_others(catalog, name)
    refuse_shared_location(name, root, others)
    if delete:
        others.refuse_unreadable(name, "delete orphan files", ignore_unreadable)
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
        with progress.step(f"orphan sweep of {name}: deleting files", len(orphans), "file(s)") as advance:
            for orphan in orphans:
                filesystem.delete_file(natives[orphan.path])
                advance(1)
        logger.warning("deleted %d orphan file(s) under %s", len(orphans), loaded.metadata.location)
        MaintenanceRunStore(store.engine).record(name, ORPHANS, time.perf_counter() - began, {
            "files_deleted": len(orphans), "bytes_deleted": sum(o.size for o in orphans),
        })  # fmt: skip
    ignored = set(ignore_unreadable)
    return OrphanSweep(
        name,
        limit,
        tuple(orphans),
        deleted=delete,
        unreadable_tables={n: why for n, why in others.unreadable.items() if n not in ignored},
        ignored_tables=tuple(sorted(n for n in others.unreadable if n in ignored)),
    )
