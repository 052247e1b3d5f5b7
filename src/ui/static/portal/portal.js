// The customer portal: one account's integrations in plain words. The link
// carries the account token in its fragment (#token=hkat_…), which browsers
// never send to a server; it moves to session storage and leaves the URL.
// Views (in the fragment after that): #/ the endpoints, #/endpoints/ID the
// deliveries of one (one API page at a time), #/deliveries/ID one delivery
// with its attempts. Every figure comes from the API with the account token,
// which the server holds to its account; nothing here decides what is shown.
import { api, h, mount, session, ApiError, fmtTime, fmtDuration } from '/lib/hookd.js';

const main = document.getElementById('main');
const who = document.getElementById('who');
const PAGE = 20;
const ID = /^[A-Za-z0-9_.:-]{1,64}$/;

let me = null;          // the token's record: {account, scope, expires_at, …}
let generation = 0;     // bumped by every navigation: a slow answer for an old view is dropped
let timer = null;       // the current view's refresh
let focusHeading = false; // the next view drawn takes the focus (set by a navigation)
let busy = 0;           // a resend question or request is open: the refresh waits, so nothing vanishes under it
const idle = () => { busy = Math.max(0, busy - 1); };

function takeTokenFromLink() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    session.token = decodeURIComponent(m[1]);
    me = null;
    history.replaceState(null, '', location.pathname + location.search);
  }
}

// ---- text from the data ----------------------------------------------------------------------

// Control, bidi and separator characters would hide or reorder what is around them: they show
// as \u{…} escapes. Everything else stays as it is (h() never parses markup).
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;
function visible(s) {
  return String(s ?? '').replace(INVISIBLE, (c) => `\\u{${c.codePointAt(0).toString(16).toUpperCase()}}`);
}
// Text from the data, isolated from the text around it.
const data = (s, cls) => h('bdi', cls ? { class: cls } : {}, visible(s));

const ms = (t) => (t ? Date.parse(t) : null);
function ago(t) {
  const at = ms(t);
  if (!at) return '—';
  const d = at - Date.now();
  if (Math.abs(d) < 1000) return d > 0 ? 'now' : 'just now';
  return d > 0 ? `in ${fmtDuration(d)}` : `${fmtDuration(-d)} ago`;
}
function when(t) {
  const at = ms(t);
  return at ? h('time', { datetime: new Date(at).toISOString(), title: fmtTime(at) }, ago(t)) : '—';
}

// ---- plain words ---------------------------------------------------------------------------------

const SYNC = {
  synced: ['Synced', 'ok', 'Everything was delivered.'],
  pending: ['Pending', 'warn', 'Some events are waiting for their first attempt.'],
  retrying: ['Retrying', 'warn', 'Your endpoint did not accept some events; they are being sent again.'],
  failed: ['Failed', 'bad', 'Some events could not be delivered and will not be retried on their own.'],
};
const DELIVERY = {
  pending: ['Waiting to be sent', 'warn'],
  retrying: ['Retrying', 'warn'],
  delivered: ['Delivered', 'ok'],
  dead: ['Failed', 'bad'],
  skipped: ['Not sent', 'bad'],
  superseded: ['Replaced by a newer version', 'muted'],
};
const FILTERS = [['', 'All'], ['dead', 'Failed'], ['skipped', 'Not sent'], ['retrying', 'Retrying'],
  ['pending', 'Waiting'], ['delivered', 'Delivered']];
const CLASS_WORDS = {
  timeout: 'timed out', connect: 'could not connect', dns: 'address not found', tls: 'secure connection failed',
  blocked: 'address not allowed', too_large: 'answer too large', request: 'request failed', other: 'error',
};
const canReplay = () => me && me.scope === 'read_replay';

const badge = (word, cls) => h('span', { class: `badge ${cls}` }, word);
function syncBadges(e) {
  const [word, cls] = SYNC[e.status] || [e.status, 'muted'];
  return [badge(word, cls), e.delayed ? badge('Delayed', 'bad') : null];
}
function endpointName(e) { return e.description ? data(e.description) : data(e.url, 'url'); }

// What an error's text adds to its code: "HTTP 502 (schedule exhausted)" after "HTTP 502" is
// "no more retries"; nothing when it only repeats it.
function errorExtra(what, error) {
  let text = error && error.startsWith(what) ? error.slice(what.length).trim() : error;
  if (text && /^\(.*\)$/.test(text)) text = text.slice(1, -1);
  return text === 'schedule exhausted' ? 'no more retries' : text || null;
}

