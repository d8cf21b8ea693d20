// Schedules (docs/schedules.md): the caller's schedules (all the tenant's
// for an admin): what each starts, its cron expression or trigger, its
// next run, its last run and result, and why it is paused when it is (a
// person paused it, or its owner lost access). Pause and resume go
// through the same mutations as every channel. The page reloads on
// scheduleChanged (a firing, a pause), polling while it is down.
import { gql, gqlOrShow } from '../api.js';
import { h, replace, table, errorBox, fmtTime, ago } from '../dom.js';
import { watch } from '../live.js';

const query = `{ schedules { id name owner targetKind targetId cron when missedRuns
  paused pausedReason nextRunAt lastRunAt lastRunId lastResult lastError } }`;

// Mutations are plain strings, as on the other pages: the test that sends
// every dashboard query to the server (gqllimits) reads template literals.
const pauseMutation = 'mutation($id: ID!) { pauseSchedule(id: $id) { id paused } }';
const resumeMutation = 'mutation($id: ID!) { resumeSchedule(id: $id) { id paused } }';

export function render(el) {
  const body = h('div', { id: 'schedules' }, h('p', { class: 'muted' }, 'Loading…'));
  const note = h('div', { id: 'schedules-note' });
  replace(el, h('h1', {}, 'Schedules'),
    h('p', { class: 'muted' }, 'Each run is made as the schedule\'s owner, under their policies and quota. Times are UTC. ',
      'Create one with ', h('code', {}, 'klique schedule create'), ', the createSchedule mutation or the create_schedule MCP tool.'),
    note, body);

  const reload = async () => {
    const d = await gqlOrShow(body, query);
    if (!d) return;
    if (!d.schedules.length) {
      replace(body, h('p', { class: 'muted' }, 'No schedules yet.'));
      return;
    }
    replace(body, table(['Schedule', 'Owner', 'Target', 'When', 'Next run', 'Last run', 'Result', 'State', ''],
      d.schedules.map((s) => row(s, act))));
  };
  const act = async (mutation, id) => {
    replace(note);
    try {
      await gql(mutation, { id });
    } catch (e) {
      replace(note, errorBox(e));
    }
    reload();
  };
  return watch([{ name: 'scheduleChanged' }], reload);
}

function row(s, act) {
  const target = s.targetKind === 'task'
    ? h('a', { href: `#/task/${encodeURIComponent(s.targetId)}` }, `task ${s.targetId.slice(0, 8)}`)
    : `${s.targetKind} ${s.targetId}`;
  const last = s.lastRunId && s.targetKind === 'task'
    ? h('a', { href: `#/task/${encodeURIComponent(s.lastRunId)}` }, ago(s.lastRunAt))
    : (s.lastRunAt ? ago(s.lastRunAt) : '–');
  const result = s.lastError ? h('span', { class: 'error-text', title: s.lastError }, `${s.lastResult || 'failed'}: ${s.lastError}`) : (s.lastResult || '–');
  const state = s.paused ? h('span', { class: 'badge s-aborted', title: s.pausedReason }, `paused: ${s.pausedReason}`) : h('span', { class: 'badge s-running' }, 'active');
  const button = s.paused
    ? h('button', { type: 'button', onclick: () => act(resumeMutation, s.id) }, 'Resume')
    : h('button', { type: 'button', onclick: () => act(pauseMutation, s.id) }, 'Pause');
  return h('tr', { 'data-schedule': s.name },
    h('td', {}, s.name), h('td', {}, s.owner), h('td', {}, target),
    h('td', { title: s.missedRuns === 'skip' ? 'missed runs are skipped' : 'missed runs: one run on start' }, s.when),
    h('td', {}, s.nextRunAt ? fmtTime(s.nextRunAt) : '–'), h('td', {}, last), h('td', {}, result), h('td', {}, state), h('td', {}, button));
}
