"""Contention with real processes: 8 jobs x 6 checkpoints into one table at once
(bench/soak.py runs concurrent jobs with crashes at length)."""

from __future__ import annotations

import os
from collections import Counter
from contextlib import ExitStack

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer import committed_checkpoints
from tests import processes
from tests.committer import crash_driver
from tests.committer.crash_driver import ROWS, checkpoint_rows, process_arguments

JOBS = 8
CHECKPOINTS = 6


def _argv(catalog: SqlCatalog, table: str, job: int) -> list[str]:
    where, _ = process_arguments(catalog)
    return [
        *where,
        "--table",
        table,
        "--job",
        f"w{job}",
        "--checkpoints",
        str(CHECKPOINTS),
        "--job-offset",
        str(job * 50),
    ]


@pytest.mark.over_rest
def test_eight_processes_commit_every_checkpoint_exactly_once(catalog: SqlCatalog) -> None:
    table = f"{catalog.name}.events"
    # create the table first so the processes race on commits, not on creation
    ic.create_table(
        catalog,
        table,
        checkpoint_rows(1).schema,
        partition_by=["event"],
        properties={"icecommit.event-time-column": "ts"},
    )
    env = {**os.environ, **process_arguments(catalog)[1]}
    with ExitStack() as running:  # a failure kills the rest and removes their folders
        children = [
            running.enter_context(processes.Child(crash_driver.main, _argv(catalog, table, job), env=env))
            for job in range(JOBS)
        ]
        for child in children:
            _, stderr = child.communicate(timeout=600)
            assert child.returncode == 0, stderr[-3000:]

    loaded = catalog.load_table(table)
    ids = Counter(loaded.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
    expected = Counter(
        i
        for job in range(JOBS)
        for c in range(1, CHECKPOINTS + 1)
        for i in checkpoint_rows(c, job * 50).column("id").to_pylist()
    )
    assert sum(ids.values()) == JOBS * CHECKPOINTS * ROWS
    assert ids == expected
    landed = Counter((c.job_id, c.checkpoint_id) for c in committed_checkpoints(loaded.metadata))
    assert len(landed) == JOBS * CHECKPOINTS and set(landed.values()) == {1}

    committer = ic.GlobalCommitter(catalog, table, job_id="w0")
    states = committer.store.list(committer.table_name)
    assert len(states) == JOBS * CHECKPOINTS and all(s.committed for s in states)
    retries = sum(s.retries for s in states)
    attempts = sum(s.attempts for s in states)
    print(f"{JOBS * CHECKPOINTS} commits, {attempts} attempts, {retries} retries")
    assert attempts == JOBS * CHECKPOINTS + retries
