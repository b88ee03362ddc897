"""The write options the writers read, as they reach them: the caller's frozen options
object (``icecommit.WriteOptions`` is one), not field by field. A new option the tasks
need is a field of ``WriteOptions`` and one property here."""

from __future__ import annotations

from typing import Protocol


class WriterOptions(Protocol):
    """What a writer reads of the write's options."""

    @property
    def target_file_size(self) -> int | None:
        """Roll files at this many bytes (None: the table's ``write.target-file-size-bytes``)."""

    @property
    def distribution(self) -> str | None:
        """How rows reach the tasks (None: the table's ``write.distribution-mode``)."""

    @property
    def route_by(self) -> str | None:
        """The routing column of a routed write (None: one table)."""

    @property
    def dead_letter(self) -> str | None:
        """The table that takes a routed write's rows of no route."""


__all__ = ["WriterOptions"]
