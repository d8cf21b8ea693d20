// Models: the LLM gateway's page. Calls and tokens per minute by alias,
// live (the gatewayTraffic subscription, every 2 s, counted on the ledger
// over the last minute); the aliases with their rules and the models
// behind them; routes and providers with the health of the routes'
// endpoints (admins); each project's token and money budgets with their
// projected run-out; the calls refused lately and why; and the tokens by
// user, project and model over a range, with the same report as CSV from
// /api/v1/usage.csv. What each person sees is decided by the server:
// members their groups' calls and projects, admins the tenant's.
import { gql, downloadUsageCSV } from '../api.js';
import { h, replace, table, errorBox, fmtNum, fmtTime, ago, section } from '../dom.js';
import { watch } from '../live.js';

const trafficSelect = '{ at windowSeconds callsPerMinute tokensPerMinute aliases { alias callsPerMinute tokensPerMinute inputTokensPerMinute outputTokensPerMinute } }';

const overviewQuery = `{
  llmAliases { name description names rules { groups projects entitlements targets { model weight } fallbacks } }
  tokenBudgetView { projectName userName period money limit used reserved left burnRate runsOutAt resetsAt }
  llmRefusals(limit: 20) { id at userName projectName alias endpoint status outcome reason }
}`;

const adminQuery = `{
  gateway {
    providers { name baseUrl keySecret timeoutSeconds }
    routes { name endpoints timeoutSeconds }
    models { name upstream provider route inputPrice outputPrice currency }
    aliases { name description names rules { groups projects entitlements targets { model weight } fallbacks } }
  }
  llmEndpointHealth { route endpoint healthy setAsideUntil }
}`;

const usageQuery = `query($in: UsageInput!) { usage(input: $in) { rows {
  keys { dimension name } calls inputTokens outputTokens tokenCost tokenCurrency } } }`;

function day(d) { return d.toISOString().slice(0, 10); }

export function render(el, { viewer }) {
  const traffic = h('div', { id: 'models-traffic' }, h('p', { class: 'muted' }, 'Loading…'));
  const aliases = h('div', { id: 'models-aliases' });
  const estate = h('div', { id: 'models-estate' });
  const budgets = h('div', { id: 'models-budgets' });
  const refusals = h('div', { id: 'models-refusals' });
  const tokens = h('div', { id: 'models-tokens' });
  replace(el, h('h1', {}, 'Models'),
    h('p', { class: 'muted' }, viewer.admin ? 'The gateway as the whole tenant uses it.' : 'The gateway as your groups use it.'),
    section('Calls and tokens per minute', traffic),
    section('Aliases', aliases),
    viewer.admin ? section('Routes and providers', estate) : null,
    section('Token and money budgets', budgets),
    section('Recent refusals', refusals),
    section('Tokens by user, project and model', tokenForm(tokens), tokens));

  // Traffic: from the subscription while it is live; from the usage
  // query over the last minute when it is not (the same calls, the same
  // access rules).
  let lastLive = 0;
  const showTraffic = (t) => {
    const rows = t.aliases.map((a) => h('tr', { 'data-alias': a.alias },
      h('td', {}, a.alias),
      h('td', { class: 'num', 'data-field': 'calls' }, a.callsPerMinute),
      h('td', { class: 'num', 'data-field': 'tokens' }, fmtNum(a.tokensPerMinute, 0)),
      h('td', { class: 'num' }, fmtNum(a.inputTokensPerMinute, 0)),
      h('td', { class: 'num' }, fmtNum(a.outputTokensPerMinute, 0))));
    replace(traffic,
      h('p', {}, h('strong', { id: 'models-calls-total' }, `${t.callsPerMinute}`), t.callsPerMinute === 1 ? ' call and ' : ' calls and ',
        h('strong', { id: 'models-tokens-total' }, fmtNum(t.tokensPerMinute, 0)), ' tokens in the last minute',
        h('span', { class: 'muted' }, ` · ${fmtTime(t.at)}`)),
      rows.length ? table(['Alias', 'Calls / min', 'Tokens / min', 'Input', 'Output'], rows)
        : h('p', { class: 'muted' }, 'No calls in the last minute.'));
  };
  const pollTraffic = async () => {
    if (Date.now() - lastLive < 5000) return;
    const to = new Date();
    const from = new Date(to.getTime() - 60_000);
    try {
      const d = await gql(usageQuery, { in: { from: from.toISOString(), to: to.toISOString(), groupBy: ['ALIAS'] } });
      const list = d.usage.rows.filter((r) => r.calls > 0).map((r) => ({
        alias: r.keys[0].name, callsPerMinute: r.calls, tokensPerMinute: r.inputTokens + r.outputTokens,
        inputTokensPerMinute: r.inputTokens, outputTokensPerMinute: r.outputTokens,
      }));
      showTraffic({ at: to.toISOString(), aliases: list, callsPerMinute: list.reduce((s, a) => s + a.callsPerMinute, 0),
        tokensPerMinute: list.reduce((s, a) => s + a.tokensPerMinute, 0) });
    } catch (e) {
      replace(traffic, errorBox(e));
    }
  };
  const stopTraffic = watch([{ name: 'gatewayTraffic', select: trafficSelect, onEvent: (t) => { lastLive = Date.now(); showTraffic(t); } }],
    pollTraffic, { pollMs: 5000 });

  // The rest changes with configuration and calls; it is read again every
  // 10 s.
  const reload = async () => {
    try {
      const d = await gql(overviewQuery);
      // Admins see every alias from the configuration below; others
      // those they may call.
      if (!viewer.admin) replace(aliases, aliasTable(d.llmAliases, false));
      replace(budgets, budgetTable(d.tokenBudgetView));
      replace(refusals, refusalTable(d.llmRefusals));
    } catch (e) {
      replace(aliases, errorBox(e));
    }
    if (viewer.admin) {
      try {
        const d = await gql(adminQuery);
        replace(aliases, aliasTable(d.gateway.aliases, true));
        replace(estate, estateTables(d.gateway, d.llmEndpointHealth));
      } catch (e) {
        replace(estate, errorBox(e));
      }
    }
  };
  reload();
  const timer = setInterval(reload, 10_000);
  return () => { clearInterval(timer); stopTraffic(); };
}

