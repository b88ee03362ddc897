"""How the command line shows long work (:mod:`icecommit.core.progress`): a bar on a
terminal; otherwise (a pipe, a log, a scheduler) a plain line every
``ICECOMMIT_PROGRESS_EVERY`` seconds (10 by default) while the work lasts, and one when it
ends, so that short work prints nothing and long work shows that it is alive. Both go to
stderr: the command's output on stdout stays what it was."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from icecommit.core.progress import Display

EVERY_ENV = "ICECOMMIT_PROGRESS_EVERY"
DEFAULT_EVERY = 10.0


def every() -> float:
    """Seconds between plain lines (``ICECOMMIT_PROGRESS_EVERY``; a value that is not a
    number of seconds is taken as the default)."""
    try:
        value = float(os.environ.get(EVERY_ENV, DEFAULT_EVERY))
    except ValueError:
        return DEFAULT_EVERY
    return value if value >= 0 else DEFAULT_EVERY


class PlainLines:
    """``description: done/total unit (pct), elapsed`` every ``period`` seconds while the
    work lasts (from a ticking thread, so one long step shows too, and as the work
    advances), and at the end if a line was printed before it."""

    def __init__(
        self, out: TextIO, period: float, clock: Callable[[], float] = time.monotonic, *, ticking: bool = True
    ) -> None:
        self._out, self._period, self._clock, self._ticking = out, period, clock, ticking
        self._description, self._total, self._unit = "", 0, ""
        self._done, self._began, self._next = 0, 0.0, 0.0
        self._shown: int | None = None  # the count the last line showed
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def start(self, description: str, total: int, unit: str) -> None:
        self._description, self._total, self._unit = description, total, unit
        self._began = self._clock()
        self._next = self._began + self._period
        if self._ticking and self._period > 0:
            self._ticker = threading.Thread(target=self._tick, name="icecommit-progress", daemon=True)
            self._ticker.start()

    def advance(self, done: int) -> None:
        with self._lock:
            self._done += done
            if self._clock() >= self._next:
                self._line()

    def finish(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self._shown is not None and self._shown != self._done:
                self._line()

    def _tick(self) -> None:
        while not self._stop.wait(self._period):
            with self._lock:
                if self._clock() >= self._next:
                    self._line()

    def _line(self) -> None:
        self._shown = self._done
        self._next = self._clock() + self._period
        pct = 100 * self._done // max(self._total, 1)
        elapsed = self._clock() - self._began
        print(f"{self._description}: {self._done:,}/{self._total:,} {self._unit} ({pct}%), {elapsed:.0f} s",
              file=self._out, flush=True)  # fmt: skip


class Bar:
    """A rich progress bar on the terminal's stderr, gone when the work ends."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[unit]}"), TimeElapsedColumn(), console=console,
                                  transient=True)  # fmt: skip
        self._task: TaskID | None = None

    def start(self, description: str, total: int, unit: str) -> None:
        self._progress.start()
        self._task = self._progress.add_task(description, total=total, unit=unit)

    def advance(self, done: int) -> None:
        if self._task is not None:
            self._progress.advance(self._task, done)

    def finish(self) -> None:
        self._progress.stop()


def display_factory() -> Callable[[], Display]:
    """A bar per piece of work on a terminal, else plain lines."""
    console = Console(stderr=True)
    if console.is_terminal:
        return lambda: Bar(console)
    period = every()
    return lambda: PlainLines(sys.stderr, period)
