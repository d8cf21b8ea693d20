// Orchestration: every pool with declared, used and free GPUs by GPU class
// and by group, the workers and their state, utilization over time and the
// event log. "Used" is what placed and running work holds, as the engine
// counts it against the declared capacity: the tenant-wide figures come
// from the poolUtilization subscription; the split by group (and, without
// the subscription, the figures themselves) from the tasks the caller may
// see.
import { gql, gqlOrShow } from '../api.js';
import { h, replace, table, errorBox, fmtNum, ago, fmtTime, section } from '../dom.js';
import { watch } from '../live.js';
import { lineChart, barChart } from '../charts.js';

const query = `{
  pools(first: 200) { edges { node { id name kind region capacityGpus gpuClass { name }
    workerStatus { online registered lastSeenAt claimTimeoutSeconds noWorker } } } }
  tasks(filter: {status: [PLACED, RUNNING]}, first: 500) { edges { node { id status pool { id } group { name } size { totalGpus } } } }
  workers { id hostname online mode kind version lastHeartbeatAt pool { name } gpus { index } tasks { id name } }
}`;

const auditQuery = `{ auditLog(first: 25) { edges { node { at actor channel action objectKind objectName detail } } } }`;

const historyQuery = `query($from: Time, $to: Time) { utilizationHistory(from: $from, to: $to) {
  from to stepSeconds gpuClasses { gpuClass { name } declaredGpus points { at usedGpus } } } }`;

// Ranges the utilization chart offers, in minutes back from now.
const ranges = [['Last hour', 60], ['Last 6 hours', 360], ['Last 24 hours', 1440], ['Last 7 days', 10080]];

// share is the used share of declared GPUs, in percent, at most 100: work
// placed before a pool was shrunk may hold more than it declares now.
function share(used, declared) {
  return declared > 0 ? Math.min(100, (100 * used) / declared) : 0;
}

// workersCell says whether a pool has a worker online. While none is, work
// placed there waits unseen in its hidden queue (and is charged), so the
// cell says so, with the sentence the placed tasks show and what the claim
// timeout will do.
function workersCell(ws, placed) {
  if (!ws.noWorker) return h('td', { class: 'workers' }, `${ws.online} online`);
  const then = ws.claimTimeoutSeconds
    ? `; placed work goes back to its compute resource after ${fmtNum(ws.claimTimeoutSeconds / 60, 2)} min unclaimed`
    : '; placed work waits for one (no claim timeout)';
  return h('td', { class: 'workers' },
    h('span', { class: 'badge s-failed' }, 'no worker online'), ' ',
    h('span', { class: 'reason', 'data-no-worker': '' }, ws.noWorker + then),
    placed ? h('div', { class: 'muted' }, `${placed} placed task${placed === 1 ? '' : 's'} wait${placed === 1 ? 's' : ''} for a worker here`) : null);
}

