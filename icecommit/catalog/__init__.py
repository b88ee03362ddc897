"""Catalog access and table creation."""

from icecommit.catalog.connect import connect, icecommit_home
from icecommit.catalog.tables import create_table, parse_transform, resolve_table, table_name

__all__ = ["connect", "create_table", "icecommit_home", "parse_transform", "resolve_table", "table_name"]
