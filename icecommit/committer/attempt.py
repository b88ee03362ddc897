"""One commit attempt's view of a table: pyiceberg's retries and cleanup switched off."""

from __future__ import annotations

import logging
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.io import FileIO, InputFile, OutputFile
from pyiceberg.table import Table, TableProperties

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


class AttemptNotSentError(Exception):
    """A commit attempt failed before it reached the catalog, so it cannot have landed
    (for example its base table was stale and a file it read had been expired). Retried
    on a fresh copy of the table, like a lost compare-and-swap."""


class SendingCatalog:
    """Passes everything to a catalog and notes whether ``commit_table`` was called: an
    attempt that failed before that call is known not to have landed."""

    def __init__(self, inner: Catalog) -> None:
        self._inner = inner
        self.sent = False

    def commit_table(self, *args: Any, **kwargs: Any) -> Any:
        self.sent = True
        return self._inner.commit_table(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def single_attempt_table(table: Table, catalog: Catalog | SendingCatalog, branch: str = "main") -> Table:
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
