"""Catalog access: the embedded default, a SQL URI, or any pyiceberg-configured catalog."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.utils.config import Config
from sqlalchemy import inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from icecommit.catalog.fileio import IO_IMPL, IO_IMPL_PROPERTY
from icecommit.core.errors import CatalogUnavailableError, InvalidArgumentError
from icecommit.core.settings import ENV_CATALOG, ENV_URI, ENV_WAREHOUSE
from icecommit.state.database import briefly, missing_driver, shown_uri
from icecommit.state.home import icecommit_home

logger = logging.getLogger(__name__)

DEFAULT_CATALOG_NAME = "icecommit"


def _default_uri(create: bool = True) -> str:
    home = icecommit_home()
    if create:
        home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'catalog.db'}"


def _file_uri(path: Path) -> str:
    """``file://`` + the path as it is: pyiceberg uses a location literally, so a
    percent-encoded URI (``Path.as_uri``) would put a folder named ``my%20warehouse`` where
    the user asked for ``my warehouse``."""
    return f"file://{path}"


def _default_warehouse(create: bool = True) -> str:
    home = icecommit_home()
    if create:
        home.mkdir(parents=True, exist_ok=True)
    return _file_uri(home)


def _normalise_warehouse(warehouse: str, create: bool = True) -> str:
    if "://" in warehouse:
        return warehouse
    path = Path(warehouse).resolve()
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return _file_uri(path)


def _embedded_uri_in(warehouse: str, create: bool) -> str:
    """The embedded catalog's database inside a local warehouse folder.

    Raises:
        CatalogUnavailableError: the warehouse is not local (an embedded SQLite catalog
            cannot live in object storage): a SQL catalog URI must go with it.
    """
    if "://" in warehouse and not warehouse.startswith("file://"):
        raise CatalogUnavailableError(
            warehouse,
            "is not a local folder, and the embedded catalog keeps its database beside the warehouse; "
            "give a catalog URI with it (--uri / ICECOMMIT_CATALOG_URI, e.g. postgresql+psycopg://...)",
        )
    folder = Path(warehouse.removeprefix("file://")).resolve()
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'catalog.db'}"


#: Warehouse schemes pyiceberg serves with pyarrow's FileIO, which UniqueNamesFileIO extends
#: (others, such as ``abfs://`` or ``hf://``, keep the FileIO pyiceberg picks for them).
_PYARROW_SCHEMES = ("s3", "s3a", "s3n", "gs", "file", "hdfs", "viewfs", "oss")


def _catalog_defaults(uri: str, warehouse: str = "") -> dict[str, str]:
    """The catalog properties icecommit sets where the caller sets none: a server
    database's pooled connections checked before use (a connection the server or the
    network dropped is replaced, not failed on), and, for a warehouse pyarrow serves, the
    FileIO that writes new files without probing for them first
    (:mod:`icecommit.catalog.fileio`: no LIST on S3)."""
    scheme = warehouse.split("://", 1)[0] if "://" in warehouse else "file"
    defaults = {IO_IMPL_PROPERTY: IO_IMPL} if scheme in _PYARROW_SCHEMES else {}
    return defaults if uri.startswith("sqlite") else {**defaults, "pool_pre_ping": "true"}


def _with_defaults(catalog: Catalog) -> Catalog:
    """A SQL catalog loaded the pyiceberg way, with icecommit's defaults (:func:`_catalog_defaults`)
    where its configuration sets none: the same catalog behaves the same by name and by URI.
    Its engine is made again when a default changes how it connects."""
    if not isinstance(catalog, SqlCatalog):
        return catalog
    props = catalog.properties
    missing = {
        k: v
        for k, v in _catalog_defaults(str(props.get("uri", "")), str(props.get("warehouse", ""))).items()
        if k not in props
    }
    if not missing:
        return catalog
    if "pool_pre_ping" not in missing:
        props.update(missing)  # read when a table's FileIO is made, later
        return catalog
    catalog.engine.dispose()
    return SqlCatalog(catalog.name, **{**missing, **props, "init_catalog_tables": "false"})


#: What a catalog URI may be, for a message that refuses one.
_URI_FORMS = "a database URL (sqlite:///path/catalog.db, postgresql+psycopg://user@host/db) or a REST catalog's https://..."


def _database_url(uri: str) -> Any:
    """``uri`` parsed as a SQLAlchemy URL.

    Raises:
        InvalidArgumentError: it is not one (a typo, a path): bad input, not a failure of
            the environment.
    """
    try:
        return make_url(uri)
    except SQLAlchemyError as e:
        raise InvalidArgumentError("uri", shown_uri(uri), _URI_FORMS) from e


def configured(name: str) -> dict[str, Any] | None:
    """The pyiceberg configuration of catalog ``name`` (``~/.pyiceberg.yaml`` under the
    environment's ``PYICEBERG_CATALOG__<NAME>__*``), or None where neither names it."""
    found = Config().get_catalog_config(name)
    return dict(found) if isinstance(found, dict) else None


def check_name_and_uri(name: str | None, uri: str | None) -> None:
    """Refuse a catalog name and a URI that disagree (the command line's ``--catalog`` and
    ``--uri``: which one the user meant cannot be guessed; ``connect`` lets the URI win).

    Raises:
        InvalidArgumentError: ``name`` is configured with another URI.
    """
    if name is None or uri is None:
        return
    known = configured(name)
    if known is not None and known.get("uri") and str(known["uri"]) != uri:
        raise InvalidArgumentError(
            "uri", shown_uri(uri), f"the URI catalog {name} is configured with ({shown_uri(str(known['uri']))}), "
            "or the catalog name alone, or the URI alone",
        )  # fmt: skip


def _where_configured(name: str) -> str:
    """Where pyiceberg (and so icecommit) looks for catalog ``name``'s configuration."""
    folders = [os.environ.get("PYICEBERG_HOME"), os.path.expanduser("~"), os.getcwd()]
    files = " or ".join(str(Path(f) / ".pyiceberg.yaml") for f in dict.fromkeys(f for f in folders if f))
    return f"no catalog.{name.lower()} in {files}, and no PYICEBERG_CATALOG__{name.upper()}__* variable"


def _is_sql(config: dict[str, Any]) -> bool:
    """A configured catalog pyiceberg opens as a SQL catalog (its type, else its URI's scheme)."""
    kind = config.get("type")
    if kind is not None:
        return str(kind).lower() == "sql"
    scheme = str(config.get("uri", "")).split(":", 1)[0].lower()
    return bool(scheme) and scheme not in ("http", "https", "thrift")


def _open_existing(name: str, uri: str, warehouse: str, properties: dict[str, str]) -> SqlCatalog:
    """A SQL catalog that must exist already: nothing is created, not even an empty file."""
    shown = shown_uri(uri)
    url = _database_url(uri)
    sqlite_file = url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:")
    if sqlite_file and not Path(str(url.database)).is_file():
        raise CatalogUnavailableError(shown, "does not exist (nothing was created)")
    try:
        catalog = SqlCatalog(
            name,
            uri=uri,
            warehouse=warehouse,
            **{"init_catalog_tables": "false", **_catalog_defaults(uri, warehouse), **properties},
        )
        present = inspect(catalog.engine).has_table("iceberg_tables")
    except (SQLAlchemyError, ImportError) as e:  # ImportError: the URL's database driver is not installed
        raise CatalogUnavailableError(shown, missing_driver(e) or f"cannot be opened: {briefly(e)}") from e
    if not present:
        catalog.engine.dispose()
        raise CatalogUnavailableError(shown, "holds no Iceberg catalog (nothing was created)")
    return catalog


def connect(
    name: str | None = None,
    *,
    uri: str | None = None,
    warehouse: str | None = None,
    create: bool = True,
    **properties: str,
) -> Catalog:
    """Open a catalog.

    Resolution order (the table "Which settings win" of ``docs/production.md``): explicit
    arguments, then a catalog ``name`` (else the name ``ICECOMMIT_CATALOG`` holds) loaded
    the pyiceberg way, then the environment
    variables ``ICECOMMIT_CATALOG_URI`` and ``ICECOMMIT_WAREHOUSE``, then the embedded default: a
    SQLite catalog and a local warehouse together in ``$ICECOMMIT_HOME``, or in the per-user
    ``~/.local/share/icecommit`` (``$XDG_DATA_HOME/icecommit``) whatever the working
    directory (a catalog an earlier version made in ``./warehouse`` is still used, with a
    notice). A warehouse given without a URI holds the embedded catalog too (moving one
    moves both); a remote warehouse needs a URI.
    With ``name`` and no ``uri``, the catalog is loaded the pyiceberg way
    (``PYICEBERG_CATALOG__<NAME>__*`` over ``~/.pyiceberg.yaml``); the environment's
    ``ICECOMMIT_CATALOG_URI`` and ``ICECOMMIT_WAREHOUSE`` do not apply to it.
    An ``http(s)://`` URI, or a ``type`` property other than ``sql``, is a REST (or other
    pyiceberg) catalog, loaded the pyiceberg way with that URI; its state database is
    named by the property ``icecommit.state-uri`` or ``ICECOMMIT_STATE_URI`` (a REST catalog
    keeps no database icecommit could use).

    Args:
        name: catalog name; selects a pyiceberg-configured catalog when no URI is given.
        uri: SQLAlchemy URL of a SQL catalog (``sqlite:///...``, ``postgresql+psycopg://...``),
            or a REST catalog's ``https://...``.
        warehouse: warehouse location (a local path or a URI such as ``s3://bucket/wh``).
        create: make the catalog (its database file, its tables, the warehouse folder)
            when it does not exist; with False, a catalog that does not exist is an error.
        **properties: extra catalog properties passed to pyiceberg.

    Returns:
        A real ``pyiceberg.catalog.Catalog``.

    Raises:
        CatalogUnavailableError: the catalog cannot be opened (with ``create=False``, also
            when it does not exist); names the URI (password hidden) or the catalog name.
    """
    for argument, value in (("uri", uri), ("warehouse", warehouse), ("name", name)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidArgumentError(argument, value, "a non-empty string, or None for the default")
    # no catalog given at all: the one ICECOMMIT_CATALOG names (a default catalog by name)
    from_environment = name is None and uri is None and bool(os.environ.get(ENV_CATALOG))
    if name is None and uri is None:
        name = os.environ.get(ENV_CATALOG) or None
    # a catalog named here is the one pyiceberg's configuration names: the environment's
    # defaults (meant for the unnamed catalog) do not override it
    resolved_uri = uri or (os.environ.get(ENV_URI) if name is None else None)
    resolved_warehouse = warehouse or (os.environ.get(ENV_WAREHOUSE) if name is None else None)
    try:
        return _connect(name, resolved_uri, resolved_warehouse, create, properties)
    except CatalogUnavailableError as e:
        if from_environment:  # a name the caller never typed: say where it came from
            raise CatalogUnavailableError(f"{e.uri} (named by {ENV_CATALOG})", e.reason) from e.__cause__ or e
        raise
    except OSError as e:  # a warehouse or home folder that cannot be made (a file in the way, no permission)
        where = resolved_warehouse or str(icecommit_home())
        raise CatalogUnavailableError(where, f"its folder cannot be made: {e.strerror or e}") from e


def _served(uri: str | None, properties: dict[str, str]) -> bool:
    """A REST catalog: a ``type`` of ``rest``, or an ``http(s)://`` URI (never a database URL)."""
    kind = str(properties.get("type", "")).lower()
    return kind == "rest" or (not kind and uri is not None and uri.split("://", 1)[0].lower() in ("http", "https"))


def _is_rest(uri: str | None, properties: dict[str, str]) -> bool:
    """A REST catalog, or a catalog whose ``type`` says it is not a SQL one: its ``uri`` is
    pyiceberg's, not a SQLAlchemy URL."""
    kind = properties.get("type")
    return kind.lower() != "sql" if kind is not None else _served(uri, properties)


def _connect(
    name: str | None,
    resolved_uri: str | None,
    resolved_warehouse: str | None,
    create: bool,
    properties: dict[str, str],
) -> Catalog:
    rest = _is_rest(resolved_uri, properties)
    if name is not None and resolved_uri is None and not rest:
        config = configured(name)
        if config is None and "uri" not in properties:
            raise CatalogUnavailableError(f"catalog {name}", f"is not configured: {_where_configured(name)}")
        if config is not None and not create and _is_sql({**config, **properties}):
            # opened as it is: pyiceberg's SQL catalog would make its database and tables
            settings = {**config, **properties}
            uri = str(settings.pop("uri", ""))
            if not uri:
                raise CatalogUnavailableError(f"catalog {name}", "is configured without a uri")
            settings.pop("type", None)
            configured_warehouse = settings.pop("warehouse", None)
            where = resolved_warehouse or (str(configured_warehouse) if configured_warehouse else None)
            return _open_existing(
                name,
                uri,
                _normalise_warehouse(where, create) if where else _default_warehouse(create),
                {k: str(v) for k, v in settings.items()},
            )
    if (name is not None and resolved_uri is None) or rest:
        extra = dict(properties)
        if rest and resolved_uri is not None:
            extra = {"type": "rest", **extra, "uri": resolved_uri}
        if resolved_warehouse is not None:
            # a REST server names its warehouse as it likes (Polaris: a catalog name), not a path
            served = _served(resolved_uri, properties)
            extra["warehouse"] = resolved_warehouse if served else _normalise_warehouse(resolved_warehouse, create)
        shown = f"catalog {name or DEFAULT_CATALOG_NAME}"
        logger.debug("loading pyiceberg-configured %s", shown)
        try:
            return _with_defaults(load_catalog(name or DEFAULT_CATALOG_NAME, **extra))
        except Exception as e:  # pyiceberg raises many kinds here (configuration, connection)
            where = f"{shown} ({shown_uri(resolved_uri)})" if resolved_uri else shown
            raise CatalogUnavailableError(where, f"cannot be loaded: {type(e).__name__}: {e}") from e
    if resolved_uri is None and resolved_warehouse is not None:
        # the embedded catalog keeps its database in the warehouse folder: moving one moves both
        catalog_uri = _embedded_uri_in(resolved_warehouse, create)
    else:
        catalog_uri = resolved_uri or _default_uri(create)
    catalog_warehouse = (
        _normalise_warehouse(resolved_warehouse, create) if resolved_warehouse else _default_warehouse(create)
    )
    logger.debug("opening SQL catalog %s at %s", name or DEFAULT_CATALOG_NAME, shown_uri(catalog_uri))
    _database_url(catalog_uri)
    if not create:
        return _open_existing(name or DEFAULT_CATALOG_NAME, catalog_uri, catalog_warehouse, properties)
    try:
        return SqlCatalog(
            name or DEFAULT_CATALOG_NAME,
            uri=catalog_uri,
            warehouse=catalog_warehouse,
            **{**_catalog_defaults(catalog_uri, catalog_warehouse), **properties},
        )
    except (SQLAlchemyError, ImportError) as e:  # ImportError: the database driver is not installed
        reason = missing_driver(e) or f"cannot be opened: {briefly(e)}"
        raise CatalogUnavailableError(shown_uri(catalog_uri), reason) from e