function aliasTable(list, admin) {
  if (!list.length) return h('p', { class: 'muted' }, 'No alias is open to you.');
  const rules = (a) => {
    if (!a.rules.length) return h('span', { class: 'muted' }, admin ? 'no rules' : 'shown to admins');
    return h('ol', { class: 'rules' }, a.rules.map((r) => {
      const who = [];
      if (r.groups.length) who.push(`groups ${r.groups.join(', ')}`);
      if (r.projects.length) who.push(`projects ${r.projects.join(', ')}`);
      if (r.entitlements.length) who.push(`entitlements ${r.entitlements.join(', ')}`);
      const to = r.targets.map((t) => (r.targets.length > 1 ? `${t.model} (${t.weight})` : t.model)).join(', ');
      return h('li', {}, `${who.length ? who.join('; ') : 'everyone'} → ${to}`,
        r.fallbacks.length ? h('span', { class: 'muted' }, `, then ${r.fallbacks.join(', ')}`) : null);
    }));
  };
  return table(['Alias', 'Also answers to', 'Rules and models'], list.map((a) => h('tr', { 'data-alias': a.name },
    h('td', {}, h('strong', {}, a.name), a.description ? h('div', { class: 'muted' }, a.description) : null),
    h('td', {}, a.names.join(', ') || '–'),
    h('td', {}, rules(a)))));
}

function estateTables(g, health) {
  const byEndpoint = new Map(health.map((e) => [`${e.route}\u0000${e.endpoint}`, e]));
  const routes = g.routes.length ? table(['Route', 'Endpoint', 'Health'], g.routes.flatMap((r) => r.endpoints.map((ep) => {
    const e = byEndpoint.get(`${r.name}\u0000${ep}`);
    const ok = !e || e.healthy;
    return h('tr', { 'data-endpoint': ep },
      h('td', {}, r.name), h('td', {}, h('code', {}, ep)),
      h('td', {}, ok ? h('span', { class: 'badge s-running' }, 'healthy')
        : h('span', { class: 'badge warn', title: `tried first again at ${fmtTime(e.setAsideUntil)}` }, 'set aside after a failure')));
  }))) : h('p', { class: 'muted' }, 'No static routes.');
  const providers = g.providers.length ? table(['Provider', 'Base URL', 'Key (vault secret)', 'Timeout'], g.providers.map((p) => h('tr', {},
    h('td', {}, p.name), h('td', {}, h('code', {}, p.baseUrl)), h('td', {}, p.keySecret || '–'),
    h('td', { class: 'num' }, p.timeoutSeconds ? `${p.timeoutSeconds} s` : 'default')))) : h('p', { class: 'muted' }, 'No providers.');
  const models = g.models.length ? table(['Model', 'Upstream id', 'Served by', 'Input / M tokens', 'Output / M tokens'], g.models.map((m) => h('tr', {},
    h('td', {}, m.name), h('td', {}, m.upstream), h('td', {}, m.provider ? `provider ${m.provider}` : `route ${m.route}`),
    h('td', { class: 'num' }, `${fmtNum(m.inputPrice, 4)} ${m.currency}`),
    h('td', { class: 'num' }, `${fmtNum(m.outputPrice, 4)} ${m.currency}`)))) : h('p', { class: 'muted' }, 'No models.');
  return [h('h3', {}, 'Models'), models, h('h3', {}, 'Routes'), routes,
    h('p', { class: 'muted' }, 'Health is what this server\'s gateway learned from its own calls: an endpoint that failed is set aside for a while and tried last.'),
    h('h3', {}, 'Providers'), providers];
}

