"""A table's creation: an operation of the one commit protocol (:mod:`.protocol`).

Creating a table is a compare-and-swap on a name: it lands only where the catalog has no
table of that name. While it has none, the operation works on the table asked for as
pyiceberg stages it (:func:`~icecommit.catalog.tables.staged_table`); once it has one, on
that table:

- check: a table of that name with the schema and partition spec asked for (field ids
  aside) is the creation found, and nothing is sent; one with others is refused with
  :class:`TableSpecError` (a write that creates its table takes any: its schema mode then
  decides about the columns);
- apply: the catalog's own create (with the namespace, when absent). Another creator that
  made the table first is a lost compare-and-swap: the retry policy has the next attempt
  check the table the winner made;
- find: after an error that does not prove the creation failed (an answer lost on the way
  back, a dropped connection), the table is looked for: there as asked, the creation landed
  (whoever made it). Not there, creating it again is safe: the attempt's own error is raised
  (:class:`CatalogUnavailableError` for a transient one).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, TableAlreadyExistsError
from pyiceberg.exceptions import ValidationError as PyIcebergValidationError
from pyiceberg.schema import Schema
from pyiceberg.table import StagedTable, Table

from icecommit.catalog.loading import load_table
from icecommit.catalog.tables import NewTable, check_own_location, difference, new_table, staged_table
from icecommit.committer import protocol
from icecommit.committer.retry import RetryPolicy
from icecommit.core.errors import TableNotFoundError, TableSpecError
from icecommit.state.database import briefly

logger = logging.getLogger(__name__)

#: Which existing table a creation takes as the one asked for: ``same``, one with the schema
#: and partition spec asked for (another is refused); ``any``, whatever its columns.
Existing = Literal["same", "any"]


class CreateTable(protocol.Operation):
    """Create the table ``asked`` for (see the module)."""

    kind = "creation"
    # made twice is made once (the second finds the first): a creation the table does not
    # show after an unknown outcome is reported by the attempt's own error
    idempotent = True
    # an error of the catalog's create does not say whether the table was made before it
    resolve_unsent = True
    remedy = "create it again: a table made meanwhile as asked is taken as it is"

    def __init__(self, asked: NewTable, *, existing: Existing = "same", creator: str | None = None) -> None:
        self.asked = asked
        self.table_name = asked.name
        self._existing = existing
        self._creator = creator

    @property
    def label(self) -> str:
        by = f" by {self._creator}" if self._creator else ""
        return f"creation of {self.table_name}{by}"

    def check(self, table: Table, number: int) -> protocol.Found | None:
        if isinstance(table, StagedTable):  # the catalog has no table of that name
            if self.asked.location is not None:
                check_own_location(table.catalog, self.table_name, self.asked.location)
            return None
        if self._existing == "same" and (different := difference(table, self.asked)) is not None:
            raise TableSpecError(self.table_name, different)
        return protocol.Found(None)

    def apply(self, table: Table) -> protocol.Applied:
        catalog = table.catalog  # the protocol's watch on the catalog
        namespace = self.asked.namespace
        if namespace:
            try:
                catalog.create_namespace_if_not_exists(namespace)
            except Exception:  # another process made it meanwhile (a SQL catalog's unique key says so)
                if not catalog.namespace_exists(namespace):
                    raise
        try:
            created = catalog.create_table(
                self.table_name,
                schema=self.asked.schema,
                partition_spec=self.asked.spec,
                properties=dict(self.asked.properties),
                location=self.asked.location,
            )
        except TableAlreadyExistsError as e:  # another creator won the name
            raise CommitFailedException(f"{self.table_name} was created by another meanwhile") from e
        except (ValueError, PyIcebergValidationError) as e:  # e.g. an unsupported format-version
            raise TableSpecError(self.table_name, f"cannot be created: {briefly(e)}") from e
        return protocol.Applied(None, created)

    def find(self, table: Table) -> protocol.Found | None:
        if isinstance(table, StagedTable):
            return None
        if self._existing == "same" and difference(table, self.asked) is not None:
            return None  # another creator's table: the next check refuses it
        return protocol.Found(None)


def current_table(catalog: Catalog, asked: NewTable) -> Table:
    """The table of ``asked``'s name as the catalog has it now; while it has none, the one
    asked for, staged (what :class:`CreateTable` works on)."""
    try:
        return load_table(catalog, asked.name)
    except TableNotFoundError:
        return staged_table(catalog, asked)


def create(
    catalog: Catalog,
    asked: NewTable,
    *,
    existing: Existing = "same",
    creator: str | None = None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Table:
    """The table ``asked`` for, created through the commit protocol unless the catalog has
    it already (see the module); ``creator`` names who creates it in logs and errors.
    ``policy``: None is Iceberg's defaults (the ``commit.retry.*`` properties asked for
    are the table's, read by its commits once it exists).

    Raises:
        TableSpecError: a table of that name with another schema or partition spec (with
            ``existing="same"``), or metadata pyiceberg cannot make.
        UnsafeLocationError: see :func:`~icecommit.catalog.tables.check_own_location`.
        CatalogUnavailableError: the catalog could not be reached, and the table is not there.
        CommitConflictError: the catalog refused every attempt the policy allowed as a conflict.
        CommitStateUnknownError: an attempt's outcome is unknown and the table could not be read.
    """
    operation = CreateTable(asked, existing=existing, creator=creator)
    outcome = protocol.run(
        operation,
        base=current_table(catalog, asked),
        load=lambda: current_table(catalog, asked),
        policy=policy or RetryPolicy(),
        sleep=sleep,
    )
    if not outcome.found_before:
        how = "found after an unknown outcome" if outcome.recovered else "created"
        logger.info("%s: %s", operation.label, how)
    return outcome.table if outcome.table is not None else load_table(catalog, asked.name)


def create_table(
    catalog: Catalog,
    name: str,
    schema: pa.Schema | Schema,
    partition_by: Sequence[str] | None = None,
    *,
    properties: Mapping[str, str] | None = None,
    location: str | None = None,
    identifier_fields: Sequence[str] | None = None,
) -> Table:
    """Create a table, or return the existing one if it has the same schema and spec.

    The creation is an operation of icecommit's commit protocol: a creator that loses the
    race to another takes the table the other made (when it has the schema and spec asked
    for), and an answer lost after the catalog made the table is resolved by looking for it.

    Args:
        catalog: the catalog to create the table in.
        name: ``namespace.table``; the namespace is created if absent.
        schema: a pyarrow schema (ids are assigned) or a pyiceberg schema.
        partition_by: Iceberg transform strings, e.g. ``["day(ts)", "event"]``.
        properties: table properties (``write.target-file-size-bytes`` ...). The state
            database that holds the table's checkpoints is recorded by the first prepare.
            ``write.parquet.compression-codec`` defaults to ``zstd`` (what icecommit
            writes), set on the table so that other engines' writers use it too.
        location: table location; the warehouse default when absent.
        identifier_fields: the columns that identify a row (the key of upserts); they are
            made required, as Iceberg requires of identifier fields.

    Raises:
        TableSpecError: an unknown transform or column, an existing table whose schema
            or partition spec differs from the one asked for, or a name whose location
            would nest in or escape from another (``/``, ``\\``, ``%``, ``.``/``..`` parts).
        UnsafeLocationError: a ``location`` that is the warehouse root or contains it, or
            that contains, or lies inside, another table's location.
        CatalogUnavailableError: the catalog could not be reached and the table is not there
            (creating it again is safe).
    """
    asked = new_table(
        name, schema, partition_by, properties=properties, location=location, identifier_fields=identifier_fields
    )
    return create(catalog, asked)
