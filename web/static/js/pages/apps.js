// Apps: the app catalogue and the caller's app instances (docs/apps.md).
// The catalogue shows as cards; an app's launch form is rendered from its
// JSON Schema, with a dropdown of the compute resources open to the
// caller (never a cluster, node or container: where an instance runs is
// the engine's choice), a project, an optional name and the
// share-with-group switch. The server validates every value against the
// same schema and its refusal (a lock, a quota, a value that fails the
// form) is shown next to the form with its message: the page checks
// nothing itself, so every channel refuses in the same words.
//
// Instances are kept current from the appInstanceChanged subscription
// (state changes, readiness and idle warnings of the instances the caller
// may see) and the queueChanged subscription of each compute resource the
// caller sees, with the page polling appInstances every 3 s while a
// subscription is down, as every page does through watch(). Each running
// instance with an idle limit shows when its limits stop it (the idle
// countdown); a warned one gets a banner above the list. Admins lock and
// unlock entries from their cards.
import { gql, token } from '../api.js';
import { h, replace, table, errorBox, ago, fmtTime, section } from '../dom.js';
import { watch } from '../live.js';

const catalogueQuery = `{
  apps { name description kind form secrets locked builtIn port }
  computeResources(first: 200) { edges { node { id name group { name } profile { name } } } }
  projects(first: 200) { edges { node { id name group { name } } } }
}`;

const instancesQuery = `{ appInstances { id name app kind state reason addressRefused url shareWithGroup
  idle { stopsAt stopReason warned } runtime { uptimeSeconds gpuUtilization lastActivity }
  task { createdAt owner { name } computeResource { name } project { name } } } }`;

// Mutations are plain strings, as on the other pages: the test that sends
// every dashboard query to the server (gqllimits) reads template literals.
const launchMutation = 'mutation($in: LaunchAppInput!) { launchApp(input: $in) { id name state url } }';

export function render(el, { viewer }) {
  const cards = h('div', { id: 'apps-catalogue', class: 'app-cards' }, h('p', { class: 'muted' }, 'Loading…'));
  const launch = h('div', { id: 'apps-launch' });
  const instances = h('div', { id: 'apps-instances' }, h('p', { class: 'muted' }, 'Loading…'));
  const launchSection = section('Launch', launch);
  launchSection.hidden = true;
  replace(el, h('h1', {}, 'Apps'),
    h('p', { class: 'muted' }, 'Model servers and sessions on the estate\'s GPUs. An app instance is a task: it is placed, charged and governed like any task, and holds its GPUs until you stop it.'),
    section('Catalogue', cards),
    launchSection,
    section('Instances', instances));

  let catalogue = { apps: [], resources: [], projects: [] };
  let stopWatch = null;
  let stopped = false;

  const reloadInstances = async () => {
    try {
      const d = await gql(instancesQuery);
      replace(instances, instanceTable(d.appInstances, reloadInstances));
    } catch (e) {
      replace(instances, errorBox(e));
    }
  };

  const openForm = (app) => {
    launchSection.hidden = false;
    replace(launch, launchForm(app, catalogue, async () => { await reloadInstances(); }));
    launchSection.scrollIntoView({ block: 'nearest' });
  };

  const reloadCatalogue = async () => {
    const d = await gql(catalogueQuery);
    catalogue = {
      apps: d.apps,
      resources: d.computeResources.edges.map((e) => e.node),
      projects: d.projects.edges.map((e) => e.node),
    };
    replace(cards, d.apps.length ? d.apps.map((a) => appCard(a, viewer, openForm, async () => {
      await reloadCatalogue();
    })) : h('p', { class: 'muted' }, 'The catalogue is empty.'));
    return catalogue;
  };

  reloadCatalogue().then((c) => {
    if (stopped) return;
    const topics = [{ name: 'appInstanceChanged' }].concat(c.resources.map((r) => ({ name: 'queueChanged', args: { computeResource: r.id } })));
    stopWatch = watch(topics, reloadInstances, { pollMs: 3000 });
  }, (e) => {
    replace(cards, errorBox(e));
    if (!stopped) stopWatch = watch([], reloadInstances, { pollMs: 3000 });
  });
  return () => { stopped = true; if (stopWatch) stopWatch(); };
}

