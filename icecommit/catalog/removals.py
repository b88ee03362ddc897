"""The retained snapshots of a branch that removed data files, read from the manifests
they wrote: the input of the lineage (:mod:`icecommit.core.lineage`), which follows a
checkpoint's rows through them."""

from __future__ import annotations

from pyiceberg.manifest import ManifestContent, ManifestEntryStatus
from pyiceberg.table import Table

from icecommit.core import ancestry
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.lineage import COMPACTION_ID_PROPERTY, Removal, path_key
from icecommit.core.overwrite import OVERWRITE_PARTITIONS
from icecommit.core.write_modes import WRITE_MODE_PROPERTY


def removals_of(table: Table, branch: str = MAIN_BRANCH) -> list[Removal]:
    """Every retained snapshot of the branch that removed data files, oldest first, with
    the files it removed and added (read from the manifests it wrote)."""
    metadata = table.metadata
    found = []
    for snapshot in reversed(list(ancestry.branch_ancestry(metadata, branch))):
        operation = snapshot.summary.operation.value if snapshot.summary is not None else ""
        if operation not in ("replace", "overwrite", "delete"):
            continue
        removed: list[tuple[str, int]] = []
        added: list[tuple[str, int]] = []
        for manifest in snapshot.manifests(table.io):
            if manifest.content != ManifestContent.DATA or manifest.added_snapshot_id != snapshot.snapshot_id:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                if entry.snapshot_id != snapshot.snapshot_id:
                    continue
                item = (path_key(entry.data_file.file_path), entry.data_file.record_count)
                if entry.status == ManifestEntryStatus.DELETED:
                    removed.append(item)
                elif entry.status == ManifestEntryStatus.ADDED:
                    added.append(item)
        if snapshot.summary is not None and snapshot.summary.get(WRITE_MODE_PROPERTY) == OVERWRITE_PARTITIONS:
            added = []  # a partition overwrite's rows are new: none of the removed rows is carried over
        if removed:
            compaction = snapshot.summary.get(COMPACTION_ID_PROPERTY) if snapshot.summary is not None else None
            found.append(Removal(snapshot.snapshot_id, operation, tuple(removed), tuple(added), compaction))
    return found


__all__ = ["removals_of"]
