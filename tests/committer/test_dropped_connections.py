"""PostgreSQL connections cut at each step of prepare, commit, recover and a rollback (a
proxy between icecommit and the server: the catalog and the state database go through it),
and a SQLite state database locked by another process or removed.

Every step is cut twice: before the server sees it, and after (its answer lost). A single
cut is ridden out by the retries, or surfaces as an icecommit error of the environment or
outcome family (never a driver's error); a connection that stays down surfaces the same
way within the retry bounds. Afterwards the table, the state and the files are checked: each
checkpoint in the table once, recorded committed, every file the table references present."""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy.engine import make_url

import icecommit as ic
from icecommit.committer import RetryPolicy
from icecommit.core import ancestry, connections
from icecommit.core.connections import connection_retry
from icecommit.core.errors import CommitOutcomeError, EnvironmentFailureError, IcecommitError
from icecommit.errors import StateDatabaseUnavailableError
from icecommit.maintenance import apply_rollback, plan_rollback
from icecommit.state import CheckpointStore
from icecommit.state.database import dispose_state_engines, shown_uri, state_engine
from tests.conftest import pg_uri
from tests.faultproxy import CutMode, FaultProxy
from tests.helpers import EVENTS_SCHEMA, events, write_arrow


def _tries(caplog: pytest.LogCaptureFixture) -> list[int]:
    """The numbers of the tries each retry of a transient failure logged (counted, not timed:
    a loaded machine makes every try slower, never more numerous)."""
    found = (re.search(r"\(try (\d+)\); retrying", r.getMessage()) for r in caplog.records)
    return [int(m.group(1)) for m in found if m is not None]


FAST = RetryPolicy(max_attempts=5, max_seconds=30, min_wait_s=0.001, max_wait_s=0.01)
MODES: tuple[CutMode, ...] = ("request", "response")


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    url = make_url(pg_uri())
    running = FaultProxy((url.host or "127.0.0.1", url.port or 5432)).start()
    yield running
    running.stop()


@pytest.fixture
def proxied(proxy: FaultProxy, tmp_path: Path) -> Iterator[SqlCatalog]:
    """A catalog (and the state database in it) reached through the proxy."""
    uri = make_url(pg_uri()).set(port=proxy.port).render_as_string(hide_password=False)
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog = ic.connect(f"c{proxy.port}", uri=uri, warehouse=warehouse.as_uri())
    assert isinstance(catalog, SqlCatalog)
    yield catalog
    catalog.engine.dispose()


def _table(catalog: SqlCatalog) -> str:
    name = f"{catalog.name}_{time.monotonic_ns() % 10**9}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    return name


def _results(committer: ic.GlobalCommitter, checkpoint_id: int) -> list[ic.WriteResult]:
    rows = events(checkpoint_id * 100, checkpoint_id * 100 + 20)
    return [write_arrow(committer.load_table(), rows, job_id=committer.job_id, checkpoint_id=checkpoint_id)]


def _surfaced(error: BaseException) -> None:
    """A failure that reached the caller: an icecommit error of the environment or outcome
    family, never a driver's."""
    assert isinstance(error, IcecommitError), f"a raw {type(error).__name__} reached the caller: {error}"
    assert isinstance(error, (EnvironmentFailureError, CommitOutcomeError)), repr(error)


