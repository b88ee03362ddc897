"""``ic.streaming_sink`` under whole-process kills: a streaming query over a folder that
keeps receiving JSON files is SIGKILLed (JVM included) and restarted from its checkpoint
location; at the end every input record is in the table exactly once.

Each run dies in one of two ways. A *planned* kill: the driver kills its own process group
at a fixed point of a batch (entering the sink, after prepare, after commit), so the test
knows exactly what the restart must find and asserts it. A *timed* kill: the test kills the
group at a random moment after some progress, to find what nobody planned; where it lands
is recorded and checked, but not required to be anywhere in particular.

The plan and the data come from a ``random.Random`` with a fixed seed, so CI runs the same
plan every time (Spark's own timing still varies; no assertion depends on it). The seed is
printed first; ``ICECOMMIT_STREAM_KILL_SEED=<n>`` replays another, ``=random`` draws one.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer import committed_checkpoints
from icecommit.state import COMMITTED
from tests.conftest import make_catalog
from tests.helpers import drop_json
from tests.streaming.stream_driver import PREFIX, spark_committed_batches

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.timestamp("us", tz="UTC"))])
JOB = "stream-kills"
FILES = 24
ROWS_PER_FILE = (40, 400)
FEED_INTERVAL_S = (0.2, 1.0)
PROGRESS_TIMEOUT_S = 120.0
DRAIN_TIMEOUT_S = 300.0
DAY0 = datetime(2026, 5, 1, tzinfo=timezone.utc)
SEED = 20261123
#: the planned kill points, most telling first: a run with fewer kills takes the first ones
PLANNED = ("after-commit", "after-prepare", "sink-entry")

Event = dict[str, Any]


class DriverRun:
    """One run of the stream driver in its own process group, its progress read by a thread."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        self.events: list[Event] = []
        self._changed = threading.Condition()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with log.open("w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.streaming.stream_driver", *args],
                cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True,
            )  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(PREFIX):
                with self._changed:
                    self.events.append(json.loads(line[len(PREFIX) :]))
                    self._changed.notify_all()
        self.process.stdout.close()
        with self._changed:
            self._changed.notify_all()

    def stderr_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def wait_for(self, done: Callable[[list[Event]], bool], what: str, timeout: float = PROGRESS_TIMEOUT_S) -> None:
        """Block until ``done(events)``; fail with the driver's stderr if it exits or stalls."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not done(self.events):
                if self.process.poll() is not None and not self._reader.is_alive():
                    pytest.fail(
                        f"driver exited ({self.process.returncode}) before {what}; events {self.events}\n"
                        f"{self.stderr_tail()}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"no {what} within {timeout:.0f} s; events {self.events}\n{self.stderr_tail()}")
                self._changed.wait(min(left, 1.0))

    def kill(self) -> None:
        """SIGKILL the whole process group (the Python driver, its JVM and Python workers)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=60)
        self._reader.join(timeout=60)

    def wait_killed_itself(self) -> Event:
        """Wait for a planned kill: the driver announces it, then its process group dies."""
        self.wait_for(lambda events: any(e["event"] == "kill" for e in events), "a planned kill")
        code = self.wait(PROGRESS_TIMEOUT_S)
        assert code == -signal.SIGKILL, f"the driver exited {code}, not by SIGKILL\n{self.stderr_tail()}"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        return next(e for e in self.events if e["event"] == "kill")

    def wait(self, timeout: float) -> int:
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"driver still running after {timeout:.0f} s; events {self.events}\n{self.stderr_tail()}")
        self._reader.join(timeout=60)
        return code


