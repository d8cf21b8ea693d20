// Charts drawn as inline SVG: a time line chart and horizontal bars. Small
// on purpose: the dashboard needs a handful of shapes, not a library.
import { h, svg, fmtNum } from './dom.js';

const palette = ['#2f6fdf', '#d9822b', '#2e9d5b', '#b84cc9', '#c23b3b', '#5b6b7f', '#1c9aa8', '#8a6d1f'];
export const color = (i) => palette[i % palette.length];

function timeLabel(ms, span) {
  const d = new Date(ms);
  const iso = d.toISOString();
  if (span > 2 * 86400_000) return iso.slice(5, 10);
  return span < 10 * 60_000 ? iso.slice(11, 19) : iso.slice(11, 16);
}

// lineChart draws series [{name, points: [[timeMs, value]], color, dashed}]
// over time, with optional horizontal lines [{value, label}] and vertical
// markers [{t, label}].
export function lineChart({ series, hlines = [], markers = [], width = 640, height = 220, unit = '', title = '', yMin = 0 }) {
  const pad = { l: 64, r: 28, t: 16, b: 26 };
  const pts = series.flatMap((s) => s.points);
  const figure = h('figure', { class: 'chart' });
  if (title) figure.appendChild(h('figcaption', {}, title));
  if (pts.length === 0) {
    figure.appendChild(h('p', { class: 'muted' }, 'No data yet.'));
    return figure;
  }
  let x0 = Math.min(...pts.map((p) => p[0]), ...markers.map((m) => m.t));
  let x1 = Math.max(...pts.map((p) => p[0]), ...markers.map((m) => m.t));
  if (x1 === x0) { x0 -= 30_000; x1 += 30_000; }
  const y0 = Math.min(yMin, ...pts.map((p) => p[1]));
  let y1 = Math.max(...pts.map((p) => p[1]), ...hlines.map((l) => l.value));
  if (y1 <= y0) y1 = y0 + 1;
  y1 += (y1 - y0) * 0.08;
  const X = (t) => pad.l + ((t - x0) / (x1 - x0)) * (width - pad.l - pad.r);
  const Y = (v) => height - pad.b - ((v - y0) / (y1 - y0)) * (height - pad.t - pad.b);

  const g = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': title || 'chart' });
  for (let i = 0; i <= 4; i++) {
    const v = y0 + ((y1 - y0) * i) / 4;
    g.appendChild(svg('line', { x1: pad.l, x2: width - pad.r, y1: Y(v), y2: Y(v), class: 'grid' }));
    g.appendChild(svg('text', { x: pad.l - 6, y: Y(v) + 4, 'text-anchor': 'end', class: 'axis' }, fmtNum(v, 1) + unit));
  }
  for (let i = 0; i <= 4; i++) {
    const t = x0 + ((x1 - x0) * i) / 4;
    g.appendChild(svg('text', { x: X(t), y: height - 8, 'text-anchor': 'middle', class: 'axis' }, timeLabel(t, x1 - x0)));
  }
  for (const l of hlines) {
    g.appendChild(svg('line', { x1: pad.l, x2: width - pad.r, y1: Y(l.value), y2: Y(l.value), class: 'hline' }));
    g.appendChild(svg('text', { x: width - pad.r - 2, y: Y(l.value) - 4, 'text-anchor': 'end', class: 'hlabel' }, l.label));
  }
  for (const m of markers) {
    g.appendChild(svg('line', { x1: X(m.t), x2: X(m.t), y1: pad.t, y2: height - pad.b, class: m.alert ? 'marker alert' : 'marker' }));
    const right = X(m.t) > width - 80;
    g.appendChild(svg('text', { x: X(m.t) + (right ? -4 : 4), y: pad.t + 10, 'text-anchor': right ? 'end' : 'start', class: m.alert ? 'mlabel alert' : 'mlabel' }, m.label));
  }
  series.forEach((s, i) => {
    const c = s.color || color(i);
    const d = s.points.map((p) => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(' ');
    g.appendChild(svg('polyline', { points: d, fill: 'none', stroke: c, 'stroke-width': 2, 'stroke-dasharray': s.dashed ? '5 4' : null }));
    if (s.points.length === 1) {
      const [p] = s.points;
      g.appendChild(svg('circle', { cx: X(p[0]), cy: Y(p[1]), r: 3, fill: c }));
    }
  });
  figure.appendChild(g);
  if (series.length > 1 || series[0].name) {
    figure.appendChild(h('div', { class: 'legend' }, series.map((s, i) =>
      h('span', {}, h('i', { class: `sw sw${i % palette.length}` }), s.name))));
  }
  return figure;
}

// barChart draws items [{label, value, note}] as horizontal bars.
export function barChart({ items, unit = '', title = '', width = 640 }) {
  const figure = h('figure', { class: 'chart' });
  if (title) figure.appendChild(h('figcaption', {}, title));
  if (!items.length) {
    figure.appendChild(h('p', { class: 'muted' }, 'Nothing in this range.'));
    return figure;
  }
  const row = 22;
  const labelW = 180;
  const height = items.length * row + 6;
  const max = Math.max(...items.map((i) => i.value), 1e-9);
  const g = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': title || 'bar chart' });
  items.forEach((it, i) => {
    const y = i * row + 3;
    const w = Math.max(1, ((width - labelW - 90) * it.value) / max);
    g.appendChild(svg('text', { x: labelW - 6, y: y + 14, 'text-anchor': 'end', class: 'axis' }, it.label.length > 28 ? `${it.label.slice(0, 27)}…` : it.label));
    g.appendChild(svg('rect', { x: labelW, y, width: w, height: row - 6, rx: 2, fill: color(0) }));
    g.appendChild(svg('text', { x: labelW + w + 6, y: y + 14, class: 'axis' }, `${fmtNum(it.value)}${unit}${it.note ? ` ${it.note}` : ''}`));
  });
  figure.appendChild(g);
  return figure;
}

// meter draws a use bar against a reservation tick and a limit (the full
// width): held GPUs up to the reservation in one colour, borrowed above it
// in another.
export function meter({ used, reservation, limit, label }) {
  const width = 320;
  const height = 18;
  const max = Math.max(limit, used, 1);
  const X = (v) => (v / max) * width;
  const within = Math.min(used, reservation);
  const borrowed = Math.max(0, used - reservation);
  return svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, class: 'meter', role: 'img', 'aria-label': label || `${used} of ${limit}` },
    svg('rect', { x: 0, y: 2, width, height: height - 4, class: 'm-bg' }),
    svg('rect', { x: 0, y: 2, width: X(within), height: height - 4, class: 'm-res' }),
    svg('rect', { x: X(within), y: 2, width: X(borrowed), height: height - 4, class: 'm-borrow' }),
    svg('line', { x1: X(reservation), x2: X(reservation), y1: 0, y2: height, class: 'm-tick' }));
}
