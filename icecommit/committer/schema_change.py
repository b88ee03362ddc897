"""A checkpoint's schema change and its table's creation: operations of the one commit protocol,
made before any task writes and recorded in the table with the checkpoint that made them
(:mod:`icecommit.core.evolution`; the creation is :mod:`.table_creation`'s).

The schema change is metadata only. Its compare-and-swap requires the table's current
schema id (pyiceberg's ``AssertCurrentSchemaId``), so the catalog assigns the new field ids
once: a job that lost the race re-reads the table and plans again on the winner's schema,
keeping what the other job already added when the types agree (nothing is sent when
nothing is left to add), and refusing when they do not. The tasks then write with the
resulting schema's field ids. A replay finds the columns there and changes nothing.

A checkpoint's creation takes a table made by another creator (or by its own attempt whose
answer was lost) whatever its columns, and goes on under its schema mode.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import StructType

from icecommit.catalog.loading import load_table
from icecommit.catalog.tables import new_table, to_iceberg_schema
from icecommit.committer import protocol
from icecommit.committer.retry import RetryPolicy
from icecommit.committer.table_creation import create
from icecommit.core.errors import SchemaMismatchError, TableNotFoundError
from icecommit.core.evolution import (
    CREATED_BY_PROPERTY,
    SCHEMA_CHANGE_PREFIX,
    AddColumn,
    Change,
    MakeOptional,
    Promote,
    checked_mode,
    plan_changes,
    schema_change_value,
)
from icecommit.core.identifiers import checked_checkpoint_id, checked_job_id

logger = logging.getLogger(__name__)


class EvolveSchema(protocol.Operation):
    """Add and widen the columns checkpoint ``checkpoint_id`` of ``job_id`` brings."""

    kind = "schema change"
    idempotent = True  # planned again on each attempt's table: made twice is made once

    def __init__(
        self,
        table_name: str,
        *,
        job_id: str,
        checkpoint_id: int,
        incoming: StructType,
        mode: str,
        ignore: Collection[str] = (),
        nulls_in: Collection[str] = (),
    ) -> None:
        self.table_name = table_name
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self._checkpoint = checkpoint_id
        self._incoming = incoming
        self._mode = mode
        self._ignore = ignore
        self._nulls_in = nulls_in
        self.changes: list[Change] = []

    @property
    def label(self) -> str:
        return f"schema change of checkpoint {self.checkpoint_id} of job {self.job_id!r} in {self.table_name}"

    def planned(self, table: Table) -> list[Change]:
        return plan_changes(
            table.schema(), self._incoming, self._mode, table=self.table_name, nulls_in=self._nulls_in,
            ignore=self._ignore,
        )  # fmt: skip

    def check(self, table: Table, number: int) -> protocol.Found | None:
        self.changes = self.planned(table)  # refuses what the mode cannot change
        return None if self.changes else protocol.Found(None)

    def apply(self, table: Table) -> protocol.Applied:
        tx = table.transaction()
        with tx.update_schema() as update:  # requires the current schema id
            for change in self.changes:
                if isinstance(change, AddColumn):
                    update.add_column(change.path, change.field_type, required=False)
                elif isinstance(change, Promote):
                    update.update_column(change.path, field_type=change.field_type)
                elif isinstance(change, MakeOptional):
                    update.make_column_optional(change.path)
        schema_id = tx.table_metadata.current_schema_id
        tx.set_properties({SCHEMA_CHANGE_PREFIX + self.job_id: schema_change_value(self._checkpoint, schema_id)})
        return protocol.Applied(None, tx.commit_transaction())

    def find(self, table: Table) -> protocol.Found | None:
        try:
            left = self.planned(table)
        except SchemaMismatchError:  # another job's change since: the next attempt's check refuses
            return None
        return None if left else protocol.Found(None)  # every change is there


def evolve(
    table: Table,
    *,
    job_id: str,
    checkpoint_id: int,
    incoming: StructType,
    mode: str,
    load: Callable[[], Table],
    policy: RetryPolicy,
    ignore: Collection[str] = (),
    nulls_in: Collection[str] = (),
    sleep: Callable[[float], None] = time.sleep,
) -> Table:
    """``table`` with the columns of ``incoming`` under ``mode`` (itself when nothing is
    to change); see the module.

    Raises:
        SchemaMismatchError: what the mode cannot change; nothing was changed.
        CommitConflictError / CommitStateUnknownError: as every operation of the protocol.
    """
    name = ".".join(table.name())
    operation = EvolveSchema(
        name, job_id=job_id, checkpoint_id=checkpoint_id, incoming=incoming, mode=mode, ignore=ignore,
        nulls_in=nulls_in,
    )  # fmt: skip
    if not operation.planned(table):
        return table
    outcome = protocol.run(operation, base=table, load=load, policy=policy, sleep=sleep)
    if operation.changes and not outcome.found_before:
        logger.info("%s: %s", operation.label, ", ".join(str(c) for c in operation.changes))
    return outcome.table if outcome.table is not None else load()


def evolve_schema(
    catalog: Catalog,
    table: Table | str,
    schema: pa.Schema | Schema,
    *,
    job_id: str,
    checkpoint_id: int,
    schema_mode: str | None = None,
    retry_policy: RetryPolicy | None = None,
) -> Table:
    """The driver's step before its own tasks write a checkpoint (``write_arrow``, or a
    ``SparkWriter`` of its own): commit the change the rows of ``schema`` need in the table
    under ``schema_mode`` (None: the table's ``icecommit.schema-mode``, else ``strict``,
    which changes nothing) as checkpoint ``checkpoint_id`` of ``job_id``, and return the
    table as it is now, whose field ids the tasks then write with. ``ic.write`` does this
    itself.

    Raises:
        SchemaMismatchError: what the mode cannot change; the table is as it was.
        InvalidArgumentError: an unknown mode.
    """
    loaded = load_table(catalog, table)
    mode = checked_mode(schema_mode, loaded.metadata.properties)
    name = ".".join(loaded.name())
    return evolve(
        loaded, job_id=checked_job_id(job_id), checkpoint_id=checked_checkpoint_id(checkpoint_id),
        incoming=to_iceberg_schema(schema).as_struct(), mode=mode, load=lambda: load_table(catalog, name),
        policy=retry_policy or RetryPolicy.from_properties(loaded.metadata.properties),
    )  # fmt: skip


class SchemaEvolver:
    """The schema change a driver's own ``SparkWriter`` commits before its tasks write:
    ``SparkWriter(table, job_id="j", schema_mode="add-columns", evolve=SchemaEvolver(catalog))``
    (a :class:`~icecommit.writers.spark.SchemaEvolution`; see :func:`evolve_schema`)."""

    def __init__(self, catalog: Catalog, *, retry_policy: RetryPolicy | None = None) -> None:
        self._catalog = catalog
        self._retry_policy = retry_policy

    def __call__(self, table: Table, incoming: Schema, *, job_id: str, checkpoint_id: int, schema_mode: str) -> Table:
        return evolve_schema(
            self._catalog, table, incoming, job_id=job_id, checkpoint_id=checkpoint_id, schema_mode=schema_mode,
            retry_policy=self._retry_policy,
        )  # fmt: skip


def create_for_checkpoint(
    catalog: Catalog,
    name: str,
    schema: pa.Schema,
    *,
    job_id: str,
    checkpoint_id: int,
    partition_by: Sequence[str] | None,
    properties: Mapping[str, str],
    identifier_fields: Sequence[str] | None,
) -> Table:
    """The table ``name``, created from ``schema`` (every column optional but the
    identifier fields) when it does not exist, recording ``job_id:checkpoint_id`` as its
    creator; a table another creator (or an earlier attempt of this one) made is taken as
    it is, whatever its columns: the write's schema mode then evolves or refuses them."""
    try:
        return load_table(catalog, name)
    except TableNotFoundError:
        pass
    keys = set(identifier_fields or ())
    columns = pa.schema([f.with_nullable(f.name not in keys) for f in schema])
    created_by = {CREATED_BY_PROPERTY: f"{job_id}:{checkpoint_id}"}
    partitions = list(partition_by or [])
    asked = new_table(
        name, columns, partitions, identifier_fields=identifier_fields, properties={**properties, **created_by}
    )
    return create(catalog, asked, existing="any", creator=f"checkpoint {checkpoint_id} of job {job_id!r}")
