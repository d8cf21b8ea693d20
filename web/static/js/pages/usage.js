// Usage: the ledger over a chosen range, GPU-hours, tokens and cost by
// group, project, user, pool or GPU class, as a chart and a table, with
// the same report as CSV from /api/v1/usage.csv.
import { gql, authedFetch, restError } from '../api.js';
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
  const to = h('input', { type: 'date', id: 'usage-to', value: day(new Date(today.getTime() + 86400_000)) });
  const by = h('select', { id: 'usage-by' }, dims.map(([v, label]) => h('option', { value: v }, label.replace('_', ' '))));
  const out = h('div');
  const range = () => {
    const f = new Date(`${from.value}T00:00:00Z`);
    const t = new Date(`${to.value}T00:00:00Z`);
    if (Number.isNaN(f.getTime()) || Number.isNaN(t.getTime())) throw new Error('Pick a start and an end date.');
    if (t <= f) throw new Error('The end date must be after the start date.');
    return { f, t };
  };
  const show = async () => {
    try {
      const { f, t } = range();
      const d = await gql(query, { in: { from: f.toISOString(), to: t.toISOString(), groupBy: [by.value] } });
      const rows = d.usage.rows;
      const name = (r) => r.keys.map((k) => k.name).join(' / ') || 'total';
      replace(out,
        h('div', { class: 'cols' },
          barChart({ title: 'GPU-hours', items: rows.filter((r) => r.gpuHours > 0).map((r) => ({ label: name(r), value: r.gpuHours })) }),
          barChart({ title: 'Tokens (input + output)', items: rows.filter((r) => r.inputTokens + r.outputTokens > 0).map((r) => ({ label: name(r), value: r.inputTokens + r.outputTokens })) })),
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
      const q = new URLSearchParams({ from: f.toISOString().replace('.000', ''), to: t.toISOString().replace('.000', ''), by: by2 });
      const resp = await authedFetch(`/api/v1/usage.csv?${q}`);
      if (!resp.ok) throw await restError(resp, 'the CSV export failed');
      const blob = await resp.blob();
      const a = h('a', { href: URL.createObjectURL(blob), download: `usage-${from.value}-${to.value}-by-${by2}.csv` });
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
    } catch (e) {
      replace(out, errorBox(e));
    }
  };
  replace(el, h('h1', {}, 'Usage'),
    h('form', { class: 'card controls', onsubmit: (ev) => { ev.preventDefault(); show(); } },
      h('label', {}, 'From ', from), h('label', {}, 'To ', to), h('label', {}, 'By ', by),
      h('button', { type: 'submit' }, 'Show'),
      h('button', { type: 'button', onclick: csv }, 'Download CSV')),
    out);
  show();
  return null;
}