function appCard(a, viewer, openForm, changed) {
  const err = h('div', { class: 'app-error' });
  const lock = async () => {
    replace(err);
    try {
      await gql(`mutation($n: String!) { ${a.locked ? 'unlockApp' : 'lockApp'}(name: $n) { app { locked } } }`, { n: a.name });
      await changed();
    } catch (e) {
      replace(err, errorBox(e));
    }
  };
  return h('div', { class: 'card app-card', 'data-app': a.name, 'data-locked': a.locked ? 'true' : 'false' },
    h('div', { class: 'app-head' },
      h('strong', {}, a.name), ' ',
      h('span', { class: `badge kind-${a.kind}` }, a.kind), ' ',
      a.locked ? h('span', { class: 'badge warn app-locked', title: 'An admin locked this app: it cannot be launched.' }, 'locked') : null,
      a.builtIn ? h('span', { class: 'badge muted' }, 'built-in') : null),
    h('p', { class: 'muted' }, a.description || '–'),
    h('div', { class: 'buttons' },
      h('button', { type: 'button', class: 'app-launch', onclick: () => openForm(a) }, 'Launch…'),
      viewer.admin ? h('button', { type: 'button', class: 'app-lock', onclick: lock }, a.locked ? 'Unlock' : 'Lock') : null),
    err);
}

// fieldsOf returns the launch form's fields in the schema's order, with
// whether each is required.
function fieldsOf(app) {
  let schema;
  try {
    schema = JSON.parse(app.form || '{}');
  } catch {
    schema = {};
  }
  const required = new Set(schema.required || []);
  return Object.entries(schema.properties || {}).map(([name, s]) => ({ name, s: s || {}, required: required.has(name), secret: app.secrets.includes(name) }));
}

// fieldInput builds the input of one schema field; read() returns its
// value for the launch, or undefined to leave it out (the server then
// fills in the schema's default).
function fieldInput(app, f) {
  const id = `app-field-${f.name}`;
  const s = f.s;
  const def = s.default;
  if (Array.isArray(s.enum)) {
    const sel = h('select', { id, name: f.name, 'data-field': f.name },
      f.required && def === undefined ? null : h('option', { value: '' }, def === undefined ? '–' : `default (${def})`),
      s.enum.map((v, i) => h('option', { value: String(i), selected: def === v && f.required ? true : null }, String(v))));
    return { el: sel, read: () => (sel.value === '' ? undefined : s.enum[Number(sel.value)]) };
  }
  if (s.type === 'boolean') {
    const box = h('input', { type: 'checkbox', id, name: f.name, 'data-field': f.name, checked: def === true ? true : null });
    return { el: box, read: () => box.checked };
  }
  if (s.type === 'integer' || s.type === 'number') {
    // A text field, not type=number: what is typed reaches the server,
    // whose schema check gives the message.
    const inp = h('input', { type: 'text', inputmode: 'decimal', id, name: f.name, 'data-field': f.name, value: def === undefined ? null : String(def), size: 12 });
    return { el: inp, read: () => {
      const v = inp.value.trim();
      if (v === '') return undefined;
      const n = Number(v);
      return Number.isNaN(n) ? v : n;
    } };
  }
  if (s.type === 'array') {
    const inp = h('input', { type: 'text', id, name: f.name, 'data-field': f.name, size: 40,
      value: Array.isArray(def) && def.length ? def.join(', ') : null, placeholder: 'comma-separated' });
    return { el: inp, read: () => {
      const v = inp.value.trim();
      if (v === '') return undefined;
      return v.split(',').map((x) => x.trim()).filter((x) => x !== '');
    } };
  }
  const inp = h('input', { type: 'text', id, name: f.name, 'data-field': f.name, size: 40, autocomplete: 'off',
    value: def === undefined || def === '' ? null : String(def),
    placeholder: f.secret ? 'the name of a vault secret, such as HF_TOKEN' : null });
  return { el: inp, read: () => (inp.value === '' ? undefined : inp.value) };
}

