"""Soak: a seeded randomized run over crash points and concurrent jobs.

Each trial starts 1-3 jobs at once on one table (SQLite or PostgreSQL, alternating), each
in its own process, each killed with ``os._exit`` at a random step boundary of a random
checkpoint (or not at all); sometimes a second round of crashes follows; then every job is
run again to completion. The table must then hold every job's rows exactly once.

With ``--upsert`` every checkpoint upserts by id, half of its keys the previous
checkpoint's and some another job's: every key must then be live exactly once, and a key
only one job wrote must hold that job's last checkpoint's row (a key several jobs wrote
holds one of theirs: whichever committed last).

    .venv/bin/python -m bench.soak [--trials 200] [--seed 20261121] [--upsert]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import shutil
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil
from pyiceberg.catalog.sql import SqlCatalog

from bench.databases import PG_URI, postgres_available
from icecommit.committer import committed_checkpoints
from icecommit.state import CheckpointStore, state_engine
from icecommit.state.database import dispose_state_engines
from tests.committer.crash_driver import CRASH_EXIT_CODE, CRASH_POINTS, checkpoint_rows, run_job, upserted

OUT = Path(__file__).resolve().parent / "out"


@dataclass(frozen=True)
class Trial:
    trial: int
    backend: str
    jobs: int
    crashes: int
    lost: int
    duplicated: int
    double_commits: int
    retries: int
    seconds: float
    stale: int = 0


def _crash_now() -> None:
    os._exit(CRASH_EXIT_CODE)


def _job(kwargs: dict[str, Any]) -> None:
    run_job(**kwargs, crash=_crash_now)


def run_trial(trial: int, rng: random.Random, backend: str, work: Path, context: Any, *, upsert: bool = False) -> Trial:
    started = time.perf_counter()
    folder = work / f"trial-{trial}"
    folder.mkdir()
    uri = f"sqlite:///{folder / 'catalog.db'}" if backend == "sqlite" else PG_URI
    warehouse = (folder / "warehouse").as_uri()
    name = f"soak{uuid.uuid4().hex[:10]}"
    table = f"{name}.events"
    jobs = [
        {"job_id": f"job{j}", "checkpoints": rng.randint(2, 4), "job_offset": j * 50, "upsert": upsert}
        for j in range(rng.randint(1, 3))
    ]
    crashes = 0
    rounds = 1 + (rng.random() < 0.3)
    # the table exists before the jobs race, as a scheduler would have created it
    run_job(uri, warehouse, table, "setup", 0, catalog_name=name)
    for _ in range(rounds):
        processes = []
        for job in jobs:
            point = rng.choice([*CRASH_POINTS, None])
            kwargs = {
                "uri": uri, "warehouse": warehouse, "table_name": table, "catalog_name": name,
                "crash_point": point, "crash_checkpoint": rng.randint(1, job["checkpoints"]), **job,
            }  # fmt: skip
            process = context.Process(target=_job, args=(kwargs,))
            process.start()
            processes.append(process)
        for process in processes:
            process.join(300)
            crashes += process.exitcode == CRASH_EXIT_CODE
            if process.exitcode not in (0, CRASH_EXIT_CODE):
                raise RuntimeError(f"trial {trial}: a job failed with exit code {process.exitcode}")
    finals = [context.Process(target=_job, args=({"uri": uri, "warehouse": warehouse, "table_name": table,
                                                   "catalog_name": name, **job},)) for job in jobs]  # fmt: skip
    for process in finals:
        process.start()
    for process in finals:
        process.join(300)
        if process.exitcode != 0:
            raise RuntimeError(f"trial {trial}: replay failed with exit code {process.exitcode}")

    catalog = SqlCatalog(name, uri=uri, warehouse=warehouse)
    loaded = catalog.load_table(table)
    rows = loaded.scan(selected_fields=("id", "event")).to_arrow().to_pylist()
    ids = Counter(r["id"] for r in rows)
    stale = 0
    if upsert:  # every key once; a key one job alone wrote holds its last checkpoint's row
        finals = [upserted(job["checkpoints"], job["job_offset"]) for job in jobs]
        expected = Counter({i: 1 for final in finals for i in final})
        only = {i: final[i] for final in finals for i in final if sum(i in f for f in finals) == 1}
        stale = sum(1 for r in rows if r["id"] in only and r["event"] != only[r["id"]])
    else:
        expected = Counter(
            i
            for job in jobs
            for c in range(1, job["checkpoints"] + 1)
            for i in checkpoint_rows(c, job["job_offset"]).column("id").to_pylist()
        )
    landed = Counter((c.job_id, c.checkpoint_id) for c in committed_checkpoints(loaded.metadata))
    store = CheckpointStore(state_engine(uri))
    retries = sum(s.retries for s in store.list(table))
    catalog.engine.dispose()
    dispose_state_engines()
    shutil.rmtree(folder, ignore_errors=True)
    return Trial(
        trial=trial,
        backend=backend,
        jobs=len(jobs),
        crashes=crashes,
        lost=sum((expected - ids).values()),
        duplicated=sum((ids - expected).values()),
        double_commits=sum(n - 1 for n in landed.values() if n > 1),
        retries=retries,
        seconds=time.perf_counter() - started,
        stale=stale,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument("--upsert", action="store_true", help="every checkpoint upserts by id")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    backends = ["sqlite", "postgres"] if postgres_available() else ["sqlite"]
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.committer.crash_driver"])
    work = Path(tempfile.mkdtemp(prefix="icecommit-soak-"))
    trials = []
    try:
        for trial in range(args.trials):
            result = run_trial(trial, rng, backends[trial % len(backends)], work, context, upsert=args.upsert)
            trials.append(result)
            if result.lost or result.duplicated or result.double_commits or result.stale:
                print(f"FAILED {asdict(result)}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / ("soak-upsert.json" if args.upsert else "soak.json")).write_text(
        json.dumps([asdict(t) for t in trials], indent=2)
    )
    print(
        f"Machine: {platform.node()}, {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB; "
        f"run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; seed {args.seed}; backends {', '.join(backends)}"
        f"{'; upserts' if args.upsert else ''}"
    )
    print(
        "| trials | jobs run | processes killed | rows lost | rows duplicated | double commits | stale keys | retries |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {len(trials)} | {sum(t.jobs for t in trials)} | {sum(t.crashes for t in trials)} | "
        f"{sum(t.lost for t in trials)} | {sum(t.duplicated for t in trials)} | "
        f"{sum(t.double_commits for t in trials)} | {sum(t.stale for t in trials)} | {sum(t.retries for t in trials)} |"
    )
    bad = [t for t in trials if t.lost or t.duplicated or t.double_commits or t.stale]
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
