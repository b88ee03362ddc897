"""Readers beside multi-table checkpoints: with one catalog commit per checkpoint, a
reader that reads the tables' pointers together never sees a checkpoint in one table and
not in the other; committed table by table, it does (so this test can fail). The
consistent cut (``ic.consistent_cut``) gives each table's snapshot as of the newest
checkpoint all of them hold, whichever way they were committed."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.catalog.multi_table import read_together
from icecommit.committer.checkpoint_tables import commit_to_tables
from icecommit.core import ancestry
from icecommit.errors import InvalidArgumentError, TableNotFoundError
from tests.cli.runner import invoke
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

JOB = "orders"
CHECKPOINTS = 100


def _heads(catalog: SqlCatalog, names: list[str]) -> tuple[int | None, ...]:
    """The job's checkpoint each table shows now, from one read of the pointers."""
    found = read_together(catalog, names)
    return tuple(ancestry.highest_committed_checkpoint(found[n], JOB) for n in names)


def _run(catalog: SqlCatalog, names: list[str], *, atomic: bool) -> tuple[int, int]:
    """Commit CHECKPOINTS checkpoints to both tables while readers read; (partial reads,
    reads)."""
    committers = {n: ic.GlobalCommitter(catalog, n, job_id=JOB, sleep=lambda _: None) for n in names}
    seen: list[tuple[int | None, ...]] = []
    done = threading.Event()

    def read() -> None:
        seen.append(_heads(catalog, names))

    def reader() -> None:
        while not done.wait(0.005):
            read()

    def then_read(commit: Callable[..., Any]) -> Callable[..., Any]:
        def committed(*args: Any, **kwargs: Any) -> Any:
            result = commit(*args, **kwargs)
            read()  # right after one table's part returned
            return result

        return committed

    for committer in committers.values():
        committer.commit = then_read(committer.commit)  # type: ignore[method-assign]
    beside = threading.Thread(target=reader)
    beside.start()
    try:
        for checkpoint in range(1, CHECKPOINTS + 1):
            plans = {}
            for i, (name, committer) in enumerate(committers.items()):
                rows = events(checkpoint * 10 + i * 1000, checkpoint * 10 + i * 1000 + 2)
                results = [write_arrow(committer.load_table(), rows, job_id=JOB, checkpoint_id=checkpoint)]
                plans[name] = committer.prepare_planned(checkpoint, results)
            commit_to_tables(committers, checkpoint, plans, together_in=catalog if atomic else None)
    finally:
        done.set()
        beside.join()
    partial = sum(1 for heads in seen if len(set(heads)) > 1)
    return partial, len(seen)


@pytest.mark.parametrize("atomic", [True, False], ids=["one-commit", "table-by-table"])
def test_readers_never_see_half_a_checkpoint_when_it_is_one_commit(sqlite_catalog: SqlCatalog, atomic: bool) -> None:
    catalog = sqlite_catalog
    names = [f"{catalog.name}.orders", f"{catalog.name}.lines"]
    for name in names:
        ic.create_table(catalog, name, EVENTS_SCHEMA)
    partial, reads = _run(catalog, names, atomic=atomic)
    assert reads >= 2 * CHECKPOINTS
    if atomic:
        assert partial == 0
    else:
        assert partial >= CHECKPOINTS  # at least after every first table's part
    cut = ic.consistent_cut(catalog, names, job_id=JOB)
    assert cut.checkpoint_id == CHECKPOINTS and set(cut.snapshots) == set(names)
    for i, name in enumerate(names):
        table = catalog.load_table(name)
        rows = table.scan(snapshot_id=cut.snapshots[name]).to_arrow()
        assert len(rows) == 2 * CHECKPOINTS and min(rows.column("id").to_pylist()) == 10 + i * 1000


def test_the_cut_is_the_newest_checkpoint_every_table_holds(sqlite_catalog: SqlCatalog, tmp_path: Path) -> None:
    catalog = sqlite_catalog
    names = [f"{catalog.name}.a", f"{catalog.name}.b"]
    for name in names:
        ic.create_table(catalog, name, EVENTS_SCHEMA)
    committers = {n: ic.GlobalCommitter(catalog, n, job_id=JOB, sleep=lambda _: None) for n in names}
    snapshot: dict[tuple[str, int], int] = {}
    for checkpoint, tables in ((1, names), (2, names), (3, names[:1])):  # b is behind: 3 is in a only
        for name in tables:
            committer = committers[name]
            rows = events(checkpoint * 10, checkpoint * 10 + 3)
            written = write_arrow(committer.load_table(), rows, job_id=JOB, checkpoint_id=checkpoint)
            committer.prepare(checkpoint, [written])
            result = committer.commit(checkpoint)
            assert result.snapshot_id is not None
            snapshot[(name, checkpoint)] = result.snapshot_id
    cut = ic.consistent_cut(catalog, names, job_id=JOB)
    assert cut.checkpoint_id == 2
    assert cut.snapshots == {names[0]: snapshot[(names[0], 2)], names[1]: snapshot[(names[1], 2)]}
    assert cut.marks == {names[0]: 3, names[1]: 2}
    assert ic.consistent_cut(catalog, names, job_id="nobody").checkpoint_id is None
    where = ("--catalog", catalog.name, "--uri", catalog.properties["uri"])
    where += ("--warehouse", catalog.properties["warehouse"])
    printed = invoke(tmp_path, *where, "cut", *names, "--job", JOB)
    assert printed.returncode == 0, printed.stderr
    assert "checkpoint 2 is the newest" in printed.stdout and "(has up to checkpoint 3)" in printed.stdout
    assert f"snapshot {snapshot[(names[1], 2)]}" in printed.stdout
    as_json = json.loads(invoke(tmp_path, *where, "--output", "json", "cut", *names, "--job", JOB).stdout)
    assert as_json["checkpoint_id"] == 2 and as_json["tables"][names[0]]["highest_checkpoint"] == 3
    assert invoke(tmp_path, *where, "cut", *names, "--job", "nobody").returncode == 1
    with pytest.raises(TableNotFoundError, match="nope"):
        ic.consistent_cut(catalog, [names[0], f"{catalog.name}.nope"], job_id=JOB)
    with pytest.raises(InvalidArgumentError, match="tables"):
        ic.consistent_cut(catalog, [names[0], names[0]], job_id=JOB)
