// Estate (admins): the allocation model as an estate file, edited in place
// and applied through the applyEstate mutation: a dry run shows what would
// change and any warning, with the same validation as the API and the
// CLI's `klique apply`; nothing changes until Apply.
import { gql } from '../api.js';
import { h, replace, table, errorBox, section } from '../dom.js';

export function render(el, { viewer }) {
  if (!viewer.admin) {
    replace(el, errorBox('Only tenant admins edit the estate.'));
    return null;
  }
  const editor = h('textarea', { id: 'estate-yaml', spellcheck: 'false', rows: 30 });
  const result = h('div', { id: 'estate-result' });
  const warningsBox = h('div');
  const apply = async (dryRun) => {
    replace(result, h('p', { class: 'muted' }, dryRun ? 'Checking…' : 'Applying…'));
    try {
      const d = await gql('mutation($doc: String!, $dry: Boolean) { applyEstate(document: $doc, dryRun: $dry) { summary dryRun changes { action kind name text } warnings { code object message } } }',
        { doc: editor.value, dry: dryRun });
      const r = d.applyEstate;
      replace(result,
        h('p', { class: r.dryRun ? 'muted' : 'ok' }, r.dryRun ? `Dry run: ${r.summary}. Nothing was changed.` : `Applied: ${r.summary}.`),
        r.changes.length ? table(['', 'Kind', 'Name', 'Change'], r.changes.map((c) => h('tr', { class: `c-${c.action.toLowerCase()}` },
          h('td', {}, c.action.toLowerCase()), h('td', {}, c.kind), h('td', {}, c.name), h('td', {}, c.text)))) : null,
        warnings(r.warnings));
      if (!dryRun) await load(false);
    } catch (e) {
      replace(result, errorBox(e));
    }
  };
  const load = async (intoEditor = true) => {
    try {
      const d = await gql('{ exportEstate estateWarnings { code object message } }');
      if (intoEditor) editor.value = d.exportEstate;
      replace(warningsBox, d.estateWarnings.length ? warnings(d.estateWarnings) : h('p', { class: 'muted' }, 'No warnings about the allocation model.'));
    } catch (e) {
      replace(result, errorBox(e));
    }
  };
  replace(el, h('h1', {}, 'Estate'),
    h('p', { class: 'muted' }, 'Pools, profiles, resource policies, compute resources and the gateway, as one estate file. Preview shows what Apply would change; Apply changes it all or nothing.'),
    section('Warnings', warningsBox),
    section('Estate file', editor,
      h('div', { class: 'buttons' },
        h('button', { type: 'button', id: 'estate-preview', onclick: () => apply(true) }, 'Preview changes'), ' ',
        h('button', { type: 'button', id: 'estate-apply', onclick: () => { if (confirm('Apply this estate file?')) apply(false); } }, 'Apply'), ' ',
        h('button', { type: 'button', onclick: () => load(true) }, 'Reload from server')),
      result));
  load();
  return null;
}

function warnings(list) {
  if (!list.length) return null;
  return h('ul', { class: 'warnings' }, list.map((w) => h('li', {}, h('b', {}, w.object), `: ${w.message} (${w.code})`)));
}
