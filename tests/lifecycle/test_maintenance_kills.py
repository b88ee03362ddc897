"""Maintenance commands killed mid-way (SIGKILL of a real process at the worst point), on
SQLite and PostgreSQL: a rollback between its catalog swap and the state recording it; an
orphan sweep and an expiry after their first deletion; a recommit and a take-over between
the catalog accepting a commit and the state recording it. Afterwards the table, the state
and the files are consistent, nothing committed is lost or committed twice, and running the
command again finishes the job."""

from __future__ import annotations

import signal
import textwrap
from datetime import timedelta

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

import icecommit as ic
from icecommit.errors import CheckpointRolledBackError
from icecommit.maintenance import apply_expire, apply_rollback, find_orphans, plan_expire, plan_rollback
from tests import processes
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

JOB = "kills"


def _table(catalog: SqlCatalog, checkpoints: int = 3) -> Table:
    table = ic.create_table(catalog, f"{catalog.name}.kills", EVENTS_SCHEMA, partition_by=["event"])
    committer = ic.GlobalCommitter(catalog, table, job_id=JOB)
    for checkpoint_id in range(1, checkpoints + 1):
        rows = events(checkpoint_id * 100, checkpoint_id * 100 + 40)
        committer.prepare(checkpoint_id, [write_arrow(committer.load_table(), rows, job_id=JOB,
                                                      checkpoint_id=checkpoint_id)])  # fmt: skip
        committer.commit(checkpoint_id)
    return committer.load_table()


def _killed(catalog: SqlCatalog, body: str) -> None:
    """Run ``body`` in a child process with ``catalog`` open as ``catalog``; the body kills
    its own process (SIGKILL) at the point under test."""
    script = textwrap.dedent(
        """
        import os, signal, sys
        from datetime import timedelta
        from pyiceberg.catalog.sql import SqlCatalog
        import icecommit as ic
        catalog = SqlCatalog(sys.argv[1], uri=sys.argv[2], warehouse=sys.argv[3])
        def die(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)
        """
    ) + textwrap.dedent(body)
    done = processes.run(
        processes.script, script, catalog.name, catalog.properties["uri"], catalog.properties["warehouse"]
    )
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr[-3000:])


