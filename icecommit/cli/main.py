"""The ``icecommit`` command line. Commands resolve arguments, call the Python API and
hand the result to an :class:`~icecommit.cli.output.Output`; they hold no logic."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shlex
import shutil
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from icecommit.catalog.event_time_versions import EventTimeVersion, snapshot_at_event_time
from icecommit.catalog.inspect import (
    list_checkpoints,
    list_snapshots,
    list_tables,
    partition_status,
    wait_for_partition,
)
from icecommit.cli.context import (
    _EXIT_OF_FAMILY,
    DURATION,
    EXIT_ENVIRONMENT,
    EXIT_OK,
    EXIT_OUTCOME,
    EXIT_PROBLEM,
    EXIT_UNKNOWN,
    EXIT_USAGE,
    INSTANT,
    INSTANT_OR_LAST,
    Context,
    _run,
    _writable,
)
from icecommit.cli.maintenance import MAINTENANCE_COMMANDS
from icecommit.cli.metrics import metrics
from icecommit.cli.output import JsonOutput, TextOutput
from icecommit.cli.release_commands import RELEASE_COMMANDS
from icecommit.committer.completion import publish_complete_partitions
from icecommit.committer.results import CommitResult
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.connections import log_retries_at
from icecommit.core.errors import (
    CompletenessNotReachedError,
    InvalidArgumentError,
    SnapshotNotFoundError,
)
from icecommit.core.extras import lazily
from icecommit.core.timeparse import format_duration
from icecommit.metrics import Thresholds, last_successful_run, record_run
from icecommit.metrics import reconcile as reconcile_table
from icecommit.metrics.runs import changes_since, history_points, last_run
from icecommit.state import state_engine, state_uri
from icecommit.state.home import icecommit_home

__all__ = [
    "EXIT_ENVIRONMENT",
    "EXIT_OK",
    "EXIT_OUTCOME",
    "EXIT_PROBLEM",
    "EXIT_UNKNOWN",
    "EXIT_USAGE",
    "_EXIT_OF_FAMILY",
    "cli",
    "main",
]


class _Commands(click.Group):
    """The command group; ``--output`` and ``--debug`` may also follow the command's name
    (``icecommit snapshots t --output json``), as people type them."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _global_options_first(args))