// An endpoint's last error ({at, status_code, error_class, error}): "HTTP 503, 2 min ago".
function lastError(le) {
  if (typeof le !== 'object') return data(le);
  const what = le.status_code ? `HTTP ${le.status_code}` : CLASS_WORDS[le.error_class] || 'error';
  const text = errorExtra(what, le.error);
  return h('span', {}, what, ', ', when(le.at), text ? [' (', data(text), ')'] : null);
}

// What happened to a delivery, from the list's fields: "HTTP 503, retry in 47 s".
function outcome(d) {
  const why = d.last_status_code ? `HTTP ${d.last_status_code}` : d.last_error ? visible(d.last_error) : null;
  switch (d.status) {
  case 'delivered': return `delivered ${ago(d.delivered_at)}${why ? ` (${why})` : ''}`;
  case 'retrying': return `${why || 'failed'}, retry ${ago(d.next_attempt_at)}`;
  case 'pending': return d.attempt_count ? `queued again, next attempt ${ago(d.next_attempt_at)}`
                                         : `first attempt ${ago(d.next_attempt_at)}`;
  case 'dead': return `${why || 'failed'}, no more retries`;
  case 'skipped': return 'not sent: the endpoint was disabled';
  default: return (DELIVERY[d.status] || [d.status])[0];
  }
}

// ---- pages ---------------------------------------------------------------------------------------

function page(title, ...children) {
  document.title = `${title} — integration status`;
  const h1 = h('h1', { tabindex: '-1' }, title);
  mount(main, h1, ...children);
  // After a navigation the new view's heading takes the focus, so a keyboard or screen reader starts there.
  if (focusHeading) {
    focusHeading = false;
    h1.focus();
  }
  return h1;
}

function expiredPage() {
  session.token = null;
  me = null;
  if (who) mount(who);
  page('This link has expired',
       h('p', { role: 'alert' }, 'The link you opened is no longer valid: it has expired or was withdrawn.'),
       h('p', {}, 'Ask the team that sent it to you for a new link. Nothing about your integrations is shown without one.'));
}

function problemPage(err) {
  if (err instanceof ApiError && err.status === 401) return expiredPage(err);
  const text = err instanceof ApiError && err.status === 404 ? 'This page does not exist, or it is not part of your account.'
             : err instanceof ApiError && err.status === 403 ? 'This link does not give access to this page.'
             : err instanceof ApiError && (err.status === 0 || err.status === 503)
               ? 'The service cannot answer right now. Try again in a moment.'
             : `Something went wrong: ${visible(err.message)}`;
  page('Cannot show this page', h('p', { class: 'error-box', role: 'alert' }, text),
       h('p', {}, h('a', { href: '#/' }, 'Back to your endpoints')));
}

function noLinkPage() {
  if (who) mount(who);
  page('Integration status', h('p', {}, 'Open this page from the link you were given: it carries your access.'));
}

function whoLine() {
  if (!who || !me) return;
  mount(who, h('span', {}, 'Account ', data(me.account, 'account')), ' · ',
        h('span', {}, canReplay() ? 'this link can view and resend' : 'this link can view only'), ' · ',
        h('span', {}, 'expires ', when(me.expires_at)));
}

function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(Boolean).map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v))));
}

function endpointFacts(e) {
  return facts([
    ['Waiting', String(e.pending)],
    ['Retrying', String(e.retrying)],
    ['Failed', String(e.failed)],
    ['Last attempt', when(e.last_attempt_at)],
    ['Next attempt', when(e.next_attempt_at)],
    e.oldest_undelivered_at ? ['Oldest waiting since', when(e.oldest_undelivered_at)] : null,
    e.last_error ? ['Last error', lastError(e.last_error)] : null,
    e.enabled === false ? ['State', 'paused by the provider: nothing is sent until it is enabled again'] : null,
  ]);
}

async function sync() { return api(`/v1/accounts/${encodeURIComponent(me.account)}/sync`); }

