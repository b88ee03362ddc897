"""A small job that writes and commits numbered checkpoints, and can crash on cue.

Used by the fault-injection tests and the soak run, in-process (a crash is an exception)
or as a subprocess (a crash is ``os._exit``). Each checkpoint ``c`` holds the rows with
ids ``c * 1000 + job_offset .. + ROWS``, so exactly-once is checked by id.

    python -m tests.committer.crash_driver --uri URI --warehouse WH --table T --job J \
        --checkpoints 3 [--crash-point after-prepare --crash-checkpoint 2] [--prepare-only]

Without ``--uri`` the catalog named by ``--catalog-name`` is opened the pyiceberg way
(``ic.connect(name)``: ``PYICEBERG_CATALOG__<NAME>__*`` or ``~/.pyiceberg.yaml``), as a
job on a REST catalog opens it (:func:`process_arguments` gives both forms).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io import OutputFile, OutputStream
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import Table

import icecommit as ic
from icecommit.committer import GlobalCommitter, RetryPolicy
from icecommit.committer.table_creation import create_table
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

ROWS = 40
CRASH_EXIT_CODE = 17
#: Crash points: the committer's fault points, plus the ones this driver adds.
CRASH_POINTS = (
    "after-write",  # files written, nothing staged
    "during-stage",  # half of the staged manifest written
    "after-stage",  # manifest staged, no state row
    "after-prepare",  # state row says prepared
    "before-commit-attempt",  # about to swap the table metadata
    "catalog-accepted",  # the catalog committed, the response never arrived
    "after-commit",  # committed, state row not yet updated
)
POLICY = RetryPolicy(max_attempts=200, max_seconds=600, min_wait_s=0.005, max_wait_s=0.2)


class InjectedCrash(BaseException):
    """An in-process crash: not an Exception, so nothing in icecommit swallows it."""


def checkpoint_rows(checkpoint_id: int, job_offset: int = 0) -> pa.Table:
    start = checkpoint_id * 1000 + job_offset
    return events(start, start + ROWS)


#: The partitions (``event`` values) each checkpoint of an overwriting job touches: the
#: first appends everywhere; the second replaces ``pv``; the third ``pv`` and ``show``, so
#: that a second application of the second would remove the third's ``pv`` rows.
OVERWRITTEN = {2: ("pv",), 3: ("pv", "show")}


def overwrite_rows(checkpoint_id: int, job_offset: int = 0) -> pa.Table:
    """The rows checkpoint ``checkpoint_id`` of an overwriting job writes."""
    rows = checkpoint_rows(checkpoint_id, job_offset)
    if checkpoint_id not in OVERWRITTEN:
        return rows
    return rows.filter(pa.compute.is_in(rows.column("event"), pa.array(OVERWRITTEN[checkpoint_id])))


def overwritten_ids(job_offset: int = 0) -> list[int]:
    """The ids an overwriting job's table holds after its three checkpoints (each once)."""
    first = checkpoint_rows(1, job_offset).to_pylist()
    kept = [r["id"] for r in first if r["event"] not in ("pv", "show")]
    return sorted(kept + overwrite_rows(3, job_offset).column("id").to_pylist())


def upsert_rows(checkpoint_id: int, job_offset: int = 0) -> pa.Table:
    """The rows checkpoint ``checkpoint_id`` of an upserting job writes: ids
    ``20c .. 20c + 39`` (half of them the previous checkpoint's), marked ``c<c>``."""
    rows = events(checkpoint_id * 20 + job_offset, checkpoint_id * 20 + job_offset + 40)
    return rows.set_column(2, "event", pa.array([f"c{checkpoint_id}"] * len(rows)))


def upserted(checkpoints: int = 3, job_offset: int = 0) -> dict[int, str]:
    """What an upserting job's table holds after its checkpoints: id -> marker, once each."""
    expected: dict[int, str] = {}
    for c in range(1, checkpoints + 1):
        expected.update({i: f"c{c}" for i in upsert_rows(c, job_offset).column("id").to_pylist()})
    return expected