function launchForm(app, catalogue, launched) {
  const fields = fieldsOf(app).map((f) => ({ ...f, input: fieldInput(app, f) }));
  const resource = h('select', { id: 'app-resource', name: 'computeResource', required: true },
    catalogue.resources.map((r) => h('option', { value: r.id }, `${r.name} (${r.group.name})`)));
  const project = h('select', { id: 'app-project', name: 'project' },
    h('option', { value: '' }, '– default –'),
    catalogue.projects.map((p) => h('option', { value: p.name }, p.group ? `${p.name} (${p.group.name})` : p.name)));
  const name = h('input', { type: 'text', id: 'app-name', name: 'name', size: 30, placeholder: `${app.name}-<you>-<n>`, autocomplete: 'off' });
  const share = h('input', { type: 'checkbox', id: 'app-share', name: 'shareWithGroup' });
  const out = h('div', { id: 'app-launch-result', role: 'status' });
  const submit = h('button', { type: 'submit' }, `Launch ${app.name}`);
  const form = h('form', { id: 'app-form', class: 'app-form', 'data-app': app.name, novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    replace(out);
    const values = {};
    for (const f of fields) {
      const v = f.input.read();
      if (v !== undefined) values[f.name] = v;
    }
    const input = { app: app.name, computeResource: resource.value, values, shareWithGroup: share.checked };
    if (project.value) input.project = project.value;
    if (name.value.trim()) input.name = name.value.trim();
    submit.disabled = true;
    try {
      const d = await gql(launchMutation, { in: input });
      const i = d.launchApp;
      replace(out, h('p', { class: 'ok', 'data-instance': i.id }, `Launched ${i.name}: ${i.state}. It will be served at `, h('code', {}, i.url), '.'));
      await launched(i);
    } catch (e) {
      replace(out, errorBox(e));
    } finally {
      submit.disabled = false;
    }
  } },
  h('h3', {}, `${app.name} (${app.kind})`),
  app.locked ? h('p', { class: 'warn-text' }, 'An admin locked this app: a launch will be refused until it is unlocked.') : null,
  catalogue.resources.length ? null : h('p', { class: 'warn-text' }, 'No compute resource is open to you: ask an admin to open one to your group.'),
  h('table', { class: 'form' }, h('tbody', {},
    fields.map((f) => h('tr', { 'data-field-row': f.name },
      h('th', {}, h('label', { for: `app-field-${f.name}` }, f.name, f.required ? ' *' : '')),
      h('td', {}, f.input.el,
        f.secret ? h('div', { class: 'muted' }, 'A vault secret\'s name: its value is injected at start and never shown.') : null,
        f.s.description ? h('div', { class: 'muted' }, f.s.description) : null))),
    h('tr', {}, h('th', {}, h('label', { for: 'app-resource' }, 'Compute resource *')), h('td', {}, resource,
      h('div', { class: 'muted' }, 'Where it runs within the compute resource is the engine\'s choice.'))),
    h('tr', {}, h('th', {}, h('label', { for: 'app-project' }, 'Project')), h('td', {}, project)),
    h('tr', {}, h('th', {}, h('label', { for: 'app-name' }, 'Name')), h('td', {}, name)),
    h('tr', {}, h('th', {}, h('label', { for: 'app-share' }, 'Share with group')), h('td', {}, share,
      h('span', { class: 'muted' }, ' the members of the compute resource\'s group may see and open it'))))),
  h('div', { class: 'buttons' }, submit),
  out);
  return form;
}