function budgetTable(list) {
  if (!list.length) return h('p', { class: 'muted' }, 'No token or money budget covers your projects.');
  const amount = (b, n) => (b.money ? fmtNum(n, 2) : fmtNum(n, 0));
  return table(['Project', 'User', 'Period', 'Limit', 'Used', 'Reserved', 'Left', 'Burn / h', 'Runs out'], list.map((b) => h('tr', {
    'data-project': b.projectName, class: b.left <= 0 ? 'near-limit' : null,
  },
  h('td', {}, b.projectName), h('td', {}, b.userName || 'whole project'),
  h('td', {}, `${b.period.toLowerCase()}${b.money ? ' (money)' : ' (tokens)'}`),
  h('td', { class: 'num' }, amount(b, b.limit)), h('td', { class: 'num' }, amount(b, b.used)),
  h('td', { class: 'num' }, amount(b, b.reserved)), h('td', { class: 'num' }, amount(b, b.left)),
  h('td', { class: 'num' }, amount(b, b.burnRate)),
  h('td', {}, b.runsOutAt ? fmtTime(b.runsOutAt) : `not before the reset (${fmtTime(b.resetsAt)})`))));
}

function refusalTable(list) {
  if (!list.length) return h('p', { class: 'muted' }, 'No call was refused in the last 24 hours.');
  return table(['When', 'User', 'Project', 'Alias', 'Status', 'Why'], list.map((r) => h('tr', { 'data-outcome': r.outcome },
    h('td', { title: fmtTime(r.at) }, ago(r.at)), h('td', {}, r.userName), h('td', {}, r.projectName),
    h('td', {}, r.alias), h('td', { class: 'num' }, r.status), h('td', {}, r.reason))));
}

// tokenForm is the range form of the tokens report; it fills out.
function tokenForm(out) {
  const today = new Date();
  const from = h('input', { type: 'date', id: 'models-from', value: day(new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1))) });
  const to = h('input', { type: 'date', id: 'models-to', value: day(today) });
  const range = () => {
    const f = new Date(`${from.value}T00:00:00Z`);
    const last = new Date(`${to.value}T00:00:00Z`);
    if (Number.isNaN(f.getTime()) || Number.isNaN(last.getTime())) throw new Error('Pick a start and an end date.');
    if (last < f) throw new Error('The end date must not be before the start date.');
    return { f, t: new Date(last.getTime() + 86400_000) };
  };
  const show = async () => {
    try {
      const { f, t } = range();
      const d = await gql(usageQuery, { in: { from: f.toISOString(), to: t.toISOString(), groupBy: ['USER', 'PROJECT', 'MODEL'] } });
      const rows = d.usage.rows.filter((r) => r.calls > 0);
      replace(out, rows.length ? table(['User', 'Project', 'Model', 'Calls', 'Input tokens', 'Output tokens', 'Cost'], rows.map((r) => h('tr', {},
        r.keys.map((k) => h('td', {}, k.name)),
        h('td', { class: 'num' }, r.calls),
        h('td', { class: 'num' }, fmtNum(r.inputTokens, 0)),
        h('td', { class: 'num' }, fmtNum(r.outputTokens, 0)),
        h('td', { class: 'num' }, r.tokenCurrency ? `${fmtNum(r.tokenCost, 4)} ${r.tokenCurrency}` : '–'))))
        : h('p', { class: 'muted' }, 'No model calls in this range.'));
    } catch (e) {
      replace(out, errorBox(e));
    }
  };
  const csv = async () => {
    try {
      const { f, t } = range();
      await downloadUsageCSV(f, t, 'user,project,model', `tokens-${from.value}-${to.value}.csv`);
    } catch (e) {
      replace(out, errorBox(e));
    }
  };
  show();
  return h('form', { class: 'controls', id: 'models-tokens-form', onsubmit: (ev) => { ev.preventDefault(); show(); } },
    h('label', {}, 'From ', from), h('label', {}, 'To ', to),
    h('button', { type: 'submit' }, 'Show'),
    h('button', { type: 'button', id: 'models-csv', onclick: csv }, 'Download CSV'));
}
