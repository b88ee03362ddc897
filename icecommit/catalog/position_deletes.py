"""What position delete files say, read from them: which data files they point at, and
which rows.

A position delete file holds ``(file_path, pos)`` rows: the row at ``pos`` of the data
file ``file_path`` (spelled as the manifest spells it) is deleted. One file may point at
several data files (Spark's merge-on-read writes one per partition); icecommit's upserts
write one per data file, which its bounds tell without reading it
(:func:`icecommit.core.deletes.single_target`). Reconciliation counts the rows they remove
per data file, compaction plans by that count and drops the delete files whose data files
it rewrote.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFile

from icecommit.core.deletes import single_target


def referenced_rows(io: FileIO, delete_path: str) -> dict[str, int]:
    """Delete rows per data file path (as the delete file spells it) in one position
    delete file (read: only its ``file_path`` column)."""
    with io.new_input(delete_path).open() as stream:
        paths = pq.read_table(stream, columns=["file_path"]).column("file_path")
    return {str(item["values"]): int(item["counts"]) for item in pc.value_counts(paths).to_pylist()}


def targets(io: FileIO, delete: DataFile, known: dict[str, dict[str, int]] | None = None) -> dict[str, int]:
    """Delete rows per data file path of one position delete file: from its bounds when it
    points at one file, else read (``known`` caches what was read, by delete file path)."""
    only = single_target(delete)
    if only is not None:
        return {only: delete.record_count}
    cache = known if known is not None else {}
    if delete.file_path not in cache:
        cache[delete.file_path] = referenced_rows(io, delete.file_path)
    return cache[delete.file_path]


def positions_by_path(io: FileIO, delete_path: str) -> dict[str, np.ndarray]:
    """The deleted positions of each data file a position delete file points at (kept
    for the next caller: delete files never change; bounded by positions kept)."""
    with _LOCK:
        if delete_path in _READ:
            _READ.move_to_end(delete_path)
            return _READ[delete_path]
    found = _positions_by_path(io, delete_path)
    global _KEPT
    with _LOCK:
        if delete_path not in _READ:  # a running total, not a sum over every entry on each read
            _KEPT += sum(len(p) for p in found.values())
        _READ[delete_path] = found
        while _KEPT > KEPT_POSITIONS and len(_READ) > 1:
            _, dropped = _READ.popitem(last=False)
            _KEPT -= sum(len(p) for p in dropped.values())
    return found


_READ: OrderedDict[str, dict[str, np.ndarray]] = OrderedDict()
_LOCK = threading.Lock()
#: At most this many deleted positions are kept (8 bytes each).
KEPT_POSITIONS = 32 * 1024**2
_KEPT = 0


def _positions_by_path(io: FileIO, delete_path: str) -> dict[str, np.ndarray]:
    with io.new_input(delete_path).open() as stream:
        rows = pq.read_table(stream, columns=["file_path", "pos"])
    paths = rows.column("file_path").combine_chunks().dictionary_encode()
    positions = rows.column("pos").to_numpy()
    codes = paths.indices.to_numpy(zero_copy_only=False)
    return {str(path): positions[codes == i] for i, path in enumerate(paths.dictionary.to_pylist())}


def deleted_positions(
    io: FileIO, data_path: str, deletes: Iterable[DataFile], added_by: Mapping[str, int]
) -> dict[int, int]:
    """The deleted rows of one data file: position to the snapshot that deleted it
    (``added_by``: delete file path to the snapshot that added it). Where several delete
    files delete one row, the first given wins: pass them oldest first."""
    found: dict[int, int] = {}
    for delete in deletes:
        for pos in positions_by_path(io, delete.file_path).get(data_path, ()):
            found.setdefault(int(pos), added_by[delete.file_path])
    return found


__all__ = ["deleted_positions", "positions_by_path", "referenced_rows", "targets"]
