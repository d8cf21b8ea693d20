// The dashboard's shell: sign-in, the header and the page router. Pages
// are chosen by the URL fragment (#/queues, #/task/ID) and each returns a
// function that stops its live updates when another page opens.
import { gql, signIn, signOut, signedIn, ssoConfig, startSSO, finishSSO } from './api.js';
import { h, replace, errorBox } from './dom.js';
import { onMode } from './live.js';
import * as orchestration from './pages/orchestration.js';
import * as queues from './pages/queues.js';
import * as schedules from './pages/schedules.js';
import * as policy from './pages/policy.js';
import * as tree from './pages/tree.js';
import * as usage from './pages/usage.js';
import * as task from './pages/task.js';
import * as estate from './pages/estate.js';
import * as models from './pages/models.js';
import * as apps from './pages/apps.js';
import * as compare from './pages/compare.js';
import * as pipelines from './pages/pipelines.js';
import * as studies from './pages/studies.js';

const pages = { orchestration, queues, policy, tree, usage, models, apps, compare, pipelines, studies, schedules, task, estate };
const main = document.getElementById('main');
let stopPage = null;
let viewer = null;

onMode((m) => {
  const el = document.getElementById('live');
  el.textContent = m === 'live' ? '● live' : m === 'polling' ? '○ polling' : '◌ reconnecting';
  el.dataset.mode = m;
});

function showSignIn(message) {
  document.getElementById('nav').hidden = true;
  document.getElementById('signout').hidden = true;
  document.getElementById('who').textContent = '';
  const input = h('input', { type: 'password', id: 'apikey', name: 'apikey', autocomplete: 'off', placeholder: 'klique_…', required: true, size: 48 });
  const err = h('div', { id: 'signin-error' });
  const form = h('form', { id: 'signin', class: 'card signin', onsubmit: async (ev) => {
    ev.preventDefault();
    replace(err);
    try {
      await signIn(input.value);
      input.value = '';
      await start();
    } catch (e) {
      replace(err, errorBox(e.code === 'BAD_USER_INPUT' ? e.message
        : `The key was refused: ${e.message}. Check that you pasted the whole key and that it is not revoked or expired.`));
    }
  } },
  h('h2', {}, 'Sign in to Klique'),
  h('label', { for: 'apikey' }, 'API key'),
  input,
  h('p', { class: 'muted' }, 'The key stays in this tab only (sessionStorage) and is exchanged for a short-lived access token. Create one with ',
    h('code', {}, 'klique create apikey'), ' or the createAPIKey mutation.'),
  h('button', { type: 'submit' }, 'Sign in'),
  err);
  if (message) replace(err, errorBox(message));
  replace(main, form);
  input.focus();
  // With single sign-on configured, the identity provider's page too.
  ssoConfig().then((cfg) => {
    if (!cfg || !form.isConnected) return;
    const sso = h('button', { type: 'button', id: 'signin-sso', onclick: async () => {
      replace(err);
      try {
        await startSSO(cfg);
      } catch (e) {
        replace(err, errorBox(e));
      }
    } }, 'Sign in with SSO');
    form.insertBefore(h('p', {}, sso), err);
  });
}

async function start() {
  if (!signedIn()) { showSignIn(); return; }
  try {
    const d = await gql('{ me { user { id name displayName role } tenant { name displayName } groups { role group { id name } } } }');
    viewer = d.me;
  } catch (e) {
    signOut();
    showSignIn(e);
    return;
  }
  const admin = viewer.user.role === 'TENANT_ADMIN' || viewer.user.role === 'PLATFORM_ADMIN';
  viewer.admin = admin;
  document.getElementById('nav').hidden = false;
  for (const a of document.querySelectorAll('[data-admin]')) a.hidden = !admin;
  document.getElementById('who').textContent = `${viewer.user.name} · ${viewer.tenant.name} · ${viewer.user.role.toLowerCase().replace('_', ' ')}`;
  const out = document.getElementById('signout');
  out.hidden = false;
  // The viewer goes too: clearing the hash fires a hashchange, which must
  // not render a page over the sign-in form.
  out.onclick = () => { if (stopPage) stopPage(); stopPage = null; viewer = null; signOut(); location.hash = ''; showSignIn(); };
  route();
}

function route() {
  if (!viewer) return;
  if (stopPage) { stopPage(); stopPage = null; }
  // Pages that follow updates set the indicator again.
  const live = document.getElementById('live');
  live.textContent = '';
  delete live.dataset.mode;
  const parts = (location.hash.replace(/^#\/?/, '') || 'queues').split('/').map(decodeURIComponent);
  const name = parts[0];
  const page = pages[name];
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === name);
  const container = h('div', { class: 'page', id: `page-${name}` });
  replace(main, container);
  if (!page) {
    replace(container, errorBox(`There is no page "${name}": pick one above.`));
    return;
  }
  document.title = `Klique · ${name}`;
  try {
    stopPage = page.render(container, { viewer, args: parts.slice(1) }) || null;
  } catch (e) {
    replace(container, errorBox(e));
  }
}

window.addEventListener('hashchange', route);

// Back from the identity provider: finish the sign-in, and take the code
// out of the address before anything else runs.
const back = new URLSearchParams(location.search);
if (back.has('code') || back.has('error')) {
  history.replaceState(null, '', '/');
  finishSSO(back).then((hash) => {
    if (hash) history.replaceState(null, '', `/${hash}`);
    start();
  }, (e) => showSignIn(e));
} else {
  start();
}
