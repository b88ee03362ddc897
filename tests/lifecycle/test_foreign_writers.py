"""Another tool appends to the table while icecommit jobs commit to it: real processes,
on SQLite and PostgreSQL. Every row of every writer lands exactly once, and icecommit's
reconciliation of its own jobs stays ok."""

from __future__ import annotations

import json
import time
from collections import Counter
from contextlib import ExitStack
from itertools import pairwise
from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.core.ancestry import branch_ancestry, checkpoint_of, committed_checkpoints
from tests import processes
from tests.committer.crash_driver import ROWS, checkpoint_rows
from tests.helpers import EVENTS_SCHEMA
from tests.lifecycle import foreign_driver
from tests.lifecycle.foreign_driver import foreign_rows

CHECKPOINTS = 6
APPENDS = 6
#: icecommit jobs and their id offsets: checkpoint c holds c * 1000 + offset .. + ROWS
JOBS = {"ingest-a": 0, "ingest-b": 100}
#: foreign writers and their first id: append i holds start + i * 1000 .. + FOREIGN_ROWS
FOREIGN = {"other-tool-1": 1_000_000, "other-tool-2": 2_000_000}
PROCESS_TIMEOUT_S = 240


def _commands(catalog: SqlCatalog, table: str, barrier: Path) -> dict[str, list[str]]:
    common = [
        "--uri", catalog.properties["uri"], "--warehouse", catalog.properties["warehouse"],
        "--catalog-name", catalog.name, "--table", table,
        "--barrier", str(barrier), "--parties", str(len(JOBS) + len(FOREIGN)),
    ]  # fmt: skip
    commands = {
        job: [*common, "--name", job, "icecommit", "--job", job, "--checkpoints", str(CHECKPOINTS),
              "--job-offset", str(offset)]
        for job, offset in JOBS.items()
    }  # fmt: skip
    for name, start in FOREIGN.items():
        commands[name] = [*common, "--name", name, "foreign", "--start", str(start), "--appends", str(APPENDS)]
    return commands


def _run_all(commands: dict[str, list[str]]) -> dict[str, str]:
    """Start every driver at once, each a process of its own; each must exit 0. Returns
    each one's stdout."""
    outputs: dict[str, str] = {}
    with ExitStack() as running:  # a failure kills the rest and removes their folders
        children = {
            name: running.enter_context(processes.Child(foreign_driver.main, argv)) for name, argv in commands.items()
        }
        for name, child in children.items():
            stdout, stderr = child.communicate(timeout=PROCESS_TIMEOUT_S)
            assert child.returncode == 0, f"{name} exited {child.returncode}:\n{stderr[-3000:]}"
            outputs[name] = stdout
    return outputs


def _expected_ids() -> Counter[int]:
    ids: Counter[int] = Counter()
    for offset in JOBS.values():
        for c in range(1, CHECKPOINTS + 1):
            ids.update(checkpoint_rows(c, offset).column("id").to_pylist())
    for start in FOREIGN.values():
        for i in range(APPENDS):
            ids.update(foreign_rows(start, i).column("id").to_pylist())
    return ids


def test_a_foreign_writer_appending_at_the_same_time_loses_and_duplicates_nothing(
    catalog: SqlCatalog, tmp_path: Path
) -> None:
    table = f"{catalog.name}.events"
    ic.create_table(catalog, table, EVENTS_SCHEMA, partition_by=["event"],
                    properties={"icecommit.event-time-column": "ts"})  # fmt: skip
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    started = time.monotonic()
    outputs = _run_all(_commands(catalog, table, barrier))
    elapsed = time.monotonic() - started

    loaded = catalog.load_table(table)
    ids = Counter(loaded.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
    expected = _expected_ids()
    missing, extra = expected - ids, ids - expected
    assert ids == expected, f"missing ids {sorted(missing)[:20]}, duplicated or foreign {sorted(extra)[:20]}"
    assert sum(ids.values()) == len(JOBS) * CHECKPOINTS * ROWS + len(FOREIGN) * APPENDS * foreign_rows(0, 0).num_rows

    # the ancestry: each icecommit checkpoint once, each foreign append once
    ancestry = list(branch_ancestry(loaded.metadata))
    landed = Counter((c.job_id, c.checkpoint_id) for c in committed_checkpoints(loaded.metadata))
    assert landed == Counter({(job, c): 1 for job in JOBS for c in range(1, CHECKPOINTS + 1)})
    kinds = ["icecommit" if checkpoint_of(s) is not None else "foreign" for s in reversed(ancestry)]
    assert kinds.count("foreign") == len(FOREIGN) * APPENDS
    # how much the writers overlapped depends on scheduling: shown, not asserted
    switches = sum(1 for before, after in pairwise(kinds) if before != after)
    print(f"icecommit and foreign snapshots alternate {switches} times in the ancestry")

    committer = ic.GlobalCommitter(catalog, table, job_id="ingest-a")
    states = committer.store.list(committer.table_name)
    assert sorted((s.job_id, s.checkpoint_id) for s in states) == sorted(landed)
    assert all(s.committed for s in states), [(s.job_id, s.checkpoint_id, s.status) for s in states]

    for job in JOBS:
        report = ic.reconcile(catalog, table, job_id=job, deep=True)
        assert report.ok, report.to_markdown()
        lines = {line.checkpoint_id: line for line in report.checkpoints}
        assert sorted(lines) == list(range(1, CHECKPOINTS + 1)), report.to_markdown()
        for line in lines.values():
            counts = (line.source, line.written, line.committed, line.readable)
            assert counts == (ROWS,) * 4, f"{job} checkpoint {line.checkpoint_id}: {counts}\n{report.to_markdown()}"

    foreign_retries = sum(json.loads(outputs[name])["retries"] for name in FOREIGN)
    committer_retries = sum(s.retries for s in states)
    print(f"{elapsed:.1f}s, {switches} writer switches, retries: icecommit {committer_retries}, "
          f"foreign {foreign_retries}")  # fmt: skip
