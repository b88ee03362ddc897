"""Contention with real processes: 8 jobs x 12 checkpoints into one table at once
(bench/soak.py runs concurrent jobs with crashes at length)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer import committed_checkpoints
from tests.committer.crash_driver import ROWS, checkpoint_rows

ROOT = Path(__file__).resolve().parents[2]
JOBS = 8
CHECKPOINTS = 12


def _command(catalog: SqlCatalog, table: str, job: int) -> list[str]:
    return [
        sys.executable, "-m", "tests.committer.crash_driver",
        "--uri", catalog.properties["uri"], "--warehouse", catalog.properties["warehouse"],
        "--table", table, "--job", f"w{job}", "--checkpoints", str(CHECKPOINTS),
        "--job-offset", str(job * 50), "--catalog-name", catalog.name,
    ]  # fmt: skip


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
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = [
        subprocess.Popen(
            _command(catalog, table, job), env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for job in range(JOBS)
    ]
    for process in processes:
        _, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, stderr[-3000:]

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
