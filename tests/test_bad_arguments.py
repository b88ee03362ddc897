"""Every argument and table property icecommit reads is checked at the door: a clear
error that names it, the value and what is accepted, and nothing written or staged."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError

import icecommit as ic
import icecommit.maintenance
from icecommit.catalog.inspect import wait_for_partition
from icecommit.committer import RetryPolicy
from icecommit.errors import (
    InvalidArgumentError,
    SchemaMismatchError,
    TableNotFoundError,
    TableSpecError,
    ValidationError,
)
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

# refused before anything is written
pytestmark = pytest.mark.database_independent


@pytest.mark.parametrize("job_id", ["", "   ", None, 7, "a\nb", "x" * 256])
def test_a_bad_job_id_is_refused_by_name(sqlite_catalog: SqlCatalog, job_id: object) -> None:
    ic.create_table(sqlite_catalog, "ns.events", EVENTS_SCHEMA)
    with pytest.raises(InvalidArgumentError) as refused:
        ic.GlobalCommitter(sqlite_catalog, "ns.events", job_id=job_id)  # type: ignore[arg-type]
    assert (refused.value.argument, refused.value.value) == ("job_id", job_id)
    assert isinstance(refused.value, ValueError) and isinstance(refused.value, ic.IcecommitError)


@pytest.mark.parametrize("checkpoint_id", [None, "7", 7.5, -5, True, 2**63])
def test_a_bad_checkpoint_id_is_refused_before_anything_is_staged(catalog: SqlCatalog, checkpoint_id: object) -> None:
    ic.create_table(catalog, f"{catalog.name}.events", EVENTS_SCHEMA)
    committer = ic.GlobalCommitter(catalog, f"{catalog.name}.events", job_id="j")
    results = [write_arrow(committer.load_table(), events(0, 5), job_id="j", checkpoint_id=1)]
    for call in (lambda: committer.prepare(checkpoint_id, results), lambda: committer.commit(checkpoint_id)):  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError) as refused:
            call()
        assert refused.value.argument == "checkpoint_id" and "non-negative integer" in refused.value.accepted
    assert committer.store.list(committer.table_name) == []
    assert catalog.load_table(f"{catalog.name}.events").current_snapshot() is None


def test_ic_write_checks_its_arguments_before_any_spark_job(sqlite_catalog: SqlCatalog) -> None:
    ic.create_table(sqlite_catalog, "ns.events", EVENTS_SCHEMA)
    with pytest.raises(InvalidArgumentError) as refused:
        ic.write(None, "ns.events", catalog=sqlite_catalog, job_id="j", checkpoint_id="7")  # type: ignore[arg-type]
    assert refused.value.argument == "checkpoint_id"
    with pytest.raises(InvalidArgumentError):
        ic.streaming_sink("ns.events", catalog=sqlite_catalog, job_id="")


@pytest.mark.parametrize(
    ("key", "value"),
    [("commit.retry.num-retries", "five"), ("commit.retry.min-wait-ms", "-1"), ("commit.retry.total-timeout-ms", "")],
)
def test_an_unparsable_retry_property_is_named_before_the_stage(
    sqlite_catalog: SqlCatalog, key: str, value: str
) -> None:
    ic.create_table(sqlite_catalog, "ns.events", EVENTS_SCHEMA, properties={key: value})
    with pytest.raises(InvalidArgumentError) as refused:
        RetryPolicy.from_properties({key: value})
    assert refused.value.argument == f"table property {key}" and refused.value.value == value
    committer = ic.GlobalCommitter(sqlite_catalog, "ns.events", job_id="j")
    results = [write_arrow(committer.load_table(), events(0, 5), job_id="j", checkpoint_id=1)]
    with pytest.raises(InvalidArgumentError):
        committer.prepare(1, results)
    assert committer.store.list(committer.table_name) == []


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("write.target-file-size-bytes", "0", "positive whole number"),
        ("write.target-file-size-bytes", "512MB", "positive whole number"),
        ("icecommit.partition-lateness", "an hour", "duration"),
        ("icecommit.event-time-column", "no_such_column", "timestamp column of the table (ts)"),
        ("icecommit.event-time-column", "score", "timestamp column of the table (ts)"),
        ("write.distribution-mode", "spread", "none, hash, range or bin-pack"),
        ("icecommit.partition-marker", "yes", "true or false"),
        ("icecommit.writer-idle-timeout", "soon", "duration"),
        ("icecommit.schema-mode", "loose", "one of strict, add-columns, merge"),
        ("icecommit.write-mode", "replace", "one of append, overwrite-partitions, upsert"),
    ],
)
def test_every_property_icecommit_reads_is_checked_before_anything_is_staged(
    catalog: SqlCatalog, key: str, value: str, accepted: str
) -> None:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA)
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    results = [write_arrow(committer.load_table(), events(0, 5), job_id="j", checkpoint_id=1)]
    with catalog.load_table(name).transaction() as tx:  # set after the tasks wrote, as another tool might
        tx.set_properties({key: value})
    before = catalog.load_table(name).metadata_location
    for call in (lambda: committer.validate(1, results), lambda: committer.prepare(1, results)):
        with pytest.raises(InvalidArgumentError) as refused:
            call()
        assert (refused.value.argument, refused.value.value) == (f"table property {key}", value)
        assert accepted in refused.value.accepted
    assert committer.store.list(committer.table_name) == []  # nothing recorded
    assert catalog.load_table(name).metadata_location == before  # the table untouched, not even claimed


def test_ic_write_checks_the_tables_properties_before_any_spark_job(sqlite_catalog: SqlCatalog) -> None:
    ic.create_table(sqlite_catalog, "ns.events", EVENTS_SCHEMA, properties={"icecommit.partition-lateness": "later"})
    ic.create_table(sqlite_catalog, "ns.other", EVENTS_SCHEMA, properties={"write.target-file-size-bytes": "-1"})

    # a stand-in that fails at any use: a refusal here comes before anything could run in Spark
    class NoSpark:
        def mapInArrow(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("a Spark job ran")

        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the DataFrame was used ({name})")

    with pytest.raises(InvalidArgumentError) as single:
        ic.write(NoSpark(), "ns.events", catalog=sqlite_catalog, job_id="j", checkpoint_id=1)  # type: ignore[arg-type]
    assert single.value.argument == "table property icecommit.partition-lateness"
    with pytest.raises(InvalidArgumentError) as routed:
        ic.write(NoSpark(), {"a": "ns.other"}, route_by="event", catalog=sqlite_catalog, job_id="j", checkpoint_id=1)  # type: ignore[arg-type]
    assert routed.value.argument == "table property write.target-file-size-bytes"
    assert sqlite_catalog.load_table("ns.events").current_snapshot() is None


@pytest.mark.parametrize("branch", [None, "", "nob", "v1"])
def test_a_branch_the_table_does_not_have_is_refused_and_nothing_lands_on_no_branch(
    catalog: SqlCatalog, branch: object
) -> None:
    name = f"{catalog.name}.events"
    table = ic.create_table(catalog, name, EVENTS_SCHEMA)
    ic.GlobalCommitter(catalog, name, job_id="j").prepare(
        0, [write_arrow(table, events(0, 5), job_id="j", checkpoint_id=0)]
    )
    ic.GlobalCommitter(catalog, name, job_id="j").commit(0)
    catalog.load_table(name).manage_snapshots().create_tag(
        catalog.load_table(name).metadata.current_snapshot_id, "v1"
    ).commit()  # type: ignore[arg-type]
    before = catalog.load_table(name).metadata
    with pytest.raises(InvalidArgumentError) as refused:
        committer = ic.GlobalCommitter(catalog, name, job_id="k", branch=branch)  # type: ignore[arg-type]
        committer.prepare(0, [write_arrow(table, events(5, 10), job_id="k", checkpoint_id=0)])
    assert refused.value.argument == "branch" and refused.value.value == branch
    if branch:
        assert "main" in refused.value.accepted and "create a new branch first" in refused.value.accepted
        with pytest.raises(InvalidArgumentError):
            ic.maintenance.plan_rollback(catalog, name, to_snapshot=before.current_snapshot_id, branch=branch)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            ic.reconcile(catalog, name, branch=branch)  # type: ignore[arg-type]
    after = catalog.load_table(name).metadata
    assert (len(after.snapshots), after.refs.keys()) == (len(before.snapshots), before.refs.keys())
    assert ic.GlobalCommitter(catalog, name, job_id="k").store.get("k", name, 0) is None


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"writers": "ab"}, "writers"),
        ({"writers": 5}, "writers"),
        ({"writers": ()}, "writers"),
        ({"lateness": "1h"}, "lateness"),
        ({"idle_timeout": timedelta(minutes=-1)}, "idle_timeout"),
        ({"on_complete": "print"}, "on_complete"),
    ],
)
def test_a_completeness_policy_that_cannot_be_used_is_refused_before_any_commit(
    kwargs: dict[str, object], argument: str
) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        ic.PartitionCompleteness(**kwargs)  # type: ignore[arg-type]
    assert refused.value.argument == argument
    assert ic.PartitionCompleteness(writers=["a", "b"]).writers == ("a", "b")  # type: ignore[arg-type]


@pytest.mark.parametrize("table", ["nosuch", "ns.", ".t", "ns..t", None, 5])
def test_a_table_that_is_not_namespace_dot_name_is_refused_by_name(sqlite_catalog: SqlCatalog, table: object) -> None:
    for call in (
        lambda: ic.catalog.list_snapshots(sqlite_catalog, table),  # type: ignore[arg-type]
        lambda: ic.GlobalCommitter(sqlite_catalog, table, job_id="j"),  # type: ignore[arg-type]
        lambda: ic.maintenance.find_orphans(sqlite_catalog, table),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidArgumentError) as refused:
            call()
        assert (refused.value.argument, refused.value.value) == ("table", table)


@pytest.mark.parametrize("older_than", [timedelta(days=-3), "3d", 3, timedelta(days=999_999_999)])
def test_an_age_that_is_negative_or_not_a_duration_is_refused_before_anything_is_deleted(
    sqlite_catalog: SqlCatalog, older_than: object
) -> None:
    ic.create_table(sqlite_catalog, "ns.events", EVENTS_SCHEMA)
    for call in (
        lambda: ic.maintenance.find_orphans(sqlite_catalog, "ns.events", older_than=older_than, delete=True),  # type: ignore[arg-type]
        lambda: ic.maintenance.plan_expire(sqlite_catalog, "ns.events", older_than=older_than),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidArgumentError) as refused:
            call()
        assert refused.value.argument == "older_than"


def test_a_duration_too_long_to_hold_and_a_missing_database_driver_are_named() -> None:
    from icecommit.core.timeparse import parse_duration

    with pytest.raises(ValueError, match="longer than any duration"):
        parse_duration("99999999999d")
    with pytest.raises(ic.errors.CatalogUnavailableError) as refused:
        ic.connect(uri="mysql://u:p@127.0.0.1/db")
    assert "mysql://" in str(refused.value) and "MySQLdb" in str(refused.value)


def test_a_missing_table_is_an_icecommit_error_that_names_what_the_namespace_holds(sqlite_catalog: SqlCatalog) -> None:
    ic.create_table(sqlite_catalog, "ns.events", EVENTS_SCHEMA)
    for call in (
        lambda: ic.catalog.list_snapshots(sqlite_catalog, "ns.evnets"),
        lambda: ic.GlobalCommitter(sqlite_catalog, "ns.evnets", job_id="j").last_committed_checkpoint(),
        lambda: ic.reconcile(sqlite_catalog, "ns.evnets"),
        lambda: ic.maintenance.find_orphans(sqlite_catalog, "ns.evnets"),
    ):
        with pytest.raises(TableNotFoundError) as missing:
            call()
        assert isinstance(missing.value, ic.IcecommitError) and isinstance(missing.value, NoSuchTableError)
        assert (missing.value.table, missing.value.known) == ("ns.evnets", ["ns.events"])
        assert "the namespace holds ns.events" in str(missing.value)
        assert isinstance(missing.value.__cause__, NoSuchTableError)
    with pytest.raises(TableNotFoundError) as missing:
        ic.catalog.list_snapshots(sqlite_catalog, "nosuch.events")
    assert missing.value.known == [] and "nor does its namespace nosuch" in str(missing.value)


def test_wrong_types_are_named_by_the_parameter_not_met_deep_inside(sqlite_catalog: SqlCatalog) -> None:
    table = ic.create_table(sqlite_catalog, "ns.events", EVENTS_SCHEMA)
    committer = ic.GlobalCommitter(sqlite_catalog, "ns.events", job_id="j")
    cases = [
        (lambda: ic.maintenance.plan_rollback(sqlite_catalog, "ns.events", to_timestamp="2026-01-01"), "to_timestamp"),
        (lambda: ic.maintenance.plan_rollback(sqlite_catalog, "ns.events", to_event_time=0), "to_event_time"),
        (lambda: ic.maintenance.plan_rollback(sqlite_catalog, "ns.events", to_snapshot="123"), "to_snapshot"),
        (
            lambda: ic.maintenance.plan_rollback(sqlite_catalog, "ns.events", to_checkpoint=-1, job_id="j"),
            "to_checkpoint",
        ),
        (lambda: ic.snapshot_at_event_time(sqlite_catalog, "ns.events", "2026-01-01"), "event_time"),
        (lambda: ic.reconcile(sqlite_catalog, "ns.events", since="yesterday"), "since"),
        (lambda: wait_for_partition(sqlite_catalog, "ns.events", "ts_hour=2026-05-01-13", timeout="1s"), "timeout"),
        (lambda: wait_for_partition(sqlite_catalog, "ns.events", "ts_hour=2026-05-01-13", poll=timedelta(0)), "poll"),
        (lambda: wait_for_partition(sqlite_catalog, "ns.events", None), "label"),
        (lambda: committer.abandon(0, reason=None), "reason"),
        (lambda: committer.prepare(0, None), "results"),
        (lambda: committer.prepare(0, "abc"), "results"),
        (lambda: committer.prepare(0, [{"task_id": 0}]), "results[0]"),
        (lambda: ic.write([1, 2], "ns.events", catalog=sqlite_catalog, job_id="j", checkpoint_id=0), "df"),
        (lambda: ic.streaming_sink("ns.events", catalog="sqlite:///x", job_id="j"), "catalog"),
        (
            lambda: ic.streaming_sink("ns.events", catalog=sqlite_catalog, job_id="j", target_file_size=-5),
            "target_file_size",
        ),
        (lambda: ic.writers.SparkWriter(table, job_id="j", target_file_size="big"), "target_file_size"),
        (lambda: ic.Thresholds(max_loss_pct="x"), "max_loss_pct"),
        (lambda: ic.Thresholds(max_duplication_pct=-1), "max_duplication_pct"),
    ]
    for call, argument in cases:
        with pytest.raises(InvalidArgumentError) as refused:
            call()  # type: ignore[no-untyped-call]
        assert refused.value.argument == argument
    with pytest.raises(TableNotFoundError):  # a typo in a streaming sink's table fails when the sink is made
        ic.streaming_sink("ns.evnets", catalog=sqlite_catalog, job_id="j")
    assert committer.store.list("ns.events") == [] and sqlite_catalog.load_table("ns.events").current_snapshot() is None


@pytest.mark.parametrize(
    ("kwargs", "error", "named"),
    [
        ({"schema": None}, InvalidArgumentError, "schema"),
        ({"schema": {"a": "int"}}, InvalidArgumentError, "schema"),
        ({"schema": pa.schema([("a", pa.int64()), ("a", pa.int32())])}, SchemaMismatchError, "a"),
        ({"schema": pa.schema([("took", pa.duration("us"))])}, SchemaMismatchError, "took"),
        ({"schema": pa.schema([("n", pa.null())])}, SchemaMismatchError, "n"),
        ({"partition_by": "day(ts)"}, InvalidArgumentError, "partition_by"),
        ({"partition_by": [None]}, InvalidArgumentError, "partition_by"),
        ({"properties": {"format-version": "9"}}, TableSpecError, "ns.bad"),
        ({"properties": {"write.target-file-size-bytes": 5}}, InvalidArgumentError, "properties"),
        ({"location": 5}, InvalidArgumentError, "location"),
    ],
)
def test_create_table_names_what_is_wrong_and_creates_nothing(
    sqlite_catalog: SqlCatalog, kwargs: dict[str, object], error: type[Exception], named: str
) -> None:
    arguments: dict[str, object] = {"schema": EVENTS_SCHEMA, **kwargs}
    with pytest.raises(error) as refused:
        ic.create_table(sqlite_catalog, "ns.bad", **arguments)  # type: ignore[arg-type]
    facts = vars(refused.value)
    assert named in (facts.get("argument"), facts.get("column"), facts.get("table")), facts
    assert not sqlite_catalog.table_exists("ns.bad")


def test_a_corrupt_or_missing_metadata_file_and_an_unusable_warehouse_are_named(
    sqlite_catalog: SqlCatalog, tmp_path: Path
) -> None:
    table = ic.create_table(sqlite_catalog, "ns.events", EVENTS_SCHEMA)
    metadata = Path(table.metadata_location.removeprefix("file://"))
    metadata.write_text('{"format-version": 2, "table-uuid": "cut sh')
    with pytest.raises(TableSpecError) as corrupt:
        ic.catalog.list_snapshots(sqlite_catalog, "ns.events")
    assert corrupt.value.table == "ns.events" and "metadata cannot be read" in str(corrupt.value)
    metadata.unlink()
    with pytest.raises(TableSpecError) as missing:
        ic.GlobalCommitter(sqlite_catalog, "ns.events", job_id="j").last_committed_checkpoint()
    assert "metadata cannot be read" in str(missing.value) and "FileNotFoundError" in str(missing.value)

    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("not a folder")
    with pytest.raises(ic.errors.CatalogUnavailableError) as unusable:
        ic.connect(uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=str(in_the_way / "wh"))
    assert str(in_the_way) in str(unusable.value) and "cannot be made" in str(unusable.value)
    with pytest.raises(InvalidArgumentError) as wrong:
        ic.connect(uri=5)  # type: ignore[arg-type]
    assert wrong.value.argument == "uri"
    with pytest.raises(ValidationError) as garbage:
        ic.WriteResult.from_json('{"job_id": "j"}')
    assert "not a write result" in str(garbage.value) and "checkpoint_id" in str(garbage.value)


@pytest.mark.parametrize("variable", ["ICECOMMIT_CONNECTION_ATTEMPTS", "ICECOMMIT_CONNECTION_RETRY_SECONDS"])
def test_a_bad_connection_retry_setting_is_named_not_taken_for_the_table(
    sqlite_catalog: SqlCatalog, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    from icecommit.core import connections

    ic.create_table(sqlite_catalog, "ns.events", EVENTS_SCHEMA)
    monkeypatch.setenv(variable, "abc")
    connections.set_connection_retry(None)  # read from the environment again
    with pytest.raises(ic.errors.InvalidArgumentError, match=variable) as raised:
        ic.GlobalCommitter(sqlite_catalog, "ns.events", job_id="j").load_table()
    assert "metadata" not in str(raised.value)
