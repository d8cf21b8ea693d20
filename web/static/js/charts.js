// Charts drawn as inline SVG: a time line chart and horizontal bars. Small
// on purpose: the dashboard needs a handful of shapes, not a library.
import { h, svg, fmtNum } from './dom.js';

const palette = ['#2f6fdf', '#d9822b', '#2e9d5b', '#b84cc9', '#c23b3b', '#5b6b7f', '#1c9aa8', '#8a6d1f'];
export const color = (i) => palette[i % palette.length];

// Time ticks fall on round UTC times (every 5 minutes, every hour...), few
// enough to read, and each label is as precise as its step needs, with the
// date when the range spans days: no two ticks read the same.
const tickSteps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800].map((s) => s * 1000);

export function timeTicks(x0, x1, most = 6) {
  const span = x1 - x0;
  const step = tickSteps.find((st) => span / st <= most) || Math.ceil(span / most / 86400_000) * 86400_000;
  const ticks = [];
  for (let t = Math.ceil(x0 / step) * step; t <= x1; t += step) ticks.push(t);
  const fmt = (ms) => {
    const iso = new Date(ms).toISOString();
    if (step >= 86400_000) return iso.slice(5, 10);
    const clock = step < 60_000 ? iso.slice(11, 19) : iso.slice(11, 16);
    return span > 86400_000 ? `${iso.slice(5, 10)} ${clock}` : clock;
  };
  return ticks.map((t) => ({ t, label: fmt(t) }));
}

// stepTicks are ticks on a whole-number axis (a metric's steps), at 1, 2
// or 5 times a power of ten.
export function stepTicks(x0, x1, most = 6) {
  const span = Math.max(x1 - x0, 1);
  let step = 1;
  for (let p = 1; ; p *= 10) {
    const s = [p, 2 * p, 5 * p].find((c) => span / c <= most);
    if (s) { step = s; break; }
  }
  const ticks = [];
  for (let t = Math.ceil(x0 / step) * step; t <= x1; t += step) ticks.push({ t, label: String(t) });
  return ticks;
}

// lineChart draws series [{name, points: [[timeMs, value]], color, dashed}]
// over time, with optional horizontal lines [{value, label}] and vertical
// markers [{t, label}]. ticks makes the x axis's ticks (stepTicks for a
// metric's steps).
// yMax, when given, is the top of the axis (a share never passes 100 %):
// values above it are drawn at it.
export function lineChart({ series, hlines = [], markers = [], width = 640, height = 220, unit = '', title = '', yMin = 0, yMax = null, x0: from = null, x1: to = null, ticks = timeTicks }) {
  const pad = { l: 64, r: 28, t: 16, b: 26 };
  const pts = series.flatMap((s) => s.points);
  const figure = h('figure', { class: 'chart' });
  if (title) figure.appendChild(h('figcaption', {}, title));
  if (pts.length === 0) {
    figure.appendChild(h('p', { class: 'muted' }, 'No data yet.'));
    return figure;
  }
  let x0 = from ?? Math.min(...pts.map((p) => p[0]), ...markers.map((m) => m.t));
  let x1 = to ?? Math.max(...pts.map((p) => p[0]), ...markers.map((m) => m.t));
  if (x1 === x0) { if (ticks === timeTicks) { x0 -= 30_000; x1 += 30_000; } else { x0 -= 1; x1 += 1; } }
  const y0 = Math.min(yMin, ...pts.map((p) => p[1]));
  let y1 = Math.max(...pts.map((p) => p[1]), ...hlines.map((l) => l.value));
  if (y1 <= y0) y1 = y0 + 1;
  if (yMax !== null) y1 = yMax;
  else y1 += (y1 - y0) * 0.08;
  const X = (t) => pad.l + ((t - x0) / (x1 - x0)) * (width - pad.l - pad.r);
  const Y = (v) => height - pad.b - ((Math.min(v, y1) - y0) / (y1 - y0)) * (height - pad.t - pad.b);

  const g = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': title || 'chart' });
  for (let i = 0; i <= 4; i++) {
    const v = y0 + ((y1 - y0) * i) / 4;
    g.appendChild(svg('line', { x1: pad.l, x2: width - pad.r, y1: Y(v), y2: Y(v), class: 'grid' }));
    g.appendChild(svg('text', { x: pad.l - 6, y: Y(v) + 4, 'text-anchor': 'end', class: 'axis y', 'data-value': v }, fmtNum(v, 1) + unit));
  }
  for (const { t, label } of ticks(x0, x1)) {
    g.appendChild(svg('line', { x1: X(t), x2: X(t), y1: height - pad.b, y2: height - pad.b + 4, class: 'tick' }));
    g.appendChild(svg('text', { x: X(t), y: height - 8, 'text-anchor': 'middle', class: 'axis x' }, label));
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
  // The value and its note ("0.000037 mixed") go right of the bar: room
  // is kept for the longest, at a generous 7.5 px a character of the 11 px
  // axis font, so that none is cut at the chart's edge.
  const texts = items.map((it) => `${fmtNum(it.value)}${unit}${it.note ? ` ${it.note}` : ''}`);
  const room = Math.min(width - labelW - 40, Math.max(...texts.map((x) => x.length)) * 7.5 + 12);
  const g = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': title || 'bar chart' });
  items.forEach((it, i) => {
    const y = i * row + 3;
    const w = Math.max(1, ((width - labelW - room) * it.value) / max);
    g.appendChild(svg('text', { x: labelW - 6, y: y + 14, 'text-anchor': 'end', class: 'axis' }, it.label.length > 28 ? `${it.label.slice(0, 27)}…` : it.label));
    g.appendChild(svg('rect', { x: labelW, y, width: w, height: row - 6, rx: 2, fill: color(0) }));
    g.appendChild(svg('text', { x: labelW + w + 6, y: y + 14, class: 'axis value' }, texts[i]));
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