async function overview(gen) {
  const s = await sync();
  if (gen !== generation) return;
  const [word, cls, sentence] = SYNC[s.status] || [s.status, 'muted', ''];
  const list = s.endpoints || [];
  page('Your endpoints',
       h('p', { class: `summary ${cls}` }, h('strong', {}, word), '. ', sentence,
         s.delayed ? ` Some events are delayed: they have waited longer than ${fmtDuration(durationMs(s.sync_warn_after))}.` : ''),
       list.length === 0 ? h('p', {}, 'No endpoints are set up for this account yet.')
         : h('ul', { class: 'cards' }, list.map((e) => h('li', { class: 'card' },
           h('h2', {}, h('a', { href: `#/endpoints/${encodeURIComponent(e.endpoint_id)}`, id: `ep-${e.endpoint_id}` },
             endpointName(e))),
           e.description ? h('p', { class: 'muted url-line' }, data(e.url, 'url')) : null,
           h('p', { class: 'badges' }, syncBadges(e)),
           endpointFacts(e)))));
  schedule(gen, 10000);
}

// "60s" / "1m30s" / "500ms" (or a number of milliseconds) → milliseconds: sync_warn_after.
function durationMs(text) {
  if (typeof text === 'number') return text;
  let total = 0;
  for (const [, n, u] of String(text || '').matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g))
    total += Number(n) * { ms: 1, s: 1e3, m: 6e4, h: 36e5, d: 864e5 }[u];
  return total;
}

function parseQuery(q) {
  const p = new URLSearchParams(q || '');
  const status = p.get('status') || '';
  const cursor = p.get('cursor') || '';
  return { status: FILTERS.some(([v]) => v === status) ? status : '', cursor: /^[A-Za-z0-9_-]{1,512}$/.test(cursor) ? cursor : '' };
}

async function endpointView(gen, id, query) {
  const { status, cursor } = parseQuery(query);
  const [s, list] = await Promise.all([
    sync(),
    api('/v1/deliveries', { query: { endpoint_id: id, status, cursor, limit: PAGE } }),
  ]);
  if (gen !== generation) return;
  const e = (s.endpoints || []).find((x) => x.endpoint_id === id);
  if (!e) throw new ApiError(404, 'not_found', 'no such endpoint');
  const link = (st, cur) => {
    const p = new URLSearchParams();
    if (st) p.set('status', st);
    if (cur) p.set('cursor', cur);
    const q = p.toString();
    return `#/endpoints/${encodeURIComponent(id)}${q ? `?${q}` : ''}`;
  };
  const select = h('select', { id: 'status-filter', onchange: (ev) => { location.hash = link(ev.target.value, ''); } },
    FILTERS.map(([v, label]) => h('option', { value: v, selected: v === status }, label)));
  const rows = list.data || [];
  page(e.description ? visible(e.description) : 'Endpoint',
       h('p', { class: 'crumbs' }, h('a', { href: '#/' }, '← All endpoints')),
       h('p', { class: 'muted url-line' }, data(e.url, 'url')),
       h('p', { class: 'badges' }, syncBadges(e)),
       endpointFacts(e),
       e.failed && canReplay() ? resendAll(e) : null,
       h('h2', {}, 'Recent deliveries'),
       h('p', { class: 'filter' }, h('label', { for: 'status-filter' }, 'Show '), select),
       status === 'dead' || status === 'skipped' || e.failed ? replayHelp() : null,
       rows.length === 0 ? h('p', {}, cursor ? 'No older deliveries.' : 'No deliveries to show.')
         : h('ul', { class: 'deliveries' }, rows.map((d) => deliveryItem(d))),
       h('p', { class: 'pager' },
         cursor ? h('a', { href: link(status, ''), id: 'newest' }, 'Newest deliveries') : null,
         list.next_cursor ? h('a', { href: link(status, list.next_cursor), id: 'older' }, 'Older deliveries') : null));
  // Sooner while something on the page is on its way: a resend shows its outcome within seconds.
  schedule(gen, rows.some((d) => d.status === 'pending' || d.status === 'retrying') ? 3000 : 10000);
}

