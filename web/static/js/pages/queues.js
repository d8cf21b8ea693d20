// Queues: every compute resource open to the caller, with its waiting
// tasks (position and reason) and the work it holds now (placed or
// running), kept current by queueChanged events.
import { gql, gqlOrShow } from '../api.js';
import { h, replace, table, errorBox, statusBadge, ago, section } from '../dom.js';
import { watch } from '../live.js';

const query = `{
  computeResources(first: 200) { edges { node {
    id name description queuedTasks overBudget
    group { name } profile { name } size { text }
    queueState { constraint reason until task { id name } }
  } } }
  tasks(filter: {status: [QUEUED, PLACED, RUNNING]}, first: 500) { edges { node {
    id name status reason position createdAt placedAt
    computeResource { id } owner { name } project { name } size { text } pool { name }
  } } }
}`;

export function render(el, { viewer }) {
  const body = h('div', { id: 'queues' });
  replace(el, h('h1', {}, 'Queues'),
    h('p', { class: 'muted' }, viewer.admin ? 'Every compute resource of the tenant.' : 'The compute resources open to you through your groups.'),
    body);

  const reload = async () => {
    const d = await gqlOrShow(body, query);
    if (!d) return;
    const tasks = d.tasks.edges.map((e) => e.node);
    const crs = d.computeResources.edges.map((e) => e.node);
    if (!crs.length) {
      replace(body, h('p', { class: 'muted' }, 'No compute resource is open to you yet: an admin connects a profile to your group\'s policy.'));
      return;
    }
    replace(body, crs.map((cr) => card(cr, tasks.filter((t) => t.computeResource && t.computeResource.id === cr.id))));
  };
  // queueChanged is per compute resource: one subscription for each open
  // to the caller when the page opens (a new one shows at the next poll).
  let stop = () => {};
  let stopped = false;
  gql('{ computeResources(first: 200) { edges { node { id } } } }').then((d) => {
    if (stopped) return;
    const topics = d.computeResources.edges.map((e) => ({ name: 'queueChanged', args: { computeResource: e.node.id } }));
    stop = watch(topics.length ? topics : [{ name: 'queueChanged' }], reload);
  }).catch((e) => replace(body, errorBox(e)));
  return () => { stopped = true; stop(); };
}

function card(cr, tasks) {
  const waiting = tasks.filter((t) => t.status === 'QUEUED').sort((a, b) => (a.position || 0) - (b.position || 0));
  const holding = tasks.filter((t) => t.status !== 'QUEUED');
  const qs = cr.queueState;
  return section(`${cr.group.name} / ${cr.name}`,
    h('p', { class: 'muted' }, `${gpus(cr.size.text)} on profile ${cr.profile.name}`, cr.description ? ` — ${cr.description}` : ''),
    h('div', { class: 'stats' },
      h('span', {}, h('b', {}, String(waiting.length)), ' waiting'),
      h('span', {}, h('b', {}, String(holding.filter((t) => t.status === 'RUNNING').length)), ' running'),
      h('span', {}, h('b', {}, String(holding.filter((t) => t.status === 'PLACED').length)), ' placed'),
      cr.overBudget ? h('span', { class: 'badge warn' }, 'budget used up') : null),
    qs ? h('p', { class: 'constraint' }, h('b', {}, 'Head of queue waits: '), `${qs.reason} (${qs.constraint})`) : null,
    h('div', { class: 'cols' },
      h('div', {}, h('h3', {}, 'Waiting'),
        waiting.length ? table(['#', 'Task', 'Owner', 'Reason', 'Since'], waiting.map((t) => row(t, [
          h('td', { class: 'num' }, t.position ?? '–'),
          h('td', {}, link(t), ' ', statusBadge(t.status)),
          h('td', {}, t.owner.name),
          h('td', { class: 'reason' }, t.reason || '–'),
          h('td', {}, ago(t.createdAt)),
        ])), { class: 'tasks waiting' }) : h('p', { class: 'muted' }, 'Nothing waits.')),
      h('div', {}, h('h3', {}, 'Placed and running'),
        holding.length ? table(['Task', 'Owner', 'Pool', 'Since'], holding.map((t) => row(t, [
          h('td', {}, link(t), ' ', statusBadge(t.status)),
          h('td', {}, t.owner.name),
          h('td', {}, t.pool ? t.pool.name : '–'),
          h('td', {}, ago(t.placedAt)),
        ])), { class: 'tasks holding' }) : h('p', { class: 'muted' }, 'Nothing runs.'))));
}

function row(t, cells) {
  return h('tr', { 'data-task-id': t.id, 'data-status': t.status }, cells);
}

function link(t) {
  return h('a', { href: `#/task/${encodeURIComponent(t.id)}` }, t.name);
}

// gpus reads a size ("0.5", "1", "8", "2x8") as words.
function gpus(text) {
  return text === '1' || Number(text) < 1 ? `${text} GPU` : `${text} GPUs`;
}
