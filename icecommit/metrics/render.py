"""Markdown and HTML forms of a reconciliation report."""

from __future__ import annotations

import html as html_escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from icecommit.metrics.report_model import ReconciliationReport


def _n(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


def markdown(report: ReconciliationReport) -> str:
    """The report as Markdown."""
    verdict = "OK: every closed checkpoint and window reconciles" if report.ok else "MISMATCH"
    since = report.since.isoformat() if report.since else "the beginning"
    lines = [
        f"# Reconciliation of {report.table}" + (f" (job {report.job_id})" if report.job_id else ""),
        "",
        f"**{verdict}**. Checkpoints prepared from {since} to {report.until.isoformat()}; "
        f"generated {report.generated_at.isoformat()}{'; deep scan' if report.deep else ''}.",
        "",
    ]
    if report.problems:
        lines += ["## Problems", ""]
        lines += [f"- **{p.kind}** ({p.severity}): {p.message}" for p in report.problems]
        lines.append("")
    lines += [
        "## Checkpoints",
        "",
        "| job | checkpoint | status | snapshot | source | written | committed | readable "
        "| loss % | dup % | ok | note |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for c in (*report.checkpoints, *report.pending):
        lines.append(
            f"| {c.job_id} | {c.checkpoint_id} | {c.status} | {c.snapshot_id or ''} | {_n(c.source)} | "
            f"{_n(c.written)} | {_n(c.committed)} | {_n(c.readable)} | {c.loss_pct:.2f} | "
            f"{c.duplication_pct:.2f} | {'yes' if c.ok else '**no**'} | {c.note} |"
        )
    lines += ["", "## Windows (one minute of event time)", ""]
    lines += [
        "| window | closed | source | written | committed | readable | loss % | dup % | ok |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for w in report.windows:
        label = w.window_start.strftime("%Y-%m-%d %H:%M") if w.window_start else "(no event time)"
        lines.append(
            f"| {label} | {'yes' if w.closed else 'no'} | {_n(w.source)} | {_n(w.written)} | {_n(w.committed)} | "
            f"{_n(w.readable)} | {w.loss_pct:.2f} | {w.duplication_pct:.2f} | {'yes' if w.ok else '**no**'} |"
        )
    h = report.health
    p50 = f"{report.lag.p50_seconds:.1f}s" if report.lag.p50_seconds is not None else "n/a"
    p99 = f"{report.lag.p99_seconds:.1f}s" if report.lag.p99_seconds is not None else "n/a"
    lines += [
        "",
        "## Commit health",
        "",
        f"{h.checkpoints} committed checkpoints, {len(report.pending)} pending; {h.attempts} attempts, "
        f"{h.retries} retries after {h.conflicts} conflicts, {h.unknown_outcomes} unknown outcomes, "
        f"{h.files_missing} files missing at commit. Lag from event time to commit: p50 {p50}, p99 {p99}.",
        "",
    ]
    if report.partitions:
        lines += [
            "## Complete time partitions",
            "",
            "| partition | completed at | records then | records now | late |",
            "|---|---|---:|---:|---:|",
        ]
        lines += [
            f"| {p.label} | {p.completed_at.strftime('%Y-%m-%d %H:%M:%S')} | {_n(p.records_at_completion)} | "
            f"{_n(p.records)} | {_n(p.late_records)} |"
            for p in report.partitions
        ]
        lines.append("")
    return "\n".join(lines)


_SCRIPT = """
(function () {
  const data = JSON.parse(document.getElementById('report-data').textContent);
  const svg = document.getElementById('chart');
  const ns = 'http://www.w3.org/2000/svg';
  // one point per event-time window; a table without event time is charted per checkpoint
  let windows = data.windows.filter(w => w.window_start !== null);
  if (!windows.length) {
    windows = data.checkpoints.map(c => Object.assign({}, c, {window_start: 'checkpoint ' + c.checkpoint_id}));
  }
  const stages = [['source', '#1f77b4'], ['written', '#ff7f0e'], ['committed', '#2ca02c'], ['readable', '#9467bd']];
  const width = 960, height = 320, left = 70, bottom = 40, top = 34, right = 20;
  const max = Math.max(1, ...windows.flatMap(w => stages.map(([s]) => w[s] || 0)));
  const x = i => left + (windows.length < 2 ? 0 : i * (width - left - right) / (windows.length - 1));
  const y = v => height - bottom - v * (height - bottom - top) / max;
  function add(tag, attrs, text) {
    const el = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    svg.appendChild(el);
    return el;
  }
  add('line', {x1: left, y1: height - bottom, x2: width - right, y2: height - bottom, stroke: '#333'});
  add('line', {x1: left, y1: top, x2: left, y2: height - bottom, stroke: '#333'});
  add('text', {x: 5, y: top + 5, 'font-size': 11}, max.toLocaleString());
  add('text', {x: 5, y: height - bottom, 'font-size': 11}, '0');
  if (windows.length) {
    add('text', {x: left, y: height - 10, 'font-size': 11}, windows[0].window_start.slice(0, 16));
    add('text', {x: width - right - 110, y: height - 10, 'font-size': 11},
        windows[windows.length - 1].window_start.slice(0, 16));
  }
  stages.forEach(([stage, colour], k) => {
    const values = windows.map(w => w[stage]);
    if (values.every(v => v === null)) return;
    const points = values.map((v, i) => `${x(i).toFixed(1)},${y(v || 0).toFixed(1)}`).join(' ');
    add('polyline', {points, fill: 'none', stroke: colour, 'stroke-width': 1.5, 'data-stage': stage});
    add('text', {x: width - right - 300 + k * 75, y: 14, fill: colour, 'font-size': 12}, stage);
  });
  windows.forEach((w, i) => {
    if (!w.ok) add('circle', {cx: x(i), cy: y(w.source), r: 4, fill: 'red', 'data-mismatch': w.window_start});
  });
  svg.setAttribute('data-drawn', String(windows.length));
})();
"""


def html(report: ReconciliationReport) -> str:
    """A self-contained page: verdict, problems, chart (inline SVG drawn from the embedded
    JSON, no external resources), and the tables."""
    document = report.to_json().replace("</", "<\\/")
    verdict = "reconciles" if report.ok else "does NOT reconcile"
    colour = "#1a7f37" if report.ok else "#cf222e"
    problems = "".join(
        f"<li><b>{html_escape.escape(p.kind)}</b>: {html_escape.escape(p.message)}</li>" for p in report.problems
    )
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html_escape.escape(str(v))}</td>"
            for v in (
                c.job_id,
                c.checkpoint_id,
                c.status,
                c.snapshot_id or "",
                f"{c.source:,}",
                f"{c.written:,}",
                f"{c.committed:,}",
                f"{c.readable:,}",
                f"{c.loss_pct:.2f}",
                f"{c.duplication_pct:.2f}",
                "yes" if c.ok else "no",
            )
        )
        + "</tr>"
        for c in (*report.checkpoints, *report.pending)
    )
    title = html_escape.escape(f"Reconciliation of {report.table}")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: right; }}
.verdict {{ color: {colour}; font-weight: bold; font-size: 1.3em; }}
</style></head><body>
<h1>{title}</h1>
<p class="verdict" id="verdict">The table {verdict}.</p>
<p>Generated {html_escape.escape(report.generated_at.isoformat())}; {len(report.checkpoints)} committed checkpoints,
{len(report.pending)} pending.</p>
{"<h2>Problems</h2><ul id='problems'>" + problems + "</ul>" if problems else ""}
<h2>Records per one-minute window (or per checkpoint), per stage</h2>
<svg id="chart" xmlns="http://www.w3.org/2000/svg" width="960" height="320" role="img"
 aria-label="records per window per stage"></svg>
<h2>Checkpoints</h2>
<table><tr><th>job</th><th>checkpoint</th><th>status</th><th>snapshot</th><th>source</th><th>written</th>
<th>committed</th><th>readable</th><th>loss %</th><th>dup %</th><th>ok</th></tr>{rows}</table>
<script type="application/json" id="report-data">{document}</script>
<script>{_SCRIPT}</script>
</body></html>
"""
