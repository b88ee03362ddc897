"""Every argument and table property icecommit reads is checked at the door: a clear
error that names it, the value and what is accepted, and nothing written or staged."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icecommit as ic
from icecommit.committer import RetryPolicy
from icecommit.errors import InvalidArgumentError
from tests.helpers import EVENTS_SCHEMA, events, write_arrow


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
    # no DataFrame at all: a refusal here comes before anything could run in Spark
    with pytest.raises(InvalidArgumentError) as single:
        ic.write(None, "ns.events", catalog=sqlite_catalog, job_id="j", checkpoint_id=1)  # type: ignore[arg-type]
    assert single.value.argument == "table property icecommit.partition-lateness"
    with pytest.raises(InvalidArgumentError) as routed:
        ic.write(None, {"a": "ns.other"}, route_by="event", catalog=sqlite_catalog, job_id="j", checkpoint_id=1)  # type: ignore[arg-type]
    assert routed.value.argument == "table property write.target-file-size-bytes"
    assert sqlite_catalog.load_table("ns.events").current_snapshot() is None
