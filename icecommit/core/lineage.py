"""Where a checkpoint's rows went after its own files left the table.

A checkpoint's rows stay readable when its files are rewritten by a ``replace`` snapshot
(compaction, by icecommit or another engine's ``rewrite_data_files``) that conserves the
record count: the rows live on in the files that snapshot added. An ``overwrite`` or
``delete`` snapshot removes rows on purpose: the rows missing from the files it added (a
copy-on-write delete rewrites a file without the deleted rows) are removed by it, not lost.
Where one such snapshot rewrote files of several checkpoints, its added files cannot be
told apart by checkpoint: the rows kept and removed are shared among the removed files in
proportion to their records, which keeps every total exact. This
module follows each of a checkpoint's files through the retained snapshots of the branch
that removed it, and says how many of its rows are readable, removed (and by which
snapshot), or untraceable (the snapshot that removed them was expired since).

:func:`trace_fates` is pure over :class:`Removal` records;
:func:`icecommit.catalog.removals.removals_of` reads them from the table's retained snapshots.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TypeVar

from pyiceberg.table.metadata import TableMetadata

from icecommit.core import ancestry
from icecommit.core.paths import UnsupportedPathError, storage_key

K = TypeVar("K")
R = TypeVar("R")

#: The snapshot summary property holding an icecommit compaction group's id.
COMPACTION_ID_PROPERTY = "icecommit.compaction-id"


#: A compaction's lineage gives rows it left out (a position delete had removed them) this
#: "output", followed by the id of the snapshot that deleted them: never a file's path.
_DELETED_BY = "icecommit:deleted-by-snapshot:"


def deleted_by(snapshot_id: int) -> str:
    """The lineage "output" of rows a compaction left out because snapshot ``snapshot_id``
    had deleted them by position."""
    return f"{_DELETED_BY}{snapshot_id}"


def deleting_snapshot(output: str) -> int | None:
    """The snapshot that deleted the rows of a :func:`deleted_by` lineage output, None for a
    file's path."""
    return int(output[len(_DELETED_BY) :]) if output.startswith(_DELETED_BY) else None


def path_key(path: str) -> str:
    """One spelling per stored file (``file:/x``, ``file:///x`` and ``/x`` are one file)."""
    try:
        key = storage_key(path)
    except UnsupportedPathError:
        return path
    return f"{key.scheme}://{key.authority}{key.path}"


@dataclass(frozen=True)
class Removal:
    """A retained snapshot that removed data files: its operation, the files it removed and
    (for a replace) the files it added, each as (path key, records)."""

    snapshot_id: int
    operation: str
    removed: tuple[tuple[str, int], ...]
    added: tuple[tuple[str, int], ...]
    compaction_id: str | None = None  # an icecommit compaction's group, whose exact lineage the state holds

    @property
    def conserves(self) -> bool:
        """A replace whose added files hold exactly the rows of the files it removed."""
        return (
            self.operation == "replace"
            and sum(n for _, n in self.added) == sum(n for _, n in self.removed)
            and bool(self.added)
        )


@dataclass
class Fate:
    """What became of some rows: readable, removed by snapshot (id, operation), or
    untraceable (no retained snapshot says what removed them)."""

    readable: Fraction = Fraction(0)
    removed: dict[tuple[int, str], Fraction] = field(default_factory=dict)
    untraceable: Fraction = Fraction(0)
    compacted: Fraction = Fraction(0)  # of the readable rows, those now in files another snapshot rewrote
    held: dict[str, Fraction] = field(default_factory=dict)  # the readable rows, by the live file holding them

    def add(self, other: Fate, share: Fraction = Fraction(1)) -> None:
        self.readable += other.readable * share
        self.untraceable += other.untraceable * share
        self.compacted += other.compacted * share
        for by, rows in other.removed.items():
            self.removed[by] = self.removed.get(by, Fraction(0)) + rows * share
        for path, rows in other.held.items():
            self.held[path] = self.held.get(path, Fraction(0)) + rows * share


