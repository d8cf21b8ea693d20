// Pipelines page: the runs of pipelines (#/pipelines, optionally of one
// project) and one run as a live graph of its steps (#/pipelines/ID),
// drawn by level in the graph: each step with its state, compute
// resource, duration and a link to its task. pipelineRunChanged makes it
// live; the queries decide what is shown (docs/pipelines.md).
import { gql } from '../api.js';
import { h, replace, table, errorBox, section, fmtTime, statusBadge } from '../dom.js';
import { watch } from '../live.js';

const runFields = `id name state reason ownerName createdAt finishedAt
  steps { name state reason dependsOn level computeResourceName taskId taskIds attempts retry onFailure cachedFromRunId startedAt finishedAt }`;
const listQuery = `query($project: String) { pipelineRuns(project: $project, first: 100) { id name state ownerName createdAt finishedAt } }`;
const runQuery = `query($id: ID!) { pipelineRun(id: $id) { ${runFields} } }`;

export function render(el, { args }) {
  if (args[0]) return renderRun(el, args[0]);
  return renderList(el);
}

function renderList(el) {
  const box = h('div', { id: 'pipeline-runs' });
  replace(el, h('h1', {}, 'Pipelines'),
    h('p', { class: 'muted' }, 'Runs of pipelines you may see, newest first. Start one with ', h('code', {}, 'klique pipeline run -f pipeline.yaml'), '.'),
    section('Runs', box));
  const reload = async () => {
    try {
      const d = await gql(listQuery, { project: null });
      replace(box, d.pipelineRuns.length ? table(['Run', 'State', 'Owner', 'Started', 'Finished', 'ID'], d.pipelineRuns.map((r) => h('tr', {},
        h('td', {}, h('a', { href: `#/pipelines/${r.id}` }, r.name)), h('td', {}, statusBadge(r.state)), h('td', {}, r.ownerName),
        h('td', {}, fmtTime(r.createdAt)), h('td', {}, r.finishedAt ? fmtTime(r.finishedAt) : '–'), h('td', { class: 'muted' }, r.id))))
        : h('p', { class: 'muted' }, 'No pipeline runs yet.'));
    } catch (e) {
      replace(box, errorBox(e));
    }
  };
  return watch([], reload, { pollMs: 3000 });
}

function duration(s) {
  if (!s.startedAt) return '';
  const end = s.finishedAt ? new Date(s.finishedAt) : new Date();
  const sec = Math.max(0, Math.round((end - new Date(s.startedAt)) / 1000));
  return sec < 60 ? `${sec}s` : sec < 3600 ? `${Math.floor(sec / 60)}m ${sec % 60}s` : `${Math.floor(sec / 3600)}h ${Math.floor(sec / 60) % 60}m`;
}

// graph lays the steps out in columns, one per level, dependencies first;
// each step names what it waits for.
function graph(run) {
  const levels = [];
  for (const s of run.steps) (levels[s.level] = levels[s.level] || []).push(s);
  return h('div', { class: 'pipeline-graph', id: 'pipeline-graph' }, levels.map((steps, i) => h('div', { class: 'pipeline-level', 'data-level': i },
    steps.map((s) => h('div', { class: `pipeline-step s-${s.state.toLowerCase()}`, 'data-step': s.name, 'data-state': s.state },
      h('div', {}, h('strong', {}, s.name), ' ', statusBadge(s.state)),
      h('div', { class: 'muted' }, s.computeResourceName),
      s.dependsOn.length ? h('div', { class: 'muted' }, `after ${s.dependsOn.join(', ')}`) : null,
      h('div', {}, duration(s), s.attempts > 1 ? ` · attempt ${s.attempts} of ${s.retry + 1}` : ''),
      s.taskId ? h('div', {}, h('a', { href: `#/task/${s.taskId}`, 'data-task': s.taskId }, s.state === 'CACHED' ? 'reused task' : 'task')) : null,
      h('div', { class: 'muted small' }, s.reason))))));
}

function renderRun(el, id) {
  const head = h('div');
  const box = h('div');
  replace(el, h('p', {}, h('a', { href: '#/pipelines' }, '← Pipelines')), head, box);
  let ended = false;
  const reload = async () => {
    try {
      const { pipelineRun: r } = await gql(runQuery, { id });
      ended = ['COMPLETED', 'FAILED', 'ABORTED'].includes(r.state);
      replace(head, h('h1', {}, r.name, ' ', h('span', { id: 'pipeline-state' }, statusBadge(r.state))),
        h('p', { class: 'muted' }, `${r.reason} · started ${fmtTime(r.createdAt)} by ${r.ownerName}`));
      replace(box, section('Steps', graph(r)));
    } catch (e) {
      replace(box, errorBox(e));
    }
  };
  return watch([{ name: 'pipelineRunChanged', args: { id }, select: '{ state }', done: (u) => ['COMPLETED', 'FAILED', 'ABORTED'].includes(u.state) || ended }],
    reload, { pollMs: 2000 });
}
