// Compare page: pick runs from a project's task list, then see them side by
// side (the platform's compareTasks): parameters with differences marked,
// each metric's final and best values, the metrics' series overlaid by
// step, and the code each ran. The address holds the runs compared
// (#/compare/ID,ID,...), so a comparison can be shared as a link.
import { gql } from '../api.js';
import { h, replace, table, errorBox, section, fmtNum, statusBadge } from '../dom.js';
import { lineChart, stepTicks } from '../charts.js';

const compareQuery = `query($ids: [ID!]!) { compareTasks(ids: $ids) {
  tasks { id name status project { name } }
  parameters { name values differs }
  metrics { name direction differs final { value step } best { value step } series { value step } }
  code { repositories commits diffFiles diffAdded diffRemoved differs }
} }`;

const listQuery = `query($project: ID) { tasks(filter: {project: $project}, first: 50) { edges { node { id name status createdAt project { name } } } } }`;
const projectsQuery = '{ projects(first: 200) { edges { node { name } } } }';

export function render(el, { args }) {
  const ids = (args[0] || '').split(',').filter(Boolean);
  const picker = h('div', { id: 'compare-picker' });
  const result = h('div', { id: 'compare-result' });
  replace(el, h('h1', {}, 'Compare'), section('Pick runs', picker), result);
  pick(picker, ids);
  if (ids.length >= 2) show(result, ids);
  else replace(result, h('p', { class: 'muted' }, 'Tick two to ten runs and press Compare.'));
  return null;
}

async function pick(el, chosen) {
  const selected = new Set(chosen);
  const project = h('select', { id: 'compare-project' });
  const list = h('div');
  const go = h('button', { type: 'button', id: 'compare-go', onclick: () => {
    location.hash = `#/compare/${[...selected].map(encodeURIComponent).join(',')}`;
  } }, 'Compare');
  const load = async () => {
    try {
      const d = await gql(listQuery, { project: project.value || null });
      const rows = d.tasks.edges.map(({ node: t }) => h('tr', {},
        h('td', {}, h('input', { type: 'checkbox', 'data-task': t.id, checked: selected.has(t.id) || null, onchange: (e) => {
          if (e.target.checked) selected.add(t.id); else selected.delete(t.id);
        } })),
        h('td', {}, h('a', { href: `#/task/${t.id}` }, t.name)), h('td', {}, statusBadge(t.status)),
        h('td', {}, t.project ? t.project.name : ''), h('td', { class: 'muted' }, t.id)));
      replace(list, rows.length ? table(['', 'Run', 'Status', 'Project', 'ID'], rows) : h('p', { class: 'muted' }, 'No runs in this project.'));
    } catch (e) {
      replace(list, errorBox(e));
    }
  };
  try {
    const d = await gql(projectsQuery);
    replace(project, h('option', { value: '' }, 'all projects'), ...d.projects.edges.map(({ node: p }) => h('option', { value: p.name }, p.name)));
  } catch { /* the list of all runs still works */ }
  project.onchange = load;
  replace(el, h('p', {}, 'Project ', project, ' ', go), list);
  load();
}

async function show(el, ids) {
  replace(el, h('p', { class: 'muted' }, 'Comparing…'));
  let c;
  try {
    c = (await gql(compareQuery, { ids })).compareTasks;
  } catch (e) {
    replace(el, errorBox(e));
    return;
  }
  const head = ['', ...c.tasks.map((t) => h('a', { href: `#/task/${t.id}` }, t.name))];
  const mark = (differs, name) => h('td', { class: differs ? 'differs' : '' }, differs ? `* ${name}` : name);
  const cell = (v) => h('td', {}, v === null || v === undefined ? '–' : v);
  const params = c.parameters.map((p) => h('tr', { class: p.differs ? 'differs' : '', 'data-param': p.name }, mark(p.differs, p.name), ...p.values.map((v) => cell(v))));
  const metrics = c.metrics.map((m) => h('tr', { class: m.differs ? 'differs' : '', 'data-metric': m.name },
    mark(m.differs, `${m.name} (${m.direction === 'MIN' ? 'lower' : 'higher'} is better)`),
    ...m.final.map((f, i) => cell(f ? `${fmtNum(f.value, 4)}${m.best[i] && m.best[i].value !== f.value ? ` (best ${fmtNum(m.best[i].value, 4)})` : ''}` : null))));
  const code = h('tr', { class: c.code.differs ? 'differs' : '' }, mark(c.code.differs, 'code'),
    ...c.code.commits.map((commit, i) => cell(`${commit ? commit.slice(0, 10) : 'command'}${c.code.diffFiles[i] ? ` +${c.code.diffAdded[i]} −${c.code.diffRemoved[i]} in ${c.code.diffFiles[i]} files` : ''}`)));
  const status = h('tr', {}, h('td', {}, 'status'), ...c.tasks.map((t) => h('td', {}, statusBadge(t.status))));
  const charts = c.metrics.map((m) => lineChart({
    title: m.name, height: 200, ticks: stepTicks,
    yMin: Math.min(0, ...m.series.flat().map((p) => p.value)),
    series: m.series.map((points, i) => ({ name: c.tasks[i].name, points: points.map((p) => [p.step, p.value]) })),
  }));
  replace(el,
    section('Side by side', table(head, [status, ...params, ...metrics, code], { id: 'compare-table' }),
      h('p', { class: 'muted' }, '* differs between the runs. Final values are the last reported; best is by the metric\'s direction.')),
    section('Metrics by step', charts.length ? h('div', { class: 'cols', id: 'compare-charts' }, charts) : h('p', { class: 'muted' }, 'None of these runs reported metrics.')));
}
