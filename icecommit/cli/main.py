"""The ``icecommit`` command line. Commands resolve arguments, call the Python API and
hand the result to an :class:`~icecommit.cli.output.Output`; they hold no logic."""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from icecommit.catalog.connect import connect
from icecommit.catalog.inspect import list_checkpoints, list_snapshots
from icecommit.cli.output import JsonOutput, Output, TextOutput
from icecommit.committer.committer import CommitResult
from icecommit.demo.pipeline import run_demo
from icecommit.errors import CommitStateUnknownError, IcecommitError

EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3


@dataclass
class Context:
    """Global options, resolved once."""

    catalog_name: str | None
    uri: str | None
    warehouse: str | None
    output: Output
    json: bool
    debug: bool

    def catalog(self) -> Catalog:
        return connect(self.catalog_name, uri=self.uri, warehouse=self.warehouse)


def _run(ctx: Context, action: Callable[[], None]) -> None:
    """Run a command body, mapping errors to one line and the documented exit codes."""
    try:
        action()
    except CommitStateUnknownError as e:
        _fail(ctx, e, EXIT_UNKNOWN)
    except (NoSuchTableError, IcecommitError, ValueError) as e:
        _fail(ctx, e, EXIT_USAGE)


def _fail(ctx: Context, error: BaseException, code: int) -> None:
    if ctx.debug:
        traceback.print_exc()
    ctx.output.error(str(error) or type(error).__name__, code)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--catalog", "catalog_name", default=None, help="A catalog configured the pyiceberg way.")
@click.option("--uri", default=None, help="SQL catalog URI (default: $ICECOMMIT_CATALOG_URI or embedded SQLite).")
@click.option("--warehouse", default=None, help="Warehouse location (default: $ICECOMMIT_WAREHOUSE or ./warehouse).")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.pass_context
def cli(
    ctx: click.Context, catalog_name: str | None, uri: str | None, warehouse: str | None, output: str, debug: bool
) -> None:
    """icecommit: land Spark data in Iceberg exactly once.

    \b
    Example:
      icecommit demo --rows 100000
      icecommit --output json snapshots demo.clickstream
    """
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    ctx.obj = Context(
        catalog_name, uri, warehouse, JsonOutput() if output == "json" else TextOutput(), output == "json", debug
    )


@cli.command()
@click.option("--rows", type=click.IntRange(min=0), default=1_000_000, show_default=True)
@click.option("--checkpoints", type=click.IntRange(min=1), default=4, show_default=True)
@click.pass_obj
def demo(ctx: Context, rows: int, checkpoints: int) -> None:
    """Land a synthetic clickstream in demo.clickstream through Spark, exactly once.

    \b
    Example:
      icecommit demo --rows 200000 --checkpoints 4
    """

    def action() -> None:
        catalog = ctx.catalog()
        if ctx.json:
            ctx.output.demo(run_demo(catalog, rows=rows, checkpoints=checkpoints))
            return
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), transient=False
        ) as bar:
            tasks: dict[int, Any] = {}

            def progress(checkpoint_id: int, phase: str, result: CommitResult | None) -> None:
                if phase == "start":
                    tasks[checkpoint_id] = bar.add_task(f"checkpoint {checkpoint_id}: writing", total=1)
                elif result is not None:
                    verb = {"committed": "committed", "already-committed": "already committed", "empty": "empty"}[
                        result.status
                    ]
                    bar.update(
                        tasks[checkpoint_id],
                        completed=1,
                        description=f"checkpoint {checkpoint_id}: {verb}, {result.records:,} records",
                    )

            report = run_demo(catalog, rows=rows, checkpoints=checkpoints, progress=progress)
        ctx.output.demo(report)

    _run(ctx, action)


@cli.command()
@click.argument("table")
@click.pass_obj
def snapshots(ctx: Context, table: str) -> None:
    """List a table's snapshots with the job and checkpoint that made them.

    \b
    Example:
      icecommit snapshots demo.clickstream
    """
    _run(ctx, lambda: ctx.output.snapshots(table, list_snapshots(ctx.catalog(), table)))


@cli.command()
@click.argument("table")
@click.option("--job", default=None, help="Only this job.")
@click.pass_obj
def checkpoints(ctx: Context, table: str, job: str | None) -> None:
    """List committed and pending checkpoints of a table.

    \b
    Example:
      icecommit checkpoints demo.clickstream --job clickstream-demo
    """
    _run(ctx, lambda: ctx.output.checkpoints(table, list_checkpoints(ctx.catalog(), table, job_id=job)))


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="icecommit")
