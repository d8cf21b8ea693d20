// The session and the GraphQL client. The API key a person pastes is kept
// in sessionStorage (gone when the tab closes) and exchanged at
// POST /api/v1/auth/token for a short-lived access token, which is what
// every request carries; the key is used again only to renew the token.

import { h, replace, errorBox } from './dom.js';

const KEY = 'klique.apiKey';
const TOKEN = 'klique.token';
const EXPIRES = 'klique.tokenExpiresAt';
// MODE is 'sso' for a session that came from the identity provider: it has
// no key to renew its token with, and ends when the token does.
const MODE = 'klique.mode';
// PKCE holds the verifier and state of a sign-in at the provider, between
// leaving for it and coming back.
const PKCE = 'klique.pkce';

// renewBefore is how long before its expiry a token is renewed.
const renewBefore = 60_000;

export class APIError extends Error {
  constructor(message, code) {
    super(message);
    this.code = code || '';
  }
}

export function signedIn() {
  return !!sessionStorage.getItem(KEY) || (sessionStorage.getItem(MODE) === 'sso' && !!sessionStorage.getItem(TOKEN));
}

export function signOut() {
  for (const k of [KEY, TOKEN, EXPIRES, MODE]) sessionStorage.removeItem(k);
}

// ssoConfig returns where the identity provider signs people in, or null
// when the server has no single sign-on configured.
export async function ssoConfig() {
  const resp = await fetch('/api/v1/auth/sso').catch(() => null);
  if (!resp || !resp.ok) return null;
  return resp.json();
}

function b64url(bytes) {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

// startSSO sends the person to the identity provider's sign-in page (the
// authorization code flow with PKCE); finishSSO completes it when the
// provider sends them back to this page with a code.
export async function startSSO(cfg) {
  if (!window.crypto || !crypto.subtle) {
    throw new APIError('Single sign-on needs the dashboard served over https (or from localhost): sign in with an API key instead.');
  }
  const verifier = b64url(crypto.getRandomValues(new Uint8Array(32)));
  const challenge = b64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
  const state = b64url(crypto.getRandomValues(new Uint8Array(16)));
  sessionStorage.setItem(PKCE, JSON.stringify({ verifier, state, hash: location.hash }));
  const u = new URL(cfg.authorization_endpoint);
  for (const [k, v] of Object.entries({
    response_type: 'code', client_id: cfg.client_id, redirect_uri: `${location.origin}/`, scope: cfg.scope,
    state, code_challenge: challenge, code_challenge_method: 'S256',
  })) u.searchParams.set(k, v);
  location.assign(u.toString());
}

// finishSSO exchanges the code in params (the page's query) for an access
// token, and returns the page the person was on when they left.
export async function finishSSO(params) {
  const saved = JSON.parse(sessionStorage.getItem(PKCE) || 'null');
  sessionStorage.removeItem(PKCE);
  if (params.get('error')) {
    throw new APIError(`The identity provider did not sign you in: ${params.get('error_description') || params.get('error')}.`);
  }
  if (!saved || params.get('state') !== saved.state) {
    throw new APIError('The sign-in came back without the state this tab sent (an old or copied link): sign in again.');
  }
  const resp = await fetch('/api/v1/auth/sso/token', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ code: params.get('code'), code_verifier: saved.verifier, redirect_uri: `${location.origin}/` }),
  });
  if (!resp.ok) throw await restError(resp, 'the sign-in failed');
  const body = await resp.json();
  signOut();
  sessionStorage.setItem(TOKEN, body.access_token);
  sessionStorage.setItem(EXPIRES, String(new Date(body.expires_at).getTime()));
  sessionStorage.setItem(MODE, 'sso');
  return saved.hash || '';
}

// signIn exchanges the key for a token; it throws with the server's
// message when the key is refused, and keeps nothing then.
export async function signIn(apiKey) {
  const key = apiKey.trim();
  if (!key) throw new APIError('Paste an API key: create one with "klique create apikey" or in GraphiQL (createAPIKey).', 'BAD_USER_INPUT');
  await exchange(key);
  sessionStorage.setItem(KEY, key);
}

async function exchange(key) {
  const resp = await fetch('/api/v1/auth/token', {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}` },
  });
  if (!resp.ok) throw await restError(resp, 'the server refused the key');
  const body = await resp.json();
  sessionStorage.setItem(TOKEN, body.access_token);
  sessionStorage.setItem(EXPIRES, String(new Date(body.expires_at).getTime()));
  return body.access_token;
}

// restError reads the {"error": {"code", "message"}} answer of the REST
// endpoints into an APIError.
export async function restError(resp, fallback) {
  const body = await resp.json().catch(() => ({}));
  const e = body.error || (body.errors && body.errors[0]) || {};
  return new APIError(e.message || `${fallback} (HTTP ${resp.status})`, e.code || (e.extensions && e.extensions.code));
}

let renewing = null;

// token returns a valid access token, renewing it when it is about to
// expire (or when force is set, after the server refused it).
export async function token(force = false) {
  const key = sessionStorage.getItem(KEY);
  const t = sessionStorage.getItem(TOKEN);
  const exp = Number(sessionStorage.getItem(EXPIRES) || 0);
  if (!key && sessionStorage.getItem(MODE) === 'sso') {
    if (!force && t && exp > Date.now()) return t;
    signOut();
    throw new APIError('Your single sign-on session has ended: sign in again.', 'UNAUTHENTICATED');
  }
  if (!key) throw new APIError('Signed out: sign in with an API key.', 'UNAUTHENTICATED');
  if (!force && t && exp - Date.now() > renewBefore) return t;
  if (!renewing) renewing = exchange(key).finally(() => { renewing = null; });
  return renewing;
}

// authedFetch is fetch with the access token, retried once with a fresh
// token when the server answers 401.
export async function authedFetch(url, init = {}) {
  for (let attempt = 0; ; attempt++) {
    const headers = new Headers(init.headers || {});
    headers.set('Authorization', `Bearer ${await token(attempt > 0)}`);
    const resp = await fetch(url, { ...init, headers });
    if (resp.status === 401 && attempt === 0) continue;
    return resp;
  }
}

// gqlOrShow runs a query as gql does; when it fails, it shows the error
// in box and returns null, so that a page's load can simply stop.
export async function gqlOrShow(box, query, variables = {}) {
  try {
    return await gql(query, variables);
  } catch (e) {
    replace(box, errorBox(e));
    return null;
  }
}

// gql runs a query or mutation and returns its data, or throws the first
// error with its message (which says what to change) and code.
export async function gql(query, variables = {}) {
  const resp = await authedFetch('/graphql', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  let body;
  try {
    body = await resp.json();
  } catch {
    throw new APIError(`the server answered HTTP ${resp.status} without a GraphQL response`);
  }
  if (body.errors && body.errors.length) {
    const e = body.errors[0];
    throw new APIError(e.message, e.extensions && e.extensions.code);
  }
  if (!resp.ok) throw new APIError(`HTTP ${resp.status}`);
  return body.data;
}

// downloadUsageCSV fetches the usage export (/api/v1/usage.csv) over
// from..to broken down by by, and saves it as the file name.
export async function downloadUsageCSV(from, to, by, name) {
  const q = new URLSearchParams({ from: from.toISOString().replace('.000', ''), to: to.toISOString().replace('.000', ''), by });
  const resp = await authedFetch(`/api/v1/usage.csv?${q}`);
  if (!resp.ok) throw await restError(resp, 'the CSV export failed');
  const blob = await resp.blob();
  const a = h('a', { href: URL.createObjectURL(blob), download: name });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}
