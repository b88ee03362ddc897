"""Source counts on their way to the state.

Spark reports a streaming batch's source count (its progress) only after the batch
function returned, on a listener bus that may deliver it after ``awaitTermination()``
returned or not at all once the process exits. A streaming sink registers here, per table,
a function that records whatever its queries reported and it has not recorded yet;
reconciliation in the same process settles a table's counts before it reads them, and the
process settles all of them when it exits.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable, Iterable

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_settlers: dict[str, list[Callable[[], None]]] = {}
_at_exit = False


def register(tables: Iterable[str], settle: Callable[[], None]) -> None:
    """Have ``settle`` called before ``tables`` are reconciled here, and at exit."""
    global _at_exit
    with _lock:
        for name in tables:
            found = _settlers.setdefault(name, [])
            if settle not in found:
                found.append(settle)
        if not _at_exit:
            # registered after Spark's own exit handler, so it runs before Spark stops
            atexit.register(settle_all)
            _at_exit = True


def settle(table: str) -> None:
    """Record the counts reported for ``table`` that are not recorded yet (never raises)."""
    with _lock:
        settlers = list(_settlers.get(table, ()))
    for settler in settlers:
        _run(settler)


def settle_all() -> None:
    """Settle every registered table's counts (at exit)."""
    with _lock:
        settlers = list(dict.fromkeys(s for found in _settlers.values() for s in found))
        _settlers.clear()
    for settler in settlers:
        _run(settler)


def _run(settler: Callable[[], None]) -> None:
    try:
        settler()
    except Exception:  # a count not recorded is shown as such; it must not fail the caller
        logger.warning("could not record a streaming query's source counts", exc_info=True)


__all__ = ["register", "settle", "settle_all"]
