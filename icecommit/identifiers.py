"""Table identifiers (facts, no I/O)."""

from __future__ import annotations

from pyiceberg.table import Table


def table_name(table: Table | str) -> str:
    """The dotted identifier of a table."""
    return table if isinstance(table, str) else ".".join(table.name())
