"""Compaction beside everything else: seeded injections at each step boundary of a group.

Each trial makes a table, commits 5 to 8 small checkpoints of a job, then compacts it, and
at one step boundary of the commit group (``rewrite``: its inputs found live, nothing
written; ``commit``: its files written, before its lineage is recorded and the swap;
``attempt``: inside the commit attempt, before it checks its inputs again) runs one
operation of another process's kind: a rollback by checkpoint, an expiry of every snapshot
but the head, a second compaction, or a live append of a new checkpoint.

After each trial, checked independently of the compaction's own report:

- every row of every checkpoint the state holds committed is in the table once, and no
  other row (no row lost, duplicated or resurrected);
- the group's outcome is the one the operation calls for: aborted after a rollback or a
  second compaction took its inputs, committed after an expiry or an append;
- an aborted group left the table as it was: no snapshot of its, no lineage in the state,
  and no file under the table's location that nothing references (the orphan sweep, with
  no age limit, finds none);
- reconciliation (shallow and deep) holds, with every checkpoint's readable count exact.

    .venv/bin/python -m bench.compaction_injections [--trials 100] [--seed 20261123]

The seed is printed; a short seeded slice runs in the default test suite
(``tests/lifecycle/test_compaction_injections.py``).
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
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psutil
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.maintenance import apply_expire, apply_rollback, find_orphans, plan_expire, plan_rollback
from icecommit.maintenance.compaction import CommitGroup, compact
from icecommit.state import CheckpointStore, state_engine, state_uri
from icecommit.state.compactions import CompactionStore
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

STEPS = ("rewrite", "commit", "attempt")
OPERATIONS = ("rollback", "expire", "second-compaction", "append")
#: The outcome of the injected group each operation calls for.
EXPECTED = {"rollback": "aborted", "second-compaction": "aborted", "expire": "committed", "append": "committed"}
ROWS = 60
JOB = "live"
TARGET = 64 * 1024


@dataclass
class TrialResult:
    trial: int
    seed: int
    backend: str
    step: str
    operation: str
    outcome: str = ""
    rows: int = 0
    lost: int = 0
    duplicated: int = 0
    foreign: int = 0
    orphans: int = 0
    failure: str | None = None


def _commit(catalog: SqlCatalog, name: str, checkpoint_id: int) -> None:
    committer = ic.GlobalCommitter(catalog, name, job_id=JOB)
    rows = events(checkpoint_id * ROWS, checkpoint_id * ROWS + ROWS)
    committer.prepare(
        checkpoint_id, [write_arrow(committer.load_table(), rows, job_id=JOB, checkpoint_id=checkpoint_id)]
    )
    committer.commit(checkpoint_id)


def run_trial(
    trial: int,
    seed: int,
    backend: str,
    catalog: SqlCatalog,
    *,
    step: str | None = None,
    operation: str | None = None,
) -> TrialResult:
    """One seeded trial (``step`` and ``operation`` drawn from the seed unless given)."""
    rng = random.Random(f"{seed}-{trial}")
    step = step or rng.choice(STEPS)
    operation = operation or rng.choice(OPERATIONS)
    result = TrialResult(trial, seed, backend, step, operation)
    name = f"inj_{uuid.uuid4().hex[:8]}.t{trial}"
    catalog.create_namespace_if_not_exists(name.split(".")[0])
    ic.create_table(
        catalog, name, EVENTS_SCHEMA, partition_by=["event"], properties={"write.target-file-size-bytes": str(TARGET)}
    )
    checkpoints = rng.randint(5, 8)
    for checkpoint_id in range(checkpoints):
        _commit(catalog, name, checkpoint_id)
    snapshots = [s.snapshot_id for s in catalog.load_table(name).snapshots()]
    fired: list[str] = []

    def inject(at: str, group: CommitGroup) -> None:
        if at != step or fired:
            return
        fired.append(at)
        if operation == "rollback":  # the last one to three checkpoints go
            keep = rng.randint(max(1, checkpoints - 3), checkpoints - 1)
            apply_rollback(catalog, plan_rollback(catalog, name, to_snapshot=snapshots[keep - 1]))
        elif operation == "expire":
            later = datetime.now(timezone.utc) + timedelta(hours=1)
            apply_expire(catalog, plan_expire(catalog, name, older_than=timedelta(0), now=later))
        elif operation == "second-compaction":
            compact(catalog, name)
        else:
            _commit(catalog, name, checkpoints)

    try:
        done = compact(catalog, name, on_step=inject)
        if not fired or len(done.groups) != 1:
            raise AssertionError(f"the {step} step was not reached once ({len(done.groups)} group(s))")
        result.outcome = done.groups[0].status
        if result.outcome != EXPECTED[operation]:
            raise AssertionError(f"the group was {result.outcome} after {operation}: {done.groups[0].reason}")
        _check(catalog, name, result)
    except Exception as e:  # recorded: the soak reports every failed trial
        result.failure = f"{type(e).__name__}: {e}"
    return result


def _check(catalog: SqlCatalog, name: str, result: TrialResult) -> None:
    """The table against the state, independently of what compaction reported."""
    table = catalog.load_table(name)
    engine = state_engine(state_uri(catalog))
    committed = [s for s in CheckpointStore(engine).list(name) if s.status == "committed"]
    expected = Counter(i for s in committed for i in range(s.checkpoint_id * ROWS, s.checkpoint_id * ROWS + ROWS))
    found = Counter(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
    result.rows = sum(found.values())
    result.lost = sum((expected - found).values())
    result.duplicated = sum(n - 1 for i, n in found.items() if n > 1 and i in expected)
    result.foreign = sum(n for i, n in found.items() if i not in expected)
    if result.lost or result.duplicated or result.foreign:
        raise AssertionError(f"lost {result.lost}, duplicated {result.duplicated}, resurrected {result.foreign}")
    groups = CompactionStore(engine).groups(name)
    if any(g.status == "prepared" for g in groups):
        raise AssertionError("a group is still recorded as prepared after compact returned")
    if result.outcome == "aborted":
        summaries = [s.summary for s in table.snapshots() if s.summary is not None]
        landed = {s.get("icecommit.compaction-id") for s in summaries} - {None}
        if landed - {g.compaction_id for g in groups if g.status == "committed"}:
            raise AssertionError("a compaction snapshot landed that the state does not hold committed")
    orphans = find_orphans(catalog, name, older_than=timedelta(0), now=datetime.now(timezone.utc) + timedelta(hours=1))
    result.orphans = len(orphans.orphans)
    if orphans.orphans:
        raise AssertionError(f"{len(orphans.orphans)} file(s) nothing references, e.g. {orphans.orphans[0].path}")
    for deep in (False, True):
        report = ic.reconcile(catalog, name, deep=deep)
        if not report.ok:
            raise AssertionError(f"reconcile (deep={deep}): {report.problems[:3]}")
        wrong = [(line.checkpoint_id, line.readable) for line in report.checkpoints
                 if line.status == "committed" and line.readable != ROWS]  # fmt: skip
        if wrong:
            raise AssertionError(f"readable counts off (deep={deep}): {wrong}")


def main() -> None:
    from bench.databases import PG_URI, postgres_available
    from bench.lifecycle_soak import soak_database

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100, help="trials per backend")
    parser.add_argument("--seed", type=int, default=20261123)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the aborted groups' warnings are the plan here
    work = Path(tempfile.mkdtemp(prefix="icecommit-compaction-injections-"))
    results: list[TrialResult] = []
    started = time.perf_counter()
    print(f"compaction injections: seed {args.seed}, {args.trials} trials per backend", flush=True)
    try:
        # a catalog per trial: the orphan check reads every table of its catalog
        runs: list[tuple[str, Callable[[int], SqlCatalog]]] = []

        def sqlite(trial: int) -> SqlCatalog:
            folder = work / f"sqlite-{trial}"
            folder.mkdir()
            return SqlCatalog(f"inj{trial}", uri=f"sqlite:///{folder / 'c.db'}", warehouse=f"file://{folder}")

        runs.append(("sqlite", sqlite))
        with soak_database(PG_URI) if postgres_available() else nullcontext() as pg:
            if pg is not None:

                def postgres(trial: int) -> SqlCatalog:
                    folder = work / f"postgres-{trial}"
                    folder.mkdir()
                    return SqlCatalog(f"inj{trial}", uri=pg, warehouse=f"file://{folder}")

                runs.append(("postgres", postgres))
            for backend, make in runs:
                for trial in range(args.trials):
                    result = run_trial(trial, args.seed, backend, make(trial))
                    results.append(result)
                    if result.failure:
                        print(f"FAILED {json.dumps(asdict(result))}", flush=True)
                    if (trial + 1) % 25 == 0:
                        print(f"{backend}: {trial + 1} trials, {time.perf_counter() - started:.0f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB; "
        f"run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; seed {args.seed}; "
        f"{time.perf_counter() - started:.0f} s"
    )
    print("| backend | step | operation | trials | committed | aborted | failed | lost | duplicated | orphans |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for key in sorted({(r.backend, r.step, r.operation) for r in results}):
        mine = [r for r in results if (r.backend, r.step, r.operation) == key]
        print(
            f"| {key[0]} | {key[1]} | {key[2]} | {len(mine)} | {sum(r.outcome == 'committed' for r in mine)} | "
            f"{sum(r.outcome == 'aborted' for r in mine)} | {sum(r.failure is not None for r in mine)} | "
            f"{sum(r.lost for r in mine)} | {sum(r.duplicated for r in mine)} | {sum(r.orphans for r in mine)} |"
        )
    raise SystemExit(1 if any(r.failure for r in results) else 0)


if __name__ == "__main__":
    main()
