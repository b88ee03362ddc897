"""What every command shares: the global options, the exit codes and the one place that
turns an error into a line on stderr and an exit code."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import click
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

from icecommit.catalog.connect import check_name_and_uri, connect
from icecommit.cli.output import Output
from icecommit.cli.progress_display import display_factory
from icecommit.core import progress
from icecommit.core.errors import (
    CheckpointHeldError,
    CheckpointRefusedError,
    CommitOutcomeError,
    EnvironmentFailureError,
    IcecommitError,
    InvalidInputError,
    family_of,
)
from icecommit.core.timeparse import parse_duration, parse_instant
from icecommit.state import dispose_state_engines

#: The exit codes (the help's epilog and docs/operations/runbooks.md list them): 0 success, 1 the command ran
#: and found a problem, 2 usage or input (invalid input, or a checkpoint the decision
#: refused), 3 commit outcome (unknown: run recover; conflict: retry later), 4 environment
#: (the catalog, the state database or storage failed: an operator acts), 5 a checkpoint held on its
#: audit branch because a check failed (publish or discard it).
EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, EXIT_OUTCOME, EXIT_ENVIRONMENT = 0, 1, 2, 3, 4
EXIT_UNKNOWN = EXIT_OUTCOME
#: A checkpoint held on its audit branch (a failed check): its own code, for schedulers.
EXIT_HELD = 5
_EXIT_OF_FAMILY: dict[type[IcecommitError], int] = {
    InvalidInputError: EXIT_USAGE,
    CheckpointRefusedError: EXIT_USAGE,
    CommitOutcomeError: EXIT_OUTCOME,
    EnvironmentFailureError: EXIT_ENVIRONMENT,
}


@dataclass
class Context:
    """Global options, resolved once."""

    catalog_name: str | None
    uri: str | None
    warehouse: str | None
    output: Output
    json: bool
    debug: bool
    opened: list[Catalog] = field(default_factory=list)

    def catalog(self, *, create: bool = False) -> Catalog:
        """The catalog; one that does not exist is an error unless ``create`` (the demo)."""
        check_name_and_uri(self.catalog_name, self.uri)
        catalog = connect(self.catalog_name, uri=self.uri, warehouse=self.warehouse, create=create)
        self.opened.append(catalog)
        return catalog

    def close(self) -> None:
        """Close the connections this command opened (a host that runs commands in-process,
        such as a test or a notebook, keeps none open)."""
        for catalog in self.opened:
            engine = getattr(catalog, "engine", None)
            if engine is not None:
                engine.dispose()
        self.opened.clear()
        dispose_state_engines()


#: Errors from outside icecommit that mean the command was asked something it cannot do
#: (a table or namespace pyiceberg does not know, a value or file it cannot use): exit 2.
_USAGE_ERRORS = (NoSuchTableError, NoSuchNamespaceError, ValueError, OSError)


def _run(ctx: Context, action: Callable[[], None]) -> None:
    """Run a command body, mapping every error to one line on stderr and the documented
    exit code (the one place that does), by the error's family (:data:`_EXIT_OF_FAMILY`); 2
    for another usage or input error (a table, value or file that cannot be used), 1 for
    anything else. The traceback only with ``--debug``."""
    try:
        with progress.showing(display_factory()):  # long work shows that it goes on
            action()
    except click.ClickException:
        raise  # click prints its own usage errors
    except IcecommitError as e:
        family = family_of(e)
        held = isinstance(e, CheckpointHeldError)
        _fail(ctx, e, EXIT_HELD if held else _EXIT_OF_FAMILY[family] if family is not None else EXIT_USAGE)
    except _USAGE_ERRORS as e:
        _fail(ctx, e, EXIT_USAGE)
    except Exception as e:  # never a bare traceback: say what failed, and how to see more
        _fail(ctx, e, EXIT_PROBLEM, unexpected=True)


def _fail(ctx: Context, error: BaseException, code: int, *, unexpected: bool = False) -> None:
    if ctx.debug:
        traceback.print_exc()
    message = str(error) or type(error).__name__
    if unexpected:
        message = f"unexpected {type(error).__name__}: {message}" + ("" if ctx.debug else " (--debug shows where)")
    ctx.output.error(message, code)
    sys.exit(code)


def _interactive() -> bool:
    """Whether a person can answer a confirmation prompt (stdin is a terminal)."""
    return sys.stdin.isatty()


def _writable(path: Path) -> None:
    """Raise before any work when ``path`` cannot be written (so a run is never recorded
    whose report could not be saved)."""
    if path.is_dir():
        raise IsADirectoryError(f"--out {path} is a directory")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise FileNotFoundError(f"--out {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise PermissionError(f"--out {path} cannot be written")


class _Instant(click.ParamType):  # type: ignore[type-arg]
    """An ISO 8601 time, UTC when no offset is given (parsed as the API parses it)."""

    name = "ISO8601"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            return parse_instant(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


INSTANT = _Instant()


class _InstantOrLast(_Instant):
    """An ISO 8601 time, or ``last`` (kept as the word)."""

    name = "ISO8601|last"

    def convert(  # type: ignore[override]
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime | str:
        if isinstance(value, str) and value.strip().lower() == "last":
            return "last"
        return super().convert(value, param, ctx)


INSTANT_OR_LAST = _InstantOrLast()


class _Duration(click.ParamType):  # type: ignore[type-arg]
    """A duration such as 90s, 30m, 12h, 3d or 1w (parsed as the API parses it)."""

    name = "DURATION"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        try:
            return parse_duration(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


DURATION = _Duration()
