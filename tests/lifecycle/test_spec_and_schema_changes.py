"""A checkpoint prepared before the table's schema or partition spec changed: schema
changes that keep its files readable commit; a spec change is refused with an error that
names both specs and says what to do, and the job goes on once the checkpoint is abandoned
(committing files of an older spec needs a snapshot producer of icecommit's own: not yet)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.types import IntegerType, LongType

import icecommit as ic
from icecommit.errors import PartitionSpecChangedError
from tests.helpers import EVENTS_SCHEMA, events, write_arrow


def _prepared(catalog: SqlCatalog, checkpoint_id: int, rows: pa.Table) -> ic.GlobalCommitter:
    committer = ic.GlobalCommitter(catalog, f"{catalog.name}.events", job_id="A")
    committer.prepare(
        checkpoint_id, [write_arrow(committer.load_table(), rows, job_id="A", checkpoint_id=checkpoint_id)]
    )
    return committer


def _ids(catalog: SqlCatalog) -> Counter[int]:
    data = catalog.load_table(f"{catalog.name}.events").scan(selected_fields=("id",)).to_arrow()
    return Counter(data.column("id").to_pylist())


def test_a_column_added_and_widened_after_prepare_still_commits(catalog: SqlCatalog) -> None:
    ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA, partition_by=["day(ts)"])
    committer = _prepared(catalog, 1, events(0, 30))
    table = catalog.load_table(f"{catalog.name}.events")
    with table.update_schema() as update:
        update.add_column("extra", IntegerType())
    assert committer.commit(1).status == "committed"
    rows = events(100, 130).append_column("extra", pa.array(range(30), pa.int32()))
    committer = _prepared(catalog, 2, rows)
    with catalog.load_table(f"{catalog.name}.events").update_schema() as update:
        update.update_column("extra", LongType())
    assert committer.commit(2).status == "committed"
    data = catalog.load_table(f"{catalog.name}.events").scan().to_arrow()
    assert data.schema.field("extra").type == pa.int64()
    assert _ids(catalog) == Counter([*range(0, 30), *range(100, 130)])
    extras = dict(zip(data.column("id").to_pylist(), data.column("extra").to_pylist(), strict=True))
    assert extras[0] is None and extras[105] == 5


def test_a_partition_spec_change_after_prepare_is_refused_by_name_and_the_job_goes_on(catalog: SqlCatalog) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["day(ts)"])
    committer = _prepared(catalog, 1, events(0, 30))
    with catalog.load_table(name).update_spec() as update:
        update.add_identity("event")
    before = catalog.load_table(name).metadata_location
    for attempt in (lambda: committer.commit(1), committer.recover):
        with pytest.raises(PartitionSpecChangedError) as raised:
            attempt()
        e = raised.value
        assert isinstance(e, ic.ValidationError)
        assert (e.job_id, e.checkpoint_id, e.prepared_spec_id, e.current_spec_id) == ("A", 1, 0, 1)
        assert "abandon(1, reason=...)" in str(e)
    assert catalog.load_table(name).metadata_location == before  # nothing committed, no retries into a conflict
    committer.abandon(1, reason="partition spec changed")
    assert committer.recover() == []
    _prepared(catalog, 2, events(0, 30)).commit(2)  # the same rows, written under the new spec
    assert _ids(catalog) == Counter(range(30))
    table = catalog.load_table(name)
    files = table.inspect.files()
    assert set(files.column("spec_id").to_pylist()) == {1}
    assert table.scan(row_filter="event == 'pv'").to_arrow().num_rows == sum(
        1 for i in range(30) if i % 11 and i % 3 == 0
    )


def test_a_checkpoint_that_landed_before_the_spec_changed_is_recorded_not_refused(catalog: SqlCatalog) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["day(ts)"])

    def die_after_commit(where: str, checkpoint_id: int) -> None:
        if where == "after-commit":
            raise KeyboardInterrupt  # the process dies between the catalog's commit and the state's

    dying = ic.GlobalCommitter(catalog, name, job_id="A", fault=die_after_commit)
    dying.prepare(1, [write_arrow(dying.load_table(), events(0, 30), job_id="A", checkpoint_id=1)])
    with pytest.raises(KeyboardInterrupt):
        dying.commit(1)
    with catalog.load_table(name).update_spec() as update:
        update.add_identity("event")
    [recovered] = ic.GlobalCommitter(catalog, name, job_id="A").recover()
    assert recovered.status == "already-committed"
    assert _ids(catalog) == Counter(range(30))


def test_a_spec_change_behind_a_committers_cached_table_commits_under_the_files_spec_or_is_refused(
    catalog: SqlCatalog,
) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["day(ts)"])
    committer = _prepared(catalog, 1, events(0, 30))
    committer.commit(1)  # the committer now caches the table its commit made
    committer.prepare(2, [write_arrow(committer.load_table(), events(100, 130), job_id="A", checkpoint_id=2)])
    other = SqlCatalog(catalog.name, **catalog.properties)  # another process changes the spec
    with other.load_table(name).update_spec() as update:
        update.add_identity("event")
    other.engine.dispose()
    # the append built on the cached table writes its manifest under the files' own spec, which
    # Iceberg allows; a retry on the fresh table would be refused (PartitionSpecChangedError)
    assert committer.commit(2).status == "committed"
    table = catalog.load_table(name)
    assert _ids(catalog) == Counter([*range(30), *range(100, 130)])
    assert set(table.inspect.files().column("spec_id").to_pylist()) == {0}
    pv = [i for i in [*range(30), *range(100, 130)] if i % 11 and i % 3 == 0]
    assert sorted(table.scan(row_filter="event == 'pv'").to_arrow().column("id").to_pylist()) == pv


def test_the_spec_of_a_wide_tables_staged_manifest_is_read_from_its_header(catalog: SqlCatalog) -> None:
    from icecommit.state.manifests import staged_spec_id

    wide = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), *(pa.field(f"column_{i:04d}", pa.string()) for i in range(800))]
    )
    name = f"{catalog.name}.wide"
    ic.create_table(catalog, name, wide)
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    rows = pa.table(
        {f.name: pa.array([1, 2], f.type) if f.name == "id" else pa.array(["a", None]) for f in wide}, schema=wide
    )
    state = committer.prepare(1, [write_arrow(committer.load_table(), rows, job_id="A", checkpoint_id=1)])
    assert state.manifest_path is not None
    table = catalog.load_table(name)
    assert staged_spec_id(table.io, state.manifest_path) == 0
