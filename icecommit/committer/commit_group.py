"""One checkpoint's tables committed in one catalog commit.

Each table's part is its committer's commit, unchanged: the one commit protocol (its
checks, its key, its retries, its unknown outcomes, its state). The tables run side by
side, each in a thread of its own and a party of one :class:`CommitGroup`; where an
attempt would send its compare-and-swap (:class:`~icecommit.committer.attempt.SendingCatalog`),
a party hands its change to the group instead and waits. Once every party still in the
group has handed one over, the group commits them all at once
(:func:`~icecommit.catalog.multi_table.commit_together`) and gives each party the answer:
its new metadata, or the one error for all of them. A conflict on any table is a conflict
for every part (no table changed): each loads its table again, checks its key and hands a
new change over, so the tables that moved are planned again. An error that does not
prove the commit failed leaves every part's outcome unknown, and each looks for its key
in its table: the catalog's one transaction means all of them find it, or none.

A party leaves when its commit returns (committed, or found its key already there: it
sends nothing) or raises. A party that raised before its part was sent breaks the
group: every other party's change is refused (:class:`TableGroupError`), so the checkpoint
lands in all its tables or in none; what stays prepared is committed by the next run.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar, copy_context
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.update import TableRequirement, TableUpdate

from icecommit.catalog.multi_table import TableChange, commit_together
from icecommit.core.errors import TableGroupError
from icecommit.core.identifiers import table_name

T = TypeVar("T")

#: Called with a crash point's name (``before-group-commit``, ``after-metadata-file`` on a
#: SQL catalog, once per table, ``after-group-commit``) and the tables; raises to crash
#: there (tests).
GroupFault = Callable[[str, Sequence[str]], None]


@dataclass
class _Slot:
    """A party's change, waiting for the group's commit, and its answer."""

    change: TableChange
    response: CommitTableResponse | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class CommitGroup:
    """The parties (tables, by name) of one commit of several tables (see the module).

    Attributes:
        catalog: the catalog every table is in (one that can commit them together).
        checkpoint_id: the checkpoint committed (for errors; None: another change, a rollback).
        fault: crash points, for tests.
        commits: catalog commits made (one per round in which every party sent).
    """

    catalog: Catalog
    checkpoint_id: int | None = None
    fault: GroupFault | None = None
    commits: int = 0
    size: int = 0
    #: parties are answered one at a time, each once the one before it has gone on (left or
    #: handed its next change over): what follows a commit (its state recorded) then never
    #: waits on a SQLite lock, whose busy handler sleeps in steps
    one_by_one: bool | None = None
    _active: set[str] = field(default_factory=set)
    _answered: list[tuple[str, _Slot]] = field(default_factory=list)
    _current: str | None = None
    _waiting: dict[str, _Slot] = field(default_factory=dict)
    _broken: tuple[str, BaseException] | None = None
    _lock: threading.Condition = field(default_factory=threading.Condition)

    def run(self, work: Mapping[str, Callable[[], T]]) -> dict[str, T]:
        """Run each table's commit (``work``, by table name) as a party, side by side; the
        results by name, in order.

        Raises:
            What a part raised, once every part ended: the part that failed, rather than
            the :class:`TableGroupError` of the parts it kept from landing.
        """
        self._active = set(work)
        self.size = len(work)
        if self.one_by_one is None:
            self.one_by_one = isinstance(self.catalog, SqlCatalog) and self.catalog.engine.dialect.name == "sqlite"
        results: dict[str, T] = {}
        errors: dict[str, BaseException] = {}

        def party(name: str, commit: Callable[[], T]) -> None:
            _PARTY.set((self, name))
            try:
                results[name] = commit()
            except BaseException as e:  # handed to the caller once every part ended
                errors[name] = e
            finally:
                self._leave(name, errors.get(name))

        threads = [
            threading.Thread(target=copy_context().run, args=(party, name, commit), name=f"icecommit-commit-{name}")
            for name, commit in work.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # the part that failed first, rather than the parts it kept from landing
        causes = [e for e in errors.values() if not isinstance(e, TableGroupError)] or list(errors.values())
        if causes:
            raise causes[0]
        return {name: results[name] for name in work}

    def submit(
        self, name: str, table: Table, requirements: tuple[TableRequirement, ...], updates: tuple[TableUpdate, ...]
    ) -> CommitTableResponse:
        """Party ``name``'s change: waits for the group's commit and returns this table's
        new metadata, or raises the commit's error (a copy for each party)."""
        with self._lock:
            self._went_on(name)
            if self._broken is not None:
                raise self._refusal(name)
            slot = _Slot(TableChange(table, requirements, updates))
            self._waiting[name] = slot
            self._fire_when_ready()
            while not slot.done:
                self._lock.wait()
        if slot.error is not None:
            raise slot.error
        assert slot.response is not None
        return slot.response

    def _leave(self, name: str, error: BaseException | None) -> None:
        with self._lock:
            self._active.discard(name)
            self._went_on(name)
            if error is not None and self._broken is None and self._active:
                self._broken = (name, error)  # the others must not land without it
                for other, slot in self._waiting.items():
                    self._answer(slot, error=self._refusal(other))
                for _, slot in self._answered:  # answered, not released yet: they are told now
                    slot.done = True
                self._waiting.clear()
                self._answered.clear()
                self._lock.notify_all()
                return
            self._fire_when_ready()

    def _fire_when_ready(self) -> None:
        """Commit every waiting change once every active party has handed one over (the
        lock is held)."""
        if not self._waiting or set(self._waiting) != self._active:
            return
        names = sorted(self._waiting)
        slots = [self._waiting[n] for n in names]
        self._waiting = {}
        try:
            if self.fault is not None:
                self.fault("before-group-commit", names)
            fault = self.fault
            written = None if fault is None else (lambda table: fault("after-metadata-file", [table]))
            responses = commit_together(self.catalog, [s.change for s in slots], fault=written)
            self.commits += 1
            if self.fault is not None:
                self.fault("after-group-commit", names)
        except BaseException as e:
            for slot in slots:
                slot.error = _copied(e)
        else:
            for slot, response in zip(slots, responses, strict=True):
                slot.response = response
        if self.one_by_one:
            self._answered = list(zip(names, slots, strict=True))
            self._went_on(None)
        else:
            for slot in slots:
                slot.done = True
        self._lock.notify_all()

    def _went_on(self, name: str | None) -> None:
        """Party ``name`` has gone on from its answer (None: a commit was just made): the
        next one answered is released (the lock is held)."""
        if name is not None and name != self._current:
            return
        self._current = None
        if self._answered:
            self._current, slot = self._answered.pop(0)
            slot.done = True
            self._lock.notify_all()

    def _refusal(self, name: str) -> TableGroupError:
        assert self._broken is not None
        failed, cause = self._broken
        return TableGroupError(name, self.checkpoint_id, failed, cause)

    @staticmethod
    def _answer(
        slot: _Slot, *, response: CommitTableResponse | None = None, error: BaseException | None = None
    ) -> None:
        slot.response, slot.error, slot.done = response, error, True


