"""Schema evolution on write and tables that create themselves, through ``ic.write`` with
Spark: the change is committed before the tasks write, once, and belongs to the checkpoint
(a replay makes it again never); what a mode cannot change is refused before any file and
leaves the table as it was."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.types import LongType, NestedField, StringType, StructType
from pyspark.sql import DataFrame, SparkSession

import icecommit as ic
from icecommit import pipeline
from icecommit.errors import SchemaMismatchError
from tests.cli.runner import invoke
from tests.helpers import drop_json, run_to_end

pytestmark = pytest.mark.spark

BASE = "id long, n int, point struct<x: double>"


def _frame(spark: SparkSession, rows: list[tuple[Any, ...]], ddl: str) -> DataFrame:
    return spark.createDataFrame(rows, ddl)


def _name() -> str:
    return f"ns_{uuid.uuid4().hex[:8]}.events"


def _base_table(spark: SparkSession, catalog: SqlCatalog, **properties: str) -> str:
    name = _name()
    first = _frame(spark, [(1, 10, (1.0,)), (2, 20, (2.0,))], BASE)
    ic.write(first, name, catalog=catalog, job_id="j", checkpoint_id=1, create=True, table_properties=properties)
    return name


def _rows(catalog: SqlCatalog, name: str) -> list[dict[str, Any]]:
    return sorted(catalog.load_table(name).scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def _features(catalog: SqlCatalog, name: str, job: str, checkpoint_id: int) -> tuple[str, ...]:
    committer = ic.GlobalCommitter(catalog, name, job_id=job)
    state = committer.store.get(job, committer.table_name, checkpoint_id)
    assert state is not None
    return state.features


def test_new_columns_at_the_top_and_inside_a_struct_are_added_once_and_a_replay_adds_nothing(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    catalog = sqlite_catalog
    name = _base_table(spark, catalog)
    assert _features(catalog, name, "j", 1) == ("table-create",)
    before = catalog.load_table(name).schema()
    wider = _frame(spark, [(3, 30, (3.0, 4.0), "fr")], "id long, n int, point struct<x: double, y: double>, c string")
    result = ic.write(wider, name, catalog=catalog, job_id="j", checkpoint_id=2, schema_mode="add-columns")
    assert result.status == "committed"
    table = catalog.load_table(name)
    schema = table.schema()
    assert schema.schema_id == before.schema_id + 1
    point = schema.find_field("point").field_type
    assert isinstance(point, StructType) and [f.name for f in point.fields] == ["x", "y"]
    assert schema.find_field("c") == NestedField(schema.find_field("c").field_id, "c", StringType(), required=False)
    assert table.metadata.properties["icecommit.schema-change.j"] == f"2:{schema.schema_id}"
    assert _rows(catalog, name) == [
        {"id": 1, "n": 10, "point": {"x": 1.0, "y": None}, "c": None},
        {"id": 2, "n": 20, "point": {"x": 2.0, "y": None}, "c": None},
        {"id": 3, "n": 30, "point": {"x": 3.0, "y": 4.0}, "c": "fr"},
    ]
    assert _features(catalog, name, "j", 2) == ("schema-change",)
    # the files of checkpoint 2 carry the new schema's field ids, and their statistics too
    (added,) = [t.file for t in table.scan(row_filter="id = 3").plan_files()]
    assert schema.find_field("c").field_id in added.value_counts
    # a replay of checkpoint 2 lands nothing and changes no schema
    again = ic.write(wider, name, catalog=catalog, job_id="j", checkpoint_id=2, schema_mode="add-columns")
    assert again.status == "already-committed"
    assert catalog.load_table(name).schema().schema_id == schema.schema_id
    # columns in another order than the table's are matched by name
    shuffled = _frame(
        spark, [("de", (5.0, 6.0), 40, 4)], "c string, point struct<y: double, x: double>, n int, id long"
    )
    ic.write(shuffled, name, catalog=catalog, job_id="j", checkpoint_id=3, schema_mode="add-columns")
    assert _rows(catalog, name)[-1] == {"id": 4, "n": 40, "point": {"x": 6.0, "y": 5.0}, "c": "de"}


def test_strict_refuses_a_new_column_and_a_wider_type_before_any_file_and_merge_widens(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    catalog = sqlite_catalog
    name = _base_table(spark, catalog)
    before = catalog.load_table(name).metadata
    extra = _frame(spark, [(3, 30, (3.0,), "fr")], f"{BASE}, c string")
    with pytest.raises(SchemaMismatchError, match=r"'c'.*unknown extra column"):
        ic.write(extra, name, catalog=catalog, job_id="j", checkpoint_id=2)
    wider = _frame(spark, [(3, 2**40, (3.0,))], "id long, n long, point struct<x: double>")
    with pytest.raises(
        SchemaMismatchError,
        match=r"column 'n'.*long cannot be written to the table's type int "
        r"\(schema_mode='merge' widens it\)",
    ):
        ic.write(wider, name, catalog=catalog, job_id="j", checkpoint_id=2, schema_mode="add-columns")
    after = catalog.load_table(name).metadata
    assert (after.current_schema_id, after.snapshots, after.properties) == (
        before.current_schema_id,
        before.snapshots,
        before.properties,
    )
    assert ic.write(wider, name, catalog=catalog, job_id="j", checkpoint_id=2, schema_mode="merge").committed
    assert isinstance(catalog.load_table(name).schema().find_field("n").field_type, LongType)
    assert [r["n"] for r in _rows(catalog, name)] == [10, 20, 2**40]


def test_the_table_property_sets_the_mode(spark: SparkSession, sqlite_catalog: SqlCatalog) -> None:
    catalog = sqlite_catalog
    name = _base_table(spark, catalog, **{"icecommit.schema-mode": "add-columns"})
    extra = _frame(spark, [(3, 30, (3.0,), "fr")], f"{BASE}, c string")
    assert ic.write(extra, name, catalog=catalog, job_id="j", checkpoint_id=2).committed
    assert "c" in catalog.load_table(name).schema().column_names


def test_a_failure_after_the_schema_change_leaves_an_empty_new_column_and_the_replay_lands_once(
    spark: SparkSession, sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = sqlite_catalog
    name = _base_table(spark, catalog)
    extra = _frame(spark, [(3, 30, (3.0,), "fr")], f"{BASE}, c string")

    def die(*args: object) -> None:
        raise RuntimeError("the job died after the schema change")

    with monkeypatch.context() as patched:  # the driver dies once the change landed, before any task
        patched.setattr(pipeline._Landing, "_write_one", die)
        with pytest.raises(RuntimeError, match="the job died after the schema change"):
            ic.write(extra, name, catalog=catalog, job_id="j", checkpoint_id=2, schema_mode="add-columns")
    changed = catalog.load_table(name)
    assert "c" in changed.schema().column_names and len(changed.metadata.snapshots) == 1  # a column, no rows
    replayed = ic.write(extra, name, catalog=catalog, job_id="j", checkpoint_id=2, schema_mode="add-columns")
    assert replayed.committed
    table = catalog.load_table(name)
    assert table.schema().schema_id == changed.schema().schema_id  # not changed again
    assert [r["c"] for r in _rows(catalog, name)] == [None, None, "fr"]
    assert _features(catalog, name, "j", 2) == ("schema-change",)


def test_routed_writes_create_their_tables_partitioned_per_route_and_the_dead_letter_evolves(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    catalog = sqlite_catalog
    ns = f"ns_{uuid.uuid4().hex[:8]}"
    routes = {"click": f"{ns}.clicks", "view": f"{ns}.views"}
    ddl = "id long, kind string, page string"
    first = _frame(spark, [(1, "click", "a"), (2, "view", "b"), (3, "buy", "c")], ddl)
    result = ic.write(
        first,
        routes,
        catalog=catalog,
        job_id="r",
        checkpoint_id=1,
        route_by="kind",
        dead_letter=f"{ns}.unrouted",
        create=True,
        partition_by={"click": ["page"]},
        identifier_fields=["id"],
        table_properties={"write.target-file-size-bytes": "1048576"},
    )
    assert {n: r.status for n, r in result.results.items()} == dict.fromkeys(
        [*routes.values(), f"{ns}.unrouted"], "committed"
    )
    clicks, views = catalog.load_table(routes["click"]), catalog.load_table(routes["view"])
    assert clicks.schema().column_names == ["id", "page"] and [f.name for f in clicks.spec().fields] == ["page"]
    assert views.spec().fields == () and views.metadata.properties["write.target-file-size-bytes"] == "1048576"
    assert [clicks.schema().find_column_name(i) for i in clicks.schema().identifier_field_ids] == ["id"]
    assert clicks.schema().find_field("id").required
    dead = catalog.load_table(f"{ns}.unrouted")
    assert dead.schema().column_names == ["id", "kind", "page"]
    # the source gains a column: under add-columns every table that gets rows gains it
    second = _frame(spark, [(4, "click", "d", "m"), (5, "buy", "e", "n")], f"{ddl}, device string")
    ic.write(
        second,
        routes,
        catalog=catalog,
        job_id="r",
        checkpoint_id=2,
        route_by="kind",
        dead_letter=f"{ns}.unrouted",
        schema_mode="add-columns",
    )
    assert "device" in catalog.load_table(routes["click"]).schema().column_names
    assert "kind" not in catalog.load_table(routes["click"]).schema().column_names
    assert [r["device"] for r in _rows(catalog, f"{ns}.unrouted")] == [None, "n"]
    # a replay of checkpoint 1 creates nothing and lands nothing
    again = ic.write(
        first,
        routes,
        catalog=catalog,
        job_id="r",
        checkpoint_id=1,
        route_by="kind",
        dead_letter=f"{ns}.unrouted",
        create=True,
    )
    assert {r.status for r in again.results.values()} == {"already-committed"}
    assert [r["id"] for r in _rows(catalog, routes["click"])] == [1, 4]


def test_merge_makes_a_required_column_optional_once_the_tasks_saw_nulls_never_a_key(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    catalog = sqlite_catalog
    name = _name()
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("n", pa.int32(), nullable=False)])
    ic.create_table(catalog, name, schema, identifier_fields=["id"])
    ddl = "id long, n int"
    holes = _frame(spark, [(1, 10), (2, None)], ddl)
    with pytest.raises(SchemaMismatchError, match=r"'n'.*null value"):  # strict, and add-columns, refuse the nulls
        ic.write(holes, name, catalog=catalog, job_id="j", checkpoint_id=1, schema_mode="add-columns")
    assert ic.write(holes, name, catalog=catalog, job_id="j", checkpoint_id=1, schema_mode="merge").committed
    table = catalog.load_table(name)
    assert not table.schema().find_field("n").required and table.schema().find_field("id").required
    assert [r["n"] for r in _rows(catalog, name)] == [10, None]
    keyless = _frame(spark, [(None, 30)], ddl)
    with pytest.raises(SchemaMismatchError, match="identifier field stays required"):
        ic.write(keyless, name, catalog=catalog, job_id="j", checkpoint_id=2, schema_mode="merge")
    assert len(catalog.load_table(name).metadata.snapshots) == 1


def test_the_cli_and_the_report_say_which_checkpoints_created_the_table_or_changed_its_schema(
    spark: SparkSession, sqlite_catalog: SqlCatalog
) -> None:
    catalog = sqlite_catalog
    name = _base_table(spark, catalog)
    wider = _frame(spark, [(3, 30, (3.0,), "fr")], f"{BASE}, c string")
    ic.write(wider, name, catalog=catalog, job_id="j", checkpoint_id=2, schema_mode="add-columns")
    ic.write(wider, name, catalog=catalog, job_id="j", checkpoint_id=3, schema_mode="add-columns")
    where = ["--catalog", catalog.name, "--uri", catalog.properties["uri"], "--warehouse",
             catalog.properties["warehouse"]]  # fmt: skip
    home = Path(catalog.properties["uri"].removeprefix("sqlite:///")).parent / "cli-home"
    checkpoints = json.loads(invoke(home, *where, "--output", "json", "checkpoints", name).stdout)["checkpoints"]
    assert [c["features"] for c in checkpoints] == [["table-create"], ["schema-change"], []]
    text = invoke(home, *where, "checkpoints", name).stdout
    assert "created the table" in text and "changed the schema (to schema 1)" in text
    assert [c["changed_schema_id"] for c in checkpoints] == [None, 1, None]  # recorded with the checkpoint's state
    snapshots = json.loads(invoke(home, *where, "--output", "json", "snapshots", name).stdout)["snapshots"]
    assert [s["schema_id"] for s in snapshots] == [0, 1, 1]
    report = ic.reconcile(catalog, name, job_id="j")
    assert report.ok and sum(line.readable for line in report.checkpoints) == 4
    assert [line.note for line in report.checkpoints] == ["created the table", "changed the schema", ""]


def test_a_stream_whose_batches_bring_new_fields_evolves_the_table_once_per_change(
    spark: SparkSession, sqlite_catalog: SqlCatalog, tmp_path: Path
) -> None:
    """JSON parsed per micro-batch: a field the events gain shows up as a column of the
    next batch; under add-columns the sink adds it before that batch's tasks write."""
    catalog = sqlite_catalog
    name = _name()
    source, checkpoints = tmp_path / "events", tmp_path / "chk"
    source.mkdir()
    drop_json(source, "1.json", [{"id": 1, "page": "a"}, {"id": 2, "page": "b"}])
    drop_json(source, "2.json", [{"id": 3, "page": "c", "device": "m", "geo": {"lat": 1.5}}])
    drop_json(source, "3.json", [{"id": 4, "page": "d", "device": "n"}])
    sink = ic.streaming_sink(name, catalog=catalog, job_id="stream", schema_mode="add-columns", create=True)

    def parsed(batch: DataFrame, batch_id: int) -> None:  # each batch's JSON, parsed on its own
        lines = [row.value for row in batch.collect()]
        sink(spark.read.json(spark.sparkContext.parallelize(lines)), batch_id)

    stream = spark.readStream.option("maxFilesPerTrigger", 1).text(str(source))
    query = stream.writeStream.foreachBatch(parsed).option("checkpointLocation", str(checkpoints))
    run_to_end(query.trigger(availableNow=True).start())
    table = catalog.load_table(name)
    assert [f.name for f in table.schema().fields] == ["id", "page", "device", "geo"]
    assert [r["device"] for r in _rows(catalog, name)] == [None, None, "m", "n"]
    assert _rows(catalog, name)[2]["geo"] == {"lat": 1.5}
    assert [_features(catalog, name, "stream", b) for b in (0, 1, 2)] == [("table-create",), ("schema-change",), ()]
    # the query restarted from its checkpoint location lands nothing again, changes nothing
    run_to_end(query.trigger(availableNow=True).start())
    assert catalog.load_table(name).metadata.current_schema_id == table.metadata.current_schema_id
    assert [r["id"] for r in _rows(catalog, name)] == [1, 2, 3, 4]


