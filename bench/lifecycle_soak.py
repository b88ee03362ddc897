"""Lifecycle soak: one table through a long, randomized life, checked against a model.

Each trial makes a table and runs a seeded sequence of steps on it: two jobs committing
checkpoints (a crash at any of the committer's step boundaries, then a restart that
recovers and replays, as ``ic.write`` would), appends by another tool (plain pyiceberg),
``expire`` by icecommit (deleting files; sometimes crashing between the expiry and its
state update) and by another tool (pyiceberg's, deleting nothing), rollbacks by
checkpoint (icecommit's; sometimes crashing between the table's change and the state's)
and by another tool (pyiceberg's ``rollback_to_snapshot``), re-commits of rolled-back
checkpoints, abandons, compactions by another engine (a replace snapshot rewriting every
live file), orphan sweeps with no age limit, and schema changes (a column
added, widened from int to long) and a partition spec change (a checkpoint prepared
before it commits under the spec its files were written for).

After every step an independent checker compares the table with the model (every accepted
row once; rolled-back and abandoned rows absent; nothing else), checks each replay's answer
(``already-committed``, refused as rolled back, a recorded no-op after abandon), and checks
that scans filtered on the partition source columns return exactly the matching rows
(files of both specs pruned correctly), and that reconciliation reports no loss, duplicate or missing file for any job.

    .venv/bin/python -m bench.lifecycle_soak [--trials 300] [--seed 20261123] [--steps 14]

The seed is printed; figures go to BENCHMARKS.md by hand. A short seeded slice runs in the
default test suite (``tests/lifecycle/test_lifecycle_soak.py``).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import random
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform
from pyiceberg.types import IntegerType, LongType
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

import icecommit as ic
from icecommit.committer import RetryPolicy
from icecommit.committer.committer import FAULT_POINTS
from icecommit.core import ancestry
from icecommit.maintenance import apply_expire, apply_rollback, find_orphans, plan_expire, plan_rollback
from icecommit.state import CheckpointStore, read_staged_manifest, state_engine, state_uri
from icecommit.state.database import dispose_state_engines
from icecommit.state.manifests import staged_spec_id
from tests.helpers import DAY0, EVENTS_SCHEMA, compact, events, write_arrow

OUT = Path(__file__).resolve().parent / "out"
JOBS = ("A", "B")
ROWS = 6
FOREIGN_BASE = 90_000_000
FAST = RetryPolicy(max_attempts=8, max_seconds=60, min_wait_s=0.001, max_wait_s=0.01)
#: Problems reconciliation must never report on a table this soak wrote.
NEVER = {"loss", "double-commit", "duplicate-file", "missing-file", "window-mismatch", "duplication"}

Key = tuple[str, int]


class Crash(BaseException):
    """The process dies here (raised from a fault hook or a patched state update). A
    BaseException, as a process's death is not an error the committer could handle."""


class SoakFailure(AssertionError):
    """The table, a replay or reconciliation disagrees with the model."""


@dataclass
class Entry:
    """One snapshot on the branch, as the model sees it."""

    key: Key | None  # None: another tool's append
    ids: tuple[int, ...]
    snapshot_id: int


@dataclass
class Model:
    """What must be in the table, kept without reading it."""

    lineage: list[Entry] = field(default_factory=list)
    #: committed | rolled-back | abandoned | landed (committed, the job died before
    #: recording it) | prepared | staged (files written, the job died before prepare)
    status: dict[Key, str] = field(default_factory=dict)
    next_checkpoint: dict[str, int] = field(default_factory=lambda: dict.fromkeys(JOBS, 1))
    pending: dict[str, int | None] = field(default_factory=lambda: dict.fromkeys(JOBS))
    foreign: int = 0
    spec: int = 0  # the table's partition spec id
    prepared_under: dict[Key, int] = field(default_factory=dict)  # the spec a checkpoint's files were written for

    def expected(self) -> Counter[int]:
        return Counter(i for entry in self.lineage for i in entry.ids)

    def land(self, key: Key, snapshot_id: int, status: str = "committed") -> None:
        self.lineage.append(Entry(key, ids_of(*key), snapshot_id))
        self.status[key] = status

    def truncate_after(self, index: int) -> None:
        for entry in self.lineage[index + 1 :]:
            if entry.key is not None:
                self.status[entry.key] = "rolled-back"
        del self.lineage[index + 1 :]


