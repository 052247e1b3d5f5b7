// Pieces every dashboard view uses: links built from the hash route, status
// badges, tables, the cursor pager, filter forms, a confirmation dialog and
// an in-place refresh that keeps focus and scroll. Text is always text
// (lib/hookd.js h()), and data shown to a reader goes through visible().
import { h, mount, visible, fmtCount, fmtDuration, timeEl } from '/lib/hookd.js';

// '#/dead?status=dead&cursor=…' from a path and a parameter object (empty values left out).
export function href(path, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return `#/${path}${s ? `?${s}` : ''}`;
}

// The current route: {name, args: [...], params: {...}}, from '#/name/arg1?x=1'.
export function currentRoute() {
  const raw = location.hash.replace(/^#\/?/, '');
  const at = raw.indexOf('?');
  const path = at < 0 ? raw : raw.slice(0, at);
  const params = Object.fromEntries(new URLSearchParams(at < 0 ? '' : raw.slice(at + 1)));
  const [name = '', ...args] = path.split('/').map((p) => { try { return decodeURIComponent(p); } catch { return p; } });
  return { name, args, params };
}

export const enc = encodeURIComponent;

// Data text, shown with its invisible characters made visible.
export const t = (s) => visible(s);

const GOOD = new Set(['delivered', 'processed', 'closed', 'synced', 'enabled', 'done', 'resolved', 'ok']);
const MEH = new Set(['pending', 'retrying', 'deferred', 'half_open', 'running', 'in_flight', 'queued']);

// A status word with its colour; the word itself carries the meaning.
export function badge(status) {
  const word = visible(status ?? '—');
  const kind = GOOD.has(status) ? 'good' : MEH.has(status) ? 'meh' : status ? 'bad' : 'none';
  return h('span', { class: `badge badge-${kind}` }, word);
}

// A table with a caption (visually hidden unless shown), header cells and rows of cells.
export function table(caption, headers, rows, { showCaption = false, empty = 'Nothing here.' } = {}) {
  if (!rows.length) return h('p', { class: 'muted empty' }, empty);
  return h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': caption },
    h('table', {},
      h('caption', { class: showCaption ? '' : 'visually-hidden' }, caption),
      h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c, i) => h('td', { 'data-label': headers[i] || null }, c)))))));
}

// A definition list of [term, value, figureName?]: the figure name marks a value for tests and scripts.
export function facts(items, label) {
  return h('dl', { class: 'facts', 'aria-label': label },
    items.filter(Boolean).map(([k, v, key]) => h('div', { class: 'fact' },
      h('dt', {}, k), h('dd', key ? { dataset: { figure: key } } : {}, v ?? '—'))));
}

export function section(title, ...children) {
  const id = `s-${title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`;
  return h('section', { 'aria-labelledby': id, class: 'panel' }, h('h2', { id }, title), ...children);
}

// "Next page" (the API's cursor) and "First page" links: one API page per view, never more.
export function pager(path, params, nextCursor) {
  const links = [];
  if (params.cursor) links.push(h('a', { href: href(path, { ...params, cursor: null }) }, 'First page'));
  if (nextCursor) links.push(h('a', { href: href(path, { ...params, cursor: nextCursor }), rel: 'next' }, 'Next page'));
  return links.length ? h('nav', { class: 'pager', 'aria-label': 'Pages' }, links) : null;
}

