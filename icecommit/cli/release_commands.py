"""Commands for what readers see: the checkpoints held on an audit branch (list them,
publish one, discard one) and where several tables can be read together (``cut``)."""

from __future__ import annotations

import sys

import click

from icecommit.catalog.loading import load_table
from icecommit.catalog.multi_table import consistent_cut
from icecommit.cli.context import EXIT_PROBLEM, Context, _run
from icecommit.committer.release import discard_checkpoint, publish_checkpoint
from icecommit.core.identifiers import table_name
from icecommit.state.identity import table_state


@click.command()
@click.argument("table")
@click.option("--job", default=None, help="Only this job's checkpoints.")
@click.pass_obj
def held(ctx: Context, table: str, job: str | None) -> None:
    """List the checkpoints held on an audit branch (a failed check, a manual release) and
    the ones queued behind them, with their check results. Exits 1 when any is held.

    \b
    Example:
      icecommit held demo.clickstream --job demo
    """

    def action() -> None:
        catalog = ctx.catalog()
        loaded = load_table(catalog, table)
        rows = table_state(catalog, loaded).waiting(table_name(loaded), job)
        ctx.output.held(table_name(loaded), rows)
        if rows:
            sys.exit(EXIT_PROBLEM)

    _run(ctx, action)


@click.command()
@click.argument("table")
@click.option("--job", required=True, help="The job that wrote the checkpoint.")
@click.option("--checkpoint", "checkpoint_id", type=click.IntRange(min=0), required=True)
@click.option("--reason", default=None, help="Why (kept with the checkpoint; needed with --force).")
@click.option("--force", is_flag=True, help="Publish it although a check failed.")
@click.option("--branch", default=None, help="The branch readers use (default main).")
@click.pass_obj
def publish(
    ctx: Context, table: str, job: str, checkpoint_id: int, reason: str | None, force: bool, branch: str | None
) -> None:
    """Bring a held checkpoint to the branch readers use (exactly once), then the checkpoints
    queued behind it whose checks passed. A checkpoint whose checks failed needs --force and
    a --reason; both are recorded with who published it.

    \b
    Example:
      icecommit publish demo.clickstream --job demo --checkpoint 7
      icecommit publish demo.clickstream --job demo --checkpoint 8 --force --reason "late partner file, checked by hand"
    """

    def action() -> None:
        extra = {"branch": branch} if branch else {}
        results = publish_checkpoint(
            ctx.catalog(), table, job_id=job, checkpoint_id=checkpoint_id, reason=reason, force=force, **extra
        )
        ctx.output.recovered(table, job, results)

    _run(ctx, action)


@click.command()
@click.argument("table")
@click.option("--job", required=True, help="The job that wrote the checkpoint.")
@click.option("--checkpoint", "checkpoint_id", type=click.IntRange(min=0), required=True)
@click.option("--reason", required=True, help="Why it is given up (kept with the checkpoint, shown in reports).")
@click.option("--branch", default=None, help="The branch readers use (default main).")
@click.pass_obj
def discard(ctx: Context, table: str, job: str, checkpoint_id: int, reason: str, branch: str | None) -> None:
    """Give up a held checkpoint: recorded as abandoned (reason, who, when), and the
    checkpoints queued behind it are published.

    \b
    Example:
      icecommit discard demo.clickstream --job demo --checkpoint 7 --reason "duplicated upstream"
    """

    def action() -> None:
        extra = {"branch": branch} if branch else {}
        state = discard_checkpoint(ctx.catalog(), table, job_id=job, checkpoint_id=checkpoint_id, reason=reason,
                                   **extra)  # fmt: skip
        ctx.output.abandoned(state)

    _run(ctx, action)


@click.command()
@click.argument("tables", nargs=-1, required=True)
@click.option("--job", required=True, help="The job whose checkpoints the tables hold.")
@click.pass_obj
def cut(ctx: Context, tables: tuple[str, ...], job: str) -> None:
    """Print where several tables can be read together: the newest checkpoint of the job
    that every table holds, and each table's snapshot as of it (read each at its snapshot
    id). Exits 1 when no checkpoint is in all of them.

    \b
    Example:
      icecommit cut shop.orders shop.lines --job orders
    """

    def action() -> None:
        found = consistent_cut(ctx.catalog(), list(tables), job_id=job)
        ctx.output.cut(job, found)
        if found.checkpoint_id is None:
            sys.exit(EXIT_PROBLEM)

    _run(ctx, action)


RELEASE_COMMANDS = (held, publish, discard, cut)

__all__ = ["RELEASE_COMMANDS"]
