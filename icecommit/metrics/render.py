"""Markdown and HTML forms of a reconciliation report."""

from __future__ import annotations

import html as html_escape
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from icecommit.metrics.report_model import Problem, ReconciliationReport, WindowLine


def _n(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


def duration(seconds: float | None) -> str:
    """Seconds in the units a person reads: ``42 s``, ``3 min 28 s``, ``2 h 18 min``, ``2 d 10 h``."""
    if seconds is None:
        return "n/a"
    whole = round(seconds)
    if whole < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def _minute(window: datetime | None) -> str:
    return window.strftime("%Y-%m-%d %H:%M") if window is not None else "(no event time)"


def window_ranges(windows: Sequence[WindowLine]) -> list[tuple[WindowLine, WindowLine, int, dict[str, int | None]]]:
    """Consecutive failing closed windows (one minute apart), collapsed: (first, last,
    count, summed source/written/committed/readable)."""
    ranges: list[tuple[WindowLine, WindowLine, int, dict[str, int | None]]] = []
    run: list[WindowLine] = []

    def close() -> None:
        if run:
            readable = None if any(w.readable is None for w in run) else sum(w.readable or 0 for w in run)
            totals: dict[str, int | None] = {
                "source": sum(w.source for w in run), "written": sum(w.written for w in run),
                "committed": sum(w.committed for w in run), "readable": readable,
            }  # fmt: skip
            ranges.append((run[0], run[-1], len(run), totals))
            run.clear()

    for w in windows:
        if w.ok or not w.closed:
            close()
            continue
        if run and (
            w.window_start is None
            or run[-1].window_start is None
            or w.window_start - run[-1].window_start != timedelta(minutes=1)
        ):
            close()
        run.append(w)
    close()
    return ranges


def summary_counts(report: ReconciliationReport) -> dict[str, object]:
    """The figures of the summary: rows per stage over the committed checkpoints, loss and
    duplication, checkpoints per state, lag and commit health."""
    lines_ = report.checkpoints
    source = sum(c.source for c in lines_ if c.status == "committed")
    written = sum(c.written for c in lines_ if c.status == "committed")
    committed = sum(c.committed for c in lines_ if c.status == "committed")
    readable = sum(c.readable for c in lines_ if c.status == "committed")
    removed = sum(c.removed for c in lines_ if c.status == "committed")  # on purpose: not loss
    consumed = sum(c.consumed for c in lines_ if c.status == "committed")  # an upsert's, by key: not written
    states: dict[str, int] = {}
    for c in (*report.checkpoints, *report.held, *report.pending):
        states[c.status] = states.get(c.status, 0) + 1
    errors = sum(1 for p in report.problems if p.severity == "error")
    return {
        "verdict": "ok" if report.ok else "mismatch",
        "errors": errors,
        "findings": len(report.problems) - errors,
        "rows": {
            "source": source,
            "written": written,
            "committed": committed,
            "readable": readable,
            "removed": removed,  # left on purpose: superseded by an overwrite or upsert, row deletes
            "consumed": consumed,  # an upsert's source rows deleted or superseded by key, never written
        },
        "readable_from": "data files" if report.deep else "table metadata",
        "loss": max(0, source - consumed - min(written, committed, readable + removed)),
        "duplicated": max(0, max(written, committed, readable) - source + consumed) if source else 0,
        "checkpoints": dict(sorted(states.items())),
        # on their job's audit branch: not on the branch by design, in no stage's sum above
        "held": {
            "checkpoints": len(report.held),
            "rows": sum(c.written for c in report.held),
            "failed_checks": sum(1 for c in report.held if any(not r.ok for r in c.checks)),
        },
    }


def summary_lines(report: ReconciliationReport, changes: str | None = None) -> list[str]:
    """The summary a person reads first: rows per stage, loss and duplication, checkpoint
    states, lag and commit health."""
    figures = summary_counts(report)
    rows = figures["rows"]
    assert isinstance(rows, dict)
    source, written, committed, readable = rows["source"], rows["written"], rows["committed"], rows["readable"]
    removed, consumed = rows["removed"], rows["consumed"]
    counted = (readable + removed if report.deep else committed) + consumed
    states, held = figures["checkpoints"], figures["held"]
    assert isinstance(states, dict) and isinstance(held, dict)
    h = report.health
    how = (
        "read from the data files (deep)"
        if report.deep
        else "from the table's metadata (run with --deep to read the files)"
    )
    return [
        "| stage | rows |",
        "|---|---:|",
        f"| source | {source:,} |",
        f"| written | {written:,} |",
        f"| committed | {committed:,} |",
        f"| readable | {readable:,} |",
        *([f"| removed on purpose (superseded, deleted) | {removed:,} |"] if removed else []),
        *(
            [f"| not written by design (an upsert's deletes and rows superseded in their checkpoint) | {consumed:,} |"]
            if consumed
            else []
        ),
        "",
        f"- **Loss**: {figures['loss']:,} row(s); **duplicated**: {figures['duplicated']:,} row(s) (readable {how}; "
        f"{counted:,} of {source:,} source rows accounted for).",
        "- **Checkpoints**: " + (", ".join(f"{n:,} {state}" for state, n in states.items()) or "none"),
        *([_held_summary(held)] if held["checkpoints"] else []),
        f"- **Event time to commit**: p50 {duration(report.lag.p50_seconds)}, p99 {duration(report.lag.p99_seconds)}.",
        f"- **Commit health**: {h.attempts:,} attempt(s), {h.retries:,} retr(y/ies) after {h.conflicts:,} "
        f"conflict(s), {h.unknown_outcomes:,} unknown outcome(s), {h.files_missing:,} file(s) missing at commit.",
        *([f"- **Changes**: {changes}."] if changes else []),
    ]


def _held_summary(held: dict[str, int]) -> str:
    """The summary's line on the checkpoints that wait on audit branches."""
    return (
        f"- **Held**: {held['checkpoints']:,} checkpoint(s) with {held['rows']:,} row(s) wait on audit branches "
        f"({held['failed_checks']:,} of them failed a check): not on this branch by design, not loss."
    )


#: What to do about a checkpoint's loss or duplication, by the stage where its counts part.
STAGE_ADVICE = {
    ("loss", "source-written"): "the rows its source reported did not all reach the writers: the query or the batch "
    "function filtered them (then do not declare preserves_rows=True: a filter is not a loss), or the source's count "
    "is wrong; compare the batch's source offsets (`icecommit checkpoints TABLE`) with what the query read",
    ("loss", "written-committed"): "the writers wrote rows its commit does not hold: see `icecommit checkpoints TABLE` "
    "for the checkpoint's files and state, and let the job (or `icecommit recover TABLE --job J`) finish it",
    ("loss", "committed-readable"): "rows committed are not readable: run with --deep to read the files, look for "
    "missing-file problems, and see `icecommit checkpoints TABLE` for the checkpoint's files and snapshot",
    ("duplication", "source-written"): "the writers wrote more rows than its source reported: the batch function "
    "read its input twice or multiplied it (a join, a union), or the source's count is short",
    ("duplication", "written-committed"): "its commit holds more rows than its writers wrote: a file committed twice; "
    "see `icecommit checkpoints TABLE` and roll back to before the second commit",
    ("duplication", "committed-readable"): "more of its rows are readable than were committed: a file live more than "
    "once (another writer added it again); roll back to before the second add, or rewrite the table's files",
}

#: What to do about each kind of problem, shown once under its heading.
ADVICE = {
    "loss": STAGE_ADVICE[("loss", "committed-readable")],
    "missing-file": "a file the table references is gone from storage: restore it (versioned storage, a backup), or "
    "roll back to before the snapshot that added it (`icecommit rollback TABLE --to-checkpoint N --job J --dry-run`)",
    "window-mismatch": "the counts of these minutes of event time disagree: the checkpoints above that cover them "
    "name the files; run with --deep to count what is readable",
    "double-commit": "a checkpoint landed twice: roll back to the snapshot before its second commit, then recommit "
    "nothing (the first is still there)",
    "duplicate-file": "one data file is live more than once (another writer added it again): roll back to before "
    "the second add, or rewrite the table's files",
    "stuck": "let the job (or its recover()) commit it, or give it up with `icecommit abandon`",
    "abandoned": "acknowledge it once its rows are dealt with: `icecommit abandon TABLE --job J --checkpoint N --ack`",
    "untraceable": "the snapshot that removed these rows was expired: nothing left to follow; keep snapshots "
    "longer than reconciliation runs",
    "failed-checks": "read the held rows on the audit branch (any Iceberg reader can), then publish the checkpoint "
    "anyway or discard it; the checkpoints queued behind it follow either way (`icecommit held TABLE` lists them)",
}


def advice(report: ReconciliationReport, heading: str) -> list[str]:
    """What to do about the problems under ``heading`` (a kind, then its counts): for loss
    and duplication, one line per stage where the checkpoints' counts part."""
    kind = heading.split(" ", 1)[0]
    stages = sorted({p.stage for p in report.problems if p.kind == kind and p.stage is not None})
    found = [STAGE_ADVICE[(kind, stage)] for stage in stages if (kind, stage) in STAGE_ADVICE]
    if found:
        return found
    return [ADVICE[kind]] if kind in ADVICE else []


def grouped_problems(report: ReconciliationReport) -> list[tuple[str, list[str]]]:
    """Problems by kind, most severe kinds first; failing windows collapsed into ranges."""
    order = {"error": 0, "warning": 1, "info": 2}
    kinds: dict[str, list[Problem]] = {}
    for p in report.problems:
        kinds.setdefault(p.kind, []).append(p)
    grouped: list[tuple[str, list[str]]] = []
    for kind, problems in sorted(kinds.items(), key=lambda item: (min(order.get(p.severity, 3) for p in item[1]),
                                                                   item[0])):  # fmt: skip
        severity = problems[0].severity
        if kind == "window-mismatch":
            items = []
            for first, last, count, totals in window_ranges(report.windows):
                span = _minute(first.window_start) if count == 1 else (
                    f"{count:,} windows {_minute(first.window_start)} to {_minute(last.window_start)}")  # fmt: skip
                read = "" if totals["readable"] is None else f", readable {totals['readable']:,}"
                items.append(f"{span}: source {totals['source']:,}, written {totals['written']:,}, "
                             f"committed {totals['committed']:,}{read}")  # fmt: skip
            grouped.append((f"{kind} ({severity}, {len(problems):,} window(s))", items))
        else:
            grouped.append((f"{kind} ({severity}, {len(problems):,})", [p.message for p in problems]))
    return grouped


def markdown(report: ReconciliationReport, *, all_windows: bool = False, changes: str | None = None) -> str:
    """The report as Markdown: the verdict and a summary first, then the problems grouped
    by kind (failing windows collapsed into ranges), then the details (passing windows
    summarised unless ``all_windows``)."""
    errors = sum(1 for p in report.problems if p.severity == "error")
    verdict = (
        "OK: every closed checkpoint and window reconciles" if report.ok
        else f"MISMATCH: {errors:,} error(s), {len(report.problems) - errors:,} other finding(s)"
    )  # fmt: skip
    since = report.since.isoformat() if report.since else "the beginning"
    lines = [
        f"# Reconciliation of {report.table}" + (f" (job {report.job_id})" if report.job_id else ""),
        "",
        f"**{verdict}**. Checkpoints prepared from {since} to {report.until.isoformat()}; "
        f"generated {report.generated_at.isoformat()}{'; deep scan' if report.deep else ''}.",
        "",
        "## Summary",
        "",
        *summary_lines(report, changes),
        "",
    ]
    if report.problems:
        lines += ["## Problems", ""]
        for heading, items in grouped_problems(report):
            lines += [f"### {heading}", ""]
            for line in advice(report, heading):
                lines += [f"What to do: {line}.", ""]
            lines += [f"- {item}" for item in items]
            lines.append("")
    lines += [
        "## Checkpoints",
        "",
        "| job | checkpoint | status | snapshot | source | written | committed | readable "
        "| loss % | dup % | ok | note |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for c in (*report.checkpoints, *report.held, *report.pending):
        lines.append(
            f"| {c.job_id} | {c.checkpoint_id} | {c.status} | {c.snapshot_id or ''} | {_n(c.source)} | "
            f"{_n(c.written)} | {_n(c.committed)} | {_n(c.readable)} | {c.loss_pct:.2f} | "
            f"{c.duplication_pct:.2f} | {'yes' if c.ok else '**no**'} | {c.note} |"
        )
    if report.held:
        lines += ["", "## Held checkpoints and their checks", "", "| " + " | ".join(_HELD_HEADERS) + " |"]
        lines.append("|---|---:|---|---|---|---|---|---|")
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row, _ in _held_rows(report)]
    shown = [w for w in report.windows if all_windows or not w.ok or not w.closed]
    passing = [w for w in report.windows if w not in shown]
    lines += ["", "## Windows (one minute of event time)", ""]
    if passing:
        first, last = passing[0].window_start, passing[-1].window_start
        lines += [
            f"{len(passing):,} closed window(s) from {_minute(first)} to {_minute(last)} reconcile and are not "
            "listed (`--all-windows` lists them).",
            "",
        ]
    if shown:
        lines += [
            "| window | closed | source | written | committed | readable | loss % | dup % | ok |",
            "|---|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for w in shown:
            lines.append(
                f"| {_minute(w.window_start)} | {'yes' if w.closed else 'no'} | {_n(w.source)} | {_n(w.written)} | "
                f"{_n(w.committed)} | {_n(w.readable)} | {w.loss_pct:.2f} | {w.duplication_pct:.2f} | "
                f"{'yes' if w.ok else '**no**'} |"
            )
    lines += ["", "## Commit health", "", _health(report), ""]
    if report.partitions:
        lines += ["## Complete time partitions", "", "| " + " | ".join(_PARTITION_HEADERS) + " |",
                  "|---|---|---:|---:|---:|"]  # fmt: skip
        lines += ["| " + " | ".join(row) + " |" for row in _partition_rows(report)]
        lines.append("")
    return "\n".join(lines)


_HELD_HEADERS = ("job", "checkpoint", "audit branch", "held because", "check", "passed", "observed", "detail")


def _held_rows(report: ReconciliationReport) -> list[tuple[tuple[str, ...], bool]]:
    """One row per check result of each held checkpoint (one without checks: one row), and
    whether it passed."""
    rows: list[tuple[tuple[str, ...], bool]] = []
    for c in report.held:
        head = (c.job_id, str(c.checkpoint_id), c.audit_branch or "", c.hold_reason or "")
        if not c.checks:
            rows.append(((*head, "", "", "", ""), True))
        for r in c.checks:
            observed = "" if r.observed is None else json.dumps(r.observed)
            rows.append(((*head, r.check, "yes" if r.ok else "no", observed, r.detail), r.ok))
    return rows


def _health(report: ReconciliationReport) -> str:
    h = report.health
    return (
        f"{h.checkpoints} committed checkpoints, {len(report.pending)} pending; {h.attempts} attempts, "
        f"{h.retries} retries after {h.conflicts} conflicts, {h.unknown_outcomes} unknown outcomes, "
        f"{h.files_missing} files missing at commit. Lag from event time to commit: p50 "
        f"{duration(report.lag.p50_seconds)}, p99 {duration(report.lag.p99_seconds)}."
    )


_PARTITION_HEADERS = ("partition", "completed at", "records then", "records now", "late")


def _partition_rows(report: ReconciliationReport) -> list[tuple[str, ...]]:
    return [
        (p.label, p.completed_at.strftime("%Y-%m-%d %H:%M:%S"), _n(p.records_at_completion), _n(p.records),
         _n(p.late_records))
        for p in report.partitions
    ]  # fmt: skip


def _partitions_html(report: ReconciliationReport) -> str:
    if not report.partitions:
        return ""
    rows = [(row, True) for row in _partition_rows(report)]  # late rows are counted, not a failure
    return "<h2>Complete time partitions</h2>" + _table(list(_PARTITION_HEADERS), rows)


#: The page's chart script (inline in the page: the report is one self-contained file).
_SCRIPT = (resources.files("icecommit.metrics") / "report_chart.js").read_text(encoding="utf-8")


def _summary_html(report: ReconciliationReport, changes: str | None) -> str:
    """The Markdown summary (a stage table, then bullets) as HTML."""
    rows, bullets = [], []
    for line in summary_lines(report, changes):
        if line.startswith("| ") and not line.startswith("| stage"):
            stage, value = (cell.strip() for cell in line.strip("|").split("|"))
            rows.append(f"<tr><th>{html_escape.escape(stage)}</th><td>{html_escape.escape(value)}</td></tr>")
        elif line.startswith("- "):
            text = html_escape.escape(line[2:]).replace("**", "")
            bullets.append(f"<li>{text}</li>")
    return f"<table>{''.join(rows)}</table><ul>{''.join(bullets)}</ul>"


#: Cells that wrap: a note, and a job id (which can be long), so the checkpoint table fits a
#: laptop's width (1,280 px) without scrolling.
_CELL = {"note": '<td class="note">', "detail": '<td class="note">', "job": '<td class="wrap">'}


def _table(headers: Sequence[str], rows: Sequence[tuple[Sequence[object], bool]]) -> str:
    """An HTML table in a horizontally scrolling box (the page itself never overflows);
    failing rows (second of each pair False) highlighted."""
    head = "".join(f"<th>{html_escape.escape(h)}</th>" for h in headers)
    body = "".join(
        ("<tr>" if ok else '<tr class="bad">')
        + "".join(
            _CELL.get(h, "<td>") + f"{html_escape.escape(str(v))}</td>" for h, v in zip(headers, values, strict=True)
        )
        + "</tr>"
        for values, ok in rows
    )
    return f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>'


def _windows_html(report: ReconciliationReport) -> str:
    shown = [w for w in report.windows if not w.ok or not w.closed]
    passing = [w for w in report.windows if w.ok and w.closed]
    parts = []
    if passing:
        parts.append(
            f"<p>{len(passing):,} closed window(s) from {_minute(passing[0].window_start)} to "
            f"{_minute(passing[-1].window_start)} reconcile (not listed).</p>"
        )
    if shown:
        parts.append(_table(
            ["window", "closed", "source", "written", "committed", "readable", "loss %", "dup %", "ok"],
            [((_minute(w.window_start), "yes" if w.closed else "no", _n(w.source), _n(w.written), _n(w.committed),
               _n(w.readable), f"{w.loss_pct:.2f}", f"{w.duplication_pct:.2f}", "yes" if w.ok else "no"),
              w.ok or not w.closed) for w in shown],
        ))  # fmt: skip
    return "".join(parts) or "<p>No windows (the table has no event-time column, or nothing in range).</p>"


def _history_html(history: Sequence[dict[str, object]]) -> str:
    if not history:
        return "<p>No stored runs yet.</p>"
    return _table(
        ["ran at (UTC)", "verdict", "checkpoints", "source", "readable", "lag p50", "lag p99", "problems"],
        [((str(r["ran_at"])[:19].replace("T", " "), "ok" if r["ok"] else "MISMATCH", r["checkpoints"],
           f"{r['source']:,}", f"{r['readable']:,}", r["lag_p50"], r["lag_p99"], r["problems"]), bool(r["ok"]))
         for r in reversed(history)],
    )  # fmt: skip


def html(report: ReconciliationReport, *, changes: str | None = None, history: Sequence[dict[str, object]] = ()) -> str:
    """A self-contained page (no external resources): verdict and summary, problems grouped
    by kind, a chart of every stage per checkpoint (problem and removed checkpoints
    marked), one per event-time window (failing windows marked), the stored runs over
    time (``history``: :func:`icecommit.metrics.runs.history_points`), then the tables.
    Fits a phone's width (390 px) and a laptop's without horizontal scrolling."""
    document = report.to_json(changes=changes).replace("</", "<\\/")
    runs = json.dumps(list(history), default=str).replace("</", "<\\/")
    verdict = "reconciles" if report.ok else "does NOT reconcile"
    colour = "#1a7f37" if report.ok else "#cf222e"
    problems = "".join(
        f"<li><b>{html_escape.escape(heading)}</b>"
        + "".join(f"<br>What to do: {html_escape.escape(a)}." for a in advice(report, heading))
        + "<ul>"
        + "".join(f"<li>{html_escape.escape(item)}</li>" for item in items)
        + "</ul></li>"
        for heading, items in grouped_problems(report)
    )
    checkpoints = _table(
        ["job", "checkpoint", "status", "snapshot", "source", "written", "committed", "readable", "loss %", "dup %",
         "ok", "note"],
        [((c.job_id, c.checkpoint_id, c.status, c.snapshot_id or "", f"{c.source:,}", f"{c.written:,}",
           f"{c.committed:,}", f"{c.readable:,}", f"{c.loss_pct:.2f}", f"{c.duplication_pct:.2f}",
           "yes" if c.ok else "no", c.note), c.ok) for c in (*report.checkpoints, *report.held, *report.pending)],
    )  # fmt: skip
    held = _table(_HELD_HEADERS, _held_rows(report)) if report.held else ""
    title = html_escape.escape(f"Reconciliation of {report.table}")
    svg = 'xmlns="http://www.w3.org/2000/svg" viewBox="0 0 960 320" role="img"'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ font: 14px system-ui, sans-serif; margin: 1em; color: #222; max-width: 1400px; }}
p, li {{ overflow-wrap: anywhere; }}
table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #ccc; padding: 2px 5px; text-align: right; white-space: nowrap; }}
th {{ white-space: normal; }}
td.note {{ white-space: normal; text-align: left; min-width: 12em; }}
td.wrap {{ white-space: normal; overflow-wrap: anywhere; text-align: left; max-width: 12em; }}
.scroll {{ overflow-x: auto; max-width: 100%; }}
tr.bad td {{ background: #ffebe9; }}
svg {{ width: 100%; height: auto; max-width: 960px; display: block; }}
.verdict {{ color: {colour}; font-weight: bold; font-size: 1.3em; }}
</style></head><body>
<h1>{title}</h1>
<p class="verdict" id="verdict">The table {verdict}.</p>
<p>Generated {html_escape.escape(report.generated_at.isoformat())}; {len(report.checkpoints)} committed checkpoints,
{len(report.held)} held, {len(report.pending)} pending.</p>
<h2>Summary</h2>
<div id="summary">{_summary_html(report, changes)}</div>
{"<h2>Problems</h2><ul id='problems'>" + problems + "</ul>" if problems else ""}
<h2>Rows per checkpoint, per stage</h2>
<svg id="chart" {svg} aria-label="rows per checkpoint per stage"></svg>
<h2>Checkpoints</h2>
{checkpoints}
{"<h2>Held checkpoints and their checks</h2>" + held if held else ""}
<h2>Windows (one minute of event time)</h2>
<svg id="chart-windows" {svg} aria-label="rows per window per stage"></svg>
{_windows_html(report)}
<h2>Commit health</h2>
<p id="health">{html_escape.escape(_health(report))}</p>
{_partitions_html(report)}
<h2>Stored runs over time</h2>
<svg id="history" {svg} aria-label="rows and verdict of the stored runs"></svg>
{_history_html(history)}
<script type="application/json" id="report-data">{document}</script>
<script type="application/json" id="report-history">{runs}</script>
<script>{_SCRIPT}</script>
</body></html>
"""
