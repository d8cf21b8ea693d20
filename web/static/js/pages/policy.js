// Policy view: each group's use against its reservation and limit, and its
// time budget: used and left, burn rate and projected run-out, drawn as a
// chart of the hours left until the period resets. Budgets at their alert
// threshold are marked.
import { gql, gqlOrShow } from '../api.js';
import { h, replace, errorBox, fmtNum, fmtTime, section } from '../dom.js';
import { watch } from '../live.js';
import { lineChart, meter } from '../charts.js';

const query = `{ policyView { reservationGpus limitGpus heldGpus borrowedGpus holdingTasks waitingTasks
  group { id name }
  policy { id alertThresholdPercent lowWatermarkMinutes }
  budget { period hours usedHours leftHours burnRate projectedRunOut resetsAt alertThresholdPercent alert usedUp }
  computeResources { name queuedTasks }
} }`;

export function render(el, { viewer }) {
  const body = h('div');
  replace(el, h('h1', {}, 'Policy'),
    h('p', { class: 'muted' }, viewer.admin ? 'Every group with a resource policy.' : 'Your groups\' resource policies.'),
    body);
  let topics = [];
  const reload = async () => {
    const d = await gqlOrShow(body, query);
    if (!d) return;
    if (!d.policyView.length) {
      replace(body, h('p', { class: 'muted' }, 'No group of yours has a resource policy.'));
      return;
    }
    replace(body, d.policyView.map(card));
  };
  // budgetBurn is per policy; without the list of policies up front, one
  // subscription per policy seen on the first load.
  let stop = () => {};
  let stopped = false;
  gql('{ policyView { policy { id } } }').then((d) => {
    if (stopped) return;
    topics = d.policyView.map((p) => ({ name: 'budgetBurn', args: { policy: p.policy.id } }));
    stop = watch(topics, reload, { pollMs: 5000 });
  }).catch((e) => replace(body, errorBox(e)));
  return () => { stopped = true; stop(); };
}

function card(v) {
  const b = v.budget;
  const near = b && (b.alert || b.usedUp);
  return h('section', { class: `card${near ? ' near-limit' : ''}`, 'data-group': v.group.name },
    h('h2', {}, v.group.name, near ? h('span', { class: 'badge warn' }, b.usedUp ? 'budget used up' : `budget at ${b.alertThresholdPercent}%`) : null),
    h('div', { class: 'cols' },
      h('div', {},
        h('h3', {}, 'GPUs'),
        meter({ used: v.heldGpus, reservation: v.reservationGpus, limit: v.limitGpus, label: `${v.heldGpus} GPUs held` }),
        h('p', {}, `${fmtNum(v.heldGpus, 3)} held of a ${v.limitGpus} limit; ${v.reservationGpus} reserved`,
          v.borrowedGpus > 0 ? `, ${fmtNum(v.borrowedGpus, 3)} borrowed` : ''),
        h('p', { class: 'muted' }, `${v.holdingTasks} ${v.holdingTasks === 1 ? 'task holds' : 'tasks hold'} capacity, ${v.waitingTasks} ${v.waitingTasks === 1 ? 'waits' : 'wait'}`),
        h('p', { class: 'muted' }, 'Compute resources: ', v.computeResources.map((c) => `${c.name} (${c.queuedTasks} waiting)`).join(', ') || '–')),
      h('div', {}, b ? budget(b) : h('p', { class: 'muted' }, 'No time budget: only the limit caps this group.'))));
}

function budget(b) {
  const now = Date.now();
  const reset = new Date(b.resetsAt).getTime();
  const runOut = b.projectedRunOut ? new Date(b.projectedRunOut).getTime() : null;
  // Hours left from now to the reset at the current burn rate (a straight
  // line: the rate is what running work spends now).
  const end = runOut && runOut < reset ? runOut : reset;
  const leftAtEnd = Math.max(0, b.leftHours - (b.burnRate * (end - now)) / 3_600_000);
  const markers = [{ t: reset, label: 'reset' }];
  if (runOut && runOut < reset) markers.push({ t: runOut, label: 'runs out', alert: true });
  return [
    h('h3', {}, `Time budget, per ${b.period.toLowerCase()}`),
    h('p', {}, `${fmtNum(b.usedHours)} of ${fmtNum(b.hours)} hours used, ${fmtNum(b.leftHours)} left; burning ${fmtNum(b.burnRate)} h/h`),
    h('p', { class: b.alert || b.usedUp ? 'warn-text' : 'muted' }, b.usedUp
      ? `Used up: budgeted work waits for the reset (${fmtTime(b.resetsAt)}) or a larger budget`
      : runOut ? `Runs out ${fmtTime(b.projectedRunOut)} at this rate` : `Lasts to the reset (${fmtTime(b.resetsAt)}) at this rate`),
    lineChart({
      title: 'Budget hours left',
      unit: 'h',
      series: [{ name: 'projected at the current burn rate', points: [[now, b.leftHours], [end, leftAtEnd]], dashed: true }],
      hlines: [{ value: (b.hours * (100 - b.alertThresholdPercent)) / 100, label: `alert at ${b.alertThresholdPercent}% used` }],
      markers,
      height: 180,
    }),
  ];
}
