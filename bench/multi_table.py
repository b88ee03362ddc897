"""What one catalog commit for a checkpoint of several tables costs, against committing the
same checkpoint table by table.

For each catalog (SQLite always; PostgreSQL when it answers; with ``--rest``, the tests' REST
catalog server on Iceberg's Java handlers, whose ``transactions/commit`` makes the one
commit) and each number of tables
(10 and 100 by default), the script makes that many tables, prepares one small checkpoint
in each (``write_arrow``, as a Spark task writes: a few rows), and times
``commit_to_tables`` with ``together_in=`` (one database transaction moves every pointer)
and without it (one commit per table). The two modes alternate checkpoint by checkpoint,
each on tables of its own, so the machine's noise hits both alike. Only the commit is
timed: writing and preparing are the same in both modes.

    .venv/bin/python -m bench.multi_table [--tables 10 100] [--checkpoints 20] [--rest]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from bench.databases import PG_URI, postgres_available
from icecommit.committer.checkpoint_tables import commit_to_tables
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

OUT = Path(__file__).resolve().parent / "out"


def _catalog(database: str, home: Path, rest_url: str | None = None) -> Catalog:
    name = f"b{uuid.uuid4().hex[:10]}"
    if database == "rest":
        assert rest_url is not None
        return ic.connect(name, **{"type": "rest", "uri": rest_url, "icecommit.state-uri": PG_URI})
    uri = f"sqlite:///{home / 'catalog.db'}" if database == "sqlite" else PG_URI
    catalog = ic.connect(name, uri=uri, warehouse=(home / "warehouse").as_uri())
    assert isinstance(catalog, SqlCatalog)
    return catalog


#: A job of this run's own (a PostgreSQL state database outlives the run's catalog).
JOB = f"bench-{uuid.uuid4().hex[:8]}"


def _one(catalog: Catalog, names: list[str], checkpoint: int, *, together: bool) -> float:
    committers = {n: ic.GlobalCommitter(catalog, n, job_id=JOB) for n in names}
    plans = {}
    for i, (name, committer) in enumerate(committers.items()):
        rows = events(checkpoint * 10_000 + i * 10, checkpoint * 10_000 + i * 10 + 5)
        plans[name] = committer.prepare_planned(
            checkpoint, [write_arrow(committer.load_table(), rows, job_id=JOB, checkpoint_id=checkpoint)]
        )
    started = time.perf_counter()
    results = commit_to_tables(committers, checkpoint, plans, together_in=catalog if together else None)
    elapsed = time.perf_counter() - started
    assert {r.status for r in results.values()} == {"committed"}, results
    return elapsed


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--checkpoints", type=int, default=20)
    parser.add_argument("--rest", action="store_true", help="the REST catalog server too (Java, PostgreSQL)")
    args = parser.parse_args()
    databases = ["sqlite"] + (["postgres"] if postgres_available() else []) + (["rest"] if args.rest else [])
    server = None
    if args.rest:
        from tests.rest.server import RestServer

        server = RestServer(Path(tempfile.mkdtemp()) / "warehouse").start()
    found: dict[str, dict[str, dict[str, list[float]]]] = {}
    for database in databases:
        for count in args.tables:
            with tempfile.TemporaryDirectory() as home:
                catalog = _catalog(database, Path(home), server.url if server else None)
                namespace = f"bench{uuid.uuid4().hex[:6]}"  # a REST server's catalog outlives one size
                catalog.create_namespace(namespace)
                tables = {
                    mode: [f"{namespace}.{mode.replace('-', '_')}_{i}" for i in range(count)]
                    for mode in ("one-commit", "table-by-table")
                }
                for names in tables.values():
                    for name in names:
                        ic.create_table(catalog, name, EVENTS_SCHEMA)
                seconds: dict[str, list[float]] = {mode: [] for mode in tables}
                for checkpoint in range(1, args.checkpoints + 1):
                    order = list(tables) if checkpoint % 2 else list(reversed(tables))  # each first in turn
                    for mode in order:
                        seconds[mode].append(_one(catalog, tables[mode], checkpoint, together=mode == "one-commit"))
                found.setdefault(database, {})[str(count)] = seconds
                one, apart = seconds["one-commit"], seconds["table-by-table"]
                print(
                    f"{database} {count} tables: one commit p50 {statistics.median(one):.3f} s "
                    f"p95 {_percentile(one, 0.95):.3f} s; table by table p50 {statistics.median(apart):.3f} s "
                    f"p95 {_percentile(apart, 0.95):.3f} s; ratio p50 "
                    f"{statistics.median(one) / statistics.median(apart):.2f}x",
                    flush=True,
                )
                if isinstance(catalog, SqlCatalog):
                    catalog.engine.dispose()
    if server is not None:
        server.stop()
    OUT.mkdir(exist_ok=True)
    document = {
        "checkpoints": args.checkpoints, "seconds": found, "machine": platform.platform(), "cpus": os.cpu_count(),
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }  # fmt: skip
    (OUT / "multi_table.json").write_text(json.dumps(document, indent=2))
    print(f"written to {OUT / 'multi_table.json'}")


if __name__ == "__main__":
    main()
