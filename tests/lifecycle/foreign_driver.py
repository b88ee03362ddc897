"""The processes of the foreign-writer test: an icecommit job, or another tool doing plain
pyiceberg appends, all starting together at a barrier (one file per process in a folder).

    python -m tests.lifecycle.foreign_driver --uri URI --warehouse WH --catalog-name C \
        --table T --barrier DIR --parties N --name NAME \
        icecommit --job J --checkpoints 15 --job-offset 0
    python -m tests.lifecycle.foreign_driver ... foreign --start 1000000 --appends 15

An icecommit job is ``tests.committer.crash_driver.run_job`` without a crash (checkpoint
``c`` holds the ids ``c * 1000 + job_offset .. + 40``). A foreign writer's append ``i``
holds the ids ``start + i * 1000 .. + FOREIGN_ROWS``; on ``CommitFailedException`` it
reloads the table and appends again, at most ``MAX_ATTEMPTS`` times, as a real one would.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException

from tests.committer.crash_driver import run_job
from tests.helpers import events

FOREIGN_ROWS = 30
MAX_ATTEMPTS = 60
BARRIER_TIMEOUT_S = 120.0


def foreign_rows(start: int, append: int) -> pa.Table:
    first = start + append * 1000
    return events(first, first + FOREIGN_ROWS)


def wait_at_barrier(folder: Path, name: str, parties: int) -> None:
    """Say this process is ready, then wait (bounded) until every process is."""
    (folder / name).touch()
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while sum(1 for _ in folder.iterdir()) < parties:
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: only {sum(1 for _ in folder.iterdir())} of {parties} processes started")
        time.sleep(0.005)


def append_loop(catalog: SqlCatalog, table_name: str, start: int, appends: int) -> int:
    """Append ``appends`` batches with plain pyiceberg; returns how many commits were retried."""
    retries = 0
    for append in range(appends):
        data = foreign_rows(start, append)
        for attempt in range(MAX_ATTEMPTS):
            table = catalog.load_table(table_name)
            try:
                table.append(data)
                break
            except CommitFailedException:
                retries += 1
                time.sleep(min(0.1, 0.002 * 2**attempt))  # fixed backoff, no jitter
        else:
            raise SystemExit(f"append {append} (ids from {start + append * 1000}) failed {MAX_ATTEMPTS} times")
    return retries


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uri", required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--catalog-name", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--barrier", type=Path, required=True)
    parser.add_argument("--parties", type=int, required=True)
    parser.add_argument("--name", required=True)
    modes = parser.add_subparsers(dest="mode", required=True)
    job = modes.add_parser("icecommit")
    job.add_argument("--job", required=True)
    job.add_argument("--checkpoints", type=int, required=True)
    job.add_argument("--job-offset", type=int, default=0)
    foreign = modes.add_parser("foreign")
    foreign.add_argument("--start", type=int, required=True)
    foreign.add_argument("--appends", type=int, required=True)
    args = parser.parse_args(argv)

    if args.mode == "icecommit":
        wait_at_barrier(args.barrier, args.name, args.parties)
        run_job(args.uri, args.warehouse, args.table, args.job, args.checkpoints,
                job_offset=args.job_offset, catalog_name=args.catalog_name)  # fmt: skip
        print(json.dumps({"writer": args.name, "checkpoints": args.checkpoints}))
        return
    catalog = SqlCatalog(args.catalog_name, uri=args.uri, warehouse=args.warehouse)
    try:
        catalog.load_table(args.table)  # connected and warm before the start
        wait_at_barrier(args.barrier, args.name, args.parties)
        retries = append_loop(catalog, args.table, args.start, args.appends)
    finally:
        catalog.engine.dispose()
    print(json.dumps({"writer": args.name, "appends": args.appends, "retries": retries}))


if __name__ == "__main__":
    main()
