"""A write mode is a planner and one registry line: a mode written here, "replace every row
whose ``event`` equals a value", is registered without touching another module, and its
checkpoints commit exactly once through every crash point, a lost reply and a replay;
its conflict rule is the shared validators'."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table
from pyiceberg.types import NestedField

import icecommit as ic
from icecommit.committer import committed_checkpoints, modes
from icecommit.committer.modes import CheckpointBase, Planner, WriteMode
from icecommit.committer.table_changes import TableChanges
from icecommit.committer.validators import Validation, first_conflict, live_files
from icecommit.core import ancestry
from icecommit.errors import InvalidArgumentError, ValidationError
from tests.committer.crash_driver import CRASH_POINTS, InjectedCrash, crashing
from tests.helpers import EVENTS_SCHEMA, events, write_arrow

MODE = "replace-event-pv"
COLUMN, VALUE = "event", "pv"


# -- the mode's rules (pure, over a data file's statistics) ------------------------------


def holds(data_file: DataFile, field: NestedField) -> str:
    """``all``: every row of the file has ``VALUE``; ``none``: no row has it; ``some``: it
    cannot tell (the bounds span it, or the file has no bounds)."""
    lower = (data_file.lower_bounds or {}).get(field.field_id)
    upper = (data_file.upper_bounds or {}).get(field.field_id)
    if lower is None or upper is None:
        return "some"
    low, high = from_bytes(field.field_type, lower), from_bytes(field.field_type, upper)
    if low == high == VALUE:
        return "all"
    return "none" if low > VALUE or high < VALUE else "some"


# -- the planner -------------------------------------------------------------------------


class ReplaceWhere(Planner):
    """The checkpoint's rows (all ``event = 'pv'``) replace every live ``pv`` row."""

    validations = frozenset({Validation.DATA_ADDED, Validation.DATA_REMOVED})

    def plan(self, head: Table, base: CheckpointBase) -> TableChanges:
        field = head.schema().find_field(COLUMN)
        if any(holds(f, field) != "all" for f in base.data_files):
            raise ValidationError(f"checkpoint {base.checkpoint_id} holds rows whose {COLUMN} is not {VALUE!r}")

        def where(data_file: DataFile) -> str | None:
            return None if holds(data_file, field) == "none" else VALUE

        live = live_files(head, base.branch)
        conflict = first_conflict(
            head, base.branch, since=base.sequence_number, where=where, validations=self.validations, live=live
        )
        if conflict is not None:
            raise ValidationError(f"{conflict.data_file.file_path} was {conflict.validation.verb} since the write")
        removed = []
        for found in live:
            kind = holds(found.data_file, field)
            if found.is_delete or kind == "none":
                continue
            if kind == "some":
                raise ValidationError(f"{found.data_file.file_path} holds rows of {VALUE!r} and others")
            removed.append(found.data_file)
        return base.changes(removed=tuple(removed), replaces=True, summary={"test.replaced": str(len(removed))})


@pytest.fixture
def registered() -> Iterator[WriteMode]:
    mode = modes.register(  # the one registry line
        WriteMode(MODE, lambda state, lookup: ReplaceWhere(), feature=MODE, min_format_version=2)
    )
    try:
        yield mode
    finally:
        modes.unregister(MODE)


# -- the checks --------------------------------------------------------------------------


def _pv(first: int, count: int) -> pa.Table:
    rows = events(first, first + count * 4)
    return rows.filter(pc.equal(rows.column(COLUMN), VALUE)).slice(0, count)


def _others(first: int, count: int) -> pa.Table:
    rows = events(first, first + count * 4)
    return rows.filter(pc.not_equal(rows.column(COLUMN), VALUE)).slice(0, count)


def _table(catalog: SqlCatalog) -> str:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA, partition_by=[COLUMN])
    return name


