"""The maintenance policy: compaction and expiry after commits, by one lease holder per
table, within a time budget; a holder killed mid-run lets its lease lapse and the next
writer takes over, with nothing lost or duplicated."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer import PartitionCompleteness
from icecommit.errors import InvalidArgumentError
from icecommit.maintenance import find_orphans
from icecommit.maintenance.policy import MaintenancePolicy, maintain
from icecommit.state import state_engine, state_uri
from icecommit.state.leases import LeaseStore
from tests import processes
from tests.conftest import unique_table
from tests.fakes import commit_checkpoint, events_at, spark_events
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)


def clock_at(moment: datetime):  # type: ignore[no-untyped-def]
    return lambda: moment


def small_commits(catalog: SqlCatalog, name: str, checkpoints: range, job: str = "job") -> None:
    committer = ic.GlobalCommitter(catalog, name, job_id=job)
    for c in checkpoints:
        committer.prepare(c, [write_arrow(committer.load_table(), events(c * 60, c * 60 + 60), job_id=job,
                                          checkpoint_id=c)])  # fmt: skip
        committer.commit(c)


def ids(catalog: SqlCatalog, name: str) -> Counter[int]:
    return Counter(catalog.load_table(name).scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def test_one_holder_at_a_time_renewed_released_and_lapsing(catalog: SqlCatalog) -> None:
    engine = state_engine(state_uri(catalog))
    name = f"maintenance:{unique_table()}"
    hour = timedelta(hours=1)
    assert LeaseStore(engine, clock=clock_at(NOW)).acquire(name, "a", hour)
    assert not LeaseStore(engine, clock=clock_at(NOW + timedelta(minutes=59))).acquire(name, "b", hour)
    assert LeaseStore(engine, clock=clock_at(NOW + timedelta(minutes=30))).acquire(name, "a", hour)  # renewed
    assert not LeaseStore(engine, clock=clock_at(NOW + timedelta(minutes=80))).acquire(name, "b", hour)
    later = LeaseStore(engine, clock=clock_at(NOW + timedelta(minutes=91)))
    assert later.acquire(name, "b", hour)  # a's renewal lapsed at 01:30
    held = later.current(name)
    assert held is not None and held.holder == "b" and held.expires_at == NOW + timedelta(minutes=151)
    later.release(name, "a")  # not a's to release
    assert later.current(name) is not None
    later.release(name, "b")
    assert later.current(name) is None
    assert LeaseStore(engine, clock=clock_at(NOW)).acquire(name, "c", hour)


def test_racing_processes_get_the_lease_once(catalog: SqlCatalog) -> None:
    engine = state_engine(state_uri(catalog))
    name = f"maintenance:{unique_table()}"
    barrier = threading.Barrier(6)
    won: list[str] = []

    def race(holder: str) -> None:
        barrier.wait()
        if LeaseStore(engine).acquire(name, holder, timedelta(minutes=5)):
            won.append(holder)

    threads = [threading.Thread(target=race, args=(f"h{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1


def test_compacts_partitions_over_the_threshold_expires_and_skips_while_another_holds_the_lease(
    catalog: SqlCatalog, table_name: str
) -> None:
    small_commits(catalog, table_name, range(6))
    expected = ids(catalog, table_name)
    engine = state_engine(state_uri(catalog))
    assert LeaseStore(engine).acquire(f"maintenance:{table_name}", "someone-else", timedelta(minutes=5))
    policy = MaintenancePolicy(compact_min_files=5, expire_older_than=timedelta(0))
    skipped = maintain(catalog, table_name, policy, holder="me")
    assert not skipped.ran and skipped.reason is not None and "someone-else until" in skipped.reason
    assert len(catalog.load_table(table_name).snapshots()) == 6  # nothing done

    LeaseStore(engine).release(f"maintenance:{table_name}", "someone-else")
    run = maintain(catalog, table_name, policy, holder="me")
    assert run.ran and run.compaction is not None and run.compaction.committed == 1
    assert len(run.compaction.groups[0].partitions) == 4  # 6 small files each: more than 5
    after = catalog.load_table(table_name)
    assert run.expired_snapshots == 6 and len(after.snapshots()) == 1  # all but the compaction's
    assert ids(catalog, table_name) == expected
    assert ic.reconcile(catalog, table_name, deep=True).ok
    assert LeaseStore(engine).current(f"maintenance:{table_name}") is None  # released

    again = maintain(catalog, table_name, MaintenancePolicy(compact_min_files=1))
    assert again.ran and again.compaction is not None and again.compaction.groups == ()  # nothing small enough


def test_only_published_time_partitions_are_compacted(catalog: SqlCatalog) -> None:
    name = unique_table()
    table = ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["hour(ts)"])
    completeness = PartitionCompleteness()
    for c in range(4):  # every checkpoint writes hour 0 and hour 1; the watermark stays in hour 1
        commit_checkpoint(catalog, table, "job", c, events_at(c, 60 + c, first_id=10 * c), completeness=completeness)
    run = maintain(catalog, name, MaintenancePolicy(compact_min_files=3))
    assert run.compaction is not None
    assert [p.label for g in run.compaction.groups for p in g.partitions] == ["ts_hour=2026-05-01-00"]
    everything = maintain(catalog, name, MaintenancePolicy(compact_min_files=3, only_complete=False))
    assert everything.compaction is not None
    assert [p.label for g in everything.compaction.groups for p in g.partitions] == ["ts_hour=2026-05-01-01"]
    assert ic.reconcile(catalog, name, deep=True).ok


def test_a_spent_budget_defers_the_work(catalog: SqlCatalog, table_name: str) -> None:
    small_commits(catalog, table_name, range(6))
    before = catalog.load_table(table_name).metadata_location
    run = maintain(catalog, table_name, MaintenancePolicy(budget=timedelta(0), expire_older_than=timedelta(0)))
    assert run.ran and run.compaction is not None and run.compaction.deferred == 1 and run.expired_snapshots == 0
    assert "time budget" in (run.compaction.groups[0].reason or "")
    assert catalog.load_table(table_name).metadata_location == before


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"compact_min_files": 0}, "compact_min_files"),
        ({"every": 0}, "every"),
        ({"retain_last": True}, "retain_last"),
        ({"expire_older_than": 5}, "expire_older_than"),
        ({"budget": timedelta(seconds=-1)}, "budget"),
        ({"lease": timedelta(seconds=30)}, "lease"),  # not longer than the budget
        ({"target_file_size": -1}, "target_file_size"),
    ],
)
def test_a_bad_policy_is_refused_with_its_field_named(kwargs: dict[str, object], argument: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        MaintenancePolicy(**kwargs)  # type: ignore[arg-type]
    assert caught.value.argument == argument


KILLED_HOLDER = """
import os, signal, sys
from datetime import timedelta
from pyiceberg.catalog.sql import SqlCatalog
from icecommit.maintenance.policy import MaintenancePolicy, maintain

