"""The write options of ``ic.write``, the routed writer and the streaming sink, defined once.

:class:`WriteOptions` is a frozen value: it holds configuration (names, numbers, policies),
never a session, a catalog object or a connection, so a streaming sink that carries it can
be pickled (Spark Connect's ``foreachBatch``). ``ic.write(..., branch="b")`` and
``ic.write(..., options=WriteOptions(branch="b"))`` are the same call; a keyword given
beside ``options`` overrides that field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.table import Table

from icecommit.committer import modes
from icecommit.committer.completion import PartitionCompleteness
from icecommit.committer.holding import Gate
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.checks import Check
from icecommit.core.errors import InvalidArgumentError
from icecommit.core.evolution import checked_mode
from icecommit.core.identifiers import checked_file_size, table_name
from icecommit.core.publishing import audit_branch, checked_on_check_failure, checked_publish
from icecommit.core.write_modes import APPEND
from icecommit.maintenance.policy import MaintenancePolicy


@dataclass(frozen=True)
class WriteOptions:
    """How a checkpoint is written and committed.

    Attributes:
        route_by: the column whose value picks the table, when ``table`` is a mapping of
            routing values to tables.
        dead_letter: the table that takes rows whose routing value maps to no table
            (created with the source's columns when missing); None fails the write with
            :class:`~icecommit.errors.UnroutedRecordsError` instead.
        branch: the branch to commit to.
        target_file_size: roll data files at this many bytes (default: the table's
            ``write.target-file-size-bytes``).
        recommit: commit again a checkpoint that a rollback removed (its staged files).
        completeness: when time partitions are published complete, and whom to tell.
        distribution: ``none``, ``hash`` or ``bin-pack``: how rows reach the writer tasks
            (None: the table's ``write.distribution-mode``, else ``hash`` for a partitioned
            table and ``none`` otherwise).
        maintenance: compaction and expiry to run after the commit (a failure there never
            undoes or fails the commit).
        schema_mode: ``strict`` (the table's schema as it is), ``add-columns`` (columns the
            table lacks are added, optional) or ``merge`` (also Iceberg's promotions); None:
            the table's ``icecommit.schema-mode``, else ``strict``. The change is committed
            before the tasks write and recorded with the checkpoint
            (:mod:`icecommit.core.evolution`).
        create: create a table that does not exist, from the DataFrame's columns (all
            optional but ``identifier_fields``), recorded with the checkpoint.
        partition_by: the partition transforms of a created table: one list for every
            table, or a mapping from routing value (or table name) to list.
        table_properties: the properties of a created table.
        identifier_fields: the key columns of a created table (for upserts later).
        mode: ``append``, ``overwrite-partitions`` (the checkpoint's rows replace every
            partition they touch, under the table's current spec; see
            :mod:`icecommit.core.overwrite`) or ``upsert`` (each row replaces the live rows
            of its key, or is inserted; :mod:`icecommit.core.upsert`); None: the table's
            ``icecommit.write-mode``, else ``append``. Recorded with the checkpoint. A
            mapping from table name to mode gives each table of a routed write or of
            ``write_many`` its own (a table it leaves out: its property, else append).
        key: an upsert's key columns (default: the table's identifier fields).
        change_column: a change-type column of an upsert (``c``/``r``/``u`` replace, ``d``
            deletes; Debezium's ``op``); not stored in the table.
        order_by: the column(s) whose largest value picks the row of a key that several
            rows of one checkpoint hold (without it, such rows are refused).
        checks: what each checkpoint's rows must pass before they reach readers
            (:mod:`icecommit.checks`): a list for every table, or a mapping from table name
            to list for a routed write. A checkpoint that fails one is held on the job's
            audit branch (see :mod:`icecommit.committer.holding`).
        on_check_failure: ``raise`` (default: the write raises ``CheckpointHeldError``) or
            ``queue`` (the job goes on; its later checkpoints wait behind the held one).
        publish: ``auto`` (default: a checkpoint whose checks pass reaches readers) or
            ``manual`` (every checkpoint waits on the audit branch until it is published).
        audit_branch: the branch held checkpoints wait on (default ``icecommit-audit-<job>``).
        atomic: how a checkpoint of several tables is committed: ``True``, in one catalog
            commit (readers see it in every table or in none; refused before anything is
            written where the catalog cannot); ``False``, table by table; ``"auto"``
            (default), in one commit where the catalog can, else table by table.
    """

    route_by: str | None = None
    dead_letter: str | None = None
    branch: str = MAIN_BRANCH
    target_file_size: int | None = None
    recommit: bool = False
    completeness: PartitionCompleteness | None = None
    distribution: str | None = None
    maintenance: MaintenancePolicy | None = None
    schema_mode: str | None = None
    create: bool = False
    # copied into tuples and dicts of their own (never the caller's); the mappings are left out
    # of the hash, so that a WriteOptions stays hashable
    partition_by: Sequence[str] | Mapping[Any, Sequence[str]] | None = field(default=None, hash=False)
    table_properties: Mapping[str, str] | None = field(default=None, hash=False)
    identifier_fields: Sequence[str] | None = None
    mode: str | Mapping[str, str] | None = field(default=None, hash=False)
    key: Sequence[str] | None = None
    change_column: str | None = None
    order_by: str | Sequence[str] | None = None
    checks: Sequence[Check] | Mapping[str, Sequence[Check]] | None = field(default=None, hash=False)
    on_check_failure: str | None = None
    publish: str | None = None
    audit_branch: str | None = None
    atomic: bool | str = "auto"

    def __post_init__(self) -> None:
        self._check_gate()
        if self.atomic not in (True, False, "auto") or not isinstance(self.atomic, (bool, str)):
            raise InvalidArgumentError("atomic", self.atomic, 'True, False or "auto"')
        # the rest is checked where it is used, with the messages callers already know
        if self.dead_letter is not None:
            object.__setattr__(self, "dead_letter", table_name(self.dead_letter))
        checked_file_size(self.target_file_size)
        if self.maintenance is not None and not isinstance(self.maintenance, MaintenancePolicy):
            raise InvalidArgumentError("maintenance", self.maintenance, "an icecommit MaintenancePolicy, or None")
        if self.schema_mode is not None:
            checked_mode(self.schema_mode)
        if isinstance(self.mode, Mapping):
            object.__setattr__(self, "mode", {table_name(t): m for t, m in self.mode.items()})
        for mode in self.mode.values() if isinstance(self.mode, Mapping) else [self.mode]:
            if mode is not None:
                modes.named(mode)
        for argument in ("key", "order_by"):
            value = getattr(self, argument)
            if isinstance(value, str) and argument == "order_by":
                value = (value,)
            if value is not None and (
                isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(n, str) for n in value)
            ):
                accepted = "a list of column names" + (", or one name" if argument == "order_by" else "")
                raise InvalidArgumentError(argument, getattr(self, argument), accepted)
            if value is not None:
                object.__setattr__(self, argument, tuple(value))
        if self.change_column is not None and not isinstance(self.change_column, str):
            raise InvalidArgumentError("change_column", self.change_column, "a column name")
        if not isinstance(self.create, bool):
            raise InvalidArgumentError("create", self.create, "True or False")
        given = self.partition_by
        specs = list(given.values()) if isinstance(given, Mapping) else [] if given is None else [given]
        for spec in specs:
            if isinstance(spec, str) or not isinstance(spec, Sequence) or not all(isinstance(p, str) for p in spec):
                raise InvalidArgumentError(
                    "partition_by", given, "a list of transforms, or a mapping from route to such a list"
                )
        if isinstance(given, Mapping):
            object.__setattr__(self, "partition_by", {k: tuple(v) for k, v in given.items()})
        elif given is not None:
            object.__setattr__(self, "partition_by", tuple(given))
        names = self.identifier_fields
        if names is not None and (isinstance(names, str) or not all(isinstance(n, str) for n in names)):
            raise InvalidArgumentError("identifier_fields", names, "a list of column names")
        if names is not None:
            object.__setattr__(self, "identifier_fields", tuple(names))
        properties = self.table_properties
        if properties is not None:
            if not isinstance(properties, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in properties.items()
            ):
                raise InvalidArgumentError("table_properties", properties, "a mapping of property names to strings")
            object.__setattr__(self, "table_properties", dict(properties))

    def partitions_of(self, table: str, routes: Mapping[Any, str]) -> list[str]:
        """The partition transforms a created ``table`` gets (``routes``: routing value to
        table name, empty for a single table)."""
        spec = self.partition_by
        if not isinstance(spec, Mapping):
            return list(spec or [])
        if table in spec:
            return list(spec[table])
        found = [list(spec[v]) for v, name in routes.items() if name == table and v in spec]
        return found[0] if found else []

    def _check_gate(self) -> None:
        checked_on_check_failure(self.on_check_failure)
        checked_publish(self.publish)
        if self.audit_branch is not None:
            audit_branch("job", self.audit_branch)
        given = self.checks
        if given is None:
            return
        lists = list(given.values()) if isinstance(given, Mapping) else [given]
        for checks in lists:
            if isinstance(checks, (str, bytes)) or not all(isinstance(c, Check) for c in checks):
                raise InvalidArgumentError(
                    "checks", checks, "a list of icecommit.checks (checks.row_count(min=1), ...), or a mapping from "
                    "table name to such a list",
                )  # fmt: skip
        if isinstance(given, Mapping):
            object.__setattr__(self, "checks", {table_name(k): tuple(v) for k, v in given.items()})
        else:
            object.__setattr__(self, "checks", tuple(given))

    def gate_of(self, table: str) -> Gate | None:
        """What ``table``'s checkpoints pass before they reach readers (None: nothing)."""
        given = self.checks  # a list is every routed table's, not the dead-letter table's
        if isinstance(given, Mapping):
            checks = tuple(given.get(table, ()))
        else:
            checks = tuple(given or ()) if table != self.dead_letter else ()
        publish = checked_publish(self.publish)
        if not checks and publish == "auto" and self.audit_branch is None:
            return None
        return Gate(checks, checked_on_check_failure(self.on_check_failure), publish, self.audit_branch)

    def mode_of(self, table: str) -> str | None:
        """The write mode ``table`` is written under (None: the table's
        ``icecommit.write-mode``, else append): the dead-letter table only ever gains rows,
        whatever the write's mode."""
        if table == self.dead_letter:
            return APPEND
        return self.mode.get(table) if isinstance(self.mode, Mapping) else self.mode

    @classmethod
    def of(cls, options: WriteOptions | None = None, **keywords: Any) -> WriteOptions:
        """``options`` (default: all defaults) with the fields ``keywords`` name replaced.

        Raises:
            InvalidArgumentError: a keyword that is no write option, or a value one cannot use.
        """
        if options is not None and not isinstance(options, WriteOptions):
            raise InvalidArgumentError("options", options, "an icecommit WriteOptions, or None")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(keywords) - known)
        if unknown:
            raise InvalidArgumentError(
                unknown[0], keywords[unknown[0]], f"a write option: one of {', '.join(sorted(known))}"
            )
        if isinstance(keywords.get("dead_letter"), Table):
            keywords["dead_letter"] = table_name(keywords["dead_letter"])
        return dataclasses.replace(options or cls(), **keywords)