export function render(el, { viewer }) {
  const poolsBox = h('div');
  const classBox = h('div');
  const chartBox = h('div', { id: 'utilization-chart' });
  let rangeMinutes = 60;
  let history = null;
  const rangeSelect = h('select', { id: 'utilization-range', onchange: () => { rangeMinutes = Number(rangeSelect.value); reload(); } },
    ranges.map(([label, m]) => h('option', { value: m }, label)));
  const workersBox = h('div');
  const logBox = h('div');
  replace(el, h('h1', {}, 'Orchestration'),
    h('div', { class: 'cols' }, section('Pools', poolsBox), section('By GPU class', classBox)),
    section('Utilization over time', h('label', { class: 'muted' }, 'Range ', rangeSelect), chartBox),
    section('Workers', workersBox),
    section(viewer.admin ? 'Event log' : 'Events seen on this page', logBox));
  const seen = [];
  // util is the latest poolUtilization update, when the subscription runs.
  let util = null;

  const reload = async () => {
    const d = await gqlOrShow(poolsBox, query);
    if (!d) return;
    const pools = d.pools.edges.map((e) => e.node);
    const tasks = d.tasks.edges.map((e) => e.node);
    const used = new Map();
    const byGroup = new Map();
    // waiting counts, per pool, the placed tasks no worker has claimed yet.
    const waiting = new Map();
    for (const t of tasks) {
      if (!t.pool) continue;
      if (t.status === 'PLACED') waiting.set(t.pool.id, (waiting.get(t.pool.id) || 0) + 1);
      used.set(t.pool.id, (used.get(t.pool.id) || 0) + t.size.totalGpus);
      const g = byGroup.get(t.pool.id) || new Map();
      const name = t.group ? t.group.name : '(no group)';
      g.set(name, (g.get(name) || 0) + t.size.totalGpus);
      byGroup.set(t.pool.id, g);
    }
    const fromServer = util ? new Map(util.pools.map((u) => [u.pool.id, u])) : null;
    if (fromServer) for (const p of pools) if (fromServer.has(p.id)) used.set(p.id, fromServer.get(p.id).usedGpus);
    const poolTable = pools.length ? table(['Pool', 'Kind', 'GPU class', 'Declared', 'Used', 'Free', 'Used by group', 'Workers'],
      pools.map((p) => {
        const u = used.get(p.id) || 0;
        const groups = [...(byGroup.get(p.id) || new Map())].map(([g, n]) => `${g} ${fmtNum(n, 3)}`).join(', ');
        return h('tr', { 'data-pool': p.name },
          h('td', {}, p.name, p.region ? h('span', { class: 'muted' }, ` ${p.region}`) : null),
          h('td', {}, p.kind.toLowerCase().replace('_', ' ')),
          h('td', {}, p.gpuClass.name),
          h('td', { class: 'num' }, p.capacityGpus),
          h('td', { class: 'num' }, fmtNum(u, 3)),
          h('td', { class: 'num' }, fmtNum(Math.max(0, p.capacityGpus - u), 3)),
          h('td', {}, groups || '–'),
          workersCell(p.workerStatus, waiting.get(p.id) || 0));
      })) : h('p', { class: 'muted' }, 'No pools yet: an admin declares them in the estate.');
    const scope = viewer.admin ? null : h('p', { class: 'muted' }, fromServer
      ? 'Used and free count all work on the pool; the split by group shows your groups\' work only.'
      : 'Counting your groups\' work only: the tenant-wide figures come with live updates.');
    replace(poolsBox, poolTable, scope,
      barChart({ title: 'Used GPUs by pool', items: pools.map((p) => ({ label: p.name, value: used.get(p.id) || 0, note: `of ${p.capacityGpus}` })) }));

    const classes = new Map();
    for (const p of pools) {
      const c = classes.get(p.gpuClass.name) || { declared: 0, used: 0 };
      c.declared += p.capacityGpus;
      c.used += used.get(p.id) || 0;
      classes.set(p.gpuClass.name, c);
    }
    replace(classBox, table(['GPU class', 'Declared', 'Used', 'Free'], [...classes].map(([name, c]) => h('tr', {},
      h('td', {}, name), h('td', { class: 'num' }, c.declared), h('td', { class: 'num' }, fmtNum(c.used, 3)),
      h('td', { class: 'num' }, fmtNum(Math.max(0, c.declared - c.used), 3))))));

    // Use over time comes from the server's usage ledger, so the chart
    // covers the whole range, not only what this tab has seen. It is read
    // again at most every 15 seconds (or on a new range): a busy estate
    // sends pool updates far more often, and a point averages minutes.
    try {
      if (!history || history.minutes !== rangeMinutes || Date.now() - history.at > 15_000) {
        const to = new Date();
        const from = new Date(to.getTime() - rangeMinutes * 60_000);
        const r = await gql(historyQuery, { from: from.toISOString(), to: to.toISOString() });
        history = { at: Date.now(), minutes: rangeMinutes, from, to, data: r.utilizationHistory };
      }
      const { from, to, data: hd } = history;
      replace(chartBox, lineChart({
        title: `Used share of declared GPUs, by GPU class (average per ${fmtNum(hd.stepSeconds / 60, 1)} min, from the usage ledger)`, unit: '%',
        series: hd.gpuClasses.map((c) => ({ name: c.gpuClass.name, points: c.points.map((p) => [new Date(p.at).getTime(), share(p.usedGpus, c.declaredGpus)]) })),
        hlines: [{ value: 100, label: 'full' }],
        yMax: 100,
        x0: from.getTime(),
        x1: to.getTime(),
      }));
    } catch (e) {
      replace(chartBox, errorBox(e));
    }

    replace(workersBox, d.workers.length ? table(['Worker', 'Pool', 'State', 'Mode', 'GPUs', 'Running', 'Last heartbeat'],
      d.workers.map((w) => h('tr', { 'data-worker': w.hostname },
        h('td', {}, w.hostname, h('span', { class: 'muted' }, ` ${w.version}`)),
        h('td', {}, w.pool ? w.pool.name : '–'),
        h('td', {}, h('span', { class: `badge ${w.online ? 's-running' : 's-failed'}` }, w.online ? 'online' : 'heartbeats lost')),
        h('td', {}, w.mode),
        h('td', { class: 'num' }, w.gpus.length),
        h('td', {}, w.tasks.length ? w.tasks.map((t, i) => [i ? ', ' : '', h('a', { href: `#/task/${encodeURIComponent(t.id)}` }, t.name)]) : '–'),
        h('td', {}, ago(w.lastHeartbeatAt))))) : h('p', { class: 'muted' }, 'No worker has registered yet.'));

    if (viewer.admin) {
      try {
        const a = await gql(auditQuery);
        replace(logBox, table(['At', 'Who', 'Channel', 'What', 'Object', 'Detail'], a.auditLog.edges.map(({ node: e }) => h('tr', {},
          h('td', {}, fmtTime(e.at)), h('td', {}, e.actor), h('td', {}, e.channel), h('td', {}, e.action),
          h('td', {}, `${e.objectKind} ${e.objectName}`), h('td', { class: 'reason' }, e.detail)))));
      } catch (e) {
        replace(logBox, errorBox(e));
      }
    } else {
      replace(logBox, seen.length ? h('ul', { class: 'events' }, seen.slice(-25).reverse().map((s) => h('li', {}, `${fmtTime(s.at)} ${s.what}`)))
        : h('p', { class: 'muted' }, 'Nothing has happened since this page opened.'));
    }
  };
  const note = (what) => seen.push({ at: new Date().toISOString(), what });
  return watch([
    {
      name: 'poolUtilization',
      select: '{ kind at pools { pool { id } declaredGpus usedGpus freeGpus } gpuClasses { gpuClass { name } declaredGpus usedGpus freeGpus } }',
      onEvent: (u) => {
        if (!u || !u.pools) return;
        util = u;
        if (u.kind !== 'snapshot' && u.kind !== 'tick') note(`pools: ${u.kind}`);
      },
    },
    {
      name: 'workers',
      select: '{ kind worker { hostname } }',
      onEvent: (u) => u && u.kind !== 'snapshot' && note(`${u.kind}${u.worker ? ` ${u.worker.hostname}` : ''}`),
    },
  ], reload, { pollMs: 5000 });
}
