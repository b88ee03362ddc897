"""Which data files an upsert's key look-up reads: only those whose partition and key
column bounds can hold one of its keys, under a bucket or truncate transform of a key
column and for date and time keys too (and the rows come out right)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Collection, Mapping, Sequence

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

import icecommit as ic
from icecommit.catalog.data_file_keys import look_up_here
from icecommit.core.key_lookup import Match
from tests.helpers import write_arrow

T0 = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("code", pa.string(), nullable=False),
        pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("day", pa.date32(), nullable=False),
        pa.field("v", pa.string()),
    ]
)


class Spy:
    """A key look-up that records which files it was asked to read."""

    def __init__(self) -> None:
        self.read: list[str] = []

    def __call__(
        self, table: Table, files: Sequence[DataFile], keys: pa.Table, deleted: Mapping[str, Collection[int]]
    ) -> dict[str, Match]:
        self.read += [f.file_path for f in files]
        return look_up_here(table, files, keys, deleted)


def _rows(ids: range, mark: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "code": [f"c{i:05d}" for i in ids],
            "at": [T0 + dt.timedelta(hours=i) for i in ids],
            "day": [(T0 + dt.timedelta(days=i)).date() for i in ids],
            "v": [mark] * len(ids),
        },
        schema=SCHEMA,
    )


def _upsert(catalog: SqlCatalog, name: str, checkpoint: int, rows: pa.Table, key: str, spy: Spy | None = None) -> None:
    committer = ic.GlobalCommitter(catalog, name, job_id="j", key_lookup=spy)
    written = write_arrow(committer.load_table(), rows, job_id="j", checkpoint_id=checkpoint)
    committer.prepare(checkpoint, [written], mode="upsert", keys=rows.select([key]))
    assert committer.commit(checkpoint).committed


def _live(catalog: SqlCatalog, name: str) -> dict[int, str]:
    rows = catalog.load_table(name).scan(selected_fields=("id", "v")).to_arrow().to_pylist()
    assert max(Counter(r["id"] for r in rows).values()) == 1
    return {r["id"]: r["v"] for r in rows}


def _files_of(catalog: SqlCatalog, name: str, partition: dict[str, object]) -> set[str]:
    return {
        f["file_path"]
        for f in catalog.load_table(name).inspect.files().to_pylist()
        if f["content"] == 0 and all(f["partition"][k] == v for k, v in partition.items())
    }


def test_a_bucket_of_the_key_reads_only_that_buckets_files(sqlite_catalog: SqlCatalog) -> None:
    name = "ns.bucketed"
    ic.create_table(sqlite_catalog, name, SCHEMA, partition_by=["bucket(4, id)"], identifier_fields=["id"])
    for checkpoint in range(3):  # 3 x 4 bucket files, every file's ids spanning 0..299
        _upsert(sqlite_catalog, name, checkpoint, _rows(range(checkpoint, 300, 3), "old"), "id")
    table = sqlite_catalog.load_table(name)
    bucket = table.spec().fields[0].transform.pyarrow_transform(table.schema().find_field("id").field_type)
    ids = [i for i in range(300) if bucket(pa.array([i], pa.int64()))[0].as_py() == 2][:20]
    spy = Spy()
    _upsert(sqlite_catalog, name, 3, _rows_of(ids), "id", spy)
    assert set(spy.read) == _files_of(sqlite_catalog, name, {"id_bucket": 2}) - set(_new_files(sqlite_catalog, name))
    live = _live(sqlite_catalog, name)
    assert len(live) == 300 and {i for i, v in live.items() if v == "new"} == set(ids)


def _rows_of(ids: list[int]) -> pa.Table:
    return pa.concat_tables([_rows(range(i, i + 1), "new") for i in ids])


def _new_files(catalog: SqlCatalog, name: str) -> list[str]:
    """The data files the last snapshot added (the upsert's own new rows, never read)."""
    table = catalog.load_table(name)
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return [
        e.data_file.file_path
        for m in snapshot.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io)
        if e.snapshot_id == snapshot.snapshot_id and e.data_file.content == 0
    ]


def test_a_truncated_string_key_reads_only_files_of_its_prefixes(sqlite_catalog: SqlCatalog) -> None:
    name = "ns.truncated"
    ic.create_table(sqlite_catalog, name, SCHEMA, partition_by=["truncate(4, code)"], identifier_fields=["code"])
    _upsert(sqlite_catalog, name, 0, _rows(range(0, 3000, 7), "old"), "code")  # prefixes c000 .. c029
    spy = Spy()
    _upsert(sqlite_catalog, name, 1, _rows_of([7, 14, 2100]), "code", spy)  # prefixes c000 and c021
    read_prefixes = {
        f["partition"]["code_trunc"]
        for f in sqlite_catalog.load_table(name).inspect.files().to_pylist()
        if f["file_path"] in set(spy.read)
    }
    assert read_prefixes == {"c000", "c021"}
    assert {i for i, v in _live(sqlite_catalog, name).items() if v == "new"} == {7, 14, 2100}


def test_timestamp_and_date_keys_are_pruned_by_their_bounds(sqlite_catalog: SqlCatalog) -> None:
    for key in ("at", "day"):
        name = f"ns.keyed_by_{key}"
        ic.create_table(sqlite_catalog, name, SCHEMA, identifier_fields=[key])
        for checkpoint in range(4):  # one file per checkpoint, each over its own range of times
            _upsert(sqlite_catalog, name, checkpoint, _rows(range(checkpoint * 100, checkpoint * 100 + 100), "old"),
                    key)  # fmt: skip
        spy = Spy()
        _upsert(sqlite_catalog, name, 4, _rows(range(250, 260), "new"), key, spy)
        assert len(spy.read) == 1, (key, spy.read)  # the third checkpoint's file only
        live = _live(sqlite_catalog, name)
        assert sorted(i for i, v in live.items() if v == "new") == list(range(250, 260))
