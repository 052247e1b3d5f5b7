// Shared by the dashboard (/ui/) and the portal (/portal/): the API client,
// a DOM builder that never parses markup (text is always text), and the
// formatting of times and durations. No framework, no build step.

// The portal keeps its account token apart from the dashboard's admin token: a customer's
// link opened in a tab logged into /ui/ neither replaces nor uses the admin token.
const TOKEN_KEY = location.pathname.startsWith('/portal/') ? 'hookd.portal_token' : 'hookd.token';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// The token lives in session storage only: it is never put in a URL the server sees.
export const session = {
  get token() { return sessionStorage.getItem(TOKEN_KEY); },
  set token(t) { if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY); },
};

// Calls the admin API with the session's token; answers the parsed JSON or throws ApiError.
export async function api(path, { method = 'GET', body, query } = {}) {
  let url = path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
    const s = q.toString();
    if (s) url += (url.includes('?') ? '&' : '?') + s;
  }
  const headers = { Accept: 'application/json' };
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
                             cache: 'no-store', credentials: 'omit' });
  } catch (e) {
    throw new ApiError(0, 'network', 'hookd cannot be reached');
  }
  const text = await res.text();
  let json = null;
  if (text) {
    try { json = JSON.parse(text); } catch { json = null; }
  }
  if (!res.ok) {
    const err = json && json.error ? json.error : {};
    throw new ApiError(res.status, err.code || `http_${res.status}`, err.message || `HTTP ${res.status}`);
  }
  return json;
}

// h('a', {href: '#/x', class: 'c', onclick: fn}, 'text', child…): attributes set as properties or
// attributes, children appended as nodes or text. Nothing is ever parsed as HTML.
export function h(tag, attrs, ...children) {
  const el = tag.includes(':') ? document.createElementNS('http://www.w3.org/2000/svg', tag.split(':')[1])
                               : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.setAttribute('class', v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// An SVG element (charts): svg('rect', {x, y, width, height}).
export function svg(tag, attrs, ...children) { return h(`svg:${tag}`, attrs, ...children); }

// Replaces el's children.
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// Times from the API are RFC 3339 text; unix milliseconds are taken too. Absent or unreadable: null.
export function toMs(t) {
  if (t === undefined || t === null || t === '') return null;
  const ms = typeof t === 'number' ? t : Date.parse(t);
  return Number.isFinite(ms) ? ms : null;
}

export function fmtTime(t) {
  const ms = toMs(t);
  if (!ms) return '—';
  return new Date(ms).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

export function fmtDuration(ms) {
  if (ms === undefined || ms === null) return '—';
  const a = Math.abs(ms);
  if (a < 1000) return `${Math.round(a)} ms`;
  if (a < 60000) return `${(a / 1000).toFixed(a < 10000 ? 1 : 0)} s`;
  if (a < 3600000) return `${Math.round(a / 60000)} min`;
  if (a < 86400000) return `${(a / 3600000).toFixed(1)} h`;
  return `${(a / 86400000).toFixed(1)} days`;
}

// "3 min ago" / "in 47 s", with the absolute time for a title attribute.
export function fmtAgo(t, now = Date.now()) {
  const ms = toMs(t);
  if (!ms) return '—';
  const d = ms - now;
  if (Math.abs(d) < 1000) return 'just now';
  return d > 0 ? `in ${fmtDuration(d)}` : `${fmtDuration(-d)} ago`;
}

export function timeEl(t) {
  const ms = toMs(t);
  return ms ? h('time', { datetime: new Date(ms).toISOString(), title: fmtTime(ms) }, fmtAgo(ms)) : '—';
}

// Text from the data with what could mislead a reader made visible: C0 and C1 controls, DEL and the
// bidirectional and line-separator marks show as \uXXXX (newlines and tabs too unless keepLines).
// U+FFFD (what the API shows for bytes that are not UTF-8) stays as it is.
const INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;
const INVISIBLE_ALL = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;
export function visible(text, { keepLines = false } = {}) {
  if (text === undefined || text === null) return '';
  return String(text).replace(keepLines ? INVISIBLE : INVISIBLE_ALL,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0').toUpperCase()}`);
}

// A number with thousands separators; null or absent: '—'.
export function fmtCount(n) {
  return n === undefined || n === null ? '—' : Number(n).toLocaleString('en-US');
}
