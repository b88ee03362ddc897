"""``ic.write``: both phases, for the common case of one DataFrame per checkpoint."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyiceberg.catalog import Catalog
from pyiceberg.io import FileIO
from pyiceberg.table import Table
from pyspark.sql import DataFrame

from icecommit.catalog.connect import connect
from icecommit.committer.committer import CommitResult, GlobalCommitter
from icecommit.datafiles import WriteResult
from icecommit.errors import SchemaMismatchError, ValidationError
from icecommit.writers.spark import SparkWriter, TaskHook

logger = logging.getLogger(__name__)


def discard_unstaged(results: Sequence[WriteResult], io: FileIO) -> int:
    """Delete the exact files of results that were refused before staging.

    Safe only because such files were never staged nor committed. Returns the count.
    """
    deleted = 0
    for result in results:
        for data_file in result.data_files:
            try:
                io.delete(data_file.path)
                deleted += 1
            except FileNotFoundError:
                continue
    return deleted


def write(
    df: DataFrame,
    table: Table | str,
    *,
    catalog: Catalog | None = None,
    job_id: str,
    checkpoint_id: int,
    branch: str = "main",
    target_file_size: int | None = None,
    task_hook: TaskHook | None = None,
    recommit: bool = False,
) -> CommitResult:
    """Write ``df`` as checkpoint ``checkpoint_id`` of ``job_id``, exactly once.

    First commits any checkpoint of the job that an earlier run prepared and did not
    commit; then, unless the checkpoint is already committed, writes the data files with
    Spark, validates and stages them, and commits them as one snapshot.

    Returns:
        The commit result; ``committed`` is False when the checkpoint was already
        committed (nothing is written twice).

    Raises:
        SchemaMismatchError: the DataFrame does not fit the table (nothing committed; any
            files written are removed).
        ValidationError: pre-commit validation failed (likewise).
        CheckpointRolledBackError: the checkpoint was committed and a rollback removed it;
            pass ``recommit=True`` to commit its staged files again (nothing is rewritten).
        CommitConflictError, CommitStateUnknownError: see ``GlobalCommitter.commit``.
    """
    catalog = catalog or connect()
    committer = GlobalCommitter(catalog, table, job_id=job_id, branch=branch)
    committer.recover()
    if committer.is_committed(checkpoint_id):
        logger.info("checkpoint %d of job %s is already committed; nothing to write", checkpoint_id, job_id)
        return committer.commit(checkpoint_id)
    prepared = committer.store.get(job_id, committer.table_name, checkpoint_id)
    if prepared is not None and prepared.committed:
        if recommit and prepared.snapshot_id is not None:
            return committer.recommit(checkpoint_id)
        return committer.commit(checkpoint_id)
    current = committer.load_table()
    writer = SparkWriter(current, job_id=job_id, target_file_size=target_file_size, task_hook=task_hook)
    results = writer.write(df, checkpoint_id)
    try:
        committer.prepare(checkpoint_id, results)
    except (SchemaMismatchError, ValidationError):
        removed = discard_unstaged(results, current.io)
        logger.warning("checkpoint %d refused; removed its %d unstaged data files", checkpoint_id, removed)
        raise
    return committer.commit(checkpoint_id)
