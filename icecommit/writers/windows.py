"""Per-minute event-time windows: how many rows of a batch fall in each minute."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc

WINDOW_US = 60_000_000


def minute_counts(times: pa.Array | pa.ChunkedArray | None, rows: int) -> Counter[int | None]:
    """Rows per one-minute window (window start in microseconds since epoch, UTC).

    Rows without an event time (a null, or a table without an event-time column) count
    in the ``None`` window.
    """
    counts: Counter[int | None] = Counter()
    if times is None:
        if rows:
            counts[None] = rows
        return counts
    micros = pc.cast(times, pa.int64())
    quotient = pc.divide(micros, WINDOW_US)
    earliest = pc.min(micros).as_py()
    if earliest is not None and earliest < 0:
        # integer division truncates toward zero; floor it for times before 1970
        quotient = pc.if_else(
            pc.and_(pc.less(micros, 0), pc.not_equal(pc.multiply(quotient, WINDOW_US), micros)),
            pc.subtract(quotient, 1),
            quotient,
        )
    for item in pc.value_counts(quotient).to_pylist():
        minute = item["values"]
        counts[None if minute is None else minute * WINDOW_US] += item["counts"]
    return counts