def ids_of(job: str, checkpoint_id: int) -> tuple[int, ...]:
    base = (JOBS.index(job) + 1) * 1_000_000 + checkpoint_id * 1_000
    return tuple(range(base, base + ROWS))


@dataclass
class TrialResult:
    trial: int
    backend: str
    seed: int
    steps: int
    operations: dict[str, int]
    crashes: int
    lost: int
    duplicated: int
    resurrected: int
    failure: str | None
    seconds: float


class Trial:
    """One table's life: ``step()`` draws and runs an operation, then checks everything."""

    def __init__(self, catalog: SqlCatalog, rng: random.Random) -> None:
        self.catalog = catalog
        self.rng = rng
        self.name = f"{catalog.name}.events"
        ic.create_table(catalog, self.name, EVENTS_SCHEMA, partition_by=["event"])
        self.model = Model()
        self.operations: Counter[str] = Counter()
        self.crashes = 0
        self.extra: str | None = None  # the added column's type, once added

    # -- helpers ---------------------------------------------------------------------

    def table(self) -> Table:
        return self.catalog.load_table(self.name)

    def committer(self, job: str, point: str | None = None, at: int | None = None) -> ic.GlobalCommitter:
        def fault(where: str, checkpoint_id: int) -> None:
            if where == point and checkpoint_id == at:
                raise Crash(f"{where} of checkpoint {checkpoint_id}")

        return ic.GlobalCommitter(self.catalog, self.name, job_id=job, retry_policy=FAST, fault=fault)

    def results(self, committer: ic.GlobalCommitter, checkpoint_id: int) -> list[ic.WriteResult]:
        ids = ids_of(committer.job_id, checkpoint_id)
        rows = self.rows(ids[0])
        return [write_arrow(committer.load_table(), rows, job_id=committer.job_id, checkpoint_id=checkpoint_id)]

    def rows(self, start: int) -> pa.Table:
        """ROWS rows from id ``start``, with the added column once the schema has it."""
        rows = events(start, start + ROWS)
        if self.extra is not None:
            kind = pa.int32() if self.extra == "int" else pa.int64()
            rows = rows.append_column("extra", pa.array(list(range(ROWS)), kind))
        return rows

    @contextmanager
    def crashing_state_update(self) -> Iterator[None]:
        """The process dies after the table changed and before the state recorded it."""
        original = CheckpointStore.mark_rolled_back

        def die(*_args: Any, **_kwargs: Any) -> int:
            raise Crash("before the state update")

        CheckpointStore.mark_rolled_back = die  # type: ignore[method-assign]
        try:
            yield
        except Crash:
            self.crashes += 1
        finally:
            CheckpointStore.mark_rolled_back = original  # type: ignore[method-assign]

    def retained(self, entries: list[tuple[int, Entry]]) -> list[tuple[int, Entry]]:
        metadata = self.table().metadata
        return [(i, e) for i, e in entries if metadata.snapshot_by_id(e.snapshot_id) is not None]

    # -- operations ------------------------------------------------------------------

    def op_commit(self) -> None:
        job = self.rng.choice(JOBS)
        self.replay(job)
        n = self.model.next_checkpoint[job]
        self.model.next_checkpoint[job] += 1
        point = self.rng.choice(FAULT_POINTS) if self.rng.random() < 0.35 else None
        committer = self.committer(job, point, n)
        self.model.prepared_under[(job, n)] = self.model.spec
        try:
            committer.prepare(n, self.results(committer, n))
            result = committer.commit(n)
        except Crash:
            self.crashes += 1
            self.model.pending[job] = n
            if point == "after-commit":
                landed = ancestry.find_checkpoint(self.table().metadata, job, n, "main")
                _expect(landed is not None, f"checkpoint {n} of job {job} crashed after its commit but is not in")
                assert landed is not None
                self.model.land((job, n), landed.snapshot_id, "landed")
            else:
                self.model.status[(job, n)] = "staged" if point == "after-stage" else "prepared"
            return
        _expect(result.status == "committed", f"commit of {job}/{n} returned {result.status}")
        assert result.snapshot_id is not None
        self.model.land((job, n), result.snapshot_id)

    def replay(self, job: str) -> None:
        """The job restarts: recover, then replay its pending checkpoint as ``ic.write`` would."""
        n = self.model.pending[job]
        if n is None:
            return
        self.operations["replay"] += 1
        key = (job, n)
        committer = self.committer(job)
        status = self.model.status[key]
        if status == "prepared" and self.model.prepared_under[key] != self.model.spec:
            self.operations["commit-under-older-spec"] += 1  # its files keep their own spec
        recovered = {r.checkpoint_id: r for r in committer.recover()}
        if status == "staged":  # never prepared: the job writes it again
            _expect(n not in recovered, f"{job}/{n} was never prepared, recover() committed it")
            self.model.prepared_under[key] = self.model.spec
            committer.prepare(n, self.results(committer, n))
            result = committer.commit(n)
            _expect(result.status == "committed", f"replay of unprepared {job}/{n} returned {result.status}")
            assert result.snapshot_id is not None
            self.model.land(key, result.snapshot_id)
        elif status == "prepared":
            result = recovered.get(n) or committer.commit(n)
            _expect(result.status == "committed", f"recovery of prepared {job}/{n} returned {result.status}")
            assert result.snapshot_id is not None
            self.model.land(key, result.snapshot_id)
        elif status == "landed":
            self.model.status[key] = "committed"
        self.check_replay(job, n)
        self.model.pending[job] = None

    def check_replay(self, job: str, n: int) -> None:
        """What a replay of checkpoint n answers, by the model."""
        status = self.model.status[(job, n)]
        committer = self.committer(job)
        if status == "committed":
            result = committer.commit(n)
            _expect(result.status == "already-committed", f"replay of committed {job}/{n}: {result.status}")
        elif status == "rolled-back":
            try:
                result = committer.commit(n)
            except ic.CheckpointRolledBackError:
                return
            raise SoakFailure(f"replay of rolled-back {job}/{n} returned {result.status}, not a refusal")
        elif status == "abandoned":
            result = committer.commit(n)
            _expect(result.status == "abandoned", f"replay of abandoned {job}/{n}: {result.status}")

    def op_foreign_append(self) -> None:
        self.model.foreign += 1
        start = FOREIGN_BASE + self.model.foreign * 100
        table = self.table()
        table.append(self.rows(start))
        head = table.current_snapshot()
        assert head is not None
        self.model.lineage.append(Entry(None, tuple(range(start, start + ROWS)), head.snapshot_id))

    def _rollback_target(self, checkpoints_only: bool) -> tuple[int, Entry] | None:
        entries = [(i, e) for i, e in enumerate(self.model.lineage[:-1]) if e.key is not None or not checkpoints_only]
        candidates = self.retained(entries)
        return self.rng.choice(candidates) if candidates else None

    def op_rollback(self) -> None:
        target = self._rollback_target(checkpoints_only=True)
        if target is None:
            return
        index, entry = target
        assert entry.key is not None
        plan = plan_rollback(self.catalog, self.name, to_checkpoint=entry.key[1], job_id=entry.key[0])
        _expect(plan.target_snapshot_id == entry.snapshot_id, f"rollback to {entry.key} chose another snapshot")
        if self.rng.random() < 0.3:
            self.operations["rollback-crash"] += 1
            with self.crashing_state_update():
                apply_rollback(self.catalog, plan)
        else:
            apply_rollback(self.catalog, plan)
        self.model.truncate_after(index)

    def op_foreign_rollback(self) -> None:
        target = self._rollback_target(checkpoints_only=False)
        if target is None:
            return
        index, entry = target
        self.table().manage_snapshots().rollback_to_snapshot(entry.snapshot_id).commit()
        self.model.truncate_after(index)

    def op_expire(self) -> None:
        plan = plan_expire(self.catalog, self.name, older_than=timedelta(0), retain_last=self.rng.randint(1, 3))
        if self.rng.random() < 0.3:
            self.operations["expire-crash"] += 1
            with self.crashing_state_update():
                apply_expire(self.catalog, plan)
        else:
            apply_expire(self.catalog, plan)

    def op_foreign_expire(self) -> None:
        table = self.table()
        keep = {ref.snapshot_id for ref in table.metadata.refs.values()}
        ids = [s.snapshot_id for s in table.metadata.snapshots if s.snapshot_id not in keep]
        if ids:
            table.maintenance.expire_snapshots().by_ids(ids).commit()  # deletes no file

    def op_recommit(self) -> None:
        rolled = sorted(k for k, s in self.model.status.items() if s == "rolled-back")
        eligible = [k for k in rolled if self._staged_files_exist(k)]
        if not eligible:
            return
        job, n = self.rng.choice(eligible)
        if self.model.prepared_under[(job, n)] != self.model.spec:
            self.operations["recommit-under-older-spec"] += 1
        result = self.committer(job).recommit(n)
        _expect(result.status == "committed", f"recommit of {job}/{n} returned {result.status}")
        assert result.snapshot_id is not None
        self.model.land((job, n), result.snapshot_id)

    def _staged_files_exist(self, key: Key) -> bool:
        """Whether a rolled-back checkpoint can still be re-committed (an orphan sweep may
        have taken the files of one whose rollback no committer had recorded yet)."""
        state = CheckpointStore(state_engine(state_uri(self.catalog))).get(key[0], self.name, key[1])
        if state is None or state.manifest_path is None:
            return False
        table = self.table()
        if not table.io.new_input(state.manifest_path).exists():
            return False
        files = read_staged_manifest(table.io, state.manifest_path, staged_spec_id(table.io, state.manifest_path))
        return all(table.io.new_input(f.file_path).exists() for f in files)

    def op_abandon(self) -> None:
        candidates = sorted(k for k, s in self.model.status.items() if s in ("prepared", "rolled-back"))
        if not candidates:
            return
        job, n = self.rng.choice(candidates)
        committer = self.committer(job)
        state = committer.abandon(n, reason="soak", by="soak")
        _expect(state.status == "abandoned", f"abandon of {job}/{n} left it {state.status}")
        self.model.status[(job, n)] = "abandoned"
        if self.model.pending[job] == n:
            self.check_replay(job, n)
            self.model.pending[job] = None

    def op_orphans(self) -> None:
        find_orphans(self.catalog, self.name, older_than=timedelta(0), delete=True)

    def op_schema(self) -> None:
        table = self.table()
        if self.extra is None:
            with table.update_schema() as update:
                update.add_column("extra", IntegerType())
            self.extra = "int"
        elif self.extra == "int":
            with table.update_schema() as update:
                update.update_column("extra", LongType())
            self.extra = "long"

    def op_spec(self) -> None:
        """A partition spec change: day(ts) is added, or removed again (pyiceberg may then
        reuse the earlier spec's id); at most three specs in a table's life."""
        table = self.table()
        fields = {f.name for f in table.spec().fields}
        if len(table.specs()) >= 3:
            return
        with table.update_spec() as update:
            if "ts_day" in fields:
                update.remove_field("ts_day")
            else:
                update.add_field("ts", DayTransform(), "ts_day")
        self.model.spec = self.table().spec().spec_id

    def op_compact(self) -> None:
        """Another engine's compaction: every live file rewritten, one replace snapshot."""
        table = self.table()
        if table.current_snapshot() is None or not self.model.expected():
            return
        snapshot_id = compact(table)
        self.model.lineage.append(Entry(None, (), snapshot_id))

    def op_restart(self) -> None:
        self.replay(self.rng.choice(JOBS))

    OPERATIONS: tuple[tuple[str, int], ...] = (
        ("commit", 40),
        ("foreign_append", 7),
        ("rollback", 9),
        ("foreign_rollback", 6),
        ("expire", 8),
        ("foreign_expire", 4),
        ("recommit", 7),
        ("abandon", 5),
        ("orphans", 4),
        ("schema", 3),
        ("spec", 4),
        ("compact", 5),
        ("restart", 7),
    )

    def step(self) -> str:
        names = [n for n, _ in self.OPERATIONS]
        weights = [w for _, w in self.OPERATIONS]
        name = self.rng.choices(names, weights)[0]
        self.operations[name] += 1
        getattr(self, f"op_{name}")()
        self.check(name)
        return name

    # -- the checker -----------------------------------------------------------------

    def actual(self) -> Counter[int]:
        data = self.table().scan(selected_fields=("id",)).to_arrow()
        return Counter(data.column("id").to_pylist())

    def check(self, after: str) -> None:
        actual, expected = self.actual(), self.model.expected()
        if actual != expected:
            raise SoakFailure(
                f"after {after}: table differs from the model: missing {sorted((expected - actual).elements())[:8]}, "
                f"extra {sorted((actual - expected).elements())[:8]}"
            )
        self.check_pruning(after)
        for job in JOBS:
            if not any(k[0] == job and s != "staged" for k, s in self.model.status.items()):
                continue  # the job has no checkpoint in the state yet
            report = ic.reconcile(self.catalog, self.name, job_id=job)
            wrong = [p for p in report.problems if p.kind in NEVER]
            wrong += [line for line in report.checkpoints if not line.ok]  # type: ignore[misc]
            if wrong:
                raise SoakFailure(f"after {after}: reconciliation of job {job} disagrees: {wrong[:3]}")

    def check_pruning(self, after: str) -> None:
        """Where files of several partition specs are live, scans filtered on each spec's
        source columns return exactly the matching rows: a file whose partition values were
        read under the wrong spec would be pruned wrongly."""
        table = self.table()
        current = table.current_snapshot()
        if current is None or len({m.partition_spec_id for m in current.manifests(table.io)}) < 2:
            return  # files of one spec: the model check above covers them
        rows = table.scan(selected_fields=("id", "event", "ts")).to_arrow().to_pylist()
        day = DAY0 + timedelta(days=1)
        filters = {
            "event == 'pv'": lambda r: r["event"] == "pv",
            "event is null": lambda r: r["event"] is None,
            f"ts >= '{day.isoformat()}'": lambda r: r["ts"] >= day,
        }
        for expression, keep in filters.items():
            expected = Counter(r["id"] for r in rows if keep(r))
            data = table.scan(row_filter=expression, selected_fields=("id",)).to_arrow()
            found = Counter(data.column("id").to_pylist())
            if found != expected:
                raise SoakFailure(
                    f"after {after}: scan with {expression} is wrong: missing "
                    f"{sorted((expected - found).elements())[:8]}, extra {sorted((found - expected).elements())[:8]}"
                )

    def finish(self) -> None:
        """Every job restarts once more; then the table must still match the model."""
        for job in JOBS:
            self.replay(job)
        self.check("the final restarts")

    def tally(self) -> tuple[int, int, int]:
        """Rows lost, duplicated and resurrected (rolled-back or abandoned rows back in)."""
        actual, expected = self.actual(), self.model.expected()
        removed = {i for k, s in self.model.status.items() if s in ("rolled-back", "abandoned") for i in ids_of(*k)}
        extra = actual - expected
        return (
            sum((expected - actual).values()),
            sum(n for i, n in extra.items() if i not in removed),
            sum(n for i, n in extra.items() if i in removed),
        )


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise SoakFailure(message)


