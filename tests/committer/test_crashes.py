"""Fault injection: a crash at every step boundary, as a dying process (``os._exit``) and
as an exception; after recover and replay every record is present exactly once."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer import committed_checkpoints
from icecommit.errors import CheckpointReusedError, StateDatabaseMismatchError
from icecommit.state import CheckpointStore, state_engine
from icecommit.state.identity import STATE_ID_PROPERTY
from tests import processes
from tests.committer import crash_driver
from tests.committer.crash_driver import (
    CRASH_EXIT_CODE,
    CRASH_POINTS,
    ROWS,
    InjectedCrash,
    checkpoint_rows,
    located,
    process_arguments,
    run_job,
)
from tests.helpers import write_arrow

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINTS = 3


def _driver(catalog: SqlCatalog, table: str, job: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """The driver as a process of its own (a crash is its ``os._exit``)."""
    where, env = process_arguments(catalog)
    argv = [*where, "--table", table, "--job", job, "--checkpoints", str(CHECKPOINTS), *extra]
    return processes.run(crash_driver.main, argv, env={**os.environ, **env})


def assert_exactly_once(catalog: SqlCatalog, table: str, job: str, checkpoints: int = CHECKPOINTS) -> None:
    loaded = catalog.load_table(table)
    ids = Counter(loaded.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
    expected = Counter(i for c in range(1, checkpoints + 1) for i in checkpoint_rows(c).column("id").to_pylist())
    assert ids == expected, f"lost {expected - ids}, duplicated {ids - expected}"
    landed = Counter((c.job_id, c.checkpoint_id) for c in committed_checkpoints(loaded.metadata))
    assert landed == Counter((job, c) for c in range(1, checkpoints + 1))
    committer = ic.GlobalCommitter(catalog, table, job_id=job)
    states = committer.store.list(committer.table_name, job_id=job)
    assert [(s.checkpoint_id, s.status) for s in states] == [(c, "committed") for c in range(1, checkpoints + 1)]


@pytest.mark.over_rest
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_process_killed_at_each_step_then_replayed(catalog: SqlCatalog, point: str) -> None:
    table, job = f"{catalog.name}.events", "crashy"
    crashed = _driver(catalog, table, job, "--crash-point", point, "--crash-checkpoint", "2")
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    replayed = _driver(catalog, table, job)
    assert replayed.returncode == 0, replayed.stderr
    assert_exactly_once(catalog, table, job)


@pytest.mark.over_rest
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_exception_at_each_step_then_replayed_in_the_same_process(catalog: SqlCatalog, point: str) -> None:
    table, job = f"{catalog.name}.events", "crashy"
    uri, warehouse, properties = located(catalog)

    def crash() -> None:
        raise InjectedCrash(point)

    with pytest.raises(InjectedCrash):
        run_job(uri, warehouse, table, job, CHECKPOINTS, crash_point=point, crash_checkpoint=2, crash=crash,
                catalog_name=catalog.name, properties=properties)  # fmt: skip
    run_job(uri, warehouse, table, job, CHECKPOINTS, catalog_name=catalog.name, properties=properties)
    assert_exactly_once(catalog, table, job)


@pytest.mark.over_rest
def test_crash_during_recovery(catalog: SqlCatalog) -> None:
    table, job = f"{catalog.name}.events", "crashy"
    prepared = _driver(catalog, table, job, "--prepare-only")
    assert prepared.returncode == 0, prepared.stderr
    committer = ic.GlobalCommitter(catalog, table, job_id=job)
    assert [s.status for s in committer.store.list(committer.table_name, job_id=job)] == ["prepared"] * 3
    # recovery dies after committing checkpoint 1, right before checkpoint 2's attempt
    crashed = _driver(catalog, table, job, "--crash-point", "before-commit-attempt", "--crash-checkpoint", "2")
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    # the next recovery dies once the catalog accepted checkpoint 2, before the response
    again = _driver(catalog, table, job, "--crash-point", "catalog-accepted", "--crash-checkpoint", "0")
    assert again.returncode == CRASH_EXIT_CODE, again.stderr
    final = _driver(catalog, table, job)
    assert final.returncode == 0, final.stderr
    assert_exactly_once(catalog, table, job)
    # running recovery once more changes nothing
    before = catalog.load_table(table).metadata.snapshots
    assert committer.recover() == []
    assert catalog.load_table(table).metadata.snapshots == before


@pytest.mark.over_rest
def test_recover_never_deletes_data_files(catalog: SqlCatalog) -> None:
    table, job = f"{catalog.name}.events", "crashy"
    uri, warehouse, properties = located(catalog)

    def crash() -> None:
        raise InjectedCrash("after-write")

    # files written for checkpoint 2 were never prepared: recovery leaves them alone
    with pytest.raises(InjectedCrash):
        run_job(uri, warehouse, table, job, CHECKPOINTS, crash_point="after-write", crash_checkpoint=2, crash=crash,
                catalog_name=catalog.name, properties=properties)  # fmt: skip
    data = Path(urlsplit(catalog.load_table(table).metadata.location).path, "data")
    before = set(data.rglob("*.parquet"))
    ic.GlobalCommitter(catalog, table, job_id=job).recover()
    assert set(data.rglob("*.parquet")) == before
    run_job(uri, warehouse, table, job, CHECKPOINTS, catalog_name=catalog.name, properties=properties)
    assert set(data.rglob("*.parquet")) >= before
    assert_exactly_once(catalog, table, job)


@pytest.mark.over_rest
def test_out_of_order_and_repeated_commit_calls(catalog: SqlCatalog) -> None:
    table, job = f"{catalog.name}.events", "calls"
    uri, warehouse, properties = located(catalog)
    run_job(
        uri, warehouse, table, job, CHECKPOINTS, prepare_only=True, catalog_name=catalog.name, properties=properties
    )
    committer = ic.GlobalCommitter(catalog, table, job_id=job)
    assert committer.commit(2).committed  # commits 1 and 2, in order
    assert [c.checkpoint_id for c in committed_checkpoints(catalog.load_table(table).metadata)] == [2, 1]
    assert committer.commit(1).status == "already-committed"
    assert committer.commit(3).committed
    assert committer.commit(3).status == "already-committed"
    assert committer.commit(2).status == "already-committed"
    assert_exactly_once(catalog, table, job)


def test_a_job_restarted_with_its_counter_reset_is_refused_not_dropped(catalog: SqlCatalog, tmp_path: Path) -> None:
    table, job = f"{catalog.name}.events", "reset"
    uri, warehouse, properties = located(catalog)
    run_job(uri, warehouse, table, job, CHECKPOINTS, catalog_name=catalog.name, properties=properties)
    snapshots = catalog.load_table(table).metadata.snapshots
    # the restarted job offers new rows under checkpoint id 1 again
    restarted = ic.GlobalCommitter(catalog, table, job_id=job)
    new_rows = [write_arrow(restarted.load_table(), checkpoint_rows(1, 500), job_id=job, checkpoint_id=1)]
    with pytest.raises(CheckpointReusedError) as info:
        restarted.prepare(1, new_rows)
    assert (info.value.job_id, info.value.checkpoint_id, info.value.status) == (job, 1, "committed")
    assert info.value.snapshot_id == snapshots[0].snapshot_id and "new job id" in str(info.value)
    # ... and with the checkpoint table lost: another state database is refused first, and
    # once the operator points the table at it (as the error says), the ancestry still refuses
    empty_store = CheckpointStore(state_engine(f"sqlite:///{tmp_path / 'other-state.db'}"))
    lost_state = ic.GlobalCommitter(catalog, table, job_id=job, store=empty_store)
    with pytest.raises(StateDatabaseMismatchError) as mismatch:
        lost_state.prepare(1, new_rows)
    with catalog.load_table(table).transaction() as tx:
        tx.set_properties({STATE_ID_PROPERTY: mismatch.value.actual_id})
    snapshots = catalog.load_table(table).metadata.snapshots
    with pytest.raises(CheckpointReusedError) as alone:
        lost_state.prepare(1, new_rows)
    assert (alone.value.status, alone.value.snapshot_id) == ("committed", snapshots[0].snapshot_id)
    assert catalog.load_table(table).metadata.snapshots == snapshots
    with catalog.load_table(table).transaction() as tx:  # back to the catalog's own state database
        tx.set_properties({STATE_ID_PROPERTY: mismatch.value.expected_id})
    # under a new job id the same rows land
    run_job(uri, warehouse, table, "reset-2", 1, catalog_name=catalog.name, properties=properties, job_offset=500)
    assert catalog.load_table(table).scan().to_arrow().num_rows == CHECKPOINTS * ROWS + ROWS


@pytest.mark.over_rest
def test_another_job_takes_over_prepared_checkpoints(catalog: SqlCatalog) -> None:
    table = f"{catalog.name}.events"
    uri, warehouse, properties = located(catalog)
    run_job(
        uri, warehouse, table, "old", CHECKPOINTS, prepare_only=True, catalog_name=catalog.name, properties=properties
    )
    results = ic.GlobalCommitter(catalog, table, job_id="new").take_over("old")
    assert [r.status for r in results] == ["committed"] * 3
    loaded = catalog.load_table(table)
    assert all(s.summary["icecommit.recovered-by"] == "new" for s in loaded.metadata.snapshots)
    assert_exactly_once(catalog, table, "old")