catalog = SqlCatalog(sys.argv[1], uri=sys.argv[2], warehouse=sys.argv[3])

def die(step, group):
    if step == "commit":  # its files are written; the lineage and the swap are not
        os.kill(os.getpid(), signal.SIGKILL)

maintain(catalog, sys.argv[4], MaintenancePolicy(compact_min_files=3), holder="doomed", on_step=die)
"""


def test_a_holder_killed_mid_run_lets_the_lease_lapse_and_the_next_takes_over(
    catalog: SqlCatalog, table_name: str
) -> None:
    small_commits(catalog, table_name, range(5))
    expected = ids(catalog, table_name)
    killed = processes.run(
        processes.script, KILLED_HOLDER, catalog.name, catalog.properties["uri"], catalog.properties["warehouse"],
        table_name,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-2000:]
    lease = LeaseStore(state_engine(state_uri(catalog))).current(f"maintenance:{table_name}")
    assert lease is not None and lease.holder == "doomed"  # it died holding it
    # the sweep compares the files' real modification times: a moment after the kill, on
    # the real clock (the fixed NOW of the leases made this a time bomb once the wall clock
    # passed NOW + 1 day)
    sweep_at = datetime.now(timezone.utc) + timedelta(seconds=1)
    dead_files = find_orphans(catalog, table_name, older_than=timedelta(0), now=sweep_at).orphans
    assert dead_files  # the group it wrote and never committed

    policy = MaintenancePolicy(compact_min_files=3)
    blocked = maintain(catalog, table_name, policy, holder="next", clock=clock_at(datetime.now(timezone.utc)))
    assert not blocked.ran and "doomed" in (blocked.reason or "")
    after_lapse = lease.expires_at + timedelta(seconds=1)
    run = maintain(catalog, table_name, policy, holder="next", clock=clock_at(after_lapse))
    assert run.ran and run.compaction is not None and run.compaction.committed == 1
    assert ids(catalog, table_name) == expected  # nothing lost, nothing twice
    assert ic.reconcile(catalog, table_name, deep=True).ok
    # what the dead holder wrote is left to the orphan sweep, and nothing else is
    left = find_orphans(catalog, table_name, older_than=timedelta(0), now=sweep_at).orphans
    assert {o.path for o in left} == {o.path for o in dead_files}


@pytest.mark.spark
@pytest.mark.parametrize("catalog", ["sqlite"], indirect=True)  # the Spark side is the same on both
def test_ic_write_runs_the_policy_after_its_commits_and_a_failure_there_keeps_the_commit(
    catalog: SqlCatalog, table_name: str, spark: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    policy = MaintenancePolicy(compact_min_files=2, every=2)
    frames = [spark_events(spark, c * 60, c * 60 + 60) for c in range(5)]
    for c, frame in enumerate(frames[:4]):
        ic.write(frame, table_name, catalog=catalog, job_id="job", checkpoint_id=c, maintenance=policy)
    operations = [s.summary.operation.value for s in catalog.load_table(table_name).snapshots() if s.summary]
    assert operations.count("replace") == 1  # after checkpoint 2 (due, 3 files > 2); not after 3 (not due)
    import icecommit.pipeline

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the maintenance run failed")

    monkeypatch.setattr(icecommit.pipeline, "maintain", broken)
    result = ic.write(frames[4], table_name, catalog=catalog, job_id="job", checkpoint_id=4, maintenance=policy)
    assert result.committed
    assert sum(ids(catalog, table_name).values()) == 5 * 60
    with pytest.raises(InvalidArgumentError, match="MaintenancePolicy"):
        ic.write(frames[0], table_name, catalog=catalog, job_id="job", checkpoint_id=9, maintenance="daily")  # type: ignore[call-overload]