def run_trial(
    trial: int, seed: int, backend: str, catalog_factory: Callable[[str], SqlCatalog], steps: int
) -> TrialResult:
    """Run one seeded trial on a fresh table; never raises for a soak failure (it is reported)."""
    rng = random.Random(seed * 1_000_003 + trial)
    started = time.perf_counter()
    catalog = catalog_factory(f"s{uuid.uuid4().hex[:10]}")
    life = Trial(catalog, rng)
    failure = None
    lost = duplicated = resurrected = 0
    count = rng.randint(steps // 2, steps * 3 // 2)
    done = 0
    try:
        while done < count:
            done += 1
            life.step()
        life.finish()
    except Exception as e:  # a failure of the soak, or an error icecommit should not raise here
        failure = f"step {done} ({life.operations.most_common()}): {type(e).__name__}: {e}"
    try:
        lost, duplicated, resurrected = life.tally()
    except Exception as e:
        failure = failure or f"tally: {type(e).__name__}: {e}"
    catalog.engine.dispose()
    dispose_state_engines()
    return TrialResult(
        trial=trial,
        backend=backend,
        seed=seed,
        steps=done,
        operations=dict(life.operations),
        crashes=life.crashes,
        lost=lost,
        duplicated=duplicated,
        resurrected=resurrected,
        failure=failure,
        seconds=time.perf_counter() - started,
    )


@contextmanager
def soak_database(admin_uri: str) -> Iterator[str]:
    """A PostgreSQL database of the soak's own, dropped at the end."""
    name = f"icecommit_soak_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_uri, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'create database "{name}"'))
    try:
        yield make_url(admin_uri).set(database=name).render_as_string(hide_password=False)
    finally:
        dispose_state_engines()
        with admin.connect() as conn:
            conn.execute(text(f'drop database if exists "{name}" with (force)'))
        admin.dispose()


def main() -> None:
    from bench.databases import PG_URI, postgres_available

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=300, help="trials per backend")
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--steps", type=int, default=14, help="mean steps per trial")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the committer's warnings (rollbacks, re-commits) are the plan here
    work = Path(tempfile.mkdtemp(prefix="icecommit-lifecycle-"))
    results: list[TrialResult] = []
    started = time.perf_counter()
    print(f"lifecycle soak: seed {args.seed}, {args.trials} trials per backend", flush=True)
    try:
        backends: list[tuple[str, Callable[[str], SqlCatalog]]] = []

        def sqlite(name: str) -> SqlCatalog:
            folder = work / name
            folder.mkdir()
            return SqlCatalog(name, uri=f"sqlite:///{folder / 'catalog.db'}", warehouse=f"file://{folder}")

        backends.append(("sqlite", sqlite))
        with soak_database(PG_URI) if postgres_available() else _nothing() as pg:
            if pg is not None:
                backends.append(("postgres", lambda name: _pg_catalog(name, pg, work)))
            for backend, factory in backends:
                for trial in range(args.trials):
                    result = run_trial(trial, args.seed, backend, factory, args.steps)
                    results.append(result)
                    if result.failure or result.lost or result.duplicated or result.resurrected:
                        print(f"FAILED {json.dumps(asdict(result))}", flush=True)
                    if (trial + 1) % 50 == 0:
                        print(f"{backend}: {trial + 1} trials, {time.perf_counter() - started:.0f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "lifecycle_soak.json").write_text(json.dumps([asdict(r) for r in results], indent=2))
    print(
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB; "
        f"run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; seed {args.seed}; "
        f"{time.perf_counter() - started:.0f} s"
    )
    print(
        "| backend | trials | steps | crashes | rollbacks | expiries | recommits | abandons | older-spec commits "
        "| failed | lost | duplicated | resurrected |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for backend in sorted({r.backend for r in results}):
        mine = [r for r in results if r.backend == backend]
        ops: Counter[str] = Counter()
        for r in mine:
            ops.update(r.operations)
        print(
            f"| {backend} | {len(mine)} | {sum(r.steps for r in mine)} | {sum(r.crashes for r in mine)} | "
            f"{ops['rollback'] + ops['foreign_rollback']} | {ops['expire'] + ops['foreign_expire']} | "
            f"{ops['recommit']} | {ops['abandon']} | "
            f"{ops['commit-under-older-spec'] + ops['recommit-under-older-spec']} | "
            f"{sum(r.failure is not None for r in mine)} | "
            f"{sum(r.lost for r in mine)} | {sum(r.duplicated for r in mine)} | {sum(r.resurrected for r in mine)} |"
        )
    bad = [r for r in results if r.failure or r.lost or r.duplicated or r.resurrected]
    raise SystemExit(1 if bad else 0)


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


def _pg_catalog(name: str, uri: str, work: Path) -> SqlCatalog:
    folder = work / name
    folder.mkdir()
    return SqlCatalog(name, uri=uri, warehouse=f"file://{folder}")


if __name__ == "__main__":
    main()
