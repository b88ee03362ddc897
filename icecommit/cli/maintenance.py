"""The commands that change a table's or a checkpoint's fate: rollback, expiry, the orphan
sweep, compaction, abandon and recover (registered on the ``icecommit`` group by
:mod:`icecommit.cli.main`)."""

from __future__ import annotations

from datetime import datetime, timedelta

import click

from icecommit.cli.context import (
    DURATION,
    INSTANT,
    Context,
    _interactive,
    _run,
)
from icecommit.core.ancestry import MAIN_BRANCH
from icecommit.core.errors import (
    NotAnAncestorError,
    TableSpecError,
)
from icecommit.maintenance.abandon import abandon_checkpoint, acknowledge_checkpoint, recover_job
from icecommit.maintenance.expire import apply_expire, plan_expire
from icecommit.maintenance.orphans import find_orphans
from icecommit.maintenance.rollback import apply_rollbacks, plan_rollback


@click.command()
@click.argument("tables", metavar="TABLE...", nargs=-1, required=True)
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
@click.option("--branch", default=MAIN_BRANCH, show_default=True, help="The branch to roll back.")
@click.option("--dry-run", is_flag=True, help="Show what would become invisible; change nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def rollback(
    ctx: Context,
    tables: tuple[str, ...],
    to_snapshot: int | None,
    to_timestamp: datetime | None,
    to_checkpoint: int | None,
    job: str | None,
    to_event_time: datetime | None,
    allow_non_ancestor: bool,
    branch: str,
    dry_run: bool,
    yes: bool,
) -> None:
    """Make an earlier snapshot current: by id, commit time, checkpoint or event time.

    --to-event-time T picks the newest snapshot with no data after T: a checkpoint that
    straddles T is left out entirely, with every later one, so the table is not "all data
    up to T". To read the table as of T without changing it, see snapshots --at-event-time.

    Several tables roll back to one checkpoint together (--to-checkpoint N --job J): in one
    catalog commit where the catalog can, so that none of them shows the checkpoints after N
    while another still does.

    Without --yes it asks when stdin is a terminal and refuses otherwise.

    \b
    Example:
      icecommit rollback demo.clickstream --to-checkpoint 2 --job clickstream-demo --dry-run
      icecommit rollback demo.clickstream --to-event-time 2026-11-20T12:00:00Z --yes
      icecommit rollback shop.orders shop.lines --to-checkpoint 6 --job orders --yes
    """

    targets = {"--to-snapshot": to_snapshot, "--to-timestamp": to_timestamp, "--to-checkpoint": to_checkpoint,
               "--to-event-time": to_event_time}  # fmt: skip
    given = [flag for flag, value in targets.items() if value is not None]
    if len(given) != 1:
        raise click.UsageError(
            f"give exactly one of {', '.join(targets)} (the snapshot to make current)"
            + (f"; {' and '.join(given)} were given" if given else "")
        )
    if to_checkpoint is not None and not job:
        raise click.UsageError("--to-checkpoint needs --job (the job whose checkpoint it is)")
    if len(tables) > 1 and to_checkpoint is None:
        raise click.UsageError("several tables roll back to one checkpoint: give --to-checkpoint N --job JOB")

    def action() -> None:
        catalog = ctx.catalog()
        plans = []
        for table in tables:  # every plan before any table changes
            try:
                plans.append(plan_rollback(
                    catalog, table, to_snapshot=to_snapshot, to_timestamp=to_timestamp, to_checkpoint=to_checkpoint,
                    job_id=job, to_event_time=to_event_time, allow_non_ancestor=allow_non_ancestor, branch=branch,
                ))  # fmt: skip
            except NotAnAncestorError as e:
                raise TableSpecError(
                    e.table,
                    f"snapshot {e.snapshot_id} is not an ancestor of the current snapshot (add --allow-non-ancestor)",
                ) from e
        if dry_run:
            for plan in plans:
                ctx.output.rollback(plan)
            return
        if not yes:
            if not _interactive():
                raise ValueError("refusing to roll back without --yes when stdin is not a terminal")
            question = " ".join(
                f"Roll {plan.table} back to snapshot {plan.target_snapshot_id}, hiding "
                f"{len(plan.hidden_snapshot_ids)} snapshot(s) and {plan.hidden_records:,} rows?"
                for plan in plans
            )
            try:
                confirmed = click.confirm(question, err=True)
            except click.Abort:  # end of input or Ctrl-C at the prompt
                confirmed = False
            if not confirmed:
                raise ValueError("rollback not confirmed; nothing changed")
        for applied in apply_rollbacks(catalog, plans):
            ctx.output.rollback(applied)

    _run(ctx, action)


@click.command()
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
@click.option(
    "--branch",
    default=None,
    metavar="BRANCH",
    help="Expire only this branch's snapshots that no other branch or tag holds [default: every branch].",
)
@click.pass_obj
def expire(
    ctx: Context,
    table: str,
    older_than: timedelta | None,
    retain_last: int | None,
    dry_run: bool,
    ignore: tuple[str, ...],
    branch: str | None,
) -> None:
    """Expire old snapshots and delete the files only they referenced (dry run by default).

    Keeps what Apache Iceberg keeps: every branch and tag head, and on every branch its
    newest --retain-last snapshots and those younger than --older-than. A branch's own
    retention (min-snapshots-to-keep, max-snapshot-age-ms on its ref) wins over both.

    With --branch, only that branch's snapshots go, those its rules leave and no other branch
    or tag holds; every other branch keeps its whole ancestry.

    No snapshot is kept for a job's sake: what each job committed to each branch is in a
    table property that expiry does not touch. Checkpoints that a rollback had taken off the
    branch are recorded as rolled back, and their files kept, before their snapshots go.

    \b
    Example:
      icecommit expire demo.clickstream --older-than 7d --retain-last 10
      icecommit expire demo.clickstream --older-than 7d --retain-last 10 --no-dry-run
      icecommit expire demo.clickstream --branch audit --older-than 1d
    """

    def action() -> None:
        catalog = ctx.catalog()
        plan = plan_expire(
            catalog, table, older_than=older_than, retain_last=retain_last, ignore_unreadable=ignore, branch=branch
        )
        ctx.output.expire(plan if dry_run else apply_expire(catalog, plan))

    _run(ctx, action)


@click.command()
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


@click.command()
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
@click.option("--delete-ratio", type=click.FloatRange(min=0, max=1, min_open=True), default=0.3, show_default=True,
              help="Also rewrite a file with this share of its rows deleted by position, any size.")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Show the plan only.")
@click.pass_obj
def compact(
    ctx: Context,
    table: str,
    where: str | None,
    target_file_size: int | None,
    min_input_files: int,
    max_bytes_per_commit: int,
    delete_ratio: float,
    dry_run: bool,
) -> None:
    """Rewrite each partition's small files into files near the target size.

    One Iceberg `replace` snapshot per group of partitions; safe beside running jobs (their
    appends win; a group whose files changed meanwhile is aborted, nothing of it committed).
    Position delete files are applied: deleted rows are not written again, and delete files
    that point only at rewritten files leave the table.
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
            max_bytes_per_commit=max_bytes_per_commit, delete_ratio=delete_ratio, dry_run=dry_run,
        )  # fmt: skip
        ctx.output.compacted(plan)

    _run(ctx, action)


@click.command()
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


@click.command()
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


#: Registered on the command group by :mod:`icecommit.cli.main`.
MAINTENANCE_COMMANDS = (rollback, expire, orphans, compact, abandon, recover)