// A GET form of labelled fields that navigates to path with their values (and no cursor).
// fields: [{name, label, type: 'text'|'select'|'datetime-local', options: [[value, label]], placeholder}]
export function filterForm(path, params, fields, { submit = 'Apply filters', label = 'Filters' } = {}) {
  const inputs = fields.map((f) => {
    const id = `f-${f.name}`;
    let input;
    if (f.type === 'select') {
      input = h('select', { id, name: f.name },
        f.options.map(([v, l]) => h('option', { value: v, selected: (params[f.name] ?? '') === v }, l)));
    } else {
      let value = params[f.name] ?? '';
      if (f.type === 'datetime-local' && value) value = toLocalInput(value);
      input = h('input', { id, name: f.name, type: f.type || 'text', value, placeholder: f.placeholder,
        autocomplete: 'off', spellcheck: 'false' });
    }
    return h('div', { class: 'field' }, h('label', { for: id }, f.label), input);
  });
  return h('form', { class: 'filters', role: 'search', 'aria-label': label, onsubmit: (e) => {
    e.preventDefault();
    const next = {};
    for (const f of fields) {
      const el = e.target.elements[f.name];
      let v = el.value.trim();
      if (f.type === 'datetime-local' && v) v = new Date(v).toISOString();
      next[f.name] = v;
    }
    location.hash = href(path, next);
  } }, inputs, h('div', { class: 'field field-submit' }, h('button', { type: 'submit', class: 'primary' }, submit)));
}

// An RFC 3339 time as the value of a datetime-local input (the reader's local time).
function toLocalInput(text) {
  const d = new Date(text);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

// A modal dialog asking to confirm; resolves true when the reader confirms. Escape or Cancel: false.
export function confirmDialog({ title, body, confirm = 'Confirm', danger = false }) {
  return new Promise((resolve) => {
    const opener = document.activeElement;
    const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': 'dialog-title' },
      h('h2', { id: 'dialog-title' }, title),
      h('div', { class: 'dialog-body' }, body),
      h('form', { method: 'dialog', class: 'dialog-actions' },
        h('button', { value: 'cancel', type: 'submit' }, 'Cancel'),
        h('button', { value: 'ok', type: 'submit', class: danger ? 'primary danger' : 'primary' }, confirm)));
    dialog.addEventListener('close', () => {
      dialog.remove();
      if (opener && opener.isConnected) opener.focus();
      resolve(dialog.returnValue === 'ok');
    });
    document.body.append(dialog);
    dialog.showModal();
    dialog.querySelector('button[value="cancel"]').focus();
  });
}

// A message read out by screen readers and shown near the top of the page.
export function announce(message, { error = false } = {}) {
  const box = document.getElementById('status');
  if (!box) return;
  mount(box, message ? h('p', { class: error ? 'error-box' : 'note-box' }, message) : null);
}

/*
 * Replaces el's children with build()'s, keeping the reader's place: the
 * focused element (found again by its id or data-key) gets focus back and
 * the page's scroll position stays.
 */
export function refreshInto(el, nodes) {
  const active = document.activeElement;
  const key = active && el.contains(active) ? (active.id ? `#${CSS.escape(active.id)}`
    : active.dataset.key ? `[data-key="${CSS.escape(active.dataset.key)}"]` : null) : null;
  const x = window.scrollX, y = window.scrollY;
  mount(el, nodes);
  if (key) el.querySelector(key)?.focus({ preventScroll: true });
  window.scrollTo(x, y);
}

// "37 × 401, 12 × timeout" from the API's clusters.
export function clusterText(clusters) {
  return (clusters || []).map((c) => `${fmtCount(c.count)} × ${c.status_code ?? visible(c.error_class ?? 'error')}`)
    .join(', ') || '—';
}

export function pct(rate) {
  return rate === null || rate === undefined ? '—' : `${(rate * 100).toFixed(rate >= 0.999 || rate === 0 ? 0 : 1)} %`;
}

export function ageText(ms) {
  return ms === null || ms === undefined ? '—' : fmtDuration(ms);
}

export { timeEl, fmtCount };

// An error shown in place of a section's content.
export function errorBox(err) {
  return h('p', { class: 'error-box', role: 'alert' }, visible(err.message || String(err)));
}

// A link to an endpoint, its URL as the text.
export function endpointLink(id, url, key) {
  return h('a', { href: href(`endpoints/${enc(id)}`), class: 'mono', 'data-key': key || null }, visible(url || id));
}

export function eventLink(id) {
  return h('a', { href: href(`events/${enc(id)}`), class: 'mono' }, visible(id));
}
