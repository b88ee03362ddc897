"""The ``icecommit`` command line. Commands resolve arguments, call the Python API and
hand the result to an :class:`~icecommit.cli.output.Output`; they hold no logic."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shlex
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from icecommit.catalog.eventtime import EventTimeVersion, snapshot_at_event_time
from icecommit.catalog.inspect import (
    list_checkpoints,
    list_snapshots,
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
    Context,
    _interactive,
    _run,
    _writable,
)
from icecommit.cli.output import JsonOutput, TextOutput
from icecommit.committer.completion import publish_complete_partitions
from icecommit.committer.results import CommitResult
from icecommit.core.errors import (
    CompletenessNotReachedError,
    InvalidArgumentError,
    NotAnAncestorError,
    SnapshotNotFoundError,
    TableSpecError,
)
from icecommit.core.settings import icecommit_home
from icecommit.core.timeparse import format_duration
from icecommit.maintenance.abandon import abandon_checkpoint, acknowledge_checkpoint, recover_job
from icecommit.maintenance.expire import apply_expire, plan_expire
from icecommit.maintenance.orphans import find_orphans
from icecommit.maintenance.rollback import apply_rollback, plan_rollback
from icecommit.metrics import Thresholds, last_successful_run, record_run
from icecommit.metrics import reconcile as reconcile_table
from icecommit.metrics.runs import changes_since, history_points, last_run
from icecommit.state import state_engine, state_uri

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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--catalog", "catalog_name", default=None, help="A catalog configured the pyiceberg way.")
@click.option("--uri", default=None, help="SQL catalog URI (default: $ICECOMMIT_CATALOG_URI or embedded SQLite).")
@click.option(
    "--warehouse",
    default=None,
    help="Warehouse location (default: $ICECOMMIT_WAREHOUSE, else $ICECOMMIT_HOME or ~/.local/share/icecommit); "
    "without --uri, the embedded catalog lives in it too.",
)
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
    ctx.obj = Context(
        catalog_name, uri, warehouse, JsonOutput() if output == "json" else TextOutput(), output == "json", debug
    )
    ctx.call_on_close(ctx.obj.close)


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
@click.pass_obj
def demo(ctx: Context, rows: int, checkpoints: int, hours: int) -> None:
    """Land a synthetic clickstream in demo.clickstream through Spark, exactly once.

    \b
    Example:
      icecommit demo --rows 200000 --checkpoints 4
    """

    def action() -> None:
        # Spark is loaded only by the command that runs it, so the catalog commands stay quick
        from icecommit.demo.pipeline import run_demo

        catalog = ctx.catalog(create=True)
        command = " ".join(
            ["icecommit"]
            + [f"{flag} {shlex.quote(value)}" for flag, value in
               (("--catalog", ctx.catalog_name), ("--uri", ctx.uri), ("--warehouse", ctx.warehouse)) if value]
        )  # fmt: skip
        run = functools.partial(run_demo, catalog, rows=rows, checkpoints=checkpoints, hours=hours, command=command)
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
@click.option("--since", default=None, help="ISO 8601 time, or 'last' to start where the last successful run ended.")
@click.option("--until", "until", type=INSTANT, default=None, help="ISO 8601 time (default: now).")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "html"]), default="md", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write the report here.")
@click.option("--deep", is_flag=True, help="Count readable rows by reading the data files.")
@click.option("--max-loss-pct", type=click.FloatRange(min=0), default=0.0, show_default=True)
@click.option("--max-dup-pct", type=click.FloatRange(min=0), default=0.0, show_default=True)
@click.option("--all-windows", is_flag=True, help="Markdown: list every window, not only those with problems.")
@click.pass_obj
def reconcile(
    ctx: Context,
    table: str,
    job: str | None,
    since: str | None,
    until: datetime | None,
    fmt: str,
    out: Path | None,
    deep: bool,
    max_loss_pct: float,
    max_dup_pct: float,
    all_windows: bool,
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
            start = INSTANT.convert(since, None, None) if since else None
        report = reconcile_table(
            catalog, table, job_id=job, since=start, until=until, deep=deep,
            thresholds=Thresholds(max_loss_pct=max_loss_pct, max_duplication_pct=max_dup_pct),
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


@cli.command()
@click.argument("table")
@click.option("--to-snapshot", type=int, default=None, help="Snapshot id (an ancestor, unless --allow-non-ancestor).")
@click.option("--to-timestamp", type=INSTANT, default=None, help="Newest ancestor committed at or before this time.")
@click.option(
    "--to-checkpoint", type=int, default=None, help="The snapshot that committed this checkpoint (with --job)."
)
@click.option("--job", default=None, help="Job id for --to-checkpoint.")
@click.option(
    "--to-event-time",
    type=INSTANT,
    default=None,
    help="Newest snapshot whose data is all at or before this (a checkpoint straddling it is left out).",
)
@click.option("--allow-non-ancestor", is_flag=True, help="Allow a --to-snapshot that is not an ancestor.")
@click.option("--dry-run", is_flag=True, help="Show what would become invisible; change nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def rollback(
    ctx: Context,
    table: str,
    to_snapshot: int | None,
    to_timestamp: datetime | None,
    to_checkpoint: int | None,
    job: str | None,
    to_event_time: datetime | None,
    allow_non_ancestor: bool,
    dry_run: bool,
    yes: bool,
) -> None:
    """Make an earlier snapshot current: by id, commit time, checkpoint or event time.

    --to-event-time T picks the newest snapshot with no data after T: a checkpoint that
    straddles T is left out entirely, with every later one, so the table is not "all data
    up to T". To read the table as of T without changing it, see snapshots --at-event-time.

    Without --yes it asks when stdin is a terminal and refuses otherwise.

    \b
    Example:
      icecommit rollback demo.clickstream --to-checkpoint 2 --job clickstream-demo --dry-run
      icecommit rollback demo.clickstream --to-event-time 2026-11-20T12:00:00Z --yes
    """

    if to_checkpoint is not None and not job:
        raise click.UsageError("--to-checkpoint needs --job (the job whose checkpoint it is)")

    def action() -> None:
        catalog = ctx.catalog()
        try:
            plan = plan_rollback(
                catalog, table, to_snapshot=to_snapshot, to_timestamp=to_timestamp, to_checkpoint=to_checkpoint,
                job_id=job, to_event_time=to_event_time, allow_non_ancestor=allow_non_ancestor,
            )  # fmt: skip
        except NotAnAncestorError as e:
            raise TableSpecError(
                e.table,
                f"snapshot {e.snapshot_id} is not an ancestor of the current snapshot (add --allow-non-ancestor)",
            ) from e
        if dry_run:
            ctx.output.rollback(plan)
            return
        if not yes:
            if not _interactive():
                raise ValueError("refusing to roll back without --yes when stdin is not a terminal")
            question = (
                f"Roll {table} back to snapshot {plan.target_snapshot_id}, hiding "
                f"{len(plan.hidden_snapshot_ids)} snapshot(s) and {plan.hidden_records:,} rows?"
            )
            try:
                confirmed = click.confirm(question, err=True)
            except click.Abort:  # end of input or Ctrl-C at the prompt
                confirmed = False
            if not confirmed:
                raise ValueError("rollback not confirmed; nothing changed")
        ctx.output.rollback(apply_rollback(catalog, plan))

    _run(ctx, action)


@cli.command()
@click.argument("table")
@click.option(
    "--older-than",
    type=DURATION,
    default=None,
    help="Expire snapshots older than this [default: the table's history.expire.max-snapshot-age-ms, else 5d].",
)
@click.option(
    "--retain-last",
    type=click.IntRange(min=1),
    default=None,
    help="Keep the newest N snapshots of every branch "
    "[default: the table's history.expire.min-snapshots-to-keep, else 1].",
)
@click.option(
    "--dry-run/--no-dry-run", default=True, show_default=True, help="List only (the default); --no-dry-run acts."
)
@click.option("--ignore-unreadable", "ignore", multiple=True, metavar="TABLE",
              help="Delete files although this other table cannot be read (repeat for each).")  # fmt: skip
@click.pass_obj
def expire(
    ctx: Context,
    table: str,
    older_than: timedelta | None,
    retain_last: int | None,
    dry_run: bool,
    ignore: tuple[str, ...],
) -> None:
    """Expire old snapshots and delete the files only they referenced (dry run by default).

    Keeps what Apache Iceberg keeps: every branch and tag head, and on every branch its
    newest --retain-last snapshots and those younger than --older-than. A branch's own
    retention (min-snapshots-to-keep, max-snapshot-age-ms on its ref) wins over both.

    No snapshot is kept for a job's sake: what each job committed is in a table property
    that expiry does not touch. Checkpoints that a rollback had taken off the branch are
    recorded as rolled back, and their files kept, before their snapshots go.

    \b
    Example:
      icecommit expire demo.clickstream --older-than 7d --retain-last 10
      icecommit expire demo.clickstream --older-than 7d --retain-last 10 --no-dry-run
    """

    def action() -> None:
        catalog = ctx.catalog()
        plan = plan_expire(catalog, table, older_than=older_than, retain_last=retain_last, ignore_unreadable=ignore)
        ctx.output.expire(plan if dry_run else apply_expire(catalog, plan))

    _run(ctx, action)


@cli.command()
@click.argument("table")
@click.option("--older-than", type=DURATION, default="3d", show_default=True, help="Only files older than this.")
@click.option("--delete", is_flag=True, help="Delete the orphans (default: only list them).")
@click.option("--ignore-unreadable", "ignore", multiple=True, metavar="TABLE",
              help="Delete although this other table of the catalog cannot be read (repeat for each).")  # fmt: skip
@click.pass_obj
def orphans(ctx: Context, table: str, older_than: timedelta, delete: bool, ignore: tuple[str, ...]) -> None:
    """List (or delete) files under the table that no snapshot or prepared checkpoint references.

    \b
    Example:
      icecommit orphans demo.clickstream --older-than 3d
      icecommit orphans demo.clickstream --older-than 3d --delete
    """

    def action() -> None:
        sweep = find_orphans(ctx.catalog(), table, older_than=older_than, delete=delete, ignore_unreadable=ignore)
        ctx.output.orphans(sweep)

    _run(ctx, action)


@cli.command()
@click.argument("table")
@click.option(
    "--where", default=None, help="Only files that may hold rows matching this filter, e.g. \"event = 'click'\"."
)
@click.option("--target-file-size", type=click.IntRange(min=1), default=None,
              help="Bytes per file (default: the table's write.target-file-size-bytes).")  # fmt: skip
@click.option("--min-input-files", type=click.IntRange(min=1), default=5, show_default=True,
              help="Leave a partition alone with fewer small files than this.")  # fmt: skip
@click.option("--max-bytes-per-commit", type=click.IntRange(min=1), default=100 * 1024**3, show_default=True,
              help="Input bytes rewritten per commit (partial progress).")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Show the plan only.")
@click.pass_obj
def compact(
    ctx: Context,
    table: str,
    where: str | None,
    target_file_size: int | None,
    min_input_files: int,
    max_bytes_per_commit: int,
    dry_run: bool,
) -> None:
    """Rewrite each partition's small files into files near the target size.

    One Iceberg `replace` snapshot per group of partitions; safe beside running jobs (their
    appends win; a group whose files changed meanwhile is aborted, nothing of it committed).
    The files it replaces stay until `icecommit expire` removes them.

    \b
    Example:
      icecommit compact demo.clickstream --dry-run
      icecommit compact demo.clickstream --where "event = 'click'" --target-file-size 134217728
    """

    def action() -> None:
        from icecommit.maintenance.compaction import compact as run_compaction  # loads the writers (and pyspark)

        plan = run_compaction(
            ctx.catalog(), table, where=where, target_file_size=target_file_size, min_input_files=min_input_files,
            max_bytes_per_commit=max_bytes_per_commit, dry_run=dry_run,
        )  # fmt: skip
        ctx.output.compacted(plan)

    _run(ctx, action)


@cli.command()
@click.argument("table")
@click.option("--job", required=True, help="The job that prepared the checkpoint.")
@click.option("--checkpoint", "checkpoint_id", type=click.IntRange(min=0), required=True)
@click.option("--reason", default=None, help="Why it is given up (kept with the checkpoint, shown in reports).")
@click.option("--ack", is_flag=True, help="Acknowledge an abandoned checkpoint (reports then show it as information).")
@click.pass_obj
def abandon(ctx: Context, table: str, job: str, checkpoint_id: int, reason: str | None, ack: bool) -> None:
    """Give up a prepared checkpoint that cannot commit, so its job can go on.

    It is recorded as abandoned (reason, who, when): replays of it are no-ops, its files
    become orphans for the sweeper, and every reconciliation reports it as a problem until
    it is acknowledged with --ack. A checkpoint the table holds cannot be abandoned.

    \b
    Example:
      icecommit abandon demo.clickstream --job demo --checkpoint 3 --reason "staged files lost in the S3 incident"
      icecommit abandon demo.clickstream --job demo --checkpoint 3 --ack
    """

    def action() -> None:
        catalog = ctx.catalog()
        if ack:
            state = acknowledge_checkpoint(catalog, table, job_id=job, checkpoint_id=checkpoint_id)
        elif reason is None or not reason.strip():
            raise click.UsageError("--reason is required to abandon a checkpoint (or --ack to acknowledge one)")
        else:
            state = abandon_checkpoint(catalog, table, job_id=job, checkpoint_id=checkpoint_id, reason=reason)
        ctx.output.abandoned(state)

    _run(ctx, action)


@cli.command()
@click.argument("table")
@click.option("--job", required=True, help="The job whose prepared checkpoints to commit.")
@click.pass_obj
def recover(ctx: Context, table: str, job: str) -> None:
    """Commit, in order, every checkpoint the job prepared and did not commit.

    What every ic.write of the job does first: nothing is committed twice and no file is
    deleted; a checkpoint a rollback removed is recorded as rolled back, not committed
    again. Exit 3 when a commit's outcome stays unknown (run it again), 4 when a checkpoint
    needs what this icecommit does not know (it was prepared by a newer version).

    \b
    Example:
      icecommit recover demo.clickstream --job demo
    """

    def action() -> None:
        ctx.output.recovered(table, job, recover_job(ctx.catalog(), table, job_id=job))

    _run(ctx, action)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="icecommit")