def test_one_read_fans_out_to_100_new_tables_once_each_even_after_a_crash_among_the_creations(
    spark: SparkSession, sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = sqlite_catalog
    ns = f"fan_{uuid.uuid4().hex[:6]}"
    frame = spark.range(1000).selectExpr("id", "cast(id % 100 as string) as route", "'x' as payload")
    routes = {str(i): f"{ns}.t{i:03d}" for i in range(100)}
    create = pipeline.create_for_checkpoint
    made: list[str] = []

    def dies_after_37(catalog: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        if len(made) == 37:
            raise RuntimeError("the driver died among the creations")
        made.append(name)
        return create(catalog, name, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(pipeline, "create_for_checkpoint", dies_after_37)
        with pytest.raises(RuntimeError, match="died among the creations"):
            ic.write(frame, routes, catalog=catalog, job_id="fan", checkpoint_id=1, route_by="route", create=True)
    assert len(catalog.list_tables(ns)) == 37
    result = ic.write(frame, routes, catalog=catalog, job_id="fan", checkpoint_id=1, route_by="route", create=True)
    assert len(result.results) == 100 and {r.status for r in result.results.values()} == {"committed"}
    again = ic.write(frame, routes, catalog=catalog, job_id="fan", checkpoint_id=1, route_by="route", create=True)
    assert {r.status for r in again.results.values()} == {"already-committed"}
    for value, name in routes.items():
        table = catalog.load_table(name)
        ids = table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist()
        assert sorted(ids) == list(range(int(value), 1000, 100)), name
        assert len(table.metadata.snapshots) == 1
        creator = table.metadata.properties["icecommit.created-by"]
        assert creator == "fan:1"


def test_a_refused_write_changes_no_table_and_creates_none(spark: SparkSession, sqlite_catalog: SqlCatalog) -> None:
    catalog = sqlite_catalog
    ns = f"ns_{uuid.uuid4().hex[:8]}"
    frame = _frame(spark, [(1, "a", 2**40, "x")], "id long, kind string, n long, extra string")
    ic.create_table(catalog, f"{ns}.a", pa.schema([pa.field("id", pa.int64())]))
    ic.create_table(catalog, f"{ns}.b", pa.schema([pa.field("id", pa.int64()), pa.field("n", pa.int32())]))
    before = {t: catalog.load_table(f"{ns}.{t}").metadata.current_schema_id for t in ("a", "b")}
    # table a would gain columns; table b cannot take n (long into int) under add-columns
    with pytest.raises(SchemaMismatchError, match=r"column 'n' of table .*\.b"):
        ic.write(frame, {"a": f"{ns}.a", "b": f"{ns}.b"}, catalog=catalog, job_id="r", checkpoint_id=1,
                 route_by="kind", schema_mode="add-columns")  # fmt: skip
    assert {t: catalog.load_table(f"{ns}.{t}").metadata.current_schema_id for t in ("a", "b")} == before
    # a table property that cannot be used is refused before any table is made
    with pytest.raises(ic.errors.InvalidArgumentError, match=r"icecommit\.schema-mode"):
        ic.write(frame, f"{ns}.new", catalog=catalog, job_id="n", checkpoint_id=1, create=True,
                 table_properties={"icecommit.schema-mode": "Merge"})  # fmt: skip
    with pytest.raises(ic.errors.TableSpecError, match="no_such"):
        ic.write(frame, {"a": f"{ns}.x", "b": f"{ns}.y"}, catalog=catalog, job_id="n", checkpoint_id=1,
                 route_by="kind", create=True, partition_by={"b": ["day(no_such)"]})  # fmt: skip
    assert sorted(t[1] for t in catalog.list_tables(ns)) == ["a", "b"]
