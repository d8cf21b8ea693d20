// The session and the GraphQL client. The API key a person pastes is kept
// in sessionStorage (gone when the tab closes) and exchanged at
// POST /api/v1/auth/token for a short-lived access token, which is what
// every request carries; the key is used again only to renew the token.

const KEY = 'klique.apiKey';
const TOKEN = 'klique.token';
const EXPIRES = 'klique.tokenExpiresAt';

// renewBefore is how long before its expiry a token is renewed.
const renewBefore = 60_000;

export class APIError extends Error {
  constructor(message, code) {
    super(message);
    this.code = code || '';
  }
}

export function signedIn() {
  return !!sessionStorage.getItem(KEY);
}

export function signOut() {
  for (const k of [KEY, TOKEN, EXPIRES]) sessionStorage.removeItem(k);
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
  if (!key) throw new APIError('Signed out: sign in with an API key.', 'UNAUTHENTICATED');
  const t = sessionStorage.getItem(TOKEN);
  const exp = Number(sessionStorage.getItem(EXPIRES) || 0);
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
