"""Several tables' changes committed at once: all of them land, or none.

A SQL catalog (SQLite, PostgreSQL) keeps each table's metadata pointer in a row of its
``iceberg_tables``: :func:`commit_together` writes every table's new metadata file first,
then moves every pointer in one database transaction, each guarded by the pointer its
change was made on (as pyiceberg's ``commit_table`` guards one). A pointer that moved
meanwhile rolls the whole transaction back: :class:`CommitFailedException`, naming the
table, and no table changed. The metadata files written for a transaction that lost are
referenced by nothing; the orphan sweep removes them.

A REST catalog whose server lists ``POST /v1/{prefix}/transactions/commit`` in its
``/v1/config`` (Iceberg's ``CatalogHandlers.commitTransaction``, Polaris, Lakekeeper) gets
one ``transactions/commit`` request with every table's requirements and updates.

Which catalogs can (:func:`can_commit_together`): those two. Others are committed table
by table by the caller, or refused where the caller asked for one commit
(:func:`catalog_kind` names them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, NoSuchTableError, RESTError
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.serializers import FromInputFile, ToOutputFile
from pyiceberg.table import CommitTableRequest, CommitTableResponse, Namespace, Table, TableIdentifier
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import TableRequirement, TableUpdate, update_table_metadata
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from icecommit.catalog.loading import load_table
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.cuts import Cut, cut_of
from icecommit.core.errors import InvalidArgumentError
from icecommit.core.identifiers import checked_job_id, table_name
from icecommit.core.pyiceberg_internals import rest_endpoints, rest_session


@dataclass(frozen=True)
class TableChange:
    """One table's part of a commit: the table as its change was made on (its identifier),
    the requirements the catalog checks and the updates it applies."""

    table: Table
    requirements: tuple[TableRequirement, ...]
    updates: tuple[TableUpdate, ...]


#: The REST endpoint that commits several tables' changes at once (Iceberg 1.4's
#: ``transactions/commit``), as a server's ``/v1/config`` lists it.
TRANSACTIONS_ENDPOINT = "POST /v1/{prefix}/transactions/commit"


def can_commit_together(catalog: Catalog) -> bool:
    """Whether :func:`commit_together` can commit several tables of ``catalog`` at once: a
    SQL catalog, or a REST catalog whose server lists the transactions endpoint."""
    if isinstance(catalog, SqlCatalog):
        return True
    return isinstance(catalog, RestCatalog) and TRANSACTIONS_ENDPOINT in rest_endpoints(catalog)


def catalog_kind(catalog: Catalog) -> str:
    """The catalog's kind as errors name it: its class."""
    return type(catalog).__name__


def commit_together(
    catalog: Catalog, changes: Sequence[TableChange], *, fault: Callable[[str], None] | None = None
) -> list[CommitTableResponse]:
    """Commit ``changes`` (one per table) to ``catalog`` at once (see the module); the new
    metadata of each table, in order. ``fault``: called with each table's name once its new
    metadata file is written, before any pointer moves (tests crash there).

    Raises:
        CommitFailedException: a requirement does not hold, or another writer moved a
            table's pointer first; no table changed.
        NoSuchTableError: a table does not exist.
        TypeError: the catalog cannot (:func:`can_commit_together`).
    """
    names = [change.table.name() for change in changes]
    if len(set(names)) != len(names):
        raise ValueError(f"one change per table: {names}")
    if isinstance(catalog, RestCatalog) and can_commit_together(catalog):
        return _rest_commit(catalog, changes)
    if not isinstance(catalog, SqlCatalog):
        raise TypeError(f"a {catalog_kind(catalog)} cannot commit several tables at once")
    staged = [_staged(catalog, change) for change in changes]
    for part in staged:  # every file first: a failure here changes no table
        ToOutputFile.table_metadata(part.response.metadata, part.io.new_output(part.response.metadata_location))
        if fault is not None:
            fault(f"{part.namespace}.{part.name}")
    with Session(catalog.engine) as session, session.begin():
        for part in staged:
            moved = session.execute(
                update(IcebergTables)
                .where(
                    IcebergTables.catalog_name == catalog.name,
                    IcebergTables.table_namespace == part.namespace,
                    IcebergTables.table_name == part.name,
                    IcebergTables.metadata_location == part.current.metadata_location,
                )
                .values(
                    metadata_location=part.response.metadata_location,
                    previous_metadata_location=part.current.metadata_location,
                )
            )
            if moved.rowcount != 1:  # type: ignore[attr-defined]
                # leaving the block with an error rolls every table's pointer back
                raise CommitFailedException(
                    f"Table has been updated by another process: {part.namespace}.{part.name} (no table changed)"
                )
    return [part.response for part in staged]


