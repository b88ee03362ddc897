// Draws the reconciliation report's charts from the JSON embedded in the page (no network).
(function () {
  const data = JSON.parse(document.getElementById('report-data').textContent);
  const history = JSON.parse(document.getElementById('report-history').textContent);
  const ns = 'http://www.w3.org/2000/svg';
  const colours = {source: '#1f77b4', written: '#ff7f0e', committed: '#2ca02c', readable: '#9467bd'};
  // draw one chart: labels along x, one polyline per series, a marker per flagged point
  function draw(svg, labels, series, markers) {
    const width = 960, height = 320, left = 78, bottom = 40, top = 34, right = 20;
    const values = series.flatMap(s => s.values.filter(v => v !== null));
    const max = Math.max(1, ...values);
    const x = i => left + (labels.length < 2 ? (width - left - right) / 2 : i * (width - left - right) / (labels.length - 1));
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
    add('text', {x: 4, y: top + 5, 'font-size': 12}, max.toLocaleString());
    add('text', {x: 4, y: height - bottom, 'font-size': 12}, '0');
    if (labels.length) {
      add('text', {x: left, y: height - 12, 'font-size': 12}, labels[0]);
      if (labels.length > 1) {
        add('text', {x: width - right, y: height - 12, 'font-size': 12, 'text-anchor': 'end'}, labels[labels.length - 1]);
      }
    }
    series.forEach((s, k) => {
      if (s.values.every(v => v === null)) return;
      const points = s.values.map((v, i) => `${x(i).toFixed(1)},${y(v || 0).toFixed(1)}`).join(' ');
      add('polyline', {points, fill: 'none', stroke: s.colour, 'stroke-width': 2, 'data-stage': s.name,
                       'stroke-dasharray': s.dash || ''});
      if (labels.length === 1) add('circle', {cx: x(0), cy: y(s.values[0] || 0), r: 3, fill: s.colour});
      add('text', {x: left + 10 + k * 100, y: 16, fill: s.colour, 'font-size': 13}, s.name);
    });
    markers.forEach(m => {
      const attrs = {cx: x(m.i), cy: y(m.value || 0), r: 6, fill: m.colour, stroke: '#fff'};
      attrs[m.attr] = m.label;
      add('circle', attrs).appendChild(document.createElementNS(ns, 'title')).textContent = m.title;
    });
    svg.setAttribute('data-drawn', String(labels.length));
    svg.setAttribute('data-stages', String(svg.querySelectorAll('polyline').length));
    svg.setAttribute('data-markers', String(markers.length));
  }
  const stages = ['source', 'written', 'committed', 'readable'];
  // per checkpoint: every stage, readable from the table (or the data files, deep)
  const checkpoints = data.checkpoints.concat(data.pending);
  const multiJob = new Set(checkpoints.map(c => c.job_id)).size > 1;
  draw(document.getElementById('chart'),
       checkpoints.map(c => (multiJob ? c.job_id + ' ' : '') + '#' + c.checkpoint_id),
       stages.map(s => ({name: s, colour: colours[s], values: checkpoints.map(c => c.status === 'pending' && s === 'readable' ? null : c[s])})),
       checkpoints.flatMap((c, i) => {
         if (!c.ok) return [{i, value: c.source, colour: '#cf222e', attr: 'data-problem', label: 'checkpoint ' + c.checkpoint_id,
                             title: `checkpoint ${c.checkpoint_id} (${c.job_id}): source ${c.source}, readable ${c.readable}`}];
         if (c.status === 'rolled-back' || c.status === 'abandoned') {
           return [{i, value: c.source, colour: '#6e7781', attr: 'data-removed', label: 'checkpoint ' + c.checkpoint_id,
                    title: `checkpoint ${c.checkpoint_id} (${c.job_id}) ${c.status}: ${c.source} rows no longer readable`}];
         }
         return [];
       }));
  // per one-minute window of event time
  const windows = data.windows.filter(w => w.window_start !== null);
  const windowChart = document.getElementById('chart-windows');
  if (windows.length) {
    draw(windowChart, windows.map(w => w.window_start.slice(0, 16).replace('T', ' ')),
         stages.map(s => ({name: s, colour: colours[s], values: windows.map(w => w[s])})),
         windows.flatMap((w, i) => w.ok || !w.closed ? [] : [{i, value: w.source, colour: '#cf222e', attr: 'data-problem',
           label: 'window ' + w.window_start, title: `${w.window_start}: source ${w.source}, committed ${w.committed}, readable ${w.readable}`}]));
  } else {
    windowChart.parentNode.removeChild(windowChart);
  }
  // the stored runs over time: rows and verdict
  const runs = document.getElementById('history');
  if (history.length) {
    draw(runs, history.map(r => r.ran_at.slice(0, 16).replace('T', ' ')),
         [{name: 'source', colour: colours.source, values: history.map(r => r.source)},
          {name: 'readable', colour: colours.readable, values: history.map(r => r.readable), dash: '6 3'}],
         history.map((r, i) => ({i, value: r.readable, colour: r.ok ? '#1a7f37' : '#cf222e', attr: 'data-verdict',
           label: r.ok ? 'ok' : 'mismatch', title: `${r.ran_at}: ${r.ok ? 'ok' : 'MISMATCH'}, lag p50 ${r.lag_p50}`})));
  } else {
    runs.parentNode.removeChild(runs);
  }
})();
