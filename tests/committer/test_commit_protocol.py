"""The one commit protocol, driven with operations made for the test: rebase on a conflict,
refuse a stale plan, find its own change after a lost answer, name the operation when the
outcome stays unknown, and pass on an error raised before anything reached the catalog."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table

import icecommit as ic
from icecommit.committer import protocol
from icecommit.committer.retry import RetryPolicy
from icecommit.errors import CommitConflictError, CommitStateUnknownError, PlanChangedError
from tests.helpers import EVENTS_SCHEMA

FAST = RetryPolicy(max_attempts=3, max_seconds=60, min_wait_s=0.001, max_wait_s=0.002)
KEY = "test.operation-key"


class SetKey(protocol.Operation):
    """Sets a table property (the operation's key) in one commit; ``before`` runs ahead of
    each attempt's compare-and-swap, ``after`` after it."""

    kind = "key"
    remedy = "look for the key by hand"

    def __init__(self, table: str, *, before: Callable[[int], None] = lambda _n: None,
                 after: Callable[[int], None] = lambda _n: None) -> None:  # fmt: skip
        self.table_name = table
        self.before, self.after = before, after
        self.sent = 0

    @property
    def label(self) -> str:
        return f"setting the key of {self.table_name}"

    def check(self, table: Table, number: int) -> protocol.Found | None:
        return protocol.Found(None) if number > 0 and KEY in table.metadata.properties else None

    def apply(self, table: Table) -> protocol.Applied:
        self.before(self.sent)
        with table.transaction() as tx:
            tx.set_properties({KEY: "set"})
        self.sent += 1
        self.after(self.sent)
        return protocol.Applied(None, None)

    def find(self, table: Table) -> protocol.Found | None:
        return protocol.Found(None) if KEY in table.metadata.properties else None


class Refused(SetKey):
    conflict = "refuse"
    kind = "key change"


def _table(catalog: SqlCatalog) -> tuple[str, Callable[[], Table]]:
    name = f"{catalog.name}.events"
    ic.create_table(catalog, name, EVENTS_SCHEMA)
    return name, lambda: catalog.load_table(name)


def _another_commit_wins_once() -> Callable[[int], None]:
    """Another writer's commit wins the first compare-and-swap (as a real conflict reads)."""
    done: list[bool] = []

    def lose(_sent: int) -> None:
        if not done:
            done.append(True)
            raise CommitFailedException("another commit won the compare-and-swap")

    return lose


def test_a_rebase_operation_retries_on_the_new_head_and_lands_once(
    sqlite_catalog: SqlCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    name, load = _table(sqlite_catalog)
    base = load()
    operation = SetKey(name, before=_another_commit_wins_once())
    with caplog.at_level("WARNING", logger="icecommit.committer.retry"):
        outcome = protocol.run(operation, base=base, load=load, policy=FAST, sleep=lambda _s: None)
    assert (outcome.sent, outcome.retries, outcome.found_before, outcome.recovered) == (2, 1, False, False)
    assert caplog.messages[0].startswith(f"commit of setting the key of {name} conflicted (attempt 1)")
    assert load().metadata.properties[KEY] == "set"


def test_a_refuse_operation_never_reapplies_a_stale_plan(sqlite_catalog: SqlCatalog) -> None:
    name, load = _table(sqlite_catalog)
    base = load()
    operation = Refused(name, before=_another_commit_wins_once())
    with pytest.raises(PlanChangedError) as refused:
        protocol.run(operation, base=base, load=load, policy=FAST, sleep=lambda _s: None)
    assert isinstance(refused.value, CommitConflictError)  # a commit outcome, not invalid input
    assert "changed since the key change was planned" in str(refused.value) and "plan again" in str(refused.value)
    assert KEY not in load().metadata.properties and operation.sent == 0


def test_conflicts_past_the_policy_name_the_operation(sqlite_catalog: SqlCatalog) -> None:
    name, load = _table(sqlite_catalog)

    def always(_sent: int) -> None:
        raise CommitFailedException("another commit won")

    with pytest.raises(CommitConflictError) as gave_up:
        protocol.run(SetKey(name, before=always), base=load(), load=load, policy=FAST, sleep=lambda _s: None)
    assert str(gave_up.value).startswith(f"setting the key of {name}: gave up after 3 conflicting commit attempts")


def test_a_lost_answer_is_resolved_by_finding_the_key(sqlite_catalog: SqlCatalog) -> None:
    name, load = _table(sqlite_catalog)

    def lost(_sent: int) -> None:
        raise ConnectionError("the answer was lost")

    outcome = protocol.run(SetKey(name, after=lost), base=load(), load=load, policy=FAST, sleep=lambda _s: None)
    assert outcome.recovered and load().metadata.properties[KEY] == "set"


def test_an_outcome_the_table_does_not_show_is_unknown_and_named(sqlite_catalog: SqlCatalog) -> None:
    name, load = _table(sqlite_catalog)
    operation = SetKey(name)

    def lost_before_landing(table: Table) -> protocol.Applied:
        table.catalog.sent = True  # type: ignore[attr-defined]  # it reached the catalog
        raise TimeoutError("no answer")

    operation.apply = lost_before_landing  # type: ignore[method-assign]
    with pytest.raises(CommitStateUnknownError) as unknown:
        protocol.run(operation, base=load(), load=load, policy=FAST, sleep=lambda _s: None)
    assert str(unknown.value).startswith(f"setting the key of {name}: commit outcome unknown")
    assert str(unknown.value).endswith("; look for the key by hand") and unknown.value.remedy == operation.remedy
    assert unknown.value.checkpoint_id is None and "checkpoint 0" not in str(unknown.value)


def test_an_error_before_the_catalog_was_reached_is_the_callers_as_it_is(sqlite_catalog: SqlCatalog) -> None:
    name, load = _table(sqlite_catalog)

    def disk_full(_sent: int) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        protocol.run(SetKey(name, before=disk_full), base=load(), load=load, policy=FAST, sleep=lambda _s: None)


def test_a_retry_that_finds_its_key_sends_nothing_more(sqlite_catalog: SqlCatalog) -> None:
    name, load = _table(sqlite_catalog)

    def landed_but_lost(_sent: int) -> None:
        raise CommitFailedException("the answer was lost; the catalog says it conflicted")

    outcome = protocol.run(
        SetKey(name, after=landed_but_lost), base=load(), load=load, policy=FAST, sleep=lambda _s: None
    )
    assert (outcome.sent, outcome.retries, outcome.found_before, outcome.recovered) == (1, 1, True, False)
