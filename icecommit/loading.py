"""Loading a table by name, with an icecommit error when it is not there."""

from __future__ import annotations

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.table import Table

from icecommit.errors import TableNotFoundError
from icecommit.identifiers import table_name


def load_table(catalog: Catalog, table: Table | str) -> Table:
    """The table as the catalog has it now (a Table is reloaded by its name).

    Raises:
        InvalidArgumentError: not a table or a name of the form namespace.table.
        TableNotFoundError: the catalog has no such table; names the tables its
            namespace holds.
    """
    name = table_name(table)
    try:
        return catalog.load_table(name)
    except (NoSuchTableError, NoSuchNamespaceError) as e:
        namespace = name.rsplit(".", 1)[0]
        try:
            known = sorted(".".join(t) for t in catalog.list_tables(namespace))
            exists = True
        except NoSuchNamespaceError:
            known, exists = [], False
        raise TableNotFoundError(name, known, namespace_exists=exists) from e
