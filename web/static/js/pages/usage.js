// Usage: the ledger over a chosen range, GPU-hours, tokens and cost by
// group, project, user, pool or GPU class, as a chart and a table, with
// the same report as CSV from /api/v1/usage.csv.
import { gql, downloadUsageCSV } from '../api.js';
import { h, replace, table, errorBox, fmtNum } from '../dom.js';
import { barChart } from '../charts.js';

const dims = [['GROUP', 'group'], ['PROJECT', 'project'], ['USER', 'user'], ['POOL', 'pool'], ['GPU_CLASS', 'gpu_class']];

const query = `query($in: UsageInput!) { usage(input: $in) { from to rows {
  keys { dimension name } gpuHours budgetHours cost currency calls inputTokens outputTokens tokenCost tokenCurrency } } }`;

function day(d) { return d.toISOString().slice(0, 10); }

export function render(el) {
  const today = new Date();
  const monthStart = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1));
  const from = h('input', { type: 'date', id: 'usage-from', value: day(monthStart) });
  // Both dates are whole UTC days and both are in the range.
  const to = h('input', { type: 'date', id: 'usage-to', value: day(today) });
  const by = h('select', { id: 'usage-by' }, dims.map(([v, label]) => h('option', { value: v }, label.replace('_', ' '))));
  const out = h('div');
  // Preset ranges: first and last day, in UTC.
  const utcDay = (y, m, d) => new Date(Date.UTC(y, m, d));
  const [y, m, d] = [today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate()];
  const presets = [
    ['Today', utcDay(y, m, d), utcDay(y, m, d)],
    ['Last 7 days', utcDay(y, m, d - 6), utcDay(y, m, d)],
    ['This month', utcDay(y, m, 1), utcDay(y, m, d)],
    ['Last month', utcDay(y, m - 1, 1), utcDay(y, m, 0)],
  ];
  const range = () => {
    const f = new Date(`${from.value}T00:00:00Z`);
    const last = new Date(`${to.value}T00:00:00Z`);
    if (Number.isNaN(f.getTime()) || Number.isNaN(last.getTime())) throw new Error('Pick a start and an end date.');
    if (last < f) throw new Error('The end date must not be before the start date.');
    const t = new Date(last.getTime() + 86400_000);
    return { f, t };
  };
  const show = async () => {
    try {
      const { f, t } = range();
      const d = await gql(query, { in: { from: f.toISOString(), to: t.toISOString(), groupBy: [by.value] } });
      const rows = d.usage.rows;
      const name = (r) => r.keys.map((k) => k.name).join(' / ') || 'total';
      replace(out,
        h('div', { class: 'cols wide' },
          barChart({ title: 'GPU-hours', items: rows.filter((r) => r.gpuHours > 0).map((r) => ({ label: name(r), value: r.gpuHours })) }),
          barChart({ title: 'Tokens (input + output)', items: rows.filter((r) => r.inputTokens + r.outputTokens > 0).map((r) => ({ label: name(r), value: r.inputTokens + r.outputTokens })) }),
          barChart({ title: 'GPU cost', items: rows.filter((r) => r.cost > 0).map((r) => ({ label: name(r), value: r.cost, note: r.currency })) }),
          barChart({ title: 'Token cost', items: rows.filter((r) => r.tokenCost > 0).map((r) => ({ label: name(r), value: r.tokenCost, note: r.tokenCurrency })) })),
        rows.length ? table(['', 'GPU-hours', 'Budget hours', 'Cost', 'Calls', 'Input tokens', 'Output tokens', 'Token cost'], rows.map((r) => h('tr', {},
          h('td', {}, name(r)),
          h('td', { class: 'num' }, fmtNum(r.gpuHours, 3)),
          h('td', { class: 'num' }, fmtNum(r.budgetHours, 3)),
          h('td', { class: 'num' }, r.currency ? `${fmtNum(r.cost)} ${r.currency}` : '–'),
          h('td', { class: 'num' }, r.calls),
          h('td', { class: 'num' }, fmtNum(r.inputTokens, 0)),
          h('td', { class: 'num' }, fmtNum(r.outputTokens, 0)),
          h('td', { class: 'num' }, r.tokenCurrency ? `${fmtNum(r.tokenCost, 4)} ${r.tokenCurrency}` : '–')))) : h('p', { class: 'muted' }, 'Nothing was used in this range.'));
    } catch (e) {
      replace(out, errorBox(e));
    }
  };
  const csv = async () => {
    try {
      const { f, t } = range();
      const by2 = dims.find(([v]) => v === by.value)[1];
      await downloadUsageCSV(f, t, by2, `usage-${from.value}-${to.value}-by-${by2}.csv`);
    } catch (e) {
      replace(out, errorBox(e));
    }
  };
  replace(el, h('h1', {}, 'Usage'),
    h('form', { class: 'card controls', onsubmit: (ev) => { ev.preventDefault(); show(); } },
      h('label', {}, 'From ', from), h('label', {}, 'To ', to), h('label', {}, 'By ', by),
      presets.map(([label, f, t]) => h('button', { type: 'button', onclick: () => { from.value = day(f); to.value = day(t); show(); } }, label)),
      h('button', { type: 'submit' }, 'Show'),
      h('button', { type: 'button', onclick: csv }, 'Download CSV')),
    out);
  show();
  return null;
}
