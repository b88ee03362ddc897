"""The storage incident of the design notes (ARCHITECTURE.md, "Why file state") as a test.

Storage that delays, duplicates and replays deletes, and that times out on operations it
did perform. The write and commit path issues no deletes and lists no directory, so
neither late deletes nor their order can touch committed or prepared data.
"""

from __future__ import annotations

import functools
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pyarrow.fs
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io import InputFile, OutputFile, OutputStream
from pyiceberg.io.pyarrow import PyArrowFileIO, PyArrowLocalFileSystem

import icecommit as ic
from icecommit.committer import RetryPolicy
from icecommit.errors import StagingError
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

# the incidents are the file store's
pytestmark = pytest.mark.database_independent

ROWS = 60


class Storage:
    """Shared state of the misbehaving storage (one per test)."""

    rng = random.Random(0)
    timeout_rate = 0.0
    pending_deletes: list[str] = []  # noqa: RUF012 - reset by the fixture
    path_deletes: list[str] = []  # noqa: RUF012
    created: list[str] = []  # noqa: RUF012
    timeouts = 0

    @classmethod
    def reset(cls, seed: int, timeout_rate: float) -> None:
        cls.rng = random.Random(seed)
        cls.timeout_rate = timeout_rate
        cls.pending_deletes = []
        cls.path_deletes = []
        cls.created = []
        cls.timeouts = 0

    @classmethod
    def maybe_time_out(cls, what: str) -> None:
        if cls.rng.random() < cls.timeout_rate:
            cls.timeouts += 1
            raise TimeoutError(f"storage timed out on {what} (it was done)")


class _TimeoutAfterClose:
    def __init__(self, inner: OutputStream, location: str) -> None:
        self._inner = inner
        self._location = location

    def write(self, data: bytes) -> int:
        return self._inner.write(data)

    def close(self) -> None:
        self._inner.close()
        Storage.maybe_time_out(f"closing {self._location}")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __enter__(self) -> _TimeoutAfterClose:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Output:
    def __init__(self, inner: OutputFile) -> None:
        self._inner = inner

    def create(self, overwrite: bool = False) -> IO[bytes]:
        return _TimeoutAfterClose(self._inner.create(overwrite=overwrite), self._inner.location)  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self._inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class IncidentFileIO(PyArrowFileIO):
    """Writes happen but may report a timeout; deletes are queued, to be replayed late,
    twice, in reverse order."""

    def new_output(self, location: str) -> OutputFile:
        Storage.created.append(location)
        return _Output(super().new_output(location))  # type: ignore[return-value]

    def delete(self, location: str | InputFile | OutputFile) -> None:
        path = location if isinstance(location, str) else location.location
        Storage.path_deletes.append(path)
        Storage.pending_deletes.append(path)
        Storage.maybe_time_out(f"deleting {path}")

    def replay_deletes(self) -> None:
        for path in reversed(Storage.pending_deletes * 2):
            try:
                super().delete(path)
            except FileNotFoundError:
                continue
        Storage.pending_deletes = []


@pytest.fixture
def no_listing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any directory listing in the driver fails the test."""

    def refuse(*args: object, **kwargs: object) -> Any:
        raise AssertionError(f"a directory was listed: {args!r}")

    original = PyArrowLocalFileSystem.get_file_info

    def get_file_info(self: Any, paths_or_selector: Any) -> Any:
        if isinstance(paths_or_selector, pyarrow.fs.FileSelector):
            refuse(paths_or_selector)
        return original(self, paths_or_selector)

    monkeypatch.setattr(os, "listdir", refuse)
    monkeypatch.setattr(os, "scandir", refuse)
    monkeypatch.setattr(Path, "iterdir", refuse)
    monkeypatch.setattr(PyArrowLocalFileSystem, "get_file_info", get_file_info)
    yield


def _retry(action: Any, *, on: type[BaseException] | tuple[type[BaseException], ...] = TimeoutError) -> Any:
    for _ in range(50):
        try:
            return action()
        except on:
            continue
    raise AssertionError("storage never let the operation through")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_late_duplicated_deletes_and_false_timeouts_lose_nothing(
    catalog: SqlCatalog, no_listing: None, seed: int
) -> None:
    Storage.reset(seed, timeout_rate=0.25)
    incident = SqlCatalog(catalog.name, **{**catalog.properties, "py-io-impl": f"{__name__}.IncidentFileIO"})
    try:
        table_name = f"{catalog.name}.events"
        _retry(lambda: ic.create_table(incident, table_name, EVENTS_SCHEMA, partition_by=["event"]))
        committer = ic.GlobalCommitter(
            incident,
            table_name,
            job_id="incident",
            retry_policy=RetryPolicy(max_attempts=20, max_seconds=60, min_wait_s=0.001, max_wait_s=0.01),
            sleep=lambda _: None,
        )
        io = IncidentFileIO(incident.properties)
        failed_attempt_files: list[str] = []
        for checkpoint_id in range(1, 7):
            data = events(checkpoint_id * 1000, checkpoint_id * 1000 + ROWS)

            attempt, result = 0, None
            while result is None:
                attempt += 1
                try:
                    table = committer.load_table()
                    result = write_arrow(table, data, job_id="incident", checkpoint_id=checkpoint_id, attempt=attempt)
                except TimeoutError:
                    continue  # a failed task attempt; its files stay unreferenced
            # the sweeper removes the failed attempts' files by exact path, but the storage
            # delays the deletes (and later replays them, twice, in reverse order)
            kept = {f.path for f in result.data_files}
            tag = f"-{checkpoint_id:08d}-"
            failed = [p for p in Storage.created if "/data/" in p and tag in p and p not in kept]
            failed_attempt_files.extend(failed)
            for path in failed:
                _retry(lambda p=path: io.delete(p))
            _retry(functools.partial(committer.prepare, checkpoint_id, [result]), on=(TimeoutError, StagingError))
            try:
                committer.commit(checkpoint_id)
            except (ic.CommitStateUnknownError, TimeoutError):
                _retry(committer.recover, on=(ic.CommitStateUnknownError, TimeoutError))
            if checkpoint_id % 2 == 0:
                io.replay_deletes()
        _retry(committer.recover, on=(ic.CommitStateUnknownError, TimeoutError))
        io.replay_deletes()

        assert Storage.timeouts > 0, "the storage should have timed out on something"
        # the write and commit path itself never deleted anything
        assert set(Storage.path_deletes) <= set(failed_attempt_files)
        loaded = incident.load_table(table_name)
        ids = sorted(loaded.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
        assert ids == [i for c in range(1, 7) for i in range(c * 1000, c * 1000 + ROWS)]
        states = committer.store.list(committer.table_name, job_id="incident")
        assert [s.status for s in states] == ["committed"] * 6
    finally:
        incident.engine.dispose()