def _check(catalog: SqlCatalog, name: str, job_id: str, checkpoints: list[int]) -> None:
    """Each checkpoint in the table once and recorded committed, every referenced file present."""
    table = catalog.load_table(name)
    ids = Counter(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
    assert ids == Counter(i for c in checkpoints for i in range(c * 100, c * 100 + 20))
    keys = Counter(ancestry.checkpoint_of(s) for s in ancestry.branch_ancestry(table.metadata, "main"))
    assert all(keys[(job_id, c)] == 1 for c in checkpoints), keys
    store = CheckpointStore(state_engine(str(catalog.properties["uri"])))
    assert {s.checkpoint_id: s.status for s in store.list(name, job_id=job_id)} == dict.fromkeys(
        checkpoints, "committed"
    )
    for task in table.scan().plan_files():
        assert Path(task.file.file_path.removeprefix("file://")).is_file(), task.file.file_path


def _steps_of(proxy: FaultProxy, flow: Callable[[], object]) -> int:
    before = proxy.steps
    flow()
    return proxy.steps - before


def _warm_steps(proxy: FaultProxy, committer: ic.GlobalCommitter) -> int:
    """The steps of one checkpoint's prepare and commit once the connections are pooled
    (checkpoints 1 and 2 committed)."""
    for checkpoint in (1, 2):
        results = _results(committer, checkpoint)
        steps = _steps_of(proxy, lambda: (committer.prepare(checkpoint, results), committer.commit(checkpoint)))  # noqa: B023
    return steps


def _replay(committer: ic.GlobalCommitter, checkpoint_id: int, results: list[ic.WriteResult]) -> None:
    """What a restarted job does: recover, then run the checkpoint again from its source."""
    committer.recover()
    committer.prepare(checkpoint_id, results)
    committer.commit(checkpoint_id)


@pytest.mark.postgres
@pytest.mark.parametrize("mode", MODES)
def test_a_connection_cut_at_each_step_of_prepare_and_commit(
    proxy: FaultProxy, proxied: SqlCatalog, mode: CutMode
) -> None:
    name = _table(proxied)
    committer = ic.GlobalCommitter(proxied, name, job_id="A", retry_policy=FAST)
    total = _warm_steps(proxy, committer)
    checkpoints, surfaced = [1, 2], Counter[str]()
    for step in range(1, total + 1):
        checkpoint = step + 2
        results = _results(committer, checkpoint)
        proxy.cut_at(proxy.steps + step, mode)
        try:
            committer.prepare(checkpoint, results)
            committer.commit(checkpoint)
        except Exception as e:
            _surfaced(e)
            surfaced[type(e).__name__] += 1
            proxy.heal()
            _replay(committer, checkpoint, results)
        proxy.heal()
        checkpoints.append(checkpoint)
    assert proxy.cuts >= total * 0.9  # (nearly) every step was cut once: a flow's length varies a little
    _check(proxied, name, "A", checkpoints)
    # a single cut is ridden out: retried, or found in the table after a lost answer
    assert sum(surfaced.values()) <= total // 4, surfaced


@pytest.mark.postgres
def test_a_database_down_from_each_step_of_prepare_and_commit_surfaces_then_recovers(
    proxy: FaultProxy, proxied: SqlCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=connections.__name__)
    name = _table(proxied)
    committer = ic.GlobalCommitter(proxied, name, job_id="A", retry_policy=FAST)
    total = _warm_steps(proxy, committer)
    checkpoints, outcomes = [1, 2], Counter[str]()
    for step in range(1, total + 1):
        checkpoint = step + 2
        results = _results(committer, checkpoint)
        proxy.down_from(proxy.steps + step)
        caplog.clear()
        try:
            committer.prepare(checkpoint, results)
            committer.commit(checkpoint)
            outcomes["done before it went down"] += 1
        except Exception as e:
            _surfaced(e)
            assert max(_tries(caplog), default=0) < connection_retry().attempts  # bounded: the retries gave up
            if isinstance(e, StateDatabaseUnavailableError):  # named as opened, no password shown
                assert e.uri == shown_uri(str(proxied.properties["uri"]))
            outcomes[type(e).__name__] += 1
        proxy.heal()
        _replay(committer, checkpoint, results)
        checkpoints.append(checkpoint)
    _check(proxied, name, "A", checkpoints)
    assert outcomes["done before it went down"] < total, outcomes


@pytest.mark.postgres
@pytest.mark.parametrize("mode", MODES)
def test_a_connection_cut_at_each_step_of_recover(proxy: FaultProxy, proxied: SqlCatalog, mode: CutMode) -> None:
    name = _table(proxied)
    committer = ic.GlobalCommitter(proxied, name, job_id="A", retry_policy=FAST)
    committer.prepare(1, _results(committer, 1))
    total = _steps_of(proxy, lambda: ic.GlobalCommitter(proxied, name, job_id="A", retry_policy=FAST).recover())
    checkpoints = [1]
    for step in range(1, total + 1):
        checkpoint = step + 1
        committer.prepare(checkpoint, _results(committer, checkpoint))  # the job died after its prepare
        proxy.cut_at(proxy.steps + step, mode)
        try:
            ic.GlobalCommitter(proxied, name, job_id="A", retry_policy=FAST).recover()
        except Exception as e:
            _surfaced(e)
        proxy.heal()
        ic.GlobalCommitter(proxied, name, job_id="A", retry_policy=FAST).recover()
        checkpoints.append(checkpoint)
    _check(proxied, name, "A", checkpoints)


@pytest.mark.postgres
@pytest.mark.parametrize("mode", MODES)
def test_a_connection_cut_at_each_step_of_a_rollback(proxy: FaultProxy, proxied: SqlCatalog, mode: CutMode) -> None:
    name = _table(proxied)
    committer = ic.GlobalCommitter(proxied, name, job_id="A", retry_policy=FAST)

    def commit(checkpoint: int) -> int:
        committer.prepare(checkpoint, _results(committer, checkpoint))
        return committer.commit(checkpoint).snapshot_id or 0

    base = commit(1)
    commit(2)
    total = _steps_of(proxy, lambda: apply_rollback(proxied, plan_rollback(proxied, name, to_snapshot=base)))
    kept = [1]
    for step in range(1, total + 1):
        target = commit(2 * step + 1)
        commit(2 * step + 2)
        plan = plan_rollback(proxied, name, to_snapshot=target)
        proxy.cut_at(proxy.steps + step, mode)
        try:
            apply_rollback(proxied, plan)
        except Exception as e:
            _surfaced(e)
        proxy.heal()
        head = proxied.load_table(name).metadata.current_snapshot_id
        # not landed: plan it again; landed: the same rollback again records what it hid
        apply_rollback(proxied, plan_rollback(proxied, name, to_snapshot=target))
        assert proxied.load_table(name).metadata.current_snapshot_id == target, (step, head)
        kept.append(2 * step + 1)
        store = CheckpointStore(state_engine(str(proxied.properties["uri"])))
        state = store.get("A", name, 2 * step + 2)
        assert state is not None and state.status == "rolled-back", (step, state)
    table = proxied.load_table(name)
    ids = Counter(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
    assert ids == Counter(i for c in kept for i in range(c * 100, c * 100 + 20))


# -- SQLite ------------------------------------------------------------------------------


@pytest.fixture
def sqlite_state(tmp_path: Path) -> Iterator[tuple[SqlCatalog, Path]]:
    """A SQLite catalog whose state lives in a SQLite file of its own that waits half a
    second for a lock."""
    state = tmp_path / "state.db"
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog = ic.connect(
        "local",
        uri=f"sqlite:///{tmp_path / 'catalog.db'}",
        warehouse=warehouse.as_uri(),
        **{"icecommit.state-uri": f"sqlite:///{state}?timeout=0.5"},
    )
    assert isinstance(catalog, SqlCatalog)
    yield catalog, state
    catalog.engine.dispose()


def _lock(path: Path) -> sqlite3.Connection:
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def test_a_locked_sqlite_state_database_surfaces_named_and_nothing_lands(
    sqlite_state: tuple[SqlCatalog, Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=connections.__name__)
    catalog, state = sqlite_state
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", retry_policy=FAST)
    committer.prepare(1, _results(committer, 1))
    holder = _lock(state)
    caplog.clear()
    with pytest.raises(StateDatabaseUnavailableError) as raised:
        committer.commit(1)
    assert max(_tries(caplog)) == connection_retry().attempts - 1  # six tries of half a second, then it gave up
    assert raised.value.uri == f"sqlite:///{state}" and "database is locked" in str(raised.value)
    assert catalog.load_table(name).metadata.snapshots == []  # listing the prepared ones failed first
    holder.rollback()
    holder.close()
    [result] = committer.recover()
    assert result.status == "committed"
    _check_sqlite(catalog, name, state, [1])


def test_a_lock_released_while_retrying_is_ridden_out(sqlite_state: tuple[SqlCatalog, Path]) -> None:
    catalog, state = sqlite_state
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", retry_policy=FAST)
    results = _results(committer, 1)
    holder = _lock(state)
    threading.Timer(0.8, lambda: (holder.rollback(), holder.close())).start()  # after the first try's wait
    committer.prepare(1, results)
    assert committer.commit(1).status == "committed"
    _check_sqlite(catalog, name, state, [1])


def test_a_removed_sqlite_state_database_is_refused_not_recreated(sqlite_state: tuple[SqlCatalog, Path]) -> None:
    catalog, state = sqlite_state
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="A", retry_policy=FAST)
    committer.prepare(1, _results(committer, 1))
    saved = state.read_bytes()
    other = state.with_name("other.db")
    state_engine(f"sqlite:///{other}")  # another state database ...
    state.write_bytes(other.read_bytes())  # ... copied over this one in place (the file keeps its inode)
    with pytest.raises(StateDatabaseUnavailableError, match="replaced by another database"):
        committer.commit(1)
    state.unlink()
    with pytest.raises(StateDatabaseUnavailableError) as raised:
        committer.commit(1)
    assert raised.value.uri == f"sqlite:///{state}"
    assert "removed since this process opened it" in str(raised.value)
    assert catalog.load_table(name).metadata.snapshots == []
    with pytest.raises(StateDatabaseUnavailableError):  # a second call does not go on in a new empty file
        committer.prepare(2, _results(committer, 2))
    assert not state.exists()
    state.write_bytes(other.read_bytes())  # another state database where this one was
    with pytest.raises(StateDatabaseUnavailableError, match="replaced by another database"):
        committer.commit(1)
    assert catalog.load_table(name).metadata.snapshots == []
    state.write_bytes(saved)  # the operator restores it
    [result] = committer.recover()
    assert result.status == "committed"
    _check_sqlite(catalog, name, state, [1])


def _check_sqlite(catalog: SqlCatalog, name: str, state: Path, checkpoints: list[int]) -> None:
    table = catalog.load_table(name)
    ids = Counter(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
    assert ids == Counter(i for c in checkpoints for i in range(c * 100, c * 100 + 20))
    assert len(table.metadata.snapshots) == len(checkpoints)
    store = CheckpointStore(state_engine(f"sqlite:///{state}?timeout=0.5"))
    assert [s.status for s in store.list(name, job_id="A")] == ["committed"] * len(checkpoints)
    assert shown_uri(store.engine).startswith("sqlite:///")


def test_a_state_database_locked_at_start_up_surfaces_within_the_bounds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=connections.__name__)
    path = tmp_path / "state.db"
    uri = f"sqlite:///{path}?timeout=0.2"
    state_engine(uri)
    dispose_state_engines()  # a new process opens it ...
    holder = _lock(path)  # ... while another holds its lock
    caplog.clear()
    with pytest.raises(StateDatabaseUnavailableError, match="database is locked"):
        state_engine(uri)
    assert _tries(caplog) == list(range(1, connection_retry().attempts))  # six tries of 0.2 s, not sixteen times six
    holder.rollback()
    holder.close()
    assert CheckpointStore(state_engine(uri)).list("ns.t") == []