def _ids(table: Table) -> list[int]:
    return sorted(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def test_a_rollback_killed_between_the_swap_and_the_state(catalog: SqlCatalog) -> None:
    table = _table(catalog)
    first = next(s for s in table.metadata.snapshots if s.summary and s.summary.get("icecommit.checkpoint-id") == "1")
    _killed(
        catalog,
        f"""
        import icecommit.state.checkpoints as checkpoints
        from icecommit.maintenance import apply_rollback, plan_rollback
        checkpoints.CheckpointStore.mark_rolled_back = die  # the swap landed; the state is not told
        apply_rollback(catalog, plan_rollback(catalog, "{catalog.name}.kills", to_checkpoint=1, job_id="{JOB}"))
    """,
    )
    loaded = catalog.load_table(f"{catalog.name}.kills")
    assert loaded.current_snapshot().snapshot_id == first.snapshot_id  # the swap is in the table
    assert _ids(loaded) == list(range(100, 140))
    committer = ic.GlobalCommitter(catalog, loaded, job_id=JOB)
    states = {s.checkpoint_id: s.status for s in committer.store.list(committer.table_name, job_id=JOB)}
    assert states == {1: "committed", 2: "committed", 3: "committed"}  # the kill came before the state
    # the hidden checkpoints read as rolled back everywhere: never committed again on their own
    with pytest.raises(CheckpointRolledBackError):
        committer.commit(3)
    assert _ids(committer.load_table()) == list(range(100, 140))
    report = ic.reconcile(catalog, loaded, job_id=JOB)
    assert report.ok, report.to_markdown()
    assert {c.checkpoint_id: c.status for c in report.checkpoints} == {1: "committed", 2: "rolled-back",
                                                                       3: "rolled-back"}  # fmt: skip
    # running the rollback again records what the killed one did not
    apply_rollback(catalog, plan_rollback(catalog, loaded, to_checkpoint=1, job_id=JOB))
    states = {s.checkpoint_id: s.status for s in committer.store.list(committer.table_name, job_id=JOB)}
    assert states == {1: "committed", 2: "rolled-back", 3: "rolled-back"}
    # and a deliberate recommit brings checkpoint 3 back exactly once
    committer.recommit(3)
    assert _ids(committer.load_table()) == list(range(100, 140)) + list(range(300, 340))


def test_an_orphan_sweep_killed_after_its_first_deletion(catalog: SqlCatalog) -> None:
    table = _table(catalog)
    # orphans: data files written and never prepared (a writer that died), one per partition
    for n in range(3):
        write_arrow(table, events(900 + 10 * n, 910 + 10 * n), job_id="dead-writer", checkpoint_id=n + 1)
    before = find_orphans(catalog, table, older_than=timedelta(0))
    assert len(before.orphans) >= 3
    _killed(
        catalog,
        f"""
        import icecommit.maintenance.orphans as maintenance
        listed = maintenance.list_location
        def list_location(*args, **kwargs):
            filesystem, stored = listed(*args, **kwargs)
            class DiesAfterOne:
                def delete_file(self, path):
                    filesystem.delete_file(path)
                    die()
            return DiesAfterOne(), stored
        maintenance.list_location = list_location
        maintenance.find_orphans(catalog, "{catalog.name}.kills", older_than=timedelta(0), delete=True)
    """,
    )
    left = find_orphans(catalog, table, older_than=timedelta(0))
    assert len(left.orphans) == len(before.orphans) - 1
    assert {o.path for o in left.orphans} < {o.path for o in before.orphans}
    loaded = catalog.load_table(f"{catalog.name}.kills")
    assert _ids(loaded) == list(range(100, 140)) + list(range(200, 240)) + list(range(300, 340))
    # running it again removes the rest, and only the rest
    again = find_orphans(catalog, loaded, older_than=timedelta(0), delete=True)
    assert {o.path for o in again.orphans} == {o.path for o in left.orphans}
    assert find_orphans(catalog, loaded, older_than=timedelta(0)).orphans == ()
    assert _ids(catalog.load_table(f"{catalog.name}.kills")) == list(range(100, 140)) + list(range(200, 240)) + list(
        range(300, 340)
    )
    report = ic.reconcile(catalog, loaded, job_id=JOB)
    assert report.ok and not report.problems, report.to_markdown()


ALL_IDS = list(range(100, 140)) + list(range(200, 240)) + list(range(300, 340))


def _states(catalog: SqlCatalog, job: str = JOB) -> dict[int, str]:
    committer = ic.GlobalCommitter(catalog, f"{catalog.name}.kills", job_id=job)
    return {s.checkpoint_id: s.status for s in committer.store.list(committer.table_name, job_id=job)}


def test_an_expiry_killed_after_its_first_file_deletion(catalog: SqlCatalog) -> None:
    table = _table(catalog)
    table.delete("id < 200")  # checkpoint 1's files are now referenced by old snapshots only
    plan = plan_expire(catalog, table, older_than=timedelta(0), retain_last=1)
    assert len(plan.files_to_delete) >= 2
    _killed(
        catalog,
        f"""
        from pyiceberg.io.pyarrow import PyArrowFileIO
        from icecommit.maintenance import apply_expire, plan_expire
        original = PyArrowFileIO.delete
        def delete(self, location):
            original(self, location)
            die()
        PyArrowFileIO.delete = delete
        apply_expire(catalog, plan_expire(catalog, "{catalog.name}.kills", older_than=timedelta(0), retain_last=1))
    """,
    )
    loaded = catalog.load_table(f"{catalog.name}.kills")
    assert [s.snapshot_id for s in loaded.metadata.snapshots] == [plan.current_snapshot_id]  # the expiry landed
    assert _ids(loaded) == ALL_IDS[40:]  # and the table is whole
    # the files it did not get to are orphans now: the next sweep removes them, and only them
    left = find_orphans(catalog, loaded, older_than=timedelta(0))
    assert 0 < len(left.orphans) == len(plan.files_to_delete) - 1
    assert {o.path for o in left.orphans} < {p.removeprefix("file://") for p in plan.files_to_delete} | {
        p for p in plan.files_to_delete
    }
    find_orphans(catalog, loaded, older_than=timedelta(0), delete=True)
    assert find_orphans(catalog, loaded, older_than=timedelta(0)).orphans == ()
    assert _ids(catalog.load_table(f"{catalog.name}.kills")) == ALL_IDS[40:]
    # expiring again finds nothing left to do
    again = apply_expire(catalog, plan_expire(catalog, loaded, older_than=timedelta(0), retain_last=1))
    assert again.expired_snapshot_ids == () and again.deleted_files == 0


@pytest.mark.parametrize("again", ["commit", "recommit"])
def test_a_recommit_killed_after_the_catalog_accepted_it(catalog: SqlCatalog, again: str) -> None:
    _table(catalog)
    apply_rollback(catalog, plan_rollback(catalog, f"{catalog.name}.kills", to_checkpoint=2, job_id=JOB))
    assert _states(catalog) == {1: "committed", 2: "committed", 3: "rolled-back"}
    _killed(
        catalog,
        f"""
        def fault(point, checkpoint_id):
            if point == "after-commit":  # the re-commit landed; its state row still says rolled back
                die()
        ic.GlobalCommitter(catalog, "{catalog.name}.kills", job_id="{JOB}", fault=fault).recommit(3)
    """,
    )
    assert _ids(catalog.load_table(f"{catalog.name}.kills")) == ALL_IDS
    assert _states(catalog)[3] == "rolled-back"  # the kill came before the state
    restarted = ic.GlobalCommitter(catalog, f"{catalog.name}.kills", job_id=JOB)
    # the job replaying it, or the operator running the recommit again: found in the
    # ancestry and recorded, nothing appended
    result = restarted.commit(3) if again == "commit" else restarted.recommit(3)
    assert (result.status, result.snapshot_id) == (
        "already-committed",
        restarted.load_table().current_snapshot().snapshot_id,
    )
    assert _states(catalog) == {1: "committed", 2: "committed", 3: "committed"}
    assert restarted.commit(3).status == "already-committed"
    assert _ids(restarted.load_table()) == ALL_IDS  # once
    report = ic.reconcile(catalog, restarted.load_table(), job_id=JOB)
    assert report.ok, report.to_markdown()


def test_a_take_over_killed_between_two_checkpoints(catalog: SqlCatalog) -> None:
    table = ic.create_table(catalog, f"{catalog.name}.kills", EVENTS_SCHEMA, partition_by=["event"])
    old = ic.GlobalCommitter(catalog, table, job_id="old")
    for checkpoint_id in (1, 2, 3):  # the old driver prepared three checkpoints and died
        rows = events(checkpoint_id * 100, checkpoint_id * 100 + 40)
        old.prepare(checkpoint_id, [write_arrow(old.load_table(), rows, job_id="old", checkpoint_id=checkpoint_id)])
    _killed(
        catalog,
        f"""
        def fault(point, checkpoint_id):
            if point == "after-commit" and checkpoint_id == 2:  # 1 recorded, 2 landed unrecorded, 3 untouched
                die()
        ic.GlobalCommitter(catalog, "{catalog.name}.kills", job_id="new", fault=fault).take_over("old")
    """,
    )
    assert _states(catalog, "old") == {1: "committed", 2: "prepared", 3: "prepared"}
    assert _ids(catalog.load_table(f"{catalog.name}.kills")) == ALL_IDS[:80]
    results = ic.GlobalCommitter(catalog, f"{catalog.name}.kills", job_id="new").take_over("old")
    assert [(r.checkpoint_id, r.status) for r in results] == [(2, "already-committed"), (3, "committed")]
    assert _states(catalog, "old") == {1: "committed", 2: "committed", 3: "committed"}
    loaded = catalog.load_table(f"{catalog.name}.kills")
    assert _ids(loaded) == ALL_IDS  # every row once
    assert [s.summary["icecommit.recovered-by"] for s in loaded.metadata.snapshots] == ["new"] * 3
    report = ic.reconcile(catalog, loaded, job_id="old")
    assert report.ok, report.to_markdown()