def landed_compactions(metadata: TableMetadata) -> dict[str, int]:
    """Compaction group id to the snapshot carrying it, for the snapshots on a branch of the
    table that an icecommit compaction committed (one rolled back off every branch is left
    out: its lineage no longer says where rows are)."""
    branches = [name for name, ref in metadata.refs.items() if ref.snapshot_ref_type == "branch"]
    return {
        group: snapshot.snapshot_id
        for branch in branches
        for snapshot in ancestry.branch_ancestry(metadata, branch)
        if snapshot.summary is not None and (group := snapshot.summary.get(COMPACTION_ID_PROPERTY)) is not None
    }


def trace_fates(
    files: Iterable[tuple[str, int]],
    live: Mapping[str, int],
    removals: Iterable[Removal],
    rewritten: Mapping[str, list[tuple[str, int]]] | None = None,
    by_group: Mapping[str, Mapping[str, list[tuple[str, int]]]] | None = None,
) -> Fate:
    """The fate of the rows of ``files`` ((path key, records) pairs): readable where the
    file is live (``live``: path key to records), else followed through what took it out.

    An icecommit compaction's exact lineage (``rewritten``: input path key to the output
    files holding its rows, with how many, from the state; rows it left out because a
    position delete had removed them are removed by that delete's snapshot) is followed first, whether or
    not its snapshot is still retained; another engine's rewrite, an overwrite or a delete
    through the retained snapshot that removed the file, a conserving replace's added
    files sharing its rows in proportion to their records.

    Where the retained snapshot that removed a file carries a compaction group's id, that
    group's own lineage (``by_group``: group id to input path key to outputs, from the
    same state as ``rewritten``) is followed, not whichever group ``rewritten`` prefers
    for the file: two groups can list one input (one rolled back or crashed, then
    another), and the snapshot says which one took it out. A group that ``by_group`` does
    not know, or whose lineage does not list the file, is followed through the snapshot's
    own files, as another engine's rewrite."""
    return FateTracer(live, removals, rewritten, by_group).trace(files)


class _Share:
    """A fate while it is being traced: the same parts as :class:`Fate`, in floats. The
    lineage of a long stream multiplies shares along chains of compactions and merges
    dictionaries of hundreds of removals at every step; in exact fractions that took
    minutes for a thousand checkpoints, in floats it takes seconds, and :meth:`exact` turns
    the sums back into fractions (whole rows stay whole, within a billionth of a row)."""

    __slots__ = ("compacted", "held", "readable", "removed", "untraceable")

    def __init__(self) -> None:
        self.readable = 0.0
        self.untraceable = 0.0
        self.compacted = 0.0
        self.removed: dict[tuple[int, str], float] = {}
        self.held: dict[str, float] = {}

    def add(self, other: _Share, share: float = 1.0) -> None:
        self.readable += other.readable * share
        self.untraceable += other.untraceable * share
        self.compacted += other.compacted * share
        removed, held = self.removed, self.held
        if share == 1.0:
            for by, rows in other.removed.items():
                removed[by] = removed.get(by, 0.0) + rows
            for path, rows in other.held.items():
                held[path] = held.get(path, 0.0) + rows
            return
        for by, rows in other.removed.items():
            removed[by] = removed.get(by, 0.0) + rows * share
        for path, rows in other.held.items():
            held[path] = held.get(path, 0.0) + rows * share

    def exact(self) -> Fate:
        return Fate(
            readable=_exact(self.readable),
            removed={by: rows for by, value in self.removed.items() if (rows := _exact(value))},
            untraceable=_exact(self.untraceable),
            compacted=_exact(self.compacted),
            held={path: rows for path, value in self.held.items() if (rows := _exact(value))},
        )