// Resend every failed (dead or skipped) delivery of an endpoint: a dry run counts them, the
// customer confirms the count, then one range replay per status runs on the server.
function resendAll(e) {
  const box = h('div', { class: 'resend-all' });
  const status = h('p', { role: 'status' });
  const ranges = ['dead', 'skipped'];
  const run = async (dryRun) => {
    let count = 0;
    for (const st of ranges) {
      const r = await api('/v1/replays', { method: 'POST', body: { endpoint_id: e.endpoint_id, status: st, dry_run: dryRun } });
      count += dryRun ? r.count : r.replayed;
    }
    return count;
  };
  const fail = (err) => {
    idle();
    if (err instanceof ApiError && err.status === 401) return expiredPage();
    mount(status, err instanceof ApiError && err.code === 'range_too_large'
      ? 'There are too many to resend at once here; ask the team that sent this link.'
      : `Could not resend: ${visible(err.message)}`);
    mount(box, start, status);
    return null;
  };
  const start = h('button', {
    type: 'button', id: 'resend-all',
    onclick: async () => {
      start.disabled = true;
      busy++; // until the question is answered
      let n;
      try { n = await run(true); } catch (err) { start.disabled = false; return fail(err); }
      start.disabled = false;
      if (n === 0) {
        idle();
        mount(status, 'Nothing to resend: no failed deliveries are left.');
        return null;
      }
      const yes = h('button', {
        type: 'button', class: 'primary', id: 'resend-confirm',
        onclick: async () => {
          yes.disabled = true;
          no.disabled = true;
          mount(status, 'Resending…');
          try {
            const sent = await run(false);
            mount(box, h('p', { role: 'status', id: 'resend-done' },
              `${sent} deliver${sent === 1 ? 'y is' : 'ies are'} queued to be sent again.`));
            setTimeout(() => { idle(); refresh(); }, 1500);
          } catch (err) { fail(err); }
        },
      }, `Resend ${n}`);
      const no = h('button', {
        type: 'button', id: 'resend-cancel',
        onclick: () => { idle(); mount(box, start, status); start.focus(); },
      }, 'Cancel');
      mount(box, h('p', { id: 'resend-question' },
        `${n} failed deliver${n === 1 ? 'y' : 'ies'} of this endpoint will be sent again. Go ahead?`),
        h('p', { class: 'actions' }, yes, ' ', no), status);
      yes.focus();
      return null;
    },
  }, 'Resend all failed deliveries…');
  return mount(box, start, status);
}

function replayHelp() {
  return canReplay() ? null
    : h('p', { class: 'note', id: 'read-only-note' },
        'This link can view only: it cannot resend failed deliveries. Ask the team that sent it for a link that can.');
}

function deliveryItem(d) {
  const [word, cls] = DELIVERY[d.status] || [d.status, 'muted'];
  return h('li', { class: 'delivery' },
    h('p', {}, badge(word, cls), ' ',
      h('a', { href: `#/deliveries/${encodeURIComponent(d.id)}`, id: `dl-${d.id}` }, 'Event ', data(d.event_id, 'id')),
      h('span', { class: 'muted' }, ' · created ', when(d.created_at), ' · ',
        `${d.attempt_count} attempt${d.attempt_count === 1 ? '' : 's'}`)),
    h('p', { class: 'outcome' }, outcome(d)),
    d.status === 'dead' || d.status === 'skipped' ? replayButton(d) : null);
}

function replayButton(d) {
  const status = h('span', { class: 'replay-status', role: 'status' });
  if (!canReplay())
    return h('p', {}, h('button', { type: 'button', disabled: true, 'aria-describedby': 'read-only-note' }, 'Resend'),
             h('span', { class: 'muted' }, ' (this link can view only)'));
  const btn = h('button', {
    type: 'button', class: 'primary', id: `resend-${d.id}`, 'aria-label': `Resend event ${visible(d.event_id)}`,
    onclick: async () => {
      btn.disabled = true;
      mount(status, ' Resending…');
      busy++;
      try {
        const r = await api(`/v1/deliveries/${encodeURIComponent(d.id)}/replay`, { method: 'POST', body: {} });
        mount(status, ` Queued to be sent again (${(DELIVERY[r.status] || [r.status])[0].toLowerCase()}).`);
        // On to the delivery's page, which follows it until it is delivered or fails again.
        const there = `#/deliveries/${encodeURIComponent(d.id)}`;
        setTimeout(() => { idle(); if (location.hash === there) route(); else location.hash = there; }, 600);
      } catch (err) {
        idle();
        if (err instanceof ApiError && err.status === 401) return expiredPage(err);
        btn.disabled = false;
        mount(status, ' ', err instanceof ApiError && err.status === 409 ? 'It is already being sent.'
                           : err instanceof ApiError && err.status === 403 ? 'This link cannot resend.'
                           : `Could not resend: ${visible(err.message)}`);
      }
      return null;
    },
  }, 'Resend');
  return h('p', {}, btn, status);
}

