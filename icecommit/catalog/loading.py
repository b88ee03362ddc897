"""Loading a table by name, with an icecommit error when it is not there."""

from __future__ import annotations

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import (
    AuthorizationExpiredError,
    ForbiddenError,
    NoSuchNamespaceError,
    NoSuchTableError,
    OAuthError,
    UnauthorizedError,
)
from pyiceberg.exceptions import ValidationError as PyIcebergValidationError
from pyiceberg.table import Table
from sqlalchemy.exc import SQLAlchemyError

from icecommit.core.connections import REST_TRANSIENT, connection_retry, retry_transient
from icecommit.core.errors import CatalogUnavailableError, TableNotFoundError, TableSpecError
from icecommit.core.identifiers import table_name
from icecommit.state.database import briefly, shown_uri


def load_table(catalog: Catalog, table: Table | str) -> Table:
    """The table as the catalog has it now (a Table is reloaded by its name).

    Raises:
        InvalidArgumentError: not a table or a name of the form namespace.table.
        TableNotFoundError: the catalog has no such table; names the tables its
            namespace holds.
        TableSpecError: its metadata file is missing or cannot be parsed.
        CatalogUnavailableError: the catalog could not be reached (a transient failure
            such as a dropped connection or a REST server's 503 is retried first, with
            bounded backoff), or it refused the credentials.
    """
    name = table_name(table)
    policy = connection_retry()  # a bad setting is its own error, not the table's metadata
    try:
        return retry_transient(
            lambda _: catalog.load_table(name), what=f"catalog {_where(catalog)}: loading {name}", policy=policy
        )
    except (UnauthorizedError, AuthorizationExpiredError, ForbiddenError, OAuthError) as e:
        raise CatalogUnavailableError(
            _where(catalog), f"refused access to {name}: {briefly(e)}; check the catalog's credentials"
        ) from e
    except (SQLAlchemyError, ConnectionError, *REST_TRANSIENT) as e:  # before OSError: a ConnectionError is one
        raise unreachable(catalog, e, f"table {name} could not be loaded") from e
    except (NoSuchTableError, NoSuchNamespaceError) as e:
        namespace = name.rsplit(".", 1)[0]
        try:
            known = sorted(".".join(t) for t in catalog.list_tables(namespace))
            exists = True
        except NoSuchNamespaceError:
            known, exists = [], False
        raise TableNotFoundError(name, known, namespace_exists=exists, catalog=_where(catalog)) from e
    except (OSError, ValueError, PyIcebergValidationError) as e:  # a metadata file missing, cut short or corrupt
        raise TableSpecError(name, f"its metadata cannot be read: {type(e).__name__}: {_first_line(e)}") from e


def unreachable(catalog: Catalog, error: BaseException, then: str) -> CatalogUnavailableError:
    """The error of a catalog that failed to answer (its retries spent): what failed, and
    what it means for the caller (``then``)."""
    return CatalogUnavailableError(_where(catalog), f"failed: {briefly(error)}; {then}: run again once it is reachable")


def _where(catalog: Catalog) -> str:
    uri = catalog.properties.get("uri")
    return f"{catalog.name} ({shown_uri(uri)})" if uri else catalog.name


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