class Feeder(threading.Thread):
    """Drops FILES JSON files into the source folder, each atomically (written outside
    the folder, then renamed in), at random intervals."""

    def __init__(self, source: Path, staging: Path, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.source, self.staging, self.rng = source, staging, rng
        self.next_file = 0
        self.next_id = 0
        self.ids: list[int] = []
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def drop(self) -> None:
        """One more file; event time grows with the id, so hour partitions fill in order."""
        count = self.rng.randint(*ROWS_PER_FILE)
        ids = range(self.next_id, self.next_id + count)
        lines = [json.dumps({"id": i, "ts": (DAY0 + timedelta(seconds=4 * i)).isoformat()}) for i in ids]
        name = f"part-{self.next_file:04d}.json"
        temporary = self.staging / name
        temporary.write_text("\n".join(lines) + "\n")
        os.replace(temporary, self.source / name)
        self.ids.extend(ids)
        self.next_id += count
        self.next_file += 1

    def run(self) -> None:
        try:
            while self.next_file < FILES and not self.stop.wait(self.rng.uniform(*FEED_INTERVAL_S)):
                self.drop()
        except BaseException as e:
            self.error = e


def _in_sink(events: list[Event]) -> int | None:
    """The batch a run was inside the sink for when it died (started, no result), or None."""
    progress = [e for e in events if e["event"] in ("start", "done")]
    if progress and progress[-1]["event"] == "start":
        return int(progress[-1]["batch"])
    return None


def _where_it_landed(events: list[Event], resumed: Event) -> str:
    """Where a kill fell, from the killed run's events and what the next run found."""
    if _in_sink(events) is not None:
        return "in-sink"
    done = [e["batch"] for e in events if e["event"] == "done"]
    if not done:
        return "before-first-batch"
    if done[-1] in resumed["spark_pending"]:
        return "after-sink"  # committed to the table, not yet in Spark's commit log
    if resumed["spark_pending"]:
        return "before-sink"  # Spark logged the next batch's offsets
    return "between-batches"


def _progress_lines(n: int) -> Callable[[list[Event]], bool]:
    return lambda events: sum(e["event"] in ("start", "done") for e in events) >= n


def kill_plan(kills: int, rng: random.Random) -> list[str]:
    """One entry per run: a planned point (each at least once) or ``timed``, shuffled."""
    plan = [*PLANNED, *["timed"] * max(0, kills - len(PLANNED))][:kills]
    rng.shuffle(plan)
    return plan


def _kill_and_restart(
    args: list[str], logs: Path, plan: list[str], rng: random.Random, feeder: Feeder
) -> tuple[list[DriverRun], list[Event | None]]:
    """Start the query and kill it as ``plan`` says, run by run; then drain it. Returns the
    runs and, per killed run, its planned kill event (None for a timed kill)."""
    runs: list[DriverRun] = []
    planned: list[Event | None] = []
    began = time.monotonic()
    try:
        for number, how in enumerate(plan):
            extra = [] if how == "timed" else ["--kill-at", how]
            run = DriverRun([*args, *extra], logs / f"driver-{number}.log")
            runs.append(run)
            if number == 0:
                feeder.start()
            if how == "timed":
                lines = rng.randint(1, 6)
                run.wait_for(_progress_lines(lines), f"{lines} progress lines")
                delay = rng.uniform(0.0, 1.5)
                time.sleep(delay)  # the random kill moment itself, not a synchronisation
                run.kill()
                planned.append(None)
                what = f"timed, {lines} lines +{delay:.2f} s"
            else:
                planned.append(run.wait_killed_itself())
                what = f"planned {how}"
            print(f"[{time.monotonic() - began:5.1f} s] kill {number + 1}/{len(plan)} ({what}): {run.events}")

        feeder.join(timeout=120)
        assert not feeder.is_alive(), "the feeder did not finish"
        assert feeder.error is None, f"the feeder failed: {feeder.error!r}"
        drain = DriverRun([*args, "--drain"], logs / "driver-drain.log")
        runs.append(drain)
        code = drain.wait(DRAIN_TIMEOUT_S)
        print(f"[{time.monotonic() - began:5.1f} s] drain: exit {code}; {drain.events}")
        assert code == 0, f"the drain run failed:\n{drain.stderr_tail()}"
        assert drain.events[-1]["event"] == "finished"
        return runs, planned
    finally:
        feeder.stop.set()
        for run in runs:
            if run.process.poll() is None:
                run.kill()
        for run in runs:  # nothing of a killed group may outlive the test
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.process.pid, signal.SIGKILL)