// countdown says when an instance's idle limits stop it unless it is used.
function countdown(i) {
  if (!i.idle || !i.idle.stopsAt) return h('span', { class: 'muted' }, '–');
  const mins = Math.max(0, Math.round((Date.parse(i.idle.stopsAt) - Date.now()) / 60000));
  const text = mins >= 120 ? `in ${Math.round(mins / 60)} h` : `in ${mins} min`;
  return h('span', { class: i.idle.warned ? 'idle-countdown warned' : 'idle-countdown', title: `${i.idle.stopReason} at ${fmtTime(i.idle.stopsAt)} unless it is used` }, text);
}

function idleBanners(list) {
  return list.filter((i) => i.idle && i.idle.warned && i.idle.stopsAt).map((i) =>
    h('div', { class: 'banner warn app-idle-warning', 'data-instance': i.id },
      h('strong', {}, i.name), ` will be ${i.idle.stopReason.replace(/^stopped: /, '')} at ${fmtTime(i.idle.stopsAt)} unless it is used.`));
}

function instanceTable(list, changed) {
  if (!list.length) return h('p', { class: 'muted' }, 'No app instance you may see.');
  const active = (s) => s === 'waiting' || s === 'placed' || s === 'running' || s === 'ready';
  return h('div', {}, ...idleBanners(list), table(['Instance', 'App', 'State', 'Compute resource', 'Owner', 'Open', 'Launched', 'Stops', ''], list.map((i) => {
    const err = h('div', {});
    const stop = async (ev) => {
      ev.target.disabled = true;
      replace(err);
      try {
        await gql('mutation($id: ID!) { stopApp(id: $id) { id state } }', { id: i.id });
        await changed();
      } catch (e) {
        ev.target.disabled = false;
        replace(err, errorBox(e));
      }
    };
    return h('tr', { 'data-instance': i.id, 'data-state': i.state },
      h('td', {}, h('strong', {}, i.name), i.shareWithGroup ? h('span', { class: 'muted' }, ' · shared with the group') : null),
      h('td', {}, i.app, h('span', { class: 'muted' }, ` (${i.kind})`)),
      h('td', { class: 'state' }, h('span', { class: `badge s-${i.state}` }, i.state), i.reason ? h('div', { class: 'reason' }, i.reason) : null,
        i.addressRefused ? h('div', { class: 'reason address-refused' }, i.addressRefused) : null),
      h('td', { class: 'resource' }, i.task.computeResource ? i.task.computeResource.name : '–'),
      h('td', {}, i.task.owner.name),
      h('td', {}, active(i.state) ? h('a', { href: i.url, target: '_blank', rel: 'noopener', class: 'app-open', onclick: (ev) => openApp(ev, i), title: 'Open: signs this browser in to the instance' }, i.url) : h('span', { class: 'muted' }, '–')),
      h('td', { title: fmtTime(i.task.createdAt) }, ago(i.task.createdAt)),
      h('td', { class: 'idle' }, active(i.state) ? countdown(i) : h('span', { class: 'muted' }, '–')),
      h('td', {}, active(i.state) ? h('button', { type: 'button', class: 'app-stop', onclick: stop }, 'Stop') : null, err));
  })));
}

// openApp signs the browser in to the instance and opens it in a new tab:
// the dashboard's access token is posted to the router's sign-in hop
// ({url}_klique/signin: on the instance's own host when the server serves
// instances so, else /apps/{id}/_klique/signin), which sets the
// instance's cookie and sends the tab on to the app (docs/apps.md, "The
// router"). The token is read before the form is sent, so the new tab is
// still opened by the click.
async function openApp(ev, i) {
  ev.preventDefault();
  let t;
  try {
    t = await token();
  } catch (e) {
    window.alert(e.message);
    return;
  }
  const form = h('form', { method: 'POST', action: `${i.url}_klique/signin`, target: '_blank', rel: 'noopener', style: 'display:none' },
    h('input', { type: 'hidden', name: 'token', value: t }));
  document.body.appendChild(form);
  form.submit();
  form.remove();
}
