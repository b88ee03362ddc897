"""Which state database holds a table's checkpoints.

A state database has an identity, made with its schema (``icecommit_state_identity``). The
committer records it on every table it prepares for (table properties ``icecommit.state.id``
and, for people, ``icecommit.state.uri`` with the password hidden), and every entry point that
relies on the table's checkpoints (the committer, ``expire``, ``orphans``, ``reconcile``)
checks that the database it opened is that one. Compared by identity, not by URL: one database
reached by two URLs is one database, and two databases at one URL over time are two.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from sqlalchemy import Engine

from icecommit.core.errors import StateDatabaseMismatchError
from icecommit.state.checkpoints import CheckpointStore
from icecommit.state.database import shown_uri, state_engine, state_identity, state_uri

STATE_ID_PROPERTY = "icecommit.state.id"
STATE_URI_PROPERTY = "icecommit.state.uri"


def state_properties(engine: Engine) -> dict[str, str]:
    """The table properties that record ``engine``'s database as the table's state."""
    return {STATE_ID_PROPERTY: state_identity(engine), STATE_URI_PROPERTY: shown_uri(engine)}


def records_state(table: str, properties: Mapping[str, str], engine: Engine) -> bool:
    """True when the table records ``engine``'s database; False when it records none.

    Raises:
        StateDatabaseMismatchError: it records another one.
    """
    recorded = properties.get(STATE_ID_PROPERTY)
    if recorded is None:
        return False
    actual = state_identity(engine)
    if recorded != actual:
        raise StateDatabaseMismatchError(
            table,
            expected_id=recorded,
            expected_uri=properties.get(STATE_URI_PROPERTY, "unknown location"),
            actual_id=actual,
            uri=shown_uri(engine),
        )
    return True


def table_state(catalog: Catalog, table: Table) -> CheckpointStore:
    """The checkpoint store of ``table``, refused unless it is the state database the table
    records (a table that records none is taken to use the catalog's default).

    Raises:
        StateDatabaseUnavailableError: the state database cannot be reached.
        StateDatabaseMismatchError: the table records another state database.
    """
    store = CheckpointStore(state_engine(state_uri(catalog)))
    records_state(".".join(table.name()), table.metadata.properties, store.engine)
    return store