def _copied(error: BaseException) -> BaseException:
    """The same error for another party (its own traceback), caused by the original."""
    try:
        twin = copy.copy(error)
    except Exception:  # an error that cannot be copied: shared
        return error
    twin.__cause__ = error
    return twin


#: The group and the party name of the thread's commit (None: a commit of its own).
_PARTY: ContextVar[tuple[CommitGroup, str] | None] = ContextVar("icecommit_commit_party", default=None)


def group_commit(table: Table, requirements: tuple[TableRequirement, ...], updates: tuple[TableUpdate, ...]) -> Any:
    """The change handed to the calling thread's group (see :func:`in_group`): the
    catalog's answer, or its error."""
    party = _PARTY.get()
    assert party is not None
    group, name = party
    return group.submit(name, table, requirements, updates)


def tables_in_group() -> int | None:
    """How many tables the calling thread's group commits at once (None: not in a group)."""
    party = _PARTY.get()
    return None if party is None else party[0].size


def in_group(table: Table) -> bool:
    """Whether a change to ``table`` made in the calling thread is its party's part of a
    group (a change to another table, in the same thread, is committed alone)."""
    party = _PARTY.get()
    return party is not None and table_name(table) == party[1]


__all__ = ["CommitGroup", "GroupFault", "group_commit", "in_group", "tables_in_group"]
