"""Real processes for the tests without an interpreter's start-up each.

A test that kills a driver, races eight committers or reads a command's exit code needs a
process of its own: its own pid, memory, file descriptors and exit status, ended by
``os._exit`` or SIGKILL with nothing cleaned up. Starting ``python -m ...`` for each costs
1.3 s of imports (pyiceberg, pyarrow, SQLAlchemy) before its first line runs, most of the
fast suite's time. Here children are forked from one server process per test process
(multiprocessing's ``forkserver``) that imported those modules once and never ran
anything, so it holds no connection, thread or lock a child could inherit: a child starts
in milliseconds and is otherwise the process ``subprocess`` would have started.

A child's stdout and stderr go to files read back when it ends (or to a terminal's device,
for the tests of terminal output); its exit code is what ``subprocess`` reports: the
target's return is 0, ``sys.exit(n)`` and ``os._exit(n)`` are ``n``, an uncaught exception
is 1 with its traceback on stderr, a signal is its negative number.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload(
    [
        "icecommit",
        "icecommit.cli.main",
        "pyiceberg.catalog.sql",
        "pyiceberg.io.pyarrow",
        "sqlalchemy.dialects.postgresql.psycopg",
        "psycopg",  # the dialect imports its driver on first use: 0.2 s in every child on PostgreSQL
        "tests.committer.crash_driver",
    ]
)


def _child(
    target: Callable[..., object],
    args: Sequence[Any],
    env: Mapping[str, str],
    cwd: str,
    stdout: str,
    stderr: str,
) -> None:
    """The child's first steps: its environment, directory and standard streams."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    # pyiceberg reads its configuration (~/.pyiceberg.yaml, PYICEBERG_*) once, on import: the
    # server imported it under its own environment; the child reads the child's, as a new process does
    import pyiceberg.catalog
    from pyiceberg.utils.config import Config

    pyiceberg.catalog._ENV_CONFIG = Config()
    for fd, path in ((1, stdout), (2, stderr)):
        opened = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - the process's own stream
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    target(*args)


class Child:
    """``target(*args)`` running in a process of its own; shaped like ``subprocess.Popen``.

    ``env`` is the child's environment (None: the test process's as it is now);
    ``terminal`` is the path of a pseudo-terminal's device to use as its stdout and
    stderr instead of files.
    """

    def __init__(
        self,
        target: Callable[..., object],
        *args: Any,
        env: Mapping[str, str] | None = None,
        cwd: Path | str = ROOT,
        terminal: str | None = None,
    ) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="child-")
        self._out = Path(self._folder.name) / "stdout"
        self._err = Path(self._folder.name) / "stderr"
        self._out.touch()
        self._err.touch()
        out, err = (terminal, terminal) if terminal is not None else (str(self._out), str(self._err))
        self._process = CONTEXT.Process(
            target=_child, args=(target, tuple(args), dict(os.environ if env is None else env), str(cwd), out, err)
        )
        self._process.start()
        assert self._process.pid is not None
        self._pid: int = self._process.pid
        self._code: int | None = None
        self.args = (getattr(target, "__qualname__", repr(target)), *map(str, args))

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def poll(self) -> int | None:
        if self._code is None:
            self._code = self._process.exitcode
        return self._code

    def wait(self, timeout: float | None = None) -> int:
        if self._code is None:
            self._process.join(timeout)
        code = self.poll()
        if code is None:
            raise subprocess.TimeoutExpired(list(self.args), timeout or 0.0)
        return code

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def kill(self) -> None:
        """SIGKILL it (if it is still running) and reap it."""
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.wait(30)

    def output(self) -> tuple[str, str]:
        """What it wrote to stdout and stderr so far (empty on a terminal)."""
        return self._out.read_text(errors="replace"), self._err.read_text(errors="replace")

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Wait for it to end (killing it at the timeout, then raising); its output."""
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        out, err = self.output()
        self._close()
        return out, err

    def _close(self) -> None:
        if self._code is not None:
            self._process.close()
        self._folder.cleanup()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        self._close()


def run(
    target: Callable[..., object],
    *args: Any,
    env: Mapping[str, str] | None = None,
    cwd: Path | str = ROOT,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run ``target(*args)`` in a process of its own to its end: its exit code and output,
    shaped like ``subprocess.run(..., capture_output=True, text=True)``."""
    child = Child(target, *args, env=env, cwd=cwd)
    out, err = child.communicate(timeout)
    code = child.returncode
    assert code is not None
    return subprocess.CompletedProcess(list(child.args), code, out, err)


def cli(home: Path | str, *args: str) -> None:
    """The ``icecommit`` command with ``args`` and ``ICECOMMIT_HOME=home`` (a child's
    target), run as its console script runs it."""
    from icecommit.cli.main import main

    os.environ["ICECOMMIT_HOME"] = str(home)
    sys.argv = ["icecommit", *args]
    main()


def script(source: str, *argv: str) -> None:
    """Python source run as ``python -c source argv...`` runs it (a child's target)."""
    sys.argv = ["-c", *argv]
    exec(compile(source, "<script>", "exec"), {"__name__": "__main__"})


def pytest_session(*args: str) -> None:
    """An inner test session, ``python -m pytest args...`` (a child's target)."""
    import pytest

    sys.exit(int(pytest.main(list(args))))