def _exact(value: float) -> Fraction:
    """The fraction of rows a traced float stands for: a sum within a billionth of a whole
    row is that row count (a float sum of shares of 60 rows may read 59.99999999999999),
    others the nearest fraction with a denominator up to a million (the rounding to whole
    rows, :func:`rounded_table`, decides the rest)."""
    nearest = round(value)
    if abs(value - nearest) < 1e-9 * max(1.0, abs(value)):
        return Fraction(nearest)
    return Fraction(value).limit_denominator(1_000_000)


class FateTracer:
    """:func:`trace_fates` for many sets of files over one table's lineage: what a file's
    rows became is worked out once and kept, so tracing every checkpoint of a table whose
    files went through many compactions costs the lineage once, not once per checkpoint."""

    def __init__(
        self,
        live: Mapping[str, int],
        removals: Iterable[Removal],
        rewritten: Mapping[str, list[tuple[str, int]]] | None = None,
        by_group: Mapping[str, Mapping[str, list[tuple[str, int]]]] | None = None,
    ) -> None:
        self._live = live
        self._lineage = rewritten or {}
        self._by_group = by_group
        self._out_records: dict[str, int] = {}
        for source in by_group.values() if by_group else (self._lineage,):
            for outputs in source.values():
                for output, n in outputs:
                    self._out_records[output] = self._out_records.get(output, 0) + n
        self._by_path: dict[str, Removal] = {}
        for removal in removals:
            for path, _ in removal.removed:
                self._by_path.setdefault(path, removal)
        self._memo: dict[str, _Share] = {}

    def trace(self, files: Iterable[tuple[str, int]]) -> Fate:
        """The fate of the rows of ``files`` ((path key, records) pairs)."""
        total = _Share()
        for path, records in files:
            total.add(self._fate_of(path, records, frozenset()))
        return total.exact()

    def _fate_of(self, path: str, records: int, seen: frozenset[str]) -> _Share:
        memo, live, lineage, by_group = self._memo, self._live, self._lineage, self._by_group
        by_path, out_records, fate_of = self._by_path, self._out_records, self._fate_of
        if path in memo:
            return memo[path]
        fate = _Share()
        removal = by_path.get(path)
        outputs = None  # the exact lineage to follow, if one applies
        if removal is not None and removal.compaction_id is not None and by_group is not None:
            # that group's own (none where the state does not know it, or it did not list
            # this file: then the snapshot's own files, as for another engine's rewrite)
            outputs = by_group.get(removal.compaction_id, {}).get(path)
        elif removal is None or removal.compaction_id is not None:
            outputs = lineage.get(path)
        if path in live:
            fate.readable = float(records)
            fate.held[path] = float(records)
        elif path in seen:
            fate.untraceable = float(records)
        elif outputs is not None:
            for output, n in outputs:  # exactly these rows of it went to that file
                if (deleter := deleting_snapshot(output)) is not None:  # deleted by position before the rewrite
                    by = (deleter, "row-level delete")
                    fate.removed[by] = fate.removed.get(by, 0.0) + n
                    continue
                fate.add(fate_of(output, out_records[output], seen | {path}), n / out_records[output])
            fate.compacted = fate.readable
        elif removal is None:
            fate.untraceable = float(records)
        else:  # rows carried into the files it added, in proportion; the rest removed by it
            removed_rows = sum(n for _, n in removal.removed)
            added_rows = sum(n for _, n in removal.added)
            if not removal.conserves and removed_rows > added_rows:
                gone = records * (removed_rows - added_rows) / removed_rows
                fate.removed[(removal.snapshot_id, removal.operation)] = gone
            for added, n in removal.added:  # each added file holds this share of its rows from here
                fate.add(fate_of(added, n, seen | {path}), records / max(removed_rows, added_rows))
            fate.compacted = fate.readable
        memo[path] = fate
        return fate


#: Up to this many cells, :func:`rounded_table` rounds every column under one maximum flow.
EXACT_CELLS = 20_000


