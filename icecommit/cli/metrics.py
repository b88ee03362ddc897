"""``icecommit metrics`` (the Prometheus text, once) and ``icecommit metrics serve`` (an
endpoint to scrape), read from the catalog's state database (registered on the
``icecommit`` group by :mod:`icecommit.cli.main`)."""

from __future__ import annotations

import threading
from datetime import timedelta

import click

from icecommit.cli.context import DURATION, Context, _run
from icecommit.core.errors import InvalidArgumentError
from icecommit.metrics.exporter import DEFAULT_PORT, DEFAULT_STUCK_AFTER, StateMetrics, exposition, serve
from icecommit.state import state_engine, state_uri

_TABLE = click.option("--table", "tables", multiple=True, help="Only this table (repeatable; default: every table).")
_STUCK = click.option(
    "--stuck-after", type=DURATION, default=f"{int(DEFAULT_STUCK_AFTER.total_seconds() // 60)}m", show_default=True,
    help="Report a checkpoint prepared this long ago and not committed as stuck.",
)  # fmt: skip


def _metrics(ctx: Context, tables: tuple[str, ...], stuck_after: timedelta) -> StateMetrics:
    """The state's metrics; a ``--table`` the state database knows nothing of is refused
    (a typo would otherwise serve an empty page that looks healthy)."""
    metrics = StateMetrics(state_engine(state_uri(ctx.catalog())), tables=tables, stuck_after=stuck_after)
    known = metrics.known_tables()
    for table in tables:
        if table not in known:
            shown = ", ".join(sorted(known)[:10]) or "none yet"
            raise InvalidArgumentError("--table", table, f"a table the state database holds something of ({shown})")
    return metrics


@click.group(invoke_without_command=True)
@_TABLE
@_STUCK
@click.pass_context
def metrics(click_ctx: click.Context, tables: tuple[str, ...], stuck_after: timedelta) -> None:
    """Print the state's metrics once, in the Prometheus text format (or serve them).

    Seconds since the last commit, checkpoints by state and stuck ones, commit attempts,
    unknown outcomes, event-time lag, partitions published and late rows, the last
    reconciliation's verdict, compaction and expiry work; per table and job.

    \b
    Example:
      icecommit metrics --table demo.clickstream
      icecommit metrics serve --port 9473
    """
    ctx: Context = click_ctx.obj
    if click_ctx.invoked_subcommand is None:
        _run(ctx, lambda: click.echo(exposition(_metrics(ctx, tables, stuck_after)), nl=False))


@metrics.command("serve")
@click.option("--table", "tables", multiple=True, help="Only this table (repeatable; default: every table).")
@click.option("--stuck-after", type=DURATION, default=None,
              help="Report a checkpoint prepared this long ago, not committed, as stuck.  [default: 15m]")  # fmt: skip
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback unless told).")
@click.option("--port", type=click.IntRange(min=0, max=65535), default=DEFAULT_PORT, show_default=True,
              help="Port to listen on (0: any free port, printed).")  # fmt: skip
@click.pass_obj
def serve_command(ctx: Context, tables: tuple[str, ...], stuck_after: timedelta | None, host: str, port: int) -> None:
    """Serve the state's metrics at http://HOST:PORT/metrics until interrupted; each scrape
    reads the state database afresh.

    \b
    Example:
      icecommit metrics serve --port 9473 --table demo.clickstream
    """

    group = click.get_current_context().parent  # --table and --stuck-after given before "serve" count too
    given = group.params if group is not None else {}
    tables = (*given.get("tables", ()), *tables)
    stuck_after = stuck_after if stuck_after is not None else given.get("stuck_after", DEFAULT_STUCK_AFTER)

    def action() -> None:
        state = _metrics(ctx, tables, stuck_after)
        try:
            server, bound = serve(state, host=host, port=port)
        except OSError as e:  # in use, or an address this machine does not have
            raise InvalidArgumentError(
                "--port", port, f"a port free on {host} ({e.strerror or e}; --port 0 picks a free one)"
            ) from e
        shown = f"[{host}]" if ":" in host else host
        click.echo(f"serving icecommit metrics on http://{shown}:{bound}/metrics (Ctrl-C stops)", err=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        finally:
            server.shutdown()
            server.server_close()

    _run(ctx, action)
