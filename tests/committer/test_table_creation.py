"""A table's creation as an operation of the commit protocol: created once through
``protocol.run``, found (not made twice) after the catalog made it and its answer was lost,
taken from the creator that won a race, and refused when the table there differs."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

import icecommit as ic
from icecommit.catalog.tables import new_table
from icecommit.committer import protocol
from icecommit.committer.retry import RetryPolicy
from icecommit.committer.schema_change import create_for_checkpoint
from icecommit.committer.table_creation import CreateTable, create
from icecommit.errors import CatalogUnavailableError, CommitStateUnknownError, TableSpecError
from tests.helpers import EVENTS_SCHEMA

FAST = RetryPolicy(max_attempts=3, max_seconds=60, min_wait_s=0.001, max_wait_s=0.002)
OTHER_COLUMNS = EVENTS_SCHEMA.append(pa.field("extra", pa.int32()))


class CreatingCatalog(SqlCatalog):
    """Fakes a catalog whose creates race others: the real SqlCatalog, a script run before
    each ``create_table`` (another creator, a request that never arrives) and after it (an
    answer lost on its way back)."""

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        self.before: list[Callable[[], None]] = []
        self.after: list[Callable[[], None]] = []
        self.creates = 0

    def create_table(self, *args: Any, **kwargs: Any) -> Table:
        self.creates += 1
        if self.before:
            self.before.pop(0)()
        table = super().create_table(*args, **kwargs)
        if self.after:
            self.after.pop(0)()
        return table


@pytest.fixture
def creating(tmp_path: Path) -> Iterator[CreatingCatalog]:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog = CreatingCatalog("creating", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=warehouse.as_uri())
    yield catalog
    catalog.engine.dispose()


def _another_creator(catalog: SqlCatalog, name: str, schema: pa.Schema = EVENTS_SCHEMA) -> Callable[[], None]:
    """Fakes another process creating ``name`` through a catalog of its own."""

    def create_it() -> None:
        other = SqlCatalog(catalog.name, **catalog.properties)
        ic.create_table(other, name, schema, partition_by=["event"])
        other.engine.dispose()

    return create_it


def _lost_answer() -> None:
    raise ConnectionResetError("connection reset by peer")


def _tables(catalog: SqlCatalog) -> list[tuple[str, ...]]:
    return catalog.list_tables("ns")


def test_a_creation_is_an_operation_of_the_protocol_and_a_second_one_finds_it(
    creating: CreatingCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes: list[tuple[protocol.Operation, protocol.Outcome]] = []
    run = protocol.run

    def recorded(operation: protocol.Operation, **kwargs: Any) -> protocol.Outcome:
        outcome = run(operation, **kwargs)
        outcomes.append((operation, outcome))
        return outcome

    monkeypatch.setattr(protocol, "run", recorded)
    table = ic.create_table(creating, "ns.t", EVENTS_SCHEMA, partition_by=["event"])
    again = ic.create_table(creating, "ns.t", EVENTS_SCHEMA, partition_by=["event"])

    assert again.metadata.table_uuid == table.metadata.table_uuid and creating.creates == 1
    assert table.catalog is creating and again.catalog is creating  # not the protocol's watch on it
    [(made, first), (found, second)] = outcomes
    assert isinstance(made, CreateTable) and made.label == "creation of ns.t"
    assert (first.sent, first.found_before, first.recovered) == (1, False, False)
    assert isinstance(found, CreateTable) and (second.sent, second.found_before) == (0, True)
    assert [f.name for f in table.spec().fields] == ["event"]
    assert table.properties["write.parquet.compression-codec"] == "zstd"


def test_the_catalog_made_the_table_and_its_answer_was_lost_the_creation_is_found(
    creating: CreatingCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    creating.after.append(_lost_answer)
    with caplog.at_level(logging.INFO, logger="icecommit"):
        table = ic.create_table(creating, "ns.t", EVENTS_SCHEMA, partition_by=["event"])

    assert creating.creates == 1 and _tables(creating) == [("ns", "t")]  # not made twice
    assert table.metadata.table_uuid == creating.load_table("ns.t").metadata.table_uuid
    assert "creation of ns.t: found after an unknown outcome" in caplog.text


def test_an_answer_lost_with_an_error_of_any_kind_is_resolved_by_looking(creating: CreatingCatalog) -> None:
    def broken() -> None:
        raise RuntimeError("the server's answer could not be parsed")

    creating.after.append(broken)
    table = ic.create_table(creating, "ns.t", EVENTS_SCHEMA)
    assert creating.creates == 1 and table.schema().find_field("id").required


def test_a_transient_failure_before_the_catalog_made_it_is_named_and_creating_again_works(
    creating: CreatingCatalog,
) -> None:
    creating.before.append(_lost_answer)  # the request never arrived
    with pytest.raises(CatalogUnavailableError) as unreachable:
        ic.create_table(creating, "ns.t", EVENTS_SCHEMA)
    assert "creation of ns.t did not land" in str(unreachable.value)
    assert _tables(creating) == []

    table = ic.create_table(creating, "ns.t", EVENTS_SCHEMA)
    assert creating.creates == 2 and _tables(creating) == [("ns", "t")]
    assert table.schema().column_names == EVENTS_SCHEMA.names


def test_an_unknown_outcome_that_the_catalog_cannot_be_asked_about_is_commit_state_unknown(
    creating: CreatingCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    def lost_and_gone() -> None:
        def down(*_args: Any, **_kwargs: Any) -> Table:
            raise ConnectionRefusedError("the catalog is down")

        monkeypatch.setattr(creating, "load_table", down)
        _lost_answer()

    creating.after.append(lost_and_gone)
    with pytest.raises(CommitStateUnknownError) as unknown:
        ic.create_table(creating, "ns.t", EVENTS_SCHEMA)
    assert unknown.value.operation == "creation of ns.t" and unknown.value.table == "ns.t"
    assert "create it again" in str(unknown.value)


def test_two_creators_race_one_wins_and_the_other_takes_its_table(
    creating: CreatingCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    creating.before.append(_another_creator(creating, "ns.t"))
    waits: list[float] = []
    asked = new_table("ns.t", EVENTS_SCHEMA, ["event"])
    with caplog.at_level(logging.WARNING, logger="icecommit"):
        table = create(creating, asked, policy=FAST, sleep=waits.append)

    winner = creating.load_table("ns.t")
    assert table.metadata.table_uuid == winner.metadata.table_uuid and _tables(creating) == [("ns", "t")]
    assert creating.creates == 1 and len(waits) == 1  # lost the name once, then found the winner's
    assert "commit of creation of ns.t conflicted (attempt 1)" in caplog.text


def test_two_processes_creating_the_same_table_at_once_both_get_the_one_table(tmp_path: Path) -> None:
    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", (tmp_path / "warehouse").as_uri()
    (tmp_path / "warehouse").mkdir()
    catalogs = [SqlCatalog("racing", uri=uri, warehouse=warehouse) for _ in range(2)]
    start = threading.Barrier(len(catalogs))
    made: list[str] = []
    failed: list[Exception] = []

    def creator(catalog: SqlCatalog) -> None:
        start.wait()
        try:
            asked = new_table("ns.t", EVENTS_SCHEMA, ["event"])
            made.append(str(create(catalog, asked, policy=FAST, sleep=lambda _s: None).metadata.table_uuid))
        except Exception as e:  # handed to the test's thread
            failed.append(e)

    threads = [threading.Thread(target=creator, args=(c,)) for c in catalogs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failed == [] and len(made) == 2 and len(set(made)) == 1
    assert catalogs[0].list_tables("ns") == [("ns", "t")]
    for catalog in catalogs:
        catalog.engine.dispose()


def test_a_table_there_with_other_columns_or_partitions_is_refused_as_before(creating: CreatingCatalog) -> None:
    ic.create_table(creating, "ns.t", EVENTS_SCHEMA, partition_by=["event"])
    with pytest.raises(TableSpecError, match="exists with a different schema") as columns:
        ic.create_table(creating, "ns.t", OTHER_COLUMNS, partition_by=["event"])
    assert columns.value.table == "ns.t" and "asked for" in str(columns.value)
    with pytest.raises(TableSpecError, match="exists with a different partition spec"):
        ic.create_table(creating, "ns.t", EVENTS_SCHEMA, partition_by=["day(ts)"])
    assert creating.creates == 1


def test_a_race_lost_to_a_creator_with_other_columns_is_refused(creating: CreatingCatalog) -> None:
    creating.before.append(_another_creator(creating, "ns.t", OTHER_COLUMNS))
    with pytest.raises(TableSpecError, match="exists with a different schema"):
        create(creating, new_table("ns.t", EVENTS_SCHEMA, ["event"]), policy=FAST, sleep=lambda _s: None)
    assert creating.load_table("ns.t").schema().column_names == OTHER_COLUMNS.names


def test_a_write_that_creates_its_table_takes_the_winners_table_whatever_its_columns(
    creating: CreatingCatalog,
) -> None:
    creating.before.append(_another_creator(creating, "ns.t", OTHER_COLUMNS))
    table = create_for_checkpoint(
        creating,
        "ns.t",
        EVENTS_SCHEMA,
        job_id="j",
        checkpoint_id=7,
        partition_by=["event"],
        properties={},
        identifier_fields=None,
    )
    assert table.schema().column_names == OTHER_COLUMNS.names  # the write's schema mode decides
    assert "icecommit.created-by" not in table.properties  # the winner's, not this checkpoint's


def test_a_write_that_creates_its_table_records_its_checkpoint_once_after_a_lost_answer(
    creating: CreatingCatalog,
) -> None:
    creating.after.append(_lost_answer)
    table = create_for_checkpoint(
        creating,
        "ns.t",
        EVENTS_SCHEMA,
        job_id="j",
        checkpoint_id=7,
        partition_by=["event"],
        properties={},
        identifier_fields=["id"],
    )
    assert creating.creates == 1 and table.properties["icecommit.created-by"] == "j:7"
    assert table.schema().identifier_field_names() == {"id"}
