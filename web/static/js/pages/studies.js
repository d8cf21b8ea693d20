// Studies page: the hyperparameter searches one may see (#/studies), and
// one study (#/studies/ID) with its trials ranked by the objective, the
// best trial, and the objective over time (at each completed trial's end,
// the best so far). A study's page follows studyChanged, so trials appear,
// end and stop early as the controller acts.
import { gql } from '../api.js';
import { h, replace, table, errorBox, section, fmtNum, fmtTime } from '../dom.js';
import { lineChart } from '../charts.js';
import { watch } from '../live.js';

const listQuery = `query($project: String) { studies(project: $project) { id name state strategy objective direction project owner
  trials { state } best { number objective } createdAt } }`;

// One string, as every page writes its queries: the dashboard's queries
// are checked against the schema as written (gqllimits test).
const oneQuery = `query($id: ID!) { study(id: $id) { id name state reason strategy objective direction summary maxConcurrent budgetTrials budgetGpuHours gpuHours
  owner project computeResource baseTaskId createdAt finishedAt
  halving { resource minResource maxResource eta rungs }
  trials { number params state objective objectiveStep rung reason taskId endedAt }
  best { number params objective taskId }
  progress { at best trial } } }`;

export function render(el, { args }) {
  if (args[0]) return one(el, args[0]);
  list(el);
  return null;
}

const stateBadge = (s) => h('span', { class: `badge ${s.toLowerCase()}` }, s.toLowerCase().replace('_', ' '));

async function list(el) {
  replace(el, h('h1', {}, 'Studies'), h('p', { class: 'muted' }, 'Loading…'));
  try {
    const d = await gql(listQuery, { project: null });
    const rows = d.studies.map((s) => h('tr', { 'data-study': s.id },
      h('td', {}, h('a', { href: `#/studies/${s.id}` }, s.name)), h('td', {}, stateBadge(s.state)), h('td', {}, s.strategy),
      h('td', {}, `${s.objective} (${s.direction === 'MIN' ? 'min' : 'max'})`), h('td', {}, String(s.trials.length)),
      h('td', {}, s.best ? `${fmtNum(s.best.objective, 4)} (trial ${s.best.number})` : '–'),
      h('td', {}, s.project), h('td', {}, s.owner), h('td', { class: 'muted' }, fmtTime(s.createdAt))));
    replace(el, h('h1', {}, 'Studies'),
      rows.length ? table(['Study', 'State', 'Strategy', 'Objective', 'Trials', 'Best', 'Project', 'Owner', 'Started'], rows, { id: 'studies-table' })
        : h('p', { class: 'muted' }, 'No studies yet. Start one with klique study start -f study.yaml, the startStudy mutation or the MCP tool start_study.'));
  } catch (e) {
    replace(el, h('h1', {}, 'Studies'), errorBox(e));
  }
}

function one(el, id) {
  const head = h('div', { id: 'study-head' });
  const best = h('div', { id: 'study-best' });
  const chart = h('div', { id: 'study-chart' });
  const trials = h('div', { id: 'study-trials' });
  replace(el, head, section('Best trial', best), section('Objective over time', chart), section('Trials, ranked', trials));

  const draw = (s) => {
    const dir = s.direction === 'MIN' ? 'lower is better' : 'higher is better';
    replace(head, h('h1', {}, `Study ${s.name} `, stateBadge(s.state)),
      h('p', {}, `${s.strategy} search of ${s.objective} (${s.summary}, ${dir}) over `,
        s.trials.length ? Object.keys(s.trials[0].params).join(', ') : '', ` · base run `, h('a', { href: `#/task/${s.baseTaskId}` }, s.baseTaskId.slice(0, 8)),
        ` · ${s.computeResource} · ${s.project} · ${s.owner}`),
      h('p', { class: 'muted' }, `At most ${s.maxConcurrent} at once · budget ${[s.budgetTrials ? `${s.budgetTrials} trials` : '', s.budgetGpuHours ? `${s.budgetGpuHours} GPU-hours` : ''].filter(Boolean).join(' and ')} · ${fmtNum(s.gpuHours, 3)} GPU-hours used`
        + (s.halving ? ` · successive halving on ${s.halving.resource} at ${s.halving.rungs.join(', ')} (eta ${s.halving.eta})` : '')),
      s.reason ? h('p', { id: 'study-reason' }, s.reason) : '');
    replace(best, s.best ? h('p', {}, h('strong', { id: 'study-best-value' }, fmtNum(s.best.objective, 4)), ` by trial ${s.best.number} `,
      h('code', {}, Object.entries(s.best.params).map(([k, v]) => `${k}=${v}`).join(' ')), ' · ', h('a', { href: `#/task/${s.best.taskId}` }, 'its run'))
      : h('p', { class: 'muted' }, 'No trial has completed yet.'));
    replace(chart, lineChart({ title: `best ${s.objective} so far`, height: 200,
      yMin: Math.min(0, ...s.progress.map((p) => p.best)),
      series: [{ name: '', points: s.progress.map((p) => [new Date(p.at).getTime(), p.best]) }] }));
    const names = s.trials.length ? Object.keys(s.trials[0].params) : [];
    const rows = s.trials.map((t, i) => h('tr', { 'data-trial': String(t.number), class: s.best && s.best.number === t.number ? 'best' : '' },
      h('td', {}, String(i + 1)), h('td', {}, String(t.number)), ...names.map((n) => h('td', {}, t.params[n] ?? '')),
      h('td', {}, t.objective === null ? '–' : `${fmtNum(t.objective, 4)} @ ${t.objectiveStep}`), h('td', {}, stateBadge(t.state)),
      h('td', { class: 'reason' }, t.reason || ''), h('td', {}, t.taskId ? h('a', { href: `#/task/${t.taskId}` }, 'run') : '')));
    replace(trials, rows.length ? table(['Rank', 'Trial', ...names, s.objective, 'State', 'Why', ''], rows, { id: 'study-trials-table' })
      : h('p', { class: 'muted' }, 'No trials yet.'));
  };

  const reload = async () => {
    try {
      const d = await gql(oneQuery, { id });
      draw(d.study);
    } catch (e) {
      replace(head, h('h1', {}, 'Study'), errorBox(e));
    }
  };
  return watch([{ name: 'studyChanged', args: { id }, select: '{ id state }' }], reload, { pollMs: 2000 });
}