def process_arguments(catalog: Catalog) -> tuple[list[str], dict[str, str]]:
    """How a process of its own opens ``catalog``: a SQL catalog by ``--uri``/``--warehouse``;
    any other by name, the pyiceberg way, its properties in ``PYICEBERG_CATALOG__<NAME>__*``
    variables (pyiceberg's spelling: ``__`` for a dot, ``_`` for a dash). Returns the
    arguments and the environment to add."""
    if isinstance(catalog, SqlCatalog):
        uri, warehouse = catalog.properties["uri"], catalog.properties["warehouse"]
        return ["--uri", uri, "--warehouse", warehouse, "--catalog-name", catalog.name], {}
    prefix = f"PYICEBERG_CATALOG__{catalog.name.upper()}__"
    env = {
        prefix + key.upper().replace(".", "__").replace("-", "_"): str(value)
        for key, value in catalog.properties.items()
        if key in ("type", "uri", "warehouse", "icecommit.state-uri") or key.startswith(("s3.", "header."))
    }
    return ["--catalog-name", catalog.name], env


def located(catalog: Catalog) -> tuple[str | None, str | None, dict[str, str]]:
    """What :func:`run_job` opens ``catalog`` from: a SQL catalog's URI and warehouse, or
    (None, None, its properties) for any other, opened by name with those properties."""
    if isinstance(catalog, SqlCatalog):
        return catalog.properties["uri"], catalog.properties["warehouse"], {}
    return None, None, {k: str(v) for k, v in catalog.properties.items()}


def crashing(catalog: Catalog, crash: Callable[[str], None]) -> Catalog:
    """``catalog``, made to die (``crash("catalog-accepted")``) after it accepted a commit."""
    accept = catalog.commit_table

    def commit_table(table: Table, requirements: Any, updates: Any) -> Any:
        response = accept(table, requirements, updates)
        crash("catalog-accepted")
        return response

    catalog.commit_table = commit_table  # type: ignore[method-assign]
    return catalog


class _HalfWrittenStream:
    def __init__(self, inner: OutputStream, on_half: Callable[[], None]) -> None:
        self._inner = inner
        self._on_half = on_half
        self._written = 0

    def write(self, data: bytes) -> int:
        written = self._inner.write(data)
        self._written += len(data)
        if self._written > 64:
            self._inner.flush()
            self._on_half()
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __enter__(self) -> _HalfWrittenStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.close()


class _CrashingOutput:
    def __init__(self, inner: OutputFile, on_half: Callable[[], None]) -> None:
        self._inner = inner
        self._on_half = on_half

    def create(self, overwrite: bool = False) -> IO[bytes]:
        return _HalfWrittenStream(self._inner.create(overwrite=overwrite), self._on_half)  # type: ignore[return-value]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class StagingCrashFileIO(PyArrowFileIO):
    """Dies half-way through writing a staged manifest when told to."""

    armed: Callable[[], None] | None = None

    def new_output(self, location: str) -> OutputFile:
        output = super().new_output(location)
        if StagingCrashFileIO.armed is not None and "icecommit-staged" in location:
            return _CrashingOutput(output, StagingCrashFileIO.armed)  # type: ignore[return-value]
        return output


def run_job(
    uri: str | None,
    warehouse: str | None,
    table_name: str,
    job_id: str,
    checkpoints: int,
    *,
    crash_point: str | None = None,
    crash_checkpoint: int = 0,
    crash: Callable[[], None] | None = None,
    prepare_only: bool = False,
    job_offset: int = 0,
    catalog_name: str = "crash",
    properties: dict[str, str] | None = None,
    overwrite: bool = False,
    upsert: bool = False,
) -> None:
    """Run the job: recover, then write/prepare/commit checkpoints 1..N that are not in.
    Without ``uri`` the catalog ``catalog_name`` is opened the pyiceberg way (with
    ``properties`` added to its configuration). ``overwrite``: checkpoints 2 and 3 replace
    the partitions of :data:`OVERWRITTEN` (:func:`overwrite_rows`); ``upsert``: every
    checkpoint upserts :func:`upsert_rows` by id."""
    current = {"checkpoint": 0}

    def maybe_crash(point: str, checkpoint_id: int | None = None) -> None:
        checkpoint = current["checkpoint"] if checkpoint_id is None else checkpoint_id
        if crash_point == point and checkpoint == crash_checkpoint and crash is not None:
            crash()

    io = {"py-io-impl": "tests.committer.crash_driver.StagingCrashFileIO"}
    if uri is None:
        opened: Catalog = ic.connect(catalog_name, **{**(properties or {}), **io})
    else:
        opened = SqlCatalog(catalog_name, uri=uri, warehouse=warehouse, **io)
    catalog = crashing(opened, maybe_crash)
    StagingCrashFileIO.armed = None
    try:
        table = create_table(
            catalog,
            table_name,
            EVENTS_SCHEMA,
            partition_by=["event"],
            properties={"icecommit.event-time-column": "ts"},
        )
        committer = GlobalCommitter(
            catalog, table_name, job_id=job_id, retry_policy=POLICY, fault=maybe_crash, sleep=lambda _: None
        )
        committer.recover()
        for checkpoint_id in range(1, checkpoints + 1):
            current["checkpoint"] = checkpoint_id
            state = committer.store.get(job_id, committer.table_name, checkpoint_id)
            if state is not None and state.committed:
                continue
            if committer.is_committed(checkpoint_id):
                committer.commit(checkpoint_id)
                continue
            if state is None:
                table = committer.load_table()
                rows = (upsert_rows if upsert else overwrite_rows if overwrite else checkpoint_rows)(
                    checkpoint_id, job_offset
                )
                results = [write_arrow(table, rows, job_id=job_id, checkpoint_id=checkpoint_id)]
                maybe_crash("after-write")
                if crash_point == "during-stage" and checkpoint_id == crash_checkpoint and crash is not None:
                    StagingCrashFileIO.armed = crash
                mode = "overwrite-partitions" if overwrite and checkpoint_id in OVERWRITTEN else "append"
                keys = rows.select(["id"]) if upsert else None
                committer.prepare(checkpoint_id, results, mode="upsert" if upsert else mode, keys=keys)
                StagingCrashFileIO.armed = None
            if not prepare_only:
                committer.commit(checkpoint_id)
    finally:
        StagingCrashFileIO.armed = None
        if isinstance(catalog, SqlCatalog):
            catalog.engine.dispose()


