"""Finding an upsert's keys in data files: which rows of a file hold one of the keys.

The committer picks the candidate files (those whose partition and key column bounds can
hold a key) and the positions earlier delete files removed; the look-up reads each file's
key columns wherever the caller runs it: in the committer's process
(:func:`icecommit.catalog.data_file_keys.look_up_here`), or in Spark tasks
(:class:`icecommit.writers.spark_key_lookup.SparkKeyLookup`), which the committer cannot
import. Both are a :class:`KeyLookup`, and both join what they read with the keys by
:func:`rows_holding_keys`, a function of Arrow tables (no file is read here).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

#: The column of a data file's key rows that holds each row's position in the file.
POSITION_COLUMN = "__pos"
_FILE = "__file"

#: A file's rows that hold a key: their positions (sorted) and their keys.
Match = tuple[list[int], pa.Table]


class KeyLookup(Protocol):
    """Looks ``keys`` (a table of the key columns) up in each of the data ``files`` of
    ``table``, leaving out the positions in ``deleted`` (by path); returns the files that
    hold a key, by path."""

    def __call__(
        self, table: Table, files: Sequence[DataFile], keys: pa.Table, deleted: Mapping[str, Collection[int]]
    ) -> dict[str, Match]: ...


def rows_holding_keys(
    read: Sequence[pa.Table | None],
    paths: Sequence[str],
    keys: pa.Table,
    deleted: Mapping[str, Collection[int]],
) -> dict[str, Match]:
    """The rows of the data files ``paths`` that hold one of ``keys`` and are not among
    their ``deleted`` positions, by path (a file with none is left out): ``read`` holds,
    for each path in order, the file's key columns (named as the keys' columns) and each
    row's position (:data:`POSITION_COLUMN`), or None for a file without a key column;
    they are joined with the keys at once."""
    names = keys.column_names
    parts = [
        rows.append_column(_FILE, pa.array(np.full(len(rows), i, dtype=np.int32)))
        for i, rows in enumerate(read)
        if rows is not None and len(rows)
    ]
    if not parts:
        return {}
    matched = pa.concat_tables(parts).join(keys, keys=names, join_type="left semi")
    found: dict[str, Match] = {}
    for i in np.unique(matched.column(_FILE).to_numpy()):
        rows = matched.filter(pc.equal(matched.column(_FILE), i))
        gone = deleted.get(paths[i])
        if gone:
            rows = rows.filter(pc.invert(pc.is_in(rows.column(POSITION_COLUMN), pa.array(sorted(gone), pa.int64()))))
        if len(rows):
            found[paths[i]] = (sorted(rows.column(POSITION_COLUMN).to_pylist()), rows.select(names))
    return found


__all__ = ["POSITION_COLUMN", "KeyLookup", "Match", "rows_holding_keys"]