def _rest_commit(catalog: RestCatalog, changes: Sequence[TableChange]) -> list[CommitTableResponse]:
    """One ``transactions/commit`` request with every table's requirements and updates; the
    server commits all of them or none. Its answer carries no metadata: each table is
    loaded after it.

    Raises:
        CommitFailedException: a requirement does not hold (409): no table changed.
        CommitStateUnknownException: the server failed after it may have committed (5xx).
    """
    requests = []
    for change in changes:
        identifier = change.table.name()
        request = CommitTableRequest(
            identifier=TableIdentifier(namespace=Namespace(list(identifier[:-1])), name=identifier[-1]),
            requirements=change.requirements,
            updates=change.updates,
        )
        requests.append(json.loads(request.model_dump_json()))
    session = rest_session(catalog)
    response = session.post(
        catalog.url("transactions/commit", prefixed=True), data=json.dumps({"table-changes": requests}).encode()
    )
    if response.status_code == 409:
        raise CommitFailedException(f"transactions/commit: {response.text} (no table changed)")
    if response.status_code >= 500:
        raise CommitStateUnknownException(f"transactions/commit answered {response.status_code}: {response.text}")
    if response.status_code >= 300:
        raise RESTError(f"transactions/commit answered {response.status_code}: {response.text}")
    loaded = [catalog.load_table(change.table.name()) for change in changes]
    return [
        CommitTableResponse.model_validate({"metadata": t.metadata, "metadata-location": t.metadata_location})
        for t in loaded
    ]


@dataclass(frozen=True)
class _Staged:
    """A change applied to its table's current metadata: the new metadata and the location
    its file gets (written before the pointers move)."""

    namespace: str
    name: str
    current: Table
    response: CommitTableResponse

    @property
    def io(self) -> FileIO:
        return self.current.io


def _staged(catalog: SqlCatalog, change: TableChange) -> _Staged:
    identifier = change.table.name()
    namespace, name = Catalog.namespace_to_string(Catalog.namespace_from(identifier)), identifier[-1]
    current = catalog.load_table(identifier)
    for requirement in change.requirements:
        requirement.validate(current.metadata)
    metadata = update_table_metadata(
        base_metadata=current.metadata, updates=change.updates, metadata_location=current.metadata_location
    )
    version = _metadata_version(current.metadata_location) + 1
    location = load_location_provider(metadata.location, metadata.properties).new_table_metadata_file_location(version)
    response = CommitTableResponse.model_validate({"metadata": metadata, "metadata-location": location})
    return _Staged(namespace, name, current, response)


def read_together(catalog: Catalog, names: Sequence[str]) -> dict[str, TableMetadata]:
    """The metadata of the tables ``names`` (dotted), by name: on a SQL catalog, from one
    read of their pointers (one query: no commit lands between two tables' reads); on
    another catalog, loaded one after another.

    Raises:
        NoSuchTableError: a table does not exist.
    """
    if not isinstance(catalog, SqlCatalog):
        return {name: catalog.load_table(name).metadata for name in names}
    wanted = {(Catalog.namespace_to_string(Catalog.namespace_from(n)), Catalog.table_name_from(n)): n for n in names}
    with Session(catalog.engine) as session:
        rows = session.execute(
            select(IcebergTables.table_namespace, IcebergTables.table_name, IcebergTables.metadata_location).where(
                IcebergTables.catalog_name == catalog.name,
                IcebergTables.table_name.in_([name for _, name in wanted]),
            )
        ).all()
    pointers = {wanted[(ns, t)]: location for ns, t, location in rows if (ns, t) in wanted and location}
    missing = [n for n in names if n not in pointers]
    if missing:
        raise NoSuchTableError(f"Table does not exist: {missing[0]}")
    return {
        name: FromInputFile.table_metadata(load_file_io(catalog.properties, pointers[name]).new_input(pointers[name]))
        for name in names
    }


def consistent_cut(catalog: Catalog, tables: Sequence[str], *, job_id: str, branch: str = MAIN_BRANCH) -> Cut:
    """``ic.consistent_cut``: the newest checkpoint of ``job_id`` committed to every one of
    ``tables``, and each table's snapshot as of it (:func:`icecommit.core.cuts.cut_of`),
    from one read of the tables' pointers where the catalog allows it (a SQL catalog).
    Read each table at its snapshot id (Spark's ``snapshot-id`` read option, Java's
    ``useSnapshot``, pyiceberg's ``scan(snapshot_id=)``) to see them as of one checkpoint.

    Raises:
        InvalidArgumentError: no table, a name twice, or a bad job id.
        TableNotFoundError: a table does not exist.
    """
    names = [table_name(t) for t in tables] if not isinstance(tables, str) else []
    if not names or len(set(names)) != len(names):
        raise InvalidArgumentError("tables", tables, "a list of distinct table names (namespace.table)")
    checked_job_id(job_id)
    try:
        found = read_together(catalog, names)
    except NoSuchTableError:
        for name in names:
            load_table(catalog, name)  # the missing one raises TableNotFoundError, naming what there is
        raise
    return cut_of(found, job_id, branch)


def _metadata_version(location: str) -> int:
    """The version a metadata file's name starts with (``00003-<uuid>.metadata.json``: 3);
    -1 where it has none (its successor is then version 0)."""
    prefix = location.rsplit("/", 1)[-1].split("-", 1)[0]
    return int(prefix) if prefix.isdigit() else -1


__all__ = ["TableChange", "can_commit_together", "catalog_kind", "commit_together", "consistent_cut", "read_together"]