def _global_options_first(args: list[str]) -> list[str]:
    """``args`` with ``--output VALUE``, ``--output=VALUE`` and ``--debug`` moved to the
    front (none of the commands has an option of those names; nothing after ``--``)."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        if arg == "--output" and i + 1 < len(args):
            front += args[i : i + 2]
            i += 2
            continue
        (front if arg == "--debug" or arg.startswith("--output=") else rest).append(arg)
        i += 1
    return front + rest


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--catalog", "catalog_name", default=None,
    help="A catalog configured the pyiceberg way (default: $ICECOMMIT_CATALOG); "
    "ICECOMMIT_CATALOG_URI and ICECOMMIT_WAREHOUSE do not apply to it.",
)  # fmt: skip
@click.option("--uri", default=None, help="SQL catalog URI (default: $ICECOMMIT_CATALOG_URI or embedded SQLite).")
@click.option(
    "--warehouse",
    default=None,
    help="Warehouse location (default: $ICECOMMIT_WAREHOUSE, else $ICECOMMIT_HOME or ~/.local/share/icecommit); "
    "without --uri, the embedded catalog lives in it too.",
)
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Text for people, JSON for programs (before or after the command).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs (before or after the command).")
@click.version_option(None, "--version", "-V", package_name="icecommit", prog_name="icecommit",
                      message="%(prog)s %(version)s")  # fmt: skip
@click.pass_context
def cli(
    ctx: click.Context, catalog_name: str | None, uri: str | None, warehouse: str | None, output: str, debug: bool
) -> None:
    """icecommit: land Spark data in Iceberg exactly once.

    \b
    Example:
      icecommit demo --rows 100000
      icecommit --output json snapshots demo.clickstream

    \b
    Exit codes:
      0  success
      1  the command ran and found a problem (a reconciliation mismatch)
      2  usage or input (a bad argument, an unknown table, a refused checkpoint)
      3  commit outcome (unknown: run recover; lost to concurrent commits: retry later)
      4  environment (catalog, state database or storage failed: an operator acts)
    """
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # a failure is one line on stderr: the tries before it are shown with --debug
    log_retries_at(logging.DEBUG)
    ctx.obj = Context(
        catalog_name, uri, warehouse, JsonOutput() if output == "json" else TextOutput(), output == "json", debug
    )
    ctx.call_on_close(ctx.obj.close)


def _invoked_as() -> str:
    """How the user ran this program, for the commands it suggests to run next: the name
    ``icecommit`` where it finds this program on PATH, else the path as typed (such as
    ``.venv/bin/icecommit``), or ``python -m icecommit.cli`` with this interpreter."""
    program = sys.argv[0] if sys.argv else ""
    if os.path.basename(program) == "icecommit":
        found = shutil.which("icecommit")
        if found is not None and os.path.realpath(found) == os.path.realpath(program):
            return "icecommit"
        return shlex.quote(program)
    return f"{shlex.quote(sys.executable)} -m icecommit.cli"


def _landed(result: CommitResult) -> str:
    verb = {"committed": "committed", "already-committed": "already committed", "empty": "empty"}[result.status]
    return f"{verb}, {result.records:,} records"


def _plain_progress(checkpoint_id: int, phase: str, result: CommitResult | None) -> None:
    if phase == "done" and result is not None:
        print(f"checkpoint {checkpoint_id}: {_landed(result)}", flush=True)


@contextlib.contextmanager
def _spark_log(ctx: Context) -> Iterator[None]:
    """Spark's start-up messages and later warnings (the JVM writes them to standard error)
    go to a log file in the icecommit home instead of the terminal; with --debug they are
    shown. The JVM keeps the file as its standard error for its lifetime; this process's
    own standard error is restored once the command's work is done."""
    if ctx.debug:
        yield
        return
    folder = icecommit_home() / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "spark-demo.log"
    sys.stderr.flush()
    saved = os.dup(2)
    with open(log, "ab") as target:
        os.dup2(target.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@cli.command()
@click.option("--rows", type=click.IntRange(min=0), default=1_000_000, show_default=True)
@click.option("--checkpoints", type=click.IntRange(min=1), default=4, show_default=True)
@click.option(
    "--hours",
    type=click.IntRange(min=1, max=24),
    default=6,
    show_default=True,
    help="Hours of event time the data spans (the checkpoints share them in order).",
)
@click.option("--reset", is_flag=True, help="Drop the demo's table and what the state holds about it first.")
@click.option("--recommit", is_flag=True, help="Commit again the checkpoints a rollback removed.")
@click.pass_obj
def demo(ctx: Context, rows: int, checkpoints: int, hours: int, reset: bool, recommit: bool) -> None:
    """Land a synthetic clickstream in demo.clickstream through Spark, exactly once.

    Run again with the same arguments, it continues its table (every checkpoint already
    committed is skipped); --reset starts over.

    \b
    Example:
      icecommit demo --rows 200000 --checkpoints 4
      icecommit demo --reset --rows 200000
    """

    def action() -> None:
        # Spark is loaded only by the command that runs it, so the catalog commands stay quick
        run_demo = lazily("icecommit.demo.job", "run_demo", "icecommit demo")

        catalog = ctx.catalog(create=True)
        command = " ".join(
            [_invoked_as()]
            + [f"{flag} {shlex.quote(value)}" for flag, value in
               (("--catalog", ctx.catalog_name), ("--uri", ctx.uri), ("--warehouse", ctx.warehouse)) if value]
        )  # fmt: skip
        run = functools.partial(run_demo, catalog, rows=rows, checkpoints=checkpoints, hours=hours, command=command,
                                reset=reset, recommit=recommit)  # fmt: skip
        with _spark_log(ctx):
            if ctx.json:
                ctx.output.demo(run())
                return
            console = getattr(ctx.output, "console", None)
            if console is None or not console.is_terminal:  # a pipe or a log: one plain line per checkpoint
                report = run(progress=_plain_progress)
            else:
                with Progress(
                    SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                    console=console, transient=False,
                ) as bar:  # fmt: skip
                    tasks: dict[int, Any] = {}

                    def progress(checkpoint_id: int, phase: str, result: CommitResult | None) -> None:
                        if phase == "start":
                            tasks[checkpoint_id] = bar.add_task(f"checkpoint {checkpoint_id}: writing", total=1)
                        elif result is not None:
                            bar.update(tasks[checkpoint_id], completed=1,
                                       description=f"checkpoint {checkpoint_id}: {_landed(result)}")  # fmt: skip

                    report = run(progress=progress)
        ctx.output.demo(report)

    _run(ctx, action)


@cli.command()
@click.argument("table")
@click.option("--at-event-time", "event_time", type=INSTANT, default=None,
              help="Show the snapshots holding the table as of this event time instead.")  # fmt: skip
@click.pass_obj
def snapshots(ctx: Context, table: str, event_time: datetime | None) -> None:
    """List a table's snapshots with the job and checkpoint that made them; or, with
    --at-event-time T, the two versions of the table as of T: the complete one (the
    earliest snapshot at which the time partition holding T was published complete; late
    rows are not in it) and the one rollback --to-event-time uses (the newest snapshot with
    no data after T; a checkpoint that straddles T is left out).

    \b
    Example:
      icecommit snapshots demo.clickstream
      icecommit snapshots demo.clickstream --at-event-time 2026-05-01T13:00:00Z
    """
    if event_time is None:
        _run(ctx, lambda: ctx.output.snapshots(table, list_snapshots(ctx.catalog(), table)))
        return

    def versions() -> None:
        catalog = ctx.catalog()
        found: list[EventTimeVersion | str] = []
        for complete in (True, False):
            try:
                found.append(snapshot_at_event_time(catalog, table, event_time, complete=complete))
            except (CompletenessNotReachedError, SnapshotNotFoundError, InvalidArgumentError) as e:
                found.append(str(e))
        ctx.output.versions(table, event_time, found)

    _run(ctx, versions)


@cli.command()
@click.argument("namespace", required=False)
@click.pass_obj
def tables(ctx: Context, namespace: str | None) -> None:
    """List the catalog's tables (of every namespace, or of NAMESPACE) with what each
    holds now and the last checkpoint icecommit committed to it.

    \b
    Example:
      icecommit tables
      icecommit tables demo
    """
    _run(ctx, lambda: ctx.output.tables(namespace, list_tables(ctx.catalog(), namespace)))


@cli.command()
@click.argument("table")
@click.option("--job", default=None, help="Only this job.")
@click.option("--branch", default=MAIN_BRANCH, show_default=True, help="The branch whose ancestry says committed.")
@click.pass_obj
def checkpoints(ctx: Context, table: str, job: str | None, branch: str) -> None:
    """List committed and pending checkpoints of a table.

    \b
    Example:
      icecommit checkpoints demo.clickstream --job clickstream-demo
    """
    _run(ctx, lambda: ctx.output.checkpoints(table, list_checkpoints(ctx.catalog(), table, job_id=job, branch=branch)))


@cli.command()
@click.argument("table")
@click.option(
    "--wait", "label", default=None, help="Wait until this partition is published, e.g. ts_hour=2026-05-01-13."
)
@click.option("--timeout", type=DURATION, default="1h", show_default=True,
              help="With --wait: give up (exit 1) after this long.")  # fmt: skip
@click.option("--poll", type=DURATION, default="30s", show_default=True,
              help="With --wait: look this often.")  # fmt: skip
@click.option("--publish", is_flag=True, help="First publish what the recorded policy deems complete now.")
@click.pass_obj
def partitions(ctx: Context, table: str, label: str | None, timeout: timedelta, poll: timedelta, publish: bool) -> None:
    """List the time partitions published complete, with the late records committed since;
    or, with --wait, wait for one of them (a scheduler's sensor).

    A partition (an hour or a day of the event-time column, per the table's spec) is
    complete once every writer's watermark passed its end plus the allowed lateness
    (table property icecommit.partition-lateness). Every partition from the first with
    data on is published, empty ones with 0 records.

    With --wait the exit code is 0 once the partition is published (within one --poll of
    it), 1 at the --timeout, and 2 at once for a label the table's spec cannot have.

    With --publish, partitions that the policy the table's committers recorded (writers,
    lateness, idle timeout) deems complete now are published first, without a commit: run
    it from a scheduler so that the last hour of a stream that went quiet is published.

    \b
    Example:
      icecommit partitions demo.clickstream
      icecommit partitions demo.clickstream --wait ts_hour=2026-05-01-13 --timeout 2h --poll 1m
      icecommit partitions demo.clickstream --publish
    """
    if label is None:

        def listing() -> None:
            catalog = ctx.catalog()
            if publish:
                publish_complete_partitions(catalog, table)
            ctx.output.partitions(table, partition_status(catalog, table))

        _run(ctx, listing)
        return

    def action() -> None:
        catalog = ctx.catalog()
        if publish:
            publish_complete_partitions(catalog, table)
        first_miss = [True]

        def sleep(seconds: float) -> None:
            # called only after a look that did not find it published: say so once, on
            # stderr, so that a scheduler's log shows the sensor is up and waiting
            if first_miss[0]:
                first_miss[0] = False
                click.echo(
                    f"{table}: {label} is not published yet; looking every {format_duration(poll)} "
                    f"for up to {format_duration(timeout)}",
                    err=True,
                )
            time.sleep(seconds)

        status = wait_for_partition(catalog, table, label, timeout=timeout, poll=poll, sleep=sleep)
        ctx.output.waited(table, label, status, timeout)
        if status is None:
            ctx.close()
            sys.exit(EXIT_PROBLEM)

    _run(ctx, action)


@cli.command()
@click.argument("table")
@click.option("--job", default=None, help="Only this job's checkpoints.")
@click.option("--since", type=INSTANT_OR_LAST, default=None,
              help="ISO 8601 time, or 'last' to start where the last successful run ended.")  # fmt: skip
@click.option("--until", "until", type=INSTANT, default=None, help="ISO 8601 time (default: now).")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "html"]), default="md", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write the report here.")
@click.option("--deep", is_flag=True, help="Count readable rows by reading the data files.")
@click.option("--max-loss-pct", type=click.FloatRange(min=0), default=0.0, show_default=True)
@click.option("--max-dup-pct", type=click.FloatRange(min=0), default=0.0, show_default=True)
@click.option("--all-windows", is_flag=True, help="Markdown: list every window, not only those with problems.")
@click.option("--branch", default=MAIN_BRANCH, show_default=True, help="The branch whose checkpoints to prove.")
@click.pass_obj
def reconcile(
    ctx: Context,
    table: str,
    job: str | None,
    since: datetime | str | None,
    until: datetime | None,
    fmt: str,
    out: Path | None,
    deep: bool,
    max_loss_pct: float,
    max_dup_pct: float,
    all_windows: bool,
    branch: str,
) -> None:
    """Prove source = written = committed = readable, or say where not.

    Exit code 0 when everything reconciles, 1 on a mismatch, 2 on a usage error. Each run
    is stored, so `--since last` continues from the previous successful run.

    \b
    Example:
      icecommit reconcile demo.clickstream --job clickstream-demo --since last --format html --out report.html
    """

    def action() -> None:
        if out is not None:
            _writable(out)
        catalog = ctx.catalog()
        engine = state_engine(state_uri(catalog))
        if since == "last":
            previous = last_successful_run(engine, table, job)
            start = previous.until if previous else None
        else:
            start = since if isinstance(since, datetime) else None
        report = reconcile_table(
            catalog, table, job_id=job, since=start, until=until, deep=deep,
            thresholds=Thresholds(max_loss_pct=max_loss_pct, max_duplication_pct=max_dup_pct), branch=branch,
        )  # fmt: skip
        changes = changes_since(last_run(engine, table, job), report)
        record_run(engine, report)
        if fmt == "md":
            rendered = report.to_markdown(all_windows=all_windows, changes=changes)
        elif fmt == "html":
            rendered = report.to_html(changes=changes, history=history_points(engine, table, job))
        else:
            rendered = report.to_json(changes=changes)
        if out is not None:
            out.write_text(rendered)
        ctx.output.reconcile(report, rendered, out, changes)
        if not report.ok:
            sys.exit(EXIT_PROBLEM)

    _run(ctx, action)


for _command in (*MAINTENANCE_COMMANDS, *RELEASE_COMMANDS, metrics):
    cli.add_command(_command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="icecommit")
