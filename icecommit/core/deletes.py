"""What a position delete file's bounds say about the data files it points at.

A position delete file holds ``(file_path, pos)`` rows: the row at ``pos`` of the data
file ``file_path`` (spelled as the manifest spells it) is deleted. One file may point at
several data files (Spark's merge-on-read writes one per partition); icecommit's upserts
write one per data file, and its ``file_path`` bounds then say which without reading it.
Reading the files themselves is :mod:`icecommit.catalog.position_deletes`.
"""

from __future__ import annotations

from pyiceberg.manifest import DataFile

from icecommit.core.upsert import DELETE_FILE_PATH_ID


def single_target(delete: DataFile) -> str | None:
    """The one data file a position delete file points at, when its ``file_path`` bounds
    say so (lower = upper; icecommit's own delete files are written that way), else None."""
    lower = (delete.lower_bounds or {}).get(DELETE_FILE_PATH_ID)
    upper = (delete.upper_bounds or {}).get(DELETE_FILE_PATH_ID)
    if lower is None or lower != upper:
        return None
    return bytes(lower).decode("utf-8")


__all__ = ["single_target"]
