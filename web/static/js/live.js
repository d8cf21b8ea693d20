// Keeping a page current. A page says which subscriptions tell it that
// something changed and how to reload what it shows; watch subscribes to
// those the server offers (checked once, by introspection) and reloads on
// each event, coalescing bursts. Where a subscription is missing, refused
// or the connection is down, it polls instead, so the page never goes
// stale. Events only say "look again": what is shown always comes from the
// queries, which apply the same access rules as every other channel.
import { gql } from './api.js';
import { SubscriptionClient } from './ws.js';

let client = null;
let schemaFields = null;
const listeners = new Set();

// mode is 'live', 'polling' or 'reconnecting', for the header's indicator.
export function onMode(fn) { listeners.add(fn); return () => listeners.delete(fn); }
function setMode(m) { for (const fn of listeners) fn(m); }

function subscriptionClient() {
  if (!client) {
    client = new SubscriptionClient();
    client.onstate = (s) => setMode(s === 'open' ? 'live' : 'reconnecting');
  }
  return client;
}

function unwrap(t) {
  while (t && (t.kind === 'NON_NULL' || t.kind === 'LIST')) t = t.ofType;
  return t || {};
}

// subscriptionFields returns the server's subscription fields by name.
export async function subscriptionFields() {
  if (!schemaFields) {
    schemaFields = gql(`{ __schema { subscriptionType { fields { name
        args { name type { kind name ofType { kind name } } }
        type { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } }`)
      .then((d) => {
        const m = new Map();
        const st = d.__schema.subscriptionType;
        for (const f of (st && st.fields) || []) m.set(f.name, f);
        return m;
      })
      .catch(() => new Map());
  }
  return schemaFields;
}

function literal(v) {
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return JSON.stringify(String(v));
}

// subscriptionQuery builds "subscription { name(arg: value) { __typename } }"
// for a field the server has, with the arguments it declares; null when a
// required argument is not given.
function subscriptionQuery(field, args, select) {
  const parts = [];
  for (const a of field.args || []) {
    if (args && args[a.name] !== undefined && args[a.name] !== null) parts.push(`${a.name}: ${literal(args[a.name])}`);
    else if (a.type.kind === 'NON_NULL') return null;
  }
  const kind = unwrap(field.type).kind;
  const sel = kind === 'OBJECT' || kind === 'INTERFACE' || kind === 'UNION' ? ` ${select || '{ __typename }'}` : '';
  return `subscription { ${field.name}${parts.length ? `(${parts.join(', ')})` : ''}${sel} }`;
}

// watch calls reload now and whenever one of topics ([{name, args, select,
// onEvent, done}]) delivers an event, or every pollMs where it cannot.
// select is the selection set of the update (default { __typename }), and
// onEvent gets the update's data. done, when given, tells from an update
// that the server has nothing more to send on the topic (a finished task's
// log): the server then completes it, and the topic stays counted as live
// instead of sending the page back to polling. It returns stop().
export function watch(topics, reload, { pollMs = 2000, slowPollMs = 30_000, debounceMs = 60 } = {}) {
  let stopped = false;
  let timer = null;
  let pending = null;
  let running = false;
  let again = false;
  const stops = [];
  let live = 0;

  const run = async () => {
    if (stopped) return;
    if (running) { again = true; return; }
    running = true;
    try { await reload(); } catch (err) { console.warn('reload', err); }
    running = false;
    if (again && !stopped) { again = false; run(); }
  };
  const soon = () => {
    if (pending) return;
    pending = setTimeout(() => { pending = null; run(); }, debounceMs);
  };
  const schedule = () => {
    clearInterval(timer);
    // With every topic live a slow poll remains as a safety net.
    const ms = live > 0 && live === topics.length ? slowPollMs : pollMs;
    timer = setInterval(run, ms);
    setMode(live > 0 && live === topics.length ? 'live' : 'polling');
  };

  run();
  schedule();
  subscriptionFields().then((fields) => {
    if (stopped) return;
    for (const t of topics) {
      const f = fields.get(t.name);
      const q = f && subscriptionQuery(f, t.args, t.select);
      if (!q) continue;
      // A topic counts as live from its first update (the server starts
      // each subscription with a snapshot) until its connection drops or
      // the server ends it; meanwhile the page polls.
      let counted = false;
      let finished = false;
      const gained = () => { if (!counted) { counted = true; live++; schedule(); } };
      const lost = () => { if (counted) { counted = false; live--; schedule(); } };
      stops.push(subscriptionClient().subscribe(q, {}, {
        next: (payload) => {
          gained();
          const data = payload && payload.data ? payload.data[t.name] : null;
          if (t.done && data && t.done(data)) finished = true;
          if (t.onEvent && data) t.onEvent(data);
          soon();
        },
        error: (err) => { console.warn(`subscription ${t.name}`, err); lost(); },
        // A topic that said it is done has told everything there is: its
        // end is not a loss.
        complete: () => { if (!finished) lost(); },
        down: lost,
      }));
    }
  });

  return () => {
    stopped = true;
    clearInterval(timer);
    clearTimeout(pending);
    for (const s of stops) s();
  };
}
