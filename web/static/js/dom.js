// Small DOM helpers. Everything the server sends (task names, logs,
// parameters) goes into the page as text nodes, never as markup.

// h builds an element: h('td', {class: 'num'}, 'text', childNode, [more]).
// Attributes starting with "on" are event listeners; null/false skip.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// svg builds an SVG element the same way.
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

// replace swaps the children of el for the given ones.
export function replace(el, ...children) {
  // A live page re-renders while someone types: a field that survives the
  // render (moved, not rebuilt) keeps its focus and caret.
  const focused = document.activeElement;
  let caret = null;
  try {
    caret = focused && typeof focused.selectionStart === 'number' ? [focused.selectionStart, focused.selectionEnd] : null;
  } catch (_) { caret = null; }
  el.replaceChildren();
  append(el, children);
  if (focused && focused !== document.body && focused.isConnected && document.activeElement !== focused) {
    focused.focus();
    if (caret) {
      try { focused.setSelectionRange(caret[0], caret[1]); } catch (_) { /* not a text field */ }
    }
  }
  return el;
}

export function table(headers, rows, attrs) {
  return h('table', attrs || {},
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', {}, x)))),
    h('tbody', {}, rows));
}

// fmtNum rounds to digits decimals, but keeps two significant digits of a
// small non-zero amount (a few seconds of GPU time is not "0").
export function fmtNum(n, digits = 2) {
  if (n === null || n === undefined || Number.isNaN(n)) return '–';
  const v = Number(n);
  if (v !== 0 && Math.abs(v) < 10 ** -digits) return v.toPrecision(2);
  return v.toLocaleString('en', { maximumFractionDigits: digits });
}

export function fmtTime(t) {
  if (!t) return '–';
  const d = new Date(t);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function ago(t) {
  if (!t) return '–';
  const s = Math.round((Date.now() - new Date(t).getTime()) / 1000);
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

export function statusBadge(status) {
  return h('span', { class: `badge s-${String(status).toLowerCase()}` }, status);
}

export function errorBox(err) {
  return h('div', { class: 'error', role: 'alert' }, String(err && err.message ? err.message : err));
}

export function section(title, ...children) {
  return h('section', { class: 'card' }, h('h2', {}, title), children);
}
