"""Catalog access: the embedded default, a SQL URI, or any pyiceberg-configured catalog."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.catalog.sql import SqlCatalog

from icecommit.settings import ENV_URI, ENV_WAREHOUSE, icecommit_home

logger = logging.getLogger(__name__)

DEFAULT_CATALOG_NAME = "icecommit"


def _default_uri() -> str:
    home = icecommit_home()
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'catalog.db'}"


def _file_uri(path: Path) -> str:
    """``file://`` + the path as it is: pyiceberg uses a location literally, so a
    percent-encoded URI (``Path.as_uri``) would put a folder named ``my%20warehouse`` where
    the user asked for ``my warehouse``."""
    return f"file://{path}"


def _default_warehouse() -> str:
    home = icecommit_home()
    home.mkdir(parents=True, exist_ok=True)
    return _file_uri(home)


def _normalise_warehouse(warehouse: str) -> str:
    if "://" in warehouse:
        return warehouse
    path = Path(warehouse).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return _file_uri(path)


def connect(
    name: str | None = None,
    *,
    uri: str | None = None,
    warehouse: str | None = None,
    **properties: str,
) -> Catalog:
    """Open a catalog.

    Resolution order: explicit arguments, then the environment variables
    ``ICECOMMIT_CATALOG_URI`` and ``ICECOMMIT_WAREHOUSE``, then the embedded default (a
    SQLite catalog and a local warehouse under ``./warehouse/`` or ``$ICECOMMIT_HOME``).
    With ``name`` and no URI from the arguments or the environment, the catalog is
    loaded the pyiceberg way (``~/.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__<NAME>__*``).

    Args:
        name: catalog name; selects a pyiceberg-configured catalog when no URI is given.
        uri: SQLAlchemy URL of a SQL catalog (``sqlite:///...``, ``postgresql+psycopg://...``).
        warehouse: warehouse location (a local path or a URI such as ``s3://bucket/wh``).
        **properties: extra catalog properties passed to pyiceberg.

    Returns:
        A real ``pyiceberg.catalog.Catalog``.
    """
    resolved_uri = uri or os.environ.get(ENV_URI)
    resolved_warehouse = warehouse or os.environ.get(ENV_WAREHOUSE)
    if name is not None and resolved_uri is None:
        extra = dict(properties)
        if resolved_warehouse is not None:
            extra["warehouse"] = _normalise_warehouse(resolved_warehouse)
        logger.debug("loading pyiceberg-configured catalog %s", name)
        return load_catalog(name, **extra)
    catalog_uri = resolved_uri or _default_uri()
    catalog_warehouse = _normalise_warehouse(resolved_warehouse) if resolved_warehouse else _default_warehouse()
    logger.debug("opening SQL catalog %s at %s", name or DEFAULT_CATALOG_NAME, catalog_uri)
    return SqlCatalog(
        name or DEFAULT_CATALOG_NAME,
        uri=catalog_uri,
        warehouse=catalog_warehouse,
        **properties,
    )
