"""What schema evolution on write costs, on SQLite and PostgreSQL (figures in BENCHMARKS.md §11).

1. A checkpoint that adds a column against one that does not, on the driver-side path
   ``ic.write`` takes (``evolve_schema``, then ``write_arrow``, ``prepare``, ``commit``):
   the schema change's own commit, the checkpoint's commit, and the wall time of the whole.
   Alternating rounds on one table (each evolving round adds a new column), medians.
2. A routed ``ic.write`` from one DataFrame into 100 tables that do not exist yet
   (``create=True``), against the same write into the 100 tables once they exist, with Spark
   ``local[2]``.

    .venv/bin/python -m bench.schema_evolution [--rounds 15] [--tables 100] [--rows 20000]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import create_engine, text

import icecommit as ic
from bench.databases import PG_URI, postgres_available
from icecommit.committer import evolve_schema
from icecommit.writers import write_arrow


def _catalog(backend: str, folder: Path) -> tuple[SqlCatalog, Callable[[], None]]:
    warehouse = folder / "warehouse"
    warehouse.mkdir(parents=True, exist_ok=True)
    if backend == "sqlite":
        catalog = SqlCatalog("bench", uri=f"sqlite:///{folder / 'catalog.db'}", warehouse=warehouse.as_uri())
        return catalog, catalog.engine.dispose
    database = f"bench_evolution_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_URI, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'create database "{database}"'))
    uri = PG_URI.rsplit("/", 1)[0] + f"/{database}"
    catalog = SqlCatalog("bench", uri=uri, warehouse=warehouse.as_uri())

    def drop() -> None:
        catalog.engine.dispose()
        from icecommit.state.database import dispose_state_engines

        dispose_state_engines()
        with admin.connect() as conn:
            conn.execute(text(f'drop database if exists "{database}" with (force)'))
        admin.dispose()

    return catalog, drop


def _rows(checkpoint: int, columns: list[str], rows: int) -> pa.Table:
    start = checkpoint * rows
    data: dict[str, pa.Array] = {"id": pa.array(range(start, start + rows), pa.int64())}
    for column in columns:
        data[column] = pa.array([f"{column}-{i % 97}" for i in range(rows)], pa.string())
    return pa.table(data)


def checkpoints(backend: str, rounds: int, rows: int) -> dict[str, dict[str, float]]:
    """Medians (seconds) of each step, for plain and evolving checkpoints."""
    with tempfile.TemporaryDirectory() as folder:
        catalog, close = _catalog(backend, Path(folder))
        try:
            name = "bench.events"
            ic.create_table(catalog, name, pa.schema([pa.field("id", pa.int64())]))
            committer = ic.GlobalCommitter(catalog, name, job_id="bench")
            columns: list[str] = []
            timings: dict[str, dict[str, list[float]]] = {k: {} for k in ("plain", "evolving")}
            for checkpoint in range(1, 2 * rounds + 3):
                kind = "evolving" if checkpoint % 2 else "plain"
                if kind == "evolving":
                    columns.append(f"c{checkpoint}")
                batch = _rows(checkpoint, columns, rows)
                began = time.perf_counter()
                table = evolve_schema(catalog, name, batch.schema, job_id="bench", checkpoint_id=checkpoint,
                                      schema_mode="add-columns")  # fmt: skip
                evolved = time.perf_counter()
                result = write_arrow(table, batch, job_id="bench", checkpoint_id=checkpoint)
                written = time.perf_counter()
                committer.prepare(checkpoint, [result])
                committer.commit(checkpoint)
                ended = time.perf_counter()
                if checkpoint <= 2:
                    continue  # warm-up: the first of each kind
                for step, seconds in (("schema change", evolved - began), ("write", written - evolved),
                                      ("prepare + commit", ended - written), ("wall", ended - began)):  # fmt: skip
                    timings[kind].setdefault(step, []).append(seconds)
            return {kind: {step: statistics.median(v) for step, v in steps.items()} for kind, steps in timings.items()}
        finally:
            close()


def routed(backend: str, tables: int, rows: int) -> dict[str, float]:
    """Wall seconds of a routed write into ``tables`` new tables, then into the same tables."""
    from pyspark.sql import functions as F

    from icecommit.writers.session import local_session

    spark = local_session("bench-evolution", master="local[2]")
    with tempfile.TemporaryDirectory() as folder:
        catalog, close = _catalog(backend, Path(folder))
        try:
            frame = spark.range(rows).select(
                F.col("id"), (F.col("id") % tables).cast("string").alias("route"), F.lit("x").alias("payload")
            ).cache()  # fmt: skip
            frame.count()
            # warm-up (Spark's first jobs, the session's code paths), into other tables
            ic.write(frame, {str(i): f"warmup.t{i}" for i in range(tables)}, catalog=catalog, job_id="warm",
                     checkpoint_id=1, route_by="route", create=True)  # fmt: skip
            routes = {str(i): f"routed.t{i:03d}" for i in range(tables)}
            began = time.perf_counter()
            first = ic.write(frame, routes, catalog=catalog, job_id="bench", checkpoint_id=1, route_by="route",
                             create=True)  # fmt: skip
            creating = time.perf_counter() - began
            assert all(r.committed for r in first.results.values()) and len(first.results) == tables
            began = time.perf_counter()
            ic.write(frame, routes, catalog=catalog, job_id="bench", checkpoint_id=2, route_by="route", create=True)
            existing = time.perf_counter() - began
            return {"creating": creating, "existing": existing}
        finally:
            close()
            spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args()
    backends = ["sqlite"] + (["postgres"] if postgres_available() else [])
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d')}")
    for backend in backends:
        medians = checkpoints(backend, args.rounds, 1_000)
        for kind, steps in medians.items():
            shown = ", ".join(f"{step} {seconds * 1000:.1f} ms" for step, seconds in steps.items())
            print(f"{backend} {kind} checkpoint (median of {args.rounds}): {shown}")
        ratio = medians["evolving"]["wall"] / medians["plain"]["wall"]
        print(f"{backend} evolving / plain wall: {ratio:.2f}x")
    for backend in backends:
        walls = routed(backend, args.tables, args.rows)
        print(f"{backend} routed write into {args.tables} tables, {args.rows:,} rows: creating them "
              f"{walls['creating']:.1f} s, into them once they exist {walls['existing']:.1f} s "
              f"({walls['creating'] / walls['existing']:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