function attemptItem(a) {
  const result = a.status_code ? `HTTP ${a.status_code}` : CLASS_WORDS[a.error_class] || 'no answer';
  const at = a.retry && a.retry.will_retry ? ms(a.retry.at) : null;
  const next = !at ? '' : at > Date.now() ? `, retry ${ago(a.retry.at)}`
                    : `, retried ${fmtDuration(Math.max(0, at - ms(a.started_at)))} later`;
  return h('li', { class: 'attempt' },
    h('p', {}, h('strong', {}, `Attempt ${a.n}`), ' · ', when(a.started_at), ' · ',
      `${result} after ${fmtDuration(a.duration_ms)}${next}`),
    errorExtra(result, a.error_text) ? h('p', {}, 'Error: ', data(errorExtra(result, a.error_text))) : null,
    a.response !== null && a.response !== undefined && a.response !== ''
      ? h('div', {}, h('p', { class: 'muted' }, `Your endpoint answered${a.response_truncated ? ' (cut short)' : ''}:`),
          h('pre', {}, visible(a.response)))
      : a.response_encoding === 'base64' ? h('p', { class: 'muted' }, 'Your endpoint answered with bytes that are not text.') : null);
}

async function deliveryView(gen, id) {
  const d = await api(`/v1/deliveries/${encodeURIComponent(id)}`);
  if (gen !== generation) return;
  const [word, cls] = DELIVERY[d.status] || [d.status, 'muted'];
  const attempts = d.attempts || [];
  page('Delivery',
       h('p', { class: 'crumbs' }, h('a', { href: '#/' }, '← All endpoints'), ' · ',
         h('a', { href: `#/endpoints/${encodeURIComponent(d.endpoint_id)}` }, 'This endpoint\'s deliveries')),
       h('p', { class: 'badges' }, badge(word, cls)),
       h('p', { class: 'summary' }, visible(d.summary)),
       facts([['Event', data(d.event_id, 'id')], ['Created', when(d.created_at)],
         ['Delivered', when(d.delivered_at)], ['Next attempt', when(d.next_attempt_at)]]),
       d.status === 'dead' || d.status === 'skipped' ? [replayHelp(), replayButton(d)] : null,
       h('h2', {}, `Attempts (${attempts.length})`),
       attempts.length ? h('ol', { class: 'attempts' }, attempts.map(attemptItem)) : h('p', {}, 'No attempt yet.'));
  schedule(gen, d.status === 'pending' || d.status === 'retrying' ? 2000 : 15000);
}

// ---- routing -------------------------------------------------------------------------------------

// Redraws the view after a while; not while the page is hidden or a resend is being asked or made.
function schedule(gen, after) {
  clearTimeout(timer);
  timer = setTimeout(() => {
    if (gen !== generation) return;
    if (document.hidden || busy > 0) schedule(gen, after);
    else refresh();
  }, after);
}

// A refresh redraws the view in place; the focus stays where it was (every control has an id) when
// the element is still there.
async function refresh() {
  const active = document.activeElement;
  const key = active && active.id ? active.id : null;
  await show(false);
  if (key && document.getElementById(key)) document.getElementById(key).focus();
}

async function show(moveFocus) {
  const gen = ++generation;
  focusHeading = moveFocus;
  if (moveFocus) busy = 0; // a navigation leaves any open question behind
  clearTimeout(timer);
  takeTokenFromLink();
  if (!session.token) return noLinkPage();
  try {
    if (!me) {
      try {
        me = await api('/v1/tokens/self');
      } catch (err) {
        // The admin token (the dashboard's, in this tab) has no account: this page is not for it.
        if (err instanceof ApiError && (err.status === 404 || err.status === 403)) return noLinkPage();
        throw err;
      }
      whoLine();
    }
    const [path, query] = location.hash.replace(/^#/, '').split('?');
    const m = /^\/(endpoints|deliveries)\/([^/]+)$/.exec(path || '');
    const id = m ? decodeURIComponent(m[2]) : null;
    if (m && !ID.test(id)) throw new ApiError(404, 'not_found', 'no such page');
    if (!m) await overview(gen);
    else if (m[1] === 'endpoints') await endpointView(gen, id, query);
    else await deliveryView(gen, id);
  } catch (err) {
    if (gen === generation) problemPage(err);
  }
}

const route = () => show(true);
window.addEventListener('hashchange', route);
show(false);