def _exit() -> None:
    sys.stdout.flush()
    os._exit(CRASH_EXIT_CODE)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uri")
    parser.add_argument("--warehouse")
    parser.add_argument("--table", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--checkpoints", type=int, required=True)
    parser.add_argument("--crash-point", choices=CRASH_POINTS)
    parser.add_argument("--crash-checkpoint", type=int, default=0)
    parser.add_argument("--prepare-only", action="store_true")
    parser.add_argument("--job-offset", type=int, default=0)
    parser.add_argument("--catalog-name", default="crash")
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--upsert", action="store_true")
    args = parser.parse_args(argv)
    run_job(
        args.uri,
        args.warehouse,
        args.table,
        args.job,
        args.checkpoints,
        crash_point=args.crash_point,
        crash_checkpoint=args.crash_checkpoint,
        crash=_exit,
        prepare_only=args.prepare_only,
        job_offset=args.job_offset,
        catalog_name=args.catalog_name,
        overwrite=args.overwrite,
        upsert=args.upsert,
    )


if __name__ == "__main__":
    # Run through the importable module, so that the FileIO class pyiceberg loads by name
    # and the one run_job arms are the same object.
    importlib.import_module("tests.committer.crash_driver").main()


def crash_then_replay_in_process(catalog: Catalog, table_name: str, job_id: str, point: str, **options: Any) -> None:
    """Run the job crashing (an exception) at ``point`` of checkpoint 2, then to its end
    (3 checkpoints); ``options``: :func:`run_job`'s (``overwrite=True``, ``upsert=True``)."""
    uri, warehouse, properties = located(catalog)

    def crash() -> None:
        raise InjectedCrash(point)

    common: dict[str, Any] = dict(catalog_name=catalog.name, properties=properties, **options)
    try:
        run_job(uri, warehouse, table_name, job_id, 3, crash_point=point, crash_checkpoint=2, crash=crash, **common)
    except InjectedCrash:
        pass
    else:
        raise AssertionError(f"the job did not reach {point}")
    run_job(uri, warehouse, table_name, job_id, 3, **common)


def crash_then_replay_as_processes(catalog: Catalog, table_name: str, job_id: str, point: str, *flags: str) -> None:
    """The same with the job as a process of its own, killed (``os._exit``) at ``point``;
    ``flags``: :func:`main`'s (``--overwrite``, ``--upsert``)."""
    from tests import processes

    where, env = process_arguments(catalog)
    argv = [*where, "--table", table_name, "--job", job_id, "--checkpoints", "3", *flags]
    environment = {**os.environ, **env}
    crashed = processes.run(main, [*argv, "--crash-point", point, "--crash-checkpoint", "2"], env=environment)
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    replayed = processes.run(main, argv, env=environment)
    assert replayed.returncode == 0, replayed.stderr