def rounded_table(
    cells: Mapping[R, Mapping[K, Fraction]], group: Callable[[K], object] | None = None
) -> dict[R, dict[K, int]]:
    """:func:`controlled_rounding` of ``cells``; a table of more than :data:`EXACT_CELLS`
    cells with a ``group`` of its columns (a thousand checkpoints of a change stream by the
    thousand snapshots that deleted their rows) is rounded in two steps: the columns summed
    by group under the maximum flow (each group's column total exact: readable, removed),
    then each row's share of a group spread over its columns, the largest remainders first
    and, among those, columns still short of their own total first (every row still adds
    up; a column of a group may be a row off its total)."""
    if group is None or sum(len(parts) for parts in cells.values()) <= EXACT_CELLS:
        return controlled_rounding(cells)
    coarse: dict[R, dict[object, list[Fraction]]] = {}
    for row, parts in cells.items():
        for col, value in parts.items():
            coarse.setdefault(row, {}).setdefault(group(col), []).append(value)
    whole = controlled_rounding({row: {g: _exact_sum(v) for g, v in by.items()} for row, by in coarse.items()})
    totals: dict[K, list[Fraction]] = {}
    for parts in cells.values():
        for col, value in parts.items():
            totals.setdefault(col, []).append(value)
    floors = {row: {col: math.floor(value) for col, value in parts.items()} for row, parts in cells.items()}
    need = {col: rounded(_exact_sum(values)) for col, values in totals.items()}
    for whole_parts in floors.values():
        for col, n in whole_parts.items():
            need[col] -= n
    for row, parts in cells.items():
        for g, total in whole.get(row, {}).items():
            members = [col for col in parts if group(col) == g]
            short = total - sum(floors[row][col] for col in members)
            ranked = sorted(
                (col for col in members if parts[col] != floors[row][col]),
                key=lambda col: (need[col] > 0, parts[col] - floors[row][col]),
                reverse=True,
            )
            for col in ranked[: max(short, 0)]:
                floors[row][col] += 1
                need[col] -= 1
    # repair: move a row's rounded-up unit from a column over its total to one of the same
    # group still under it, where that row's cell there is not whole (the row's sum holds)
    for row, parts in cells.items():
        over = [c for c in parts if need[c] < 0 and floors[row][c] > math.floor(parts[c])]
        if not over:
            continue
        under = [c for c in parts if need[c] > 0 and floors[row][c] == math.floor(parts[c]) != parts[c]]
        for up in over:
            target = next((c for c in under if need[c] > 0 and group(c) == group(up)), None)
            if target is None or need[up] >= 0:
                continue
            floors[row][up] -= 1
            floors[row][target] += 1
            need[up] += 1
            need[target] -= 1
            under.remove(target)
    return floors


