"""The write options of ``ic.write``, the routed writer and the streaming sink, defined once.

:class:`WriteOptions` is a frozen value: it holds configuration (names, numbers, policies),
never a session, a catalog object or a connection, so a streaming sink that carries it can
be pickled (Spark Connect's ``foreachBatch``). ``ic.write(..., branch="b")`` and
``ic.write(..., options=WriteOptions(branch="b"))`` are the same call; a keyword given
beside ``options`` overrides that field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pyiceberg.table import Table

from icecommit.committer.completion import PartitionCompleteness
from icecommit.core.errors import InvalidArgumentError
from icecommit.core.identifiers import checked_file_size, table_name
from icecommit.maintenance.policy import MaintenancePolicy


@dataclass(frozen=True)
class WriteOptions:
    """How a checkpoint is written and committed.

    Attributes:
        route_by: the column whose value picks the table, when ``table`` is a mapping of
            routing values to tables.
        dead_letter: the table that takes rows whose routing value maps to no table
            (created with the source's columns when missing); None fails the write with
            :class:`~icecommit.errors.UnroutedRecordsError` instead.
        branch: the branch to commit to.
        target_file_size: roll data files at this many bytes (default: the table's
            ``write.target-file-size-bytes``).
        recommit: commit again a checkpoint that a rollback removed (its staged files).
        completeness: when time partitions are published complete, and whom to tell.
        distribution: ``none``, ``hash`` or ``bin-pack``: how rows reach the writer tasks
            (None: the table's ``write.distribution-mode``, else ``hash`` for a partitioned
            table and ``none`` otherwise).
        maintenance: compaction and expiry to run after the commit (a failure there never
            undoes or fails the commit).
    """

    route_by: str | None = None
    dead_letter: str | None = None
    branch: str = "main"
    target_file_size: int | None = None
    recommit: bool = False
    completeness: PartitionCompleteness | None = None
    distribution: str | None = None
    maintenance: MaintenancePolicy | None = None

    def __post_init__(self) -> None:
        # the rest is checked where it is used, with the messages callers already know
        if self.dead_letter is not None:
            object.__setattr__(self, "dead_letter", table_name(self.dead_letter))
        checked_file_size(self.target_file_size)
        if self.maintenance is not None and not isinstance(self.maintenance, MaintenancePolicy):
            raise InvalidArgumentError("maintenance", self.maintenance, "an icecommit MaintenancePolicy, or None")

    @classmethod
    def of(cls, options: WriteOptions | None = None, **keywords: Any) -> WriteOptions:
        """``options`` (default: all defaults) with the fields ``keywords`` name replaced.

        Raises:
            InvalidArgumentError: a keyword that is no write option, or a value one cannot use.
        """
        if options is not None and not isinstance(options, WriteOptions):
            raise InvalidArgumentError("options", options, "an icecommit WriteOptions, or None")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(keywords) - known)
        if unknown:
            raise InvalidArgumentError(
                unknown[0], keywords[unknown[0]], f"a write option: one of {', '.join(sorted(known))}"
            )
        if isinstance(keywords.get("dead_letter"), Table):
            keywords["dead_letter"] = table_name(keywords["dead_letter"])
        return dataclasses.replace(options or cls(), **keywords)