def _ids(catalog: SqlCatalog, name: str) -> list[int]:
    return sorted(catalog.load_table(name).scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def _run(catalog: SqlCatalog, name: str, *, crash_point: str | None = None) -> None:
    """Checkpoint 1 appends pv and other rows; 2 and 3 replace the pv rows (each its own)."""
    rows = {1: pa.concat_tables([_pv(0, 10), _others(0, 10)]), 2: _pv(2000, 7), 3: _pv(3000, 5)}

    current = {"checkpoint": 0}

    def fault(point: str, checkpoint_id: int | None = None) -> None:
        at = current["checkpoint"] if checkpoint_id is None else checkpoint_id
        if point == crash_point and at == 2:
            raise InjectedCrash(point)

    accept = catalog.commit_table
    committer = ic.GlobalCommitter(crashing(catalog, fault), name, job_id="j", fault=fault, sleep=lambda _: None)
    try:
        committer.recover()
        for checkpoint_id, batch in rows.items():
            current["checkpoint"] = checkpoint_id
            state = committer.store.get("j", committer.table_name, checkpoint_id)
            if state is None:
                table = committer.load_table()
                results = [write_arrow(table, batch, job_id="j", checkpoint_id=checkpoint_id)]
                committer.prepare(checkpoint_id, results, mode="append" if checkpoint_id == 1 else MODE)
            if state is None or not state.committed:
                committer.commit(checkpoint_id)
    finally:
        catalog.commit_table = accept  # type: ignore[method-assign]


def _expected() -> list[int]:
    return sorted(_others(0, 10).column("id").to_pylist() + _pv(3000, 5).column("id").to_pylist())


def test_a_mode_written_for_the_test_commits_once(catalog: SqlCatalog, registered: WriteMode) -> None:
    name = _table(catalog)
    _run(catalog, name)
    assert _ids(catalog, name) == _expected()
    metadata = catalog.load_table(name).metadata
    by_checkpoint = {ancestry.checkpoint_of(s): s for s in metadata.snapshots}
    third = by_checkpoint[("j", 3)].summary
    assert third is not None and third.operation.value == "overwrite" and third["test.replaced"] == "1"
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    assert [MODE in s.features for s in committer.store.list(committer.table_name, job_id="j")] == [False, True, True]


@pytest.mark.parametrize("point", [p for p in CRASH_POINTS if p not in ("after-write", "during-stage")])
def test_a_crash_at_each_point_then_a_replay_commits_the_new_mode_once(
    catalog: SqlCatalog, registered: WriteMode, point: str
) -> None:
    name = _table(catalog)
    with pytest.raises(InjectedCrash):
        _run(catalog, name, crash_point=point)
    _run(catalog, name)
    assert _ids(catalog, name) == _expected()
    landed = Counter((c.job_id, c.checkpoint_id) for c in committed_checkpoints(catalog.load_table(name).metadata))
    assert landed == Counter({("j", 1): 1, ("j", 2): 1, ("j", 3): 1})


def test_its_conflict_rule_is_the_shared_validators(catalog: SqlCatalog, registered: WriteMode) -> None:
    name = _table(catalog)
    _run(catalog, name)
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    table = committer.load_table()
    written = [write_arrow(table, _pv(4000, 3), job_id="j", checkpoint_id=4)]
    committer.prepare(4, written, mode=MODE)
    other = ic.GlobalCommitter(catalog, name, job_id="other")  # pv rows the writers of 4 did not see
    other.prepare(1, [write_arrow(other.load_table(), _pv(5000, 2), job_id="other", checkpoint_id=1)])
    other.commit(1)
    before = catalog.load_table(name).metadata_location
    with pytest.raises(ValidationError, match="was added since the write"):
        committer.commit(4)
    assert catalog.load_table(name).metadata_location == before  # nothing landed


def test_a_mode_whose_name_is_taken_is_refused_and_a_replay_under_another_mode_too(
    catalog: SqlCatalog, registered: WriteMode
) -> None:
    with pytest.raises(InvalidArgumentError, match="no other write mode has"):
        modes.register(WriteMode("upsert", lambda state, lookup: ReplaceWhere()))
    name = _table(catalog)
    committer = ic.GlobalCommitter(catalog, name, job_id="j")
    results = [write_arrow(committer.load_table(), _pv(0, 3), job_id="j", checkpoint_id=1)]
    committer.prepare(1, results, mode=MODE)
    with pytest.raises(InvalidArgumentError, match=f"was prepared as '{MODE}'"):
        committer.prepare(1, results, mode="append")