@pytest.mark.parametrize(("backend", "kills"), [("sqlite", 3), pytest.param("postgres", 1, marks=pytest.mark.postgres)])
def test_stream_killed_and_restarted_lands_every_record_once(
    backend: str, kills: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    chosen = os.environ.get("ICECOMMIT_STREAM_KILL_SEED") or str(SEED)
    seed = random.SystemRandom().randrange(2**32) if chosen == "random" else int(chosen)
    print(f"seed {seed} (replay with ICECOMMIT_STREAM_KILL_SEED={seed})")
    rng = random.Random(seed)
    plan = kill_plan(kills, rng)
    catalog: SqlCatalog = make_catalog(backend, tmp_path)
    request.addfinalizer(catalog.engine.dispose)  # no pooled connection outlives the test
    table = f"{catalog.name}.stream"
    ic.create_table(catalog, table, SCHEMA, partition_by=["hour(ts)"])
    source, staging, checkpoints = tmp_path / "in", tmp_path / "staging", tmp_path / "chk"
    source.mkdir()
    staging.mkdir()
    args = [
        "--uri", catalog.properties["uri"], "--warehouse", catalog.properties["warehouse"],
        "--catalog-name", catalog.name, "--table", table, "--job", JOB, "--source", str(source),
        "--checkpoint-location", str(checkpoints), "--spark-local-dir", str(tmp_path / "spark-local"),
    ]  # fmt: skip
    feeder = Feeder(source, staging, rng)
    feeder.drop()
    feeder.drop()
    print(f"driver logs in {tmp_path}")
    runs, planned = _kill_and_restart(args, tmp_path, plan, rng, feeder)

    resumes = [next(e for e in run.events if e["event"] == "resume") for run in runs[1:]]
    landed = [_where_it_landed(run.events, resumed) for run, resumed in zip(runs, resumes, strict=False)]
    done = [e for run in runs for e in run.events if e["event"] == "done"]
    context = f"seed {seed}; plan {plan}; kills landed {landed}; driver logs in {tmp_path}"
    print(
        f"kills landed: {dict(Counter(landed))}; Spark replayed batches "
        f"{[b for r in resumes for b in r['spark_pending']]}; prepared checkpoints found by a restart "
        f"{[b for r in resumes for b in r['prepared']]}; sink results {dict(Counter(e['status'] for e in done))}"
    )

    # every record exactly once, nothing else
    loaded = catalog.load_table(table)
    ids = Counter(loaded.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
    expected = Counter(feeder.ids)
    assert ids == expected, f"{context}: lost {sorted(expected - ids)[:20]}, duplicated {sorted(ids - expected)[:20]}"

    # one snapshot per batch Spark completed, none twice (a batch usually holds one file; it
    # holds two when a kill fell between Spark logging a file for a batch and its offsets)
    batches = spark_committed_batches(checkpoints)
    assert batches == list(range(len(batches))), f"{context}: Spark's commit log has gaps"
    in_table = Counter(c.checkpoint_id for c in committed_checkpoints(loaded.metadata, job_id=JOB))
    assert [b for b, n in in_table.items() if n > 1] == [], f"{context}: batches committed twice"
    assert sorted(in_table) == batches, context
    committer = ic.GlobalCommitter(catalog, table, job_id=JOB)
    states = committer.store.list(committer.table_name, job_id=JOB)
    assert [(s.checkpoint_id, s.status) for s in states] == [(b, COMMITTED) for b in batches], context

    # the sink reported each batch committed at most once, and every batch has a result
    committed_by_sink = Counter(e["batch"] for e in done if e["status"] == "committed")
    assert [b for b, n in committed_by_sink.items() if n > 1] == [], context
    assert sorted({e["batch"] for e in done}) == batches, context

    # each planned kill left what it had to leave, and the restart settled it: a batch killed
    # on entering the sink or after its commit is replayed by Spark; one killed after
    # prepare is found prepared and committed by the restart's recovery
    for kill, resumed in zip(planned, resumes, strict=True):
        if kill is None:
            continue
        batch = kill["batch"]
        if kill["point"] == "after-prepare":
            assert batch in resumed["prepared"], f"{context}: {kill}, restart found {resumed}"
        elif kill["point"] == "after-commit":
            assert batch not in resumed["prepared"], f"{context}: {kill}, restart found {resumed}"
        assert batch in resumed["spark_pending"], f"{context}: {kill}, restart found {resumed}"

    # the kills interrupted work and the restarts finished it: a batch the sink was inside of
    # is replayed by Spark; a replayed batch that had reached the table (committed by the
    # sink, or prepared and committed by the restart's recovery) is recognised, not re-added
    for number, (run, resumed, where) in enumerate(zip(runs, resumes, landed, strict=False)):
        progress = [e for e in run.events if e["event"] in ("start", "done")]
        reached_table = set(resumed["prepared"])

        if where == "in-sink":
            assert progress[-1]["batch"] in resumed["spark_pending"], context
        if where == "after-sink":
            reached_table.add(progress[-1]["batch"])
        later = [e for r in runs[number + 1 :] for e in r.events if e["event"] == "done"]
        for batch in reached_table:
            replays = [e["status"] for e in later if e["batch"] == batch]
            assert replays and set(replays) == {"already-committed"}, f"{context}: batch {batch}: {replays}"

    # reconciliation agrees, per checkpoint and in total
    report = ic.reconcile(catalog, table, job_id=JOB, deep=True)
    print(f"reconciliation: ok {report.ok}, problems {dict(Counter(p.kind for p in report.problems))}")
    assert report.ok, f"{context}\n{report.to_markdown()}"
    assert report.pending == ()
    assert len(report.checkpoints) == len(batches)
    total = len(feeder.ids)
    for stage in ("source", "written", "committed", "readable"):
        assert sum(getattr(line, stage) for line in report.checkpoints) == total, f"{context}: {stage}"
    assert sum(w.source for w in report.windows) == total
    assert sum(w.readable or 0 for w in report.windows) == total
    assert all(w.closed and w.ok for w in report.windows)


def test_a_stream_killed_right_after_its_schema_change_lands_every_record_once_and_changes_it_once(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Events gain fields as the stream goes (JSON parsed per batch, add-columns). The driver
    dies (SIGKILL, JVM included) once the first batch's new column is in the table and none
    of its rows; the restart replays that batch: its rows land once, and no column is added
    twice."""
    catalog: SqlCatalog = make_catalog("sqlite", tmp_path)
    request.addfinalizer(catalog.engine.dispose)
    table = f"{catalog.name}.stream"
    ic.create_table(catalog, table, SCHEMA, partition_by=["hour(ts)"])
    source, checkpoints = tmp_path / "in", tmp_path / "chk"
    source.mkdir()
    extra: list[dict[str, str]] = [{}, {"device": "m"}, {"device": "n", "geo": "fr"}, {"geo": "de"}]
    expected: dict[int, dict[str, str]] = {}
    for number, fields in enumerate(extra):
        ids = range(number * 10, number * 10 + 10)
        rows = [{"id": i, "ts": (DAY0 + timedelta(seconds=4 * i)).isoformat(), **fields} for i in ids]
        expected.update({i: fields for i in ids})
        drop_json(source, f"part-{number:04d}.json", rows)
    args = [
        "--uri", catalog.properties["uri"], "--warehouse", catalog.properties["warehouse"],
        "--catalog-name", catalog.name, "--table", table, "--job", JOB, "--source", str(source),
        "--checkpoint-location", str(checkpoints), "--spark-local-dir", str(tmp_path / "spark-local"), "--evolving",
    ]  # fmt: skip
    killed = DriverRun([*args, "--drain", "--kill-at", "after-schema-change"], tmp_path / "driver-0.log")
    try:
        kill = killed.wait_killed_itself()
        assert kill["batch"] == 1, kill
        assert "device" in catalog.load_table(table).schema().column_names
        drain = DriverRun([*args, "--drain"], tmp_path / "driver-drain.log")
        assert drain.wait(DRAIN_TIMEOUT_S) == 0, drain.stderr_tail()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(killed.process.pid, signal.SIGKILL)
    loaded = catalog.load_table(table)
    rows = loaded.scan().to_arrow().to_pylist()
    assert Counter(r["id"] for r in rows) == Counter(expected.keys())
    assert {r["id"]: {k: r[k] for k in ("device", "geo") if r[k] is not None} for r in rows} == expected
    assert [f.name for f in loaded.schema().fields] == ["id", "ts", "device", "geo"]
    assert len(loaded.metadata.schemas) == 3  # the first schema and two changes: none made twice
    committer = ic.GlobalCommitter(catalog, table, job_id=JOB)
    features = {s.checkpoint_id: s.features for s in committer.store.list(committer.table_name, job_id=JOB)}
    assert features == {0: (), 1: ("schema-change",), 2: ("schema-change",), 3: ()}
