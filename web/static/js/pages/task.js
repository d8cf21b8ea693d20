// Task page: the state history with reasons, the live log, metrics charted,
// parameters and outputs, and clone & enqueue with changed parameters.
import { gql, gqlOrShow } from '../api.js';
import { h, replace, table, errorBox, fmtTime, statusBadge, section, fmtNum } from '../dom.js';
import { watch } from '../live.js';
import { lineChart } from '../charts.js';

const query = `query($id: ID!) { task(id: $id) {
  id name status reason position attempt retries exitCode outputs
  createdAt placedAt startedAt finishedAt updatedAt
  owner { name } project { name } group { name } computeResource { id name } pool { name } worker { hostname }
  size { text } clonedFrom { id name }
  spec { command repository commit entryPoint workingDir image packages parameters env secrets }
  metrics(first: 5000) { seq at name value step }
} }`;

const logQuery = `query($id: ID!, $after: Int!) { task(id: $id) { logs(after: $after, first: 1000) { lastSeq truncated lines { seq attempt at stream line } } } }`;
const tailQuery = `query($id: ID!) { task(id: $id) { logs(tail: 500) { lastSeq truncated lines { seq attempt at stream line } } } }`;
const auditQuery = `query($id: String!) { auditLog(filter: {objectKind: "task", objectId: $id}, first: 100) { edges { node { at actor channel action detail } } } }`;

const ended = new Set(['COMPLETED', 'FAILED', 'ABORTED']);

export function render(el, { viewer, args }) {
  const id = args[0];
  if (!id) { replace(el, errorBox('Open a task from the queues page: the address needs a task id (#/task/ID).')); return null; }
  const head = h('div');
  const history = h('div');
  const metricsBox = h('div', { id: 'task-metrics' });
  const params = h('div');
  const cloneBox = h('div', { id: 'task-clone' });
  const logPre = h('pre', { class: 'log', id: 'task-log' });
  const logNote = h('p', { class: 'muted' });
  replace(el, head,
    h('div', { class: 'cols' }, section('State history', history), section('Parameters and outputs', params)),
    section('Log', logNote, logPre),
    section('Metrics', metricsBox),
    section('Clone & enqueue', cloneBox));

  // Aborting takes two clicks (no browser dialog) and an optional reason;
  // the API decides who may (the owner, a group lead, an admin).
  const abortBox = h('div', { class: 'abort' });
  const abortStart = () => {
    const reason = h('input', { id: 'task-abort-reason', placeholder: 'reason (optional)', size: 40 });
    const msg = h('span');
    replace(abortBox, reason, ' ',
      h('button', { type: 'button', id: 'task-abort-confirm', onclick: async () => {
        try {
          await gql('mutation($id: ID!, $r: String) { abortTask(id: $id, reason: $r) { id status } }', { id, r: reason.value.trim() || null });
          replace(abortBox, abortButton());
          reload();
        } catch (e) {
          replace(msg, errorBox(e));
        }
      } }, 'Abort task'), ' ',
      h('button', { type: 'button', onclick: () => replace(abortBox, abortButton()) }, 'Keep it'), msg);
  };
  const abortButton = () => h('button', { type: 'button', id: 'task-abort', onclick: abortStart }, 'Abort…');
  replace(abortBox, abortButton());

  let lastSeq = null;
  let cloneShown = false;
  const seenEvents = [];

  const loadLogs = async () => {
    const d = lastSeq === null ? await gql(tailQuery, { id }) : await gql(logQuery, { id, after: lastSeq });
    if (!d.task) return;
    const page = d.task.logs;
    const stick = logPre.scrollTop + logPre.clientHeight >= logPre.scrollHeight - 8;
    for (const l of page.lines) {
      logPre.appendChild(h('span', { class: `l-${l.stream}` }, `${l.line}\n`));
    }
    while (logPre.childNodes.length > 5000) logPre.firstChild.remove();
    if (page.lastSeq > (lastSeq ?? -1)) lastSeq = page.lastSeq;
    if (lastSeq === null) lastSeq = page.lastSeq;
    logNote.textContent = page.truncated ? 'The log reached its size limit: later lines were not kept.' : '';
    if (!logPre.childNodes.length) logNote.textContent = 'No log lines yet.';
    if (stick) logPre.scrollTop = logPre.scrollHeight;
  };

  const reload = async () => {
    const d = await gqlOrShow(head, query, { id });
    if (!d) return;
    const t = d.task;
    if (!t) { replace(head, errorBox(`No task ${id} that you may see.`)); return; }
    document.title = `Klique · ${t.name}`;
    replace(head, h('h1', {}, t.name, ' ', statusBadge(t.status)),
      h('p', { class: 'reason', id: 'task-reason' }, t.reason || ''),
      h('p', { class: 'muted' }, `${t.owner.name} · project ${t.project.name} · ${t.group ? t.group.name : '–'} / ${t.computeResource ? t.computeResource.name : (t.status === 'RUNNING_LOCALLY' ? '(on its owner\'s machine)' : '(none)')} · ${t.size.text} GPU`,
        t.pool ? ` · pool ${t.pool.name}` : '', t.worker ? ` · worker ${t.worker.hostname}` : '',
        t.clonedFrom ? [' · cloned from ', h('a', { href: `#/task/${encodeURIComponent(t.clonedFrom.id)}` }, t.clonedFrom.name)] : ''),
      ended.has(t.status) ? null : abortBox);

    const steps = [['Enqueued', t.createdAt, ''], ['Placed', t.placedAt, t.pool ? `on ${t.pool.name}` : ''],
      ['Started', t.startedAt, `attempt ${t.attempt}${t.retries ? `, ${t.retries} requeues` : ''}${t.worker ? ` on ${t.worker.hostname}` : ''}`]];
    if (t.finishedAt) steps.push([t.status.toLowerCase(), t.finishedAt, `${t.exitCode !== null ? `exit code ${t.exitCode}; ` : ''}${t.reason}`]);
    else steps.push([`now ${t.status.toLowerCase()}`, t.updatedAt, t.position ? `position ${t.position}: ${t.reason}` : t.reason]);
    let rows = steps.filter((s) => s[1]).map(([what, at, why]) => ({ at, what, why }));
    if (viewer.admin) {
      try {
        const a = await gql(auditQuery, { id });
        rows = rows.concat(a.auditLog.edges.map(({ node: e }) => ({ at: e.at, what: `${e.action} (${e.channel}, ${e.actor})`, why: e.detail })));
      } catch { /* the audit trail is an addition; the timestamps stand alone */ }
    }
    rows = rows.concat(seenEvents);
    rows.sort((a, b) => new Date(a.at) - new Date(b.at));
    replace(history, table(['At', 'What', 'Why'], rows.map((r) => h('tr', {}, h('td', {}, fmtTime(r.at)), h('td', {}, r.what), h('td', { class: 'reason' }, r.why || '')))));

    const kv = (obj) => Object.entries(obj || {}).map(([k, v]) => h('tr', {}, h('td', {}, k), h('td', {}, h('code', {}, v))));
    replace(params,
      h('h3', {}, 'Command'), h('pre', {}, t.spec.command.join(' ') || '(the image\'s default)'),
      t.spec.repository ? h('p', {}, `${t.spec.repository} @ ${t.spec.commit || 'HEAD'}${t.spec.entryPoint ? ` · ${t.spec.entryPoint}` : ''}`) : null,
      t.spec.image ? h('p', {}, `image ${t.spec.image}`) : null,
      h('h3', {}, 'Parameters'), Object.keys(t.spec.parameters).length ? table(['Name', 'Value'], kv(t.spec.parameters)) : h('p', { class: 'muted' }, 'None.'),
      t.spec.secrets.length ? h('p', {}, `Secrets from the vault: ${t.spec.secrets.join(', ')}`) : null,
      h('h3', {}, 'Outputs'), t.outputs.length ? h('ul', {}, t.outputs.map((o) => h('li', {}, h('code', {}, o)))) : h('p', { class: 'muted' }, 'None yet.'));

    const names = [...new Set(t.metrics.map((m) => m.name))];
    replace(metricsBox, names.length ? h('div', { class: 'cols' }, names.map((n) => lineChart({
      title: n, series: [{ name: '', points: t.metrics.filter((m) => m.name === n).map((m) => [new Date(m.at).getTime(), m.value]) }], height: 180, yMin: Math.min(0, ...t.metrics.filter((m) => m.name === n).map((m) => m.value)),
    }))) : h('p', { class: 'muted' }, 'The task has reported no metrics.'));
    if (!cloneShown) { cloneShown = true; replace(cloneBox, cloneForm(t)); }
    try { await loadLogs(); } catch (e) { logNote.textContent = e.message; }
  };

  return watch([
    {
      name: 'taskEvents',
      args: { id },
      select: '{ kind at task { status reason } }',
      // What happened while the page was open, with the reason the task
      // had then: the history beyond the timestamps the task keeps.
      onEvent: (u) => {
        if (u && u.kind !== 'snapshot') seenEvents.push({ at: u.at, what: u.kind.replace(/^task\./, ''), why: u.task ? u.task.reason : '' });
      },
    },
    // The log of an ended task is sent whole and the subscription
    // completes (done): the page stays live on taskEvents.
    { name: 'taskLogs', args: { id }, select: '{ done }', done: (u) => u.done },
  ], reload, { pollMs: 2000 });
}