def controlled_rounding(cells: Mapping[R, Mapping[K, Fraction]]) -> dict[R, dict[K, int]]:
    """Shares of rows (row ``R``: a checkpoint; column ``K``: readable, or what removed
    them) in whole rows, each share rounded down or up, so that every row adds up to its
    rounded total and every column too where that can be done (controlled rounding: a
    maximum flow from the rows short of their total to the columns short of theirs,
    through the cells not whole yet). Rows always add up; a unit no column can take goes
    to the row's largest remainder.

    The flow starts from a greedy one (each row's largest remainders first, while their
    column still needs units), so the augmenting paths (each a search of the whole graph)
    are only those the greedy start left: a long stream's thousand checkpoints by a
    thousand deleting snapshots need a handful, not one per unit."""
    rows = list(cells)
    cols = list(dict.fromkeys(col for parts in cells.values() for col in parts))
    col_index = {col: j for j, col in enumerate(cols)}
    floors = {row: {col: math.floor(value) for col, value in cells[row].items()} for row in rows}
    row_left = [rounded(_exact_sum(cells[row].values())) - sum(floors[row].values()) for row in rows]
    by_col: list[list[Fraction]] = [[] for _ in cols]
    for row in rows:
        for col, value in cells[row].items():
            by_col[col_index[col]].append(value)
    col_left = [
        rounded(_exact_sum(values)) - sum(floors[row].get(col, 0) for row in rows)
        for col, values in zip(cols, by_col, strict=True)
    ]
    # nodes: 0 the source, 1.. the rows, then the columns, then the sink
    n_rows = len(rows)
    sink = 1 + n_rows + len(cols)
    row_need = [max(left, 0) for left in row_left]
    col_need = [max(left, 0) for left in col_left]
    fractional = [
        sorted(
            ((cells[row][col] - floors[row][col], col_index[col]) for col in cells[row]
             if cells[row][col] != floors[row][col]),
            reverse=True,
        )
        for row in rows
    ]  # fmt: skip
    flowed: set[tuple[int, int]] = set()  # (row, column) cells that took a unit
    for i in range(n_rows):  # the greedy start
        for _, j in fractional[i]:
            if row_need[i] == 0:
                break
            if col_need[j] > 0:
                flowed.add((i, j))
                row_need[i] -= 1
                col_need[j] -= 1
    if any(row_need) and any(col_need):  # augmenting paths for what the greedy start left
        capacity: dict[tuple[int, int], int] = {}
        edges: dict[int, list[int]] = {}

        def edge(u: int, v: int, forward: int, backward: int) -> None:
            capacity[(u, v)], capacity[(v, u)] = forward, backward
            edges.setdefault(u, []).append(v)
            edges.setdefault(v, []).append(u)

        for i in range(n_rows):
            edge(0, 1 + i, row_need[i], max(row_left[i], 0) - row_need[i])
            for _, j in fractional[i]:
                taken = (i, j) in flowed
                edge(1 + i, 1 + n_rows + j, 0 if taken else 1, 1 if taken else 0)
        for j in range(len(cols)):
            edge(1 + n_rows + j, sink, col_need[j], max(col_left[j], 0) - col_need[j])
        while True:  # Edmonds-Karp: the shortest augmenting path, one unit at a time
            parent = {0: 0}
            queue = [0]
            for u in queue:
                for v in edges.get(u, []):
                    if v not in parent and capacity[(u, v)] > 0:
                        parent[v] = u
                        queue.append(v)
            if sink not in parent:
                break
            v = sink
            while v != 0:
                u = parent[v]
                capacity[(u, v)] -= 1
                capacity[(v, u)] += 1
                v = u
        flowed = {(i, j) for i in range(n_rows) for _, j in fractional[i] if capacity[(1 + n_rows + j, 1 + i)] > 0}
    for i, row in enumerate(rows):
        placed = 0
        for _, j in fractional[i]:
            if (i, j) in flowed:  # a unit flowed through this cell
                floors[row][cols[j]] += 1
                placed += 1
        rest = sorted(
            (col for col in cells[row] if floors[row][col] < cells[row][col]),
            key=lambda col: cells[row][col] - floors[row][col],
            reverse=True,
        )
        for col in rest[: max(row_left[i] - placed, 0)]:
            floors[row][col] += 1
    return floors


def _exact_sum(values: Iterable[Fraction]) -> Fraction:
    """The sum of many fractions, adding the numerators of each denominator as integers
    first (the fractions of one table's lineage share few denominators)."""
    by_denominator: dict[int, int] = {}
    for value in values:
        by_denominator[value.denominator] = by_denominator.get(value.denominator, 0) + value.numerator
    return sum((Fraction(n, d) for d, n in by_denominator.items()), Fraction(0))


def rounded(value: Fraction) -> int:
    """The nearest whole number of rows (halves up)."""
    return (value.numerator * 2 + value.denominator) // (2 * value.denominator)


__all__ = [
    "Fate",
    "FateTracer",
    "Removal",
    "controlled_rounding",
    "deleted_by",
    "deleting_snapshot",
    "landed_compactions",
    "path_key",
    "rounded",
    "rounded_table",
    "trace_fates",
]
