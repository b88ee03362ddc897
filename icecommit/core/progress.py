"""Progress of long work (a compaction's groups, expiry's deletions, the orphan sweep's
deletions, a deep reconcile's reads), told to whoever shows it.

The work calls :func:`step` around its loop and advances it; nothing is shown unless a
caller installed a display with :func:`showing` (the command line does: a bar on a
terminal, plain periodic lines otherwise). A library user gets nothing printed and pays one
context-variable read per loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol


class Display(Protocol):
    """Shows one piece of work: ``start`` once, ``advance`` as it goes, ``finish`` at its end."""

    def start(self, description: str, total: int, unit: str) -> None: ...

    def advance(self, done: int) -> None: ...

    def finish(self) -> None: ...


_DISPLAY: ContextVar[Callable[[], Display] | None] = ContextVar("icecommit_progress", default=None)


@contextmanager
def showing(make: Callable[[], Display]) -> Iterator[None]:
    """Show the progress of the work done inside, each piece on a display ``make()`` returns."""
    token = _DISPLAY.set(make)
    try:
        yield
    finally:
        _DISPLAY.reset(token)


@contextmanager
def step(description: str, total: int, unit: str) -> Iterator[Callable[[int], None]]:
    """A piece of work of ``total`` ``unit`` (``"file(s)"``); yields ``advance(n)``, called
    as each ``n`` more are done."""
    make = _DISPLAY.get()
    if make is None or total <= 0:
        yield _nothing
        return
    display = make()
    display.start(description, total, unit)
    try:
        yield display.advance
    finally:
        display.finish()


def _nothing(_done: int) -> None:
    return None
