"""Write modes by name (``mode=``, or the table property ``icecommit.write-mode``).

A mode's own rules live with it (:mod:`icecommit.core.overwrite`,
:mod:`icecommit.core.upsert`); which modes exist is the committer's registry
(:mod:`icecommit.committer.modes`). This module holds what every mode shares: the
default, the property, and the summary key that names a snapshot's mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from icecommit.core.choices import chosen

#: The default mode: the checkpoint's rows join the table.
APPEND = "append"
#: The table property that sets the default mode of writes into the table, and the
#: snapshot summary key that names the mode of a snapshot that is not an append.
WRITE_MODE_PROPERTY = "icecommit.write-mode"


def checked_write_mode(mode: str | None, properties: Mapping[str, str] | None, known: Sequence[str]) -> str:
    """The mode a write uses: ``mode``, else the table's ``icecommit.write-mode``, else
    append; one of ``known``.

    Raises:
        InvalidArgumentError: a mode (argument or property) that is not ``known``.
    """
    return chosen("mode", mode, tuple(known), prop=WRITE_MODE_PROPERTY, properties=properties, default=APPEND)


__all__ = ["APPEND", "WRITE_MODE_PROPERTY", "checked_write_mode"]
