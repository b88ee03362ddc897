"""A checkpoint prepared before the table's schema or partition spec changed commits
afterwards: schema changes that keep its files readable, and partition spec changes (its
files keep the spec they were written for, in a manifest of that spec, and both specs
prune correctly). Only files of a spec the table no longer has are refused, by name, and
the job goes on once the checkpoint is abandoned."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DATA_FILE_TYPE, DataFile
from pyiceberg.table import Table
from pyiceberg.transforms import HourTransform, IdentityTransform
from pyiceberg.types import IntegerType, LongType

import icecommit as ic
from icecommit.committer.checkpoint_commit import require_readable
from icecommit.committer.staging import read_staged
from icecommit.errors import EnvironmentFailureError, PartitionSpecChangedError, SchemaChangedError
from icecommit.maintenance import apply_rollback, plan_rollback
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

# specs and schemas live in the table's metadata
pytestmark = pytest.mark.database_independent


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


def _pruned(table: Table, expression: str) -> tuple[set[int], int]:
    """The ids a filtered scan returns, and how many files it plans to read."""
    scan = table.scan(row_filter=expression, selected_fields=("id",))
    return set(scan.to_arrow().column("id").to_pylist()), len(list(scan.plan_files()))


@pytest.mark.parametrize(
    "change",
    ["field added", "transform changed", "field removed"],
)
def test_a_checkpoint_prepared_before_a_partition_spec_change_commits_under_its_own_spec(
    catalog: SqlCatalog, change: str
) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["day(ts)"])
    committer = _prepared(catalog, 1, events(0, 30))
    with catalog.load_table(name).update_spec() as update:
        if change == "field added":
            update.add_identity("event")
        elif change == "transform changed":
            update.remove_field("ts_day")
            update.add_field("ts", HourTransform(), "ts_hour")
        else:
            update.remove_field("ts_day")
    assert committer.commit(1).status == "committed"
    assert committer.recover() == []
    _prepared(catalog, 2, events(100, 130)).commit(2)  # written under the new spec
    table = catalog.load_table(name)
    assert _ids(catalog) == Counter([*range(30), *range(100, 130)])
    files = table.inspect.files()
    specs = dict(zip(files.column("file_path").to_pylist(), files.column("spec_id").to_pylist(), strict=True))
    assert sorted(set(specs.values())) == [0, 1]
    # the old spec's files keep their day partition values, and both specs prune correctly
    partitions = [p for p, s in zip(files.column("partition").to_pylist(), specs.values(), strict=True) if s == 0]
    assert {p["ts_day"] for p in partitions} == {dt.date(2026, 1, 1), dt.date(2026, 1, 2), dt.date(2026, 1, 3)}
    everything = [*range(30), *range(100, 130)]
    second_day = {i for i in everything if i % 3 == 1}
    ids, planned = _pruned(table, "ts >= '2026-01-02T00:00:00+00:00' and ts < '2026-01-03T00:00:00+00:00'")
    assert ids == second_day
    if change != "field removed":  # an unpartitioned new spec cannot prune its own files
        old_files = sum(1 for s in specs.values() if s == 0)
        assert planned < len(specs) and planned >= 1 and old_files == 3
    ids, _ = _pruned(table, "event == 'pv'")
    assert ids == {i for i in everything if i % 11 and i % 3 == 0}
    # the snapshot's summary counts the older spec's files as added
    head = table.current_snapshot()
    assert head is not None
    committed = [s for s in table.snapshots() if s.summary and s.summary.get("icecommit.checkpoint-id") == "1"]
    assert committed[0].summary["added-data-files"] == "3" and committed[0].summary["added-records"] == "30"


def test_a_recommit_after_a_spec_change_keeps_the_files_spec(catalog: SqlCatalog) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["day(ts)"])
    _prepared(catalog, 1, events(0, 30)).commit(1)
    committer = _prepared(catalog, 2, events(100, 130))
    committer.commit(2)
    apply_rollback(catalog, plan_rollback(catalog, name, to_checkpoint=1, job_id="A"))
    with catalog.load_table(name).update_spec() as update:
        update.add_identity("event")
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    assert committer.recommit(2).status == "committed"
    table = catalog.load_table(name)
    assert _ids(catalog) == Counter([*range(30), *range(100, 130)])
    assert set(table.inspect.files().column("spec_id").to_pylist()) == {0}
    ids, _ = _pruned(table, "event == 'click'")
    assert ids == {i for i in [*range(30), *range(100, 130)] if i % 11 and i % 3 == 2}


def test_files_of_a_spec_the_table_no_longer_has_are_refused_by_name_and_the_job_goes_on(
    catalog: SqlCatalog,
) -> None:
    """Another engine's maintenance may remove unused specs (Java's RemoveUnusedSpecs);
    files prepared under such a spec have nothing to be read with."""
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["day(ts)"])
    committer = _prepared(catalog, 1, events(0, 30))
    with catalog.load_table(name).update_spec() as update:
        update.add_identity("event")
    table = catalog.load_table(name)
    # what a RemoveUnusedSpecs commit leaves: spec 0 is gone from the metadata
    metadata = table.metadata.model_copy(
        update={"partition_specs": [s for s in table.metadata.partition_specs if s.spec_id != 0]}
    )
    pruned = Table(table.name(), metadata, table.metadata_location, table.io, catalog)
    committer._latest = pruned
    committer.load_table = lambda: pruned  # type: ignore[method-assign]  # the table as the catalog has it
    before = table.metadata_location
    with pytest.raises(PartitionSpecChangedError) as raised:
        committer.commit(1)
    e = raised.value
    assert isinstance(e, EnvironmentFailureError)
    assert (e.job_id, e.checkpoint_id, e.prepared_spec_id, e.current_spec_id) == ("A", 1, 0, 1)
    assert "no longer has" in str(e) and "abandon(1, reason=...)" in str(e)
    assert catalog.load_table(name).metadata_location == before
    committer.abandon(1, reason="its spec was removed")
    assert committer.recover() == []


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
    # whether the append built on the cached table lands on the catalog's newer metadata or
    # is retried on the fresh table, its files keep their own spec
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


def test_a_required_column_added_after_prepare_is_refused_by_name_and_the_job_goes_on(catalog: SqlCatalog) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["day(ts)"])
    committer = _prepared(catalog, 1, events(0, 30))
    with catalog.load_table(name).update_schema(allow_incompatible_changes=True) as update:
        update.add_column("tenant", IntegerType(), required=True)
    before = catalog.load_table(name).metadata_location
    with pytest.raises(SchemaChangedError) as raised:
        committer.commit(1)
    e = raised.value
    assert isinstance(e, EnvironmentFailureError)
    assert (e.job_id, e.checkpoint_id, e.column) == ("A", 1, "tenant")
    assert "abandon(1, reason=...)" in str(e)
    assert catalog.load_table(name).metadata_location == before
    committer.abandon(1, reason="required column added")
    assert committer.recover() == []


def test_required_nested_columns_are_present_in_files_that_have_their_leaves(catalog: SqlCatalog) -> None:
    """The readability check looks for a nested column's leaves (a struct's own field id
    never has statistics): files with them commit."""
    point = pa.struct([pa.field("x", pa.float64(), nullable=False)])
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("point", point, nullable=False),
            pa.field("tags", pa.list_(pa.field("element", pa.int64(), nullable=False)), nullable=False),
        ]
    )
    name = f"{catalog.name}.nested"
    table = ic.create_table(catalog, name, schema)
    rows = pa.table(
        {"id": [1, 2], "point": pa.array([{"x": 1.0}, {"x": 2.0}], point), "tags": [[1], []]}, schema=schema
    )
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, [write_arrow(table, rows, job_id="A", checkpoint_id=1)])
    assert committer.commit(1).status == "committed"
    assert catalog.load_table(name).scan().to_arrow().num_rows == 2


def test_a_required_column_is_present_by_either_statistic_and_a_file_without_any_does_not_end_the_check(
    catalog: SqlCatalog,
) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["event"])
    committer = _prepared(catalog, 1, events(0, 30))
    table = committer.load_table()
    state = committer.store.get("A", name, 1)
    assert state is not None
    files = read_staged(state, table)
    required = table.schema().find_field("id").field_id

    def with_stats(value_counts: dict[int, int] | None, column_sizes: dict[int, int] | None) -> DataFile:
        fields = {f.name: getattr(files[0], f.name) for f in DATA_FILE_TYPE[2].fields}
        changed = DataFile.from_args(2, **{**fields, "value_counts": value_counts, "column_sizes": column_sizes})
        changed.spec_id = files[0].spec_id
        return changed

    others = {fid: 1 for fid in (files[0].value_counts or {}) if fid != required}
    by_sizes = with_stats(others, {**others, required: 10})  # id only in the column sizes
    by_counts = with_stats({**others, required: 3}, others)  # id only in the value counts
    require_readable([by_sizes, by_counts], table, committer.job_id, 1, committer.table_name)  # both have it
    without_stats = with_stats(None, None)
    lacking = with_stats(others, others)
    with pytest.raises(SchemaChangedError) as raised:
        require_readable([without_stats, lacking], table, committer.job_id, 1, committer.table_name)
    assert raised.value.column == "id"


def test_a_required_nested_column_is_present_when_any_one_of_its_leaves_has_statistics(catalog: SqlCatalog) -> None:
    """A struct is there when one of its children is, a map when its keys or its values are
    (their own field ids never have statistics), checked on files whose statistics cover
    one leaf each."""
    point = pa.struct([pa.field("x", pa.float64(), nullable=False), pa.field("y", pa.float64(), nullable=False)])
    attrs = pa.map_(pa.string(), pa.int64())
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("point", point, nullable=False),
         pa.field("attrs", attrs, nullable=False)]
    )  # fmt: skip
    name = f"{catalog.name}.nested"
    table = ic.create_table(catalog, name, schema)
    rows = pa.table(
        {"id": [1], "point": pa.array([{"x": 1.0, "y": 2.0}], point), "attrs": pa.array([[("a", 1)]], attrs)},
        schema=schema,
    )
    committer = ic.GlobalCommitter(catalog, name, job_id="A")
    committer.prepare(1, [write_arrow(table, rows, job_id="A", checkpoint_id=1)])
    state = committer.store.get("A", name, 1)
    assert state is not None
    loaded = committer.load_table()
    [written] = read_staged(state, loaded)
    ids = {f.name: f.field_id for f in loaded.schema().fields}
    leaf = {path: loaded.schema().find_field(path).field_id for path in ("point.x", "attrs.key", "attrs.value")}

    def stats_on(*field_ids: int) -> DataFile:
        fields = {f.name: getattr(written, f.name) for f in DATA_FILE_TYPE[2].fields}
        counts = {i: 1 for i in field_ids}
        changed = DataFile.from_args(2, **{**fields, "value_counts": counts, "column_sizes": counts})
        changed.spec_id = written.spec_id
        return changed

    # the struct by its first child only, the map by its keys, then by its values
    require_readable(
        [stats_on(ids["id"], leaf["point.x"], leaf["attrs.key"])], loaded, committer.job_id, 1, committer.table_name
    )
    require_readable(
        [stats_on(ids["id"], leaf["point.x"], leaf["attrs.value"])], loaded, committer.job_id, 1, committer.table_name
    )
    with pytest.raises(SchemaChangedError) as raised:
        require_readable([stats_on(ids["id"], leaf["attrs.key"])], loaded, committer.job_id, 1, committer.table_name)
    assert raised.value.column == "point"


def test_a_committer_whose_last_commit_predates_a_spec_change_commits_under_the_new_spec(
    catalog: SqlCatalog,
) -> None:
    """The committer keeps the table its last commit left as the next commit's base; when
    another process changed the spec meanwhile, the files written under the new spec are
    committed on the table as it is, not refused as of a spec the table no longer has."""
    name = f"{catalog.name}.respec"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=["day(ts)"])
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    for checkpoint in (1, 2):
        if checkpoint == 2:  # another process's catalog changes the spec
            other = SqlCatalog(catalog.name, **catalog.properties)
            with other.load_table(name).update_spec() as spec:
                spec.add_field("event", IdentityTransform(), "event")
            other.engine.dispose()
        written = write_arrow(committer.load_table(), events(checkpoint * 100, checkpoint * 100 + 20), job_id="j",
                              checkpoint_id=checkpoint)  # fmt: skip
        committer.prepare(checkpoint, [written])
        assert committer.commit(checkpoint).committed
    table = catalog.load_table(name)
    assert {f.spec_id for f in table.scan().plan_files() for f in [f.file]} == {0, 1}
    assert len(table.scan().to_arrow()) == 40
