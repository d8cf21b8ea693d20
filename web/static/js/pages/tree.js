// Organisation tree: each department and group the caller may see, indented
// under the department it sits in, with one horizontal bar per node on a
// common GPU scale: held GPUs within the reservation, the part borrowed
// above it, the idle reserved GPUs lent to groups outside the node, the
// reservation as a tick and the effective limit as the bar's end. Every
// figure is the platform's (policyTree); the page only draws it.
import { gqlOrShow } from '../api.js';
import { h, svg, replace, fmtNum } from '../dom.js';
import { watch } from '../live.js';

const query = `{ policyTree { id name kind parent level reservedGpus limitGpus effectiveLimitGpus weight
  heldGpus borrowedGpus lentGpus holdingTasks waitingTasks
  budget { period hours usedHours leftHours usedUp } } }`;

// The bar's width in pixels (each level's indent is app.css's .lvl-N: the
// page's policy allows no inline style).
const barWidth = 420;

export function render(el, { viewer }) {
  const body = h('div');
  replace(el, h('h1', {}, 'Organisation tree'),
    h('p', { class: 'muted' }, viewer.admin ? 'Every department and group of the tenant, with what each level reserves, holds, borrows and lends.'
      : 'The departments above your groups, and your groups, with what each level reserves, holds, borrows and lends.'),
    legend(),
    body);
  const reload = async () => {
    const d = await gqlOrShow(body, query);
    if (!d) return;
    if (!d.policyTree.length) {
      replace(body, h('p', { class: 'muted' }, 'No department or group of yours to show.'));
      return;
    }
    replace(body, tree(d.policyTree));
  };
  // The policyTree subscription tells when work waits, is placed or ends,
  // or the tree's policies change (and every minute, as budgets burn).
  return watch([{ name: 'policyTree' }], reload, { pollMs: 5000 });
}

function legend() {
  const key = (cls, text) => h('span', { class: 'tree-key' }, svg('svg', { width: 14, height: 10, class: 'tree-bar' },
    svg('rect', { x: 0, y: 0, width: 14, height: 10, class: cls })), ' ', text);
  return h('p', { class: 'muted tree-legend' }, key('t-held', 'held within the reservation'), key('t-borrow', 'borrowed above it'),
    key('t-lent', 'reserved, lent to others'), key('t-bg', 'up to the effective limit'), ' · the tick marks the reservation');
}

function tree(nodes) {
  // One scale for every bar, so that levels compare at a glance.
  const max = Math.max(1, ...nodes.map((n) => Math.max(n.effectiveLimitGpus ?? 0, n.reservedGpus, n.heldGpus + n.lentGpus)));
  return h('div', { class: 'card tree', id: 'tree', role: 'tree' }, nodes.map((n) => row(n, max)));
}

function row(n, max) {
  const X = (v) => (v / max) * barWidth;
  const within = Math.min(n.heldGpus, n.reservedGpus);
  const end = n.effectiveLimitGpus ?? Math.max(n.reservedGpus, n.heldGpus);
  const label = `${n.name}: ${fmtNum(n.heldGpus, 3)} GPUs held of ${n.reservedGpus} reserved` +
    (n.effectiveLimitGpus !== null ? `, limit ${n.effectiveLimitGpus}` : ', no limit');
  const bar = svg('svg', { viewBox: `0 0 ${barWidth + 2} 20`, width: barWidth + 2, height: 20, class: 'tree-bar', role: 'img', 'aria-label': label },
    svg('rect', { x: 0, y: 3, width: X(end), height: 14, class: 't-bg' }),
    svg('rect', { x: 0, y: 3, width: X(within), height: 14, class: 't-held' }),
    svg('rect', { x: X(within), y: 3, width: X(n.borrowedGpus), height: 14, class: 't-borrow' }),
    svg('rect', { x: X(n.heldGpus), y: 3, width: X(n.lentGpus), height: 14, class: 't-lent' }),
    svg('line', { x1: X(n.reservedGpus) + 1, x2: X(n.reservedGpus) + 1, y1: 0, y2: 20, class: 't-tick' }));
  const figures = [`${fmtNum(n.heldGpus, 3)} held`, `${n.reservedGpus} reserved`,
    n.effectiveLimitGpus !== null ? `limit ${n.effectiveLimitGpus}` : 'no limit'];
  if (n.limitGpus !== null && n.limitGpus !== n.effectiveLimitGpus) figures.push(`own limit ${n.limitGpus}`);
  if (n.borrowedGpus > 0) figures.push(`${fmtNum(n.borrowedGpus, 3)} borrowed`);
  if (n.lentGpus > 0) figures.push(`${fmtNum(n.lentGpus, 3)} lent`);
  figures.push(`weight ${n.weight}`, `${n.waitingTasks} waiting`);
  const b = n.budget;
  return h('div', { class: `tree-node${n.kind === 'DEPARTMENT' ? ' dept' : ''}`, role: 'treeitem', 'aria-level': n.level + 1,
    'data-node': n.name, 'data-kind': n.kind.toLowerCase(), 'data-level': n.level, 'data-parent': n.parent ?? '' },
  h('div', { class: `tree-name lvl-${Math.min(n.level, 5)}` },
    n.kind === 'DEPARTMENT' ? '▾ ' : '', h('strong', {}, n.name), n.kind === 'DEPARTMENT' ? h('span', { class: 'muted' }, ' department') : null),
  bar,
  h('div', { class: 'tree-figures' }, figures.join(' · '),
    b ? h('span', { class: b.usedUp ? 'warn-text' : 'muted' }, ` · budget ${fmtNum(b.usedHours)} of ${fmtNum(b.hours)} h per ${b.period.toLowerCase()}${b.usedUp ? ', used up' : ''}`) : null));
}
