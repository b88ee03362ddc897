"""``icecommit partitions``: complete time partitions and late records, text and JSON."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

import icecommit as ic
from icecommit.catalog import partition_status
from icecommit.catalog.inspect import wait_for_partition
from icecommit.core.completeness import TimePartition, partition_value
from icecommit.errors import InvalidArgumentError
from tests import processes
from tests.cli.runner import invoke
from tests.fakes import catalog_of, cli_json
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

BASE = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)


def rows_at(first_id: int, *minutes: int) -> pa.Table:
    data = events(first_id, first_id + len(minutes), days=1)
    times = [BASE + dt.timedelta(minutes=m) for m in minutes]
    return data.set_column(1, "ts", pa.array(times, data.schema.field("ts").type))


def test_partitions_lists_completion_and_late_records(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    catalog = catalog_of(home)
    lateness = {"icecommit.partition-lateness": "5m"}
    table = ic.create_table(catalog, "ns.events", EVENTS_SCHEMA, partition_by=["hour(ts)"], properties=lateness)
    committer = ic.GlobalCommitter(catalog, table, job_id="job")
    batches = [rows_at(0, 1, 2, 50), rows_at(10, 66, 70), rows_at(20, 3, 130)]  # the last holds a late row for hour 0
    for checkpoint_id, data in enumerate(batches):
        committer.prepare(checkpoint_id, [write_arrow(table, data, job_id="job", checkpoint_id=checkpoint_id)])
        committer.commit(checkpoint_id)
    assert [(s.label, s.records_at_completion, s.late_records) for s in partition_status(catalog, "ns.events")] == [
        ("ts_hour=2026-03-01-00", 3, 1),
        ("ts_hour=2026-03-01-01", 2, 0),
    ]

    document = cli_json(home, "partitions", "ns.events")
    assert [(p["label"], p["records_at_completion"], p["late_records"]) for p in document["partitions"]] == [
        ("ts_hour=2026-03-01-00", 3, 1),
        ("ts_hour=2026-03-01-01", 2, 0),
    ]
    first = document["partitions"][0]
    assert first["lateness"] == 300 and first["writers"] == ["job"] and first["notified_at"] is None
    assert first["start"].startswith("2026-03-01T00:00:00") and first["end"].startswith("2026-03-01T01:00:00")

    text = invoke(home, "partitions", "ns.events")
    assert text.returncode == 0, text.stderr
    assert "ts_hour=2026-03-01-00" in text.stdout and "late records" in text.stdout

    missing = invoke(home, "partitions", "ns.nope")
    assert missing.returncode == 2 and "nope" in missing.stderr


def _hourly(home: Path) -> tuple[SqlCatalog, Table, ic.GlobalCommitter]:
    catalog = catalog_of(home)
    table = ic.create_table(catalog, "ns.events", EVENTS_SCHEMA, partition_by=["hour(ts)"])
    return catalog, table, ic.GlobalCommitter(catalog, table, job_id="job")


def _commit(committer: ic.GlobalCommitter, table: Table, checkpoint_id: int, data: pa.Table) -> None:
    committer.prepare(checkpoint_id, [write_arrow(table, data, job_id="job", checkpoint_id=checkpoint_id)])
    committer.commit(checkpoint_id)


def test_wait_for_partition_returns_once_published_and_none_at_the_timeout(tmp_path: Path) -> None:
    catalog, table, committer = _hourly(tmp_path)
    _commit(committer, table, 0, rows_at(0, 10, 20))
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    label = "ts_hour=2026-03-01-00"
    missed = wait_for_partition(
        catalog, "ns.events", label, timeout=dt.timedelta(seconds=95), poll=dt.timedelta(seconds=30),
        clock=lambda: now[0], sleep=sleep,
    )  # fmt: skip
    assert missed is None and slept == [30, 30, 30, 5]
    _commit(committer, table, 1, rows_at(10, 130))  # the watermark reaches 02:10: hours 0 and 1 close
    found = wait_for_partition(catalog, "ns.events", label, clock=lambda: now[0], sleep=sleep)
    assert found is not None and (found.label, found.records_at_completion) == (label, 2)
    empty = wait_for_partition(catalog, "ns.events", "ts_hour=2026-03-01-01", clock=lambda: now[0], sleep=sleep)
    assert empty is not None and empty.records_at_completion == 0  # an hour with no rows is published too
    assert slept == [30, 30, 30, 5]  # found at once, no waiting


def test_a_label_the_spec_cannot_have_is_refused_at_once(tmp_path: Path) -> None:
    catalog, _table, _committer = _hourly(tmp_path)
    for label in ("ts_day=2026-03-01", "ts_hour=2026-03-01", "ts_hour=tomorrow", "2026-03-01-00"):
        with pytest.raises(InvalidArgumentError) as raised:
            wait_for_partition(catalog, "ns.events", label, sleep=lambda _s: pytest.fail("waited"))
        assert raised.value.argument == "label" and "ts_hour=<%Y-%m-%d-%H>" in str(raised.value)
    refused = invoke(tmp_path, "partitions", "ns.events", "--wait", "ts_day=2026-03-01")
    assert refused.returncode == 2 and "ts_hour" in refused.stderr


def test_labels_of_every_granularity_parse_back_to_their_value() -> None:
    for granularity, value in (("hour", 493_000), ("day", 20_500), ("month", 675), ("year", 56)):
        field = TimePartition(f"ts_{granularity}", 0, granularity, "ts")
        assert partition_value(field, field.label(value)) == value


def test_a_scheduler_process_waits_on_a_partition_and_exits_once_it_is_published(tmp_path: Path) -> None:
    # "within one poll" is shown with an injected clock above; this is the process as a
    # scheduler runs it: it says on stderr that it is waiting, then exits 0 once published
    _catalog, table, committer = _hourly(tmp_path)
    _commit(committer, table, 0, rows_at(0, 10, 20))
    wait = ("--output", "json", "partitions", "ns.events", "--wait", "ts_hour=2026-03-01-00")
    timed_out = processes.run(processes.cli, tmp_path, *wait, "--timeout", "1s", "--poll", "1s")
    assert timed_out.returncode == 1 and json.loads(timed_out.stdout)["published"] is False
    assert timed_out.stderr == "ns.events: ts_hour=2026-03-01-00 is not published yet; looking every 1s for up to 1s\n"
    with processes.Child(processes.cli, tmp_path, *wait, "--timeout", "10m", "--poll", "1s") as waiting:
        deadline = time.monotonic() + 120  # a bound on a hang, not on the behaviour
        while not waiting.output()[1] and waiting.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # its stderr line is written after its first look found nothing
        assert waiting.output()[1] == (
            "ns.events: ts_hour=2026-03-01-00 is not published yet; looking every 1s for up to 10m\n"
        )
        assert waiting.poll() is None
        _commit(committer, table, 1, rows_at(10, 130))
        out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    document = json.loads(out)
    assert document["published"] is True and document["records_at_completion"] == 2


def test_partitions_publish_applies_the_recorded_policy_without_a_commit(tmp_path: Path) -> None:
    from icecommit.state.checkpoints import CheckpointStore
    from icecommit.state.database import state_engine, state_uri

    catalog = catalog_of(tmp_path)
    table = ic.create_table(catalog, "ns.events", EVENTS_SCHEMA, partition_by=["hour(ts)"])
    hour = dt.datetime.now(dt.timezone.utc).replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=4)
    committed_at = hour + dt.timedelta(minutes=55)  # the job last committed then, and has been quiet since
    store = CheckpointStore(state_engine(state_uri(catalog)), clock=lambda: committed_at)
    policy = ic.PartitionCompleteness(idle_timeout=dt.timedelta(minutes=30))
    committer = ic.GlobalCommitter(catalog, table, job_id="job", store=store, completeness=policy)
    data = events(0, 3, days=1)
    data = data.set_column(
        1, "ts", pa.array([hour + dt.timedelta(minutes=m) for m in (10, 20, 50)], pa.timestamp("us", tz="UTC"))
    )
    committer.prepare(0, [write_arrow(table, data, job_id="job", checkpoint_id=0)])
    committer.commit(0)
    assert partition_status(catalog, "ns.events") == []  # the watermark (xx:50) has not passed the hour
    listed = cli_json(tmp_path, "partitions", "ns.events")
    assert listed["partitions"] == []
    published = cli_json(tmp_path, "partitions", "ns.events", "--publish")
    label = f"ts_hour={hour:%Y-%m-%d-%H}"
    assert [(p["label"], p["records_at_completion"]) for p in published["partitions"]] == [(label, 3)]
    waited = cli_json(tmp_path, "partitions", "ns.events", "--wait", label, "--timeout", "1s")
    assert waited["published"] is True
