"""One commit attempt's view of a table: pyiceberg's retries and cleanup switched off."""

from __future__ import annotations

import logging
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.io import FileIO, InputFile, OutputFile
from pyiceberg.table import Table, TableProperties

from icecommit.catalog.fileio import MetadataWriteError
from icecommit.committer.commit_group import group_commit, in_group
from icecommit.committer.delete_files import write_row_deletes
from icecommit.committer.producer import OverwriteFiles, SpecPreservingAppend
from icecommit.committer.table_changes import TableChanges
from icecommit.core import ancestry
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.conflicts import AttemptNotSentError, is_commit_conflict

logger = logging.getLogger(__name__)


class RetainingFileIO(FileIO):
    """A FileIO that reads and writes through another one but never deletes.

    pyiceberg removes the manifests of an attempt that raised ``CommitFailedException``;
    a catalog that misreports a commit that did land would leave the table pointing at
    deleted files. Inside the commit path nothing is deleted: the files of attempts that
    truly failed are left for the orphan sweeper.
    """

    def __init__(self, inner: FileIO) -> None:
        super().__init__(inner.properties)
        self._inner = inner
        self.retained: list[str] = []

    def new_input(self, location: str) -> InputFile:
        return self._inner.new_input(location)

    def new_output(self, location: str) -> OutputFile:
        return self._inner.new_output(location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        path = location if isinstance(location, str) else location.location
        logger.debug("commit path keeps %s (deletes are left to the orphan sweeper)", path)
        self.retained.append(path)


class SendingCatalog:
    """Passes everything to a catalog and notes whether ``commit_table`` was called: an
    attempt that failed before that call is known not to have landed."""

    def __init__(self, inner: Catalog) -> None:
        self._inner = inner
        self.sent = False

    def commit_table(self, table: Table, requirements: Any, updates: Any) -> Any:
        self.sent = True
        try:
            if in_group(table):  # one of several tables committed at once: the group sends it
                return group_commit(table, requirements, updates)
            return self._inner.commit_table(table, requirements, updates)
        except MetadataWriteError as e:
            # a catalog that writes the new metadata file itself does so before its
            # compare-and-swap: the file failing proves the swap was never tried
            raise AttemptNotSentError(f"writing the new table metadata failed: {e}") from e

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def single_attempt_table(table: Table, catalog: Catalog | SendingCatalog, branch: str = MAIN_BRANCH) -> Table:
    """The table as one commit attempt needs it.

    - pyiceberg's own retry loop and cleanup are off: icecommit retries itself, so that the
      ancestry check runs before every attempt, and deletes nothing while a commit's
      outcome could be in doubt;
    - manifests are merged unless the table says otherwise (Iceberg's default; pyiceberg's
      is off), so the manifest list stays bounded as checkpoints accumulate;
    - the in-memory metadata keeps only the branch head among the snapshots. pyiceberg
      re-derives the transaction's metadata many times per commit, at a cost that grows
      with the number of snapshots; the attempt needs only the head (its manifests and
      summary totals). The catalog applies the resulting updates to the full, current
      metadata, and the requirement that the branch head is unchanged makes that exact.

    Only the in-memory copy changes; the table's properties are untouched.
    """
    properties = {
        TableProperties.MANIFEST_MERGE_ENABLED: "true",
        **table.metadata.properties,
        TableProperties.COMMIT_NUM_RETRIES: "0",
    }
    ref = table.metadata.refs.get(branch)
    head = table.metadata.snapshot_by_id(ref.snapshot_id) if ref is not None else None
    metadata = table.metadata.model_copy(
        update={
            "properties": properties,
            "snapshots": [head] if head is not None else [],
            "refs": {branch: ref} if ref is not None else {},
            "snapshot_log": [],
            "metadata_log": [],
        }
    )
    return Table(table.name(), metadata, table.metadata_location, RetainingFileIO(table.io), catalog)  # type: ignore[arg-type]


def commit_changes(
    catalog: Catalog, table: Table, changes: TableChanges, *, job_id: str, checkpoint_id: int
) -> tuple[int, Table]:
    """One commit attempt of a checkpoint: a single compare-and-swap that makes ``changes``
    one snapshot of their branch (each added file under its own partition spec) and sets
    their properties in the same catalog commit; no retries inside pyiceberg, no deletes.
    A replacing change is one ``overwrite`` snapshot that also removes its files; rows
    deleted by position are written first, as delete files the snapshot adds.

    Returns the snapshot id the checkpoint landed as and the table as the commit left it.

    Raises:
        AttemptNotSentError: the attempt failed before it reached the catalog (retryable).
        Anything the catalog raised otherwise: a conflict, or an outcome not known; and
        what storage raised while the delete files were written (nothing was sent).
    """
    branch = changes.branch
    deletes = write_row_deletes(table, changes.row_deletes, job_id=job_id, checkpoint_id=checkpoint_id)
    sending = SendingCatalog(catalog)
    single = single_attempt_table(table, sending, branch)
    summary = dict(changes.summary)
    try:
        with single.transaction() as tx:
            if changes.properties:
                tx.set_properties(dict(changes.properties))
            if not changes.replaces:
                with SpecPreservingAppend.of(tx, branch=branch, snapshot_properties=summary, deletes=deletes) as add:
                    for data_file in changes.added:
                        add.append_data_file(data_file)
            else:
                with OverwriteFiles.of(tx, branch=branch, snapshot_properties=summary) as overwrite:
                    for data_file in changes.removed:
                        overwrite.delete_data_file(data_file)
                    for data_file in changes.added:
                        overwrite.append_data_file(data_file)
    except Exception as e:
        if not sending.sent and not is_commit_conflict(e):
            logger.warning("commit attempt of checkpoint %d failed before reaching the catalog: %r", checkpoint_id, e)
            raise AttemptNotSentError(f"checkpoint {checkpoint_id}: {e!r}") from e
        raise
    # the compare-and-swap made this snapshot the branch head: no walk of the ancestry
    head = ancestry.branch_head(single.metadata, branch)
    if head is None or ancestry.checkpoint_of(head) != (job_id, checkpoint_id):
        raise RuntimeError(f"checkpoint {checkpoint_id} is not the branch head after its commit")
    return head.snapshot_id, Table(table.name(), single.metadata, single.metadata_location, table.io, catalog)