function cloneForm(t) {
  const rows = [];
  const box = h('tbody');
  const addRow = (k = '', v = '') => {
    const name = h('input', { value: k, placeholder: 'name', size: 16 });
    const value = h('input', { value: v, placeholder: 'value', size: 24 });
    const tr = h('tr', {}, h('td', {}, name), h('td', {}, value), h('td', {}, h('button', { type: 'button', onclick: () => { tr.remove(); rows.splice(rows.indexOf(r), 1); } }, '×')));
    const r = { name, value };
    rows.push(r);
    box.appendChild(tr);
  };
  for (const [k, v] of Object.entries(t.spec.parameters)) addRow(k, v);
  const taskName = h('input', { value: `${t.name}-clone`, size: 32 });
  const result = h('div');
  return h('form', { class: 'clone', onsubmit: async (ev) => {
    ev.preventDefault();
    const overrides = {};
    for (const r of rows) {
      const k = r.name.value.trim();
      if (!k) continue;
      if (r.value.value !== t.spec.parameters[k]) overrides[k] = r.value.value;
    }
    try {
      const d = await gql('mutation($id: ID!, $p: StringMap, $n: String) { cloneTask(id: $id, parameterOverrides: $p, name: $n) { id name status } }',
        { id: t.id, p: overrides, n: taskName.value.trim() || null });
      location.hash = `#/task/${encodeURIComponent(d.cloneTask.id)}`;
    } catch (e) {
      replace(result, errorBox(e));
    }
  } },
  h('label', {}, 'Name ', taskName),
  h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Parameter'), h('th', {}, 'Value'), h('th', {}))), box),
  h('p', { class: 'muted' }, `Same compute resource (${t.computeResource ? t.computeResource.name : 'disconnected: pick none'}), project and spec; only changed parameters are sent. ${fmtNum(Object.keys(t.spec.parameters).length, 0)} parameters.`),
  h('button', { type: 'button', onclick: () => addRow() }, 'Add parameter'), ' ',
  h('button', { type: 'submit' }, 'Clone & enqueue'),
  result);
}
