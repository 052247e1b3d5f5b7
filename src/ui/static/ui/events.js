// Events: the list (one page, filters by type and account) and one event's
// page: its payload, every destination's status with the plain-words
// summary ("timeout after 10 s, retry in 47 s"), and each attempt (time,
// status, duration, error, the response snippet shown safely, what followed).
import { api, h, visible, fmtDuration, toMs } from '/lib/hookd.js';
import { section, facts, table, badge, endpointLink, eventLink, fmtCount, timeEl, t, href, enc, pager, filterForm,
  announce, confirmDialog } from './common.js';

const DETAILED = 20; // destinations shown with their attempts; more are listed with their summary only

export async function renderEvents(ctx) {
  const { params } = ctx;
  const page = await api('/v1/events', { query: { limit: 25, cursor: params.cursor, type: params.type,
    account: params.account, since: params.since, until: params.until } });
  return [
    h('h1', { tabindex: '-1' }, 'Events'),
    filterForm('events', params, [
      { name: 'type', label: 'Type' }, { name: 'account', label: 'Account' },
      { name: 'since', label: 'Created from', type: 'datetime-local' },
      { name: 'until', label: 'Created until', type: 'datetime-local' }], { label: 'Filter events' }),
    table('Events', ['Event', 'Type', 'Account', 'Resource', 'Created', 'Problem'], page.data.map((e) => [
      eventLink(e.id), t(e.type), t(e.account ?? '—'),
      e.resource ? t(`${e.resource.type ?? ''}/${e.resource.id ?? ''}${e.resource.version != null ? ` v${e.resource.version}` : ''}`) : '—',
      timeEl(e.created_at), e.error ? h('span', { class: 'bad' }, t(e.error)) : '—']), { empty: 'No events match.' }),
    pager('events', params, page.next_cursor),
  ];
}

// A response snippet: UTF-8 as text (controls made visible), other bytes as hex.
function snippet(a) {
  if (a.response_encoding === 'utf-8' && a.response !== null) {
    return h('pre', { class: 'snippet' }, visible(a.response, { keepLines: true }),
      a.response_truncated ? h('span', { class: 'muted' }, '\n… (cut at the snippet limit)') : null);
  }
  if (a.response_encoding === 'base64' && a.response_base64) {
    let bytes;
    try { bytes = Uint8Array.from(atob(a.response_base64), (c) => c.charCodeAt(0)); } catch { bytes = new Uint8Array(); }
    const shown = Array.from(bytes.slice(0, 256), (b) => b.toString(16).padStart(2, '0')).join(' ');
    return h('div', {}, h('p', { class: 'muted small' }, `${fmtCount(bytes.length)} bytes, not UTF-8 text; shown as hex:`),
      h('pre', { class: 'snippet' }, shown + (bytes.length > 256 ? ' …' : '')));
  }
  return h('span', { class: 'muted' }, 'no response body');
}

// What followed an attempt: the next one's start for an earlier attempt, the retry to come for the last.
function retryText(a, isLast, status) {
  const r = a.retry;
  if (!r || !r.will_retry) {
    if (!isLast) return '—';
    return status === 'dead' ? 'no more retries (dead)' : status === 'delivered' ? 'delivered' : '—';
  }
  const at = toMs(r.at), started = toMs(a.started_at);
  if (!isLast && at && started) return `retried ${fmtDuration(Math.max(0, at - started - (a.duration_ms || 0)))} later`;
  if (r.in_ms === null || r.in_ms === undefined) return ['next attempt ', timeEl(r.at)];
  return r.in_ms === 0 ? 'retry due now' : `retry in ${fmtDuration(r.in_ms)}`;
}

function attemptsTable(d) {
  return table(`Attempts of delivery ${d.id}`, ['#', 'Started', 'Duration', 'Status', 'Error', 'Response', 'Then'],
    (d.attempts || []).map((a) => [
      String(a.n), timeEl(a.started_at), fmtDuration(a.duration_ms),
      a.status_code ? h('span', { class: a.status_code < 300 ? 'ok' : 'bad' }, String(a.status_code)) : '—',
      a.error_text || a.error_class ? h('span', {}, t(a.error_class ?? ''), a.error_text ? [': ', t(a.error_text)] : '') : '—',
      snippet(a), retryText(a, a === d.attempts[d.attempts.length - 1], d.status)]), { empty: 'No attempt yet.' });
}

async function replayDelivery(d, ctx) {
  if (!await confirmDialog({ title: 'Replay this delivery?', confirm: 'Replay',
    body: [h('p', {}, 'It is sent again to ', h('strong', {}, visible(d.endpoint_id)), ' as a new run of attempts.')] })) return;
  try {
    await api(`/v1/deliveries/${enc(d.id)}/replay`, { method: 'POST', body: {} });
    await ctx.rerender();
    announce(`Delivery ${d.id} replayed; it is pending.`);
  } catch (err) {
    announce(err.message, { error: true });
  }
}

function destination(d, detail, url, ctx) {
  const replayable = ['dead', 'skipped', 'delivered'].includes(d.status);
  return h('article', { class: 'destination panel', id: `dlv-${d.id}`, 'aria-labelledby': `dlv-h-${d.id}` },
    h('h3', { id: `dlv-h-${d.id}` }, badge(d.status), ' ', endpointLink(d.endpoint_id, url || d.endpoint_id)),
    detail?.summary ? h('p', { class: 'summary-line', dataset: { delivery: d.id } }, visible(detail.summary)) : null,
    facts([
      ['Delivery', h('span', { class: 'mono' }, t(d.id))],
      ['Attempts', fmtCount(d.attempt_count)],
      ['Next attempt', timeEl(d.next_attempt_at)],
      ['Delivered', timeEl(d.delivered_at)],
    ], `Delivery ${d.id}`),
    replayable ? h('div', { class: 'actions' },
      h('button', { type: 'button', 'data-key': `replay-${d.id}`, onclick: () => replayDelivery(d, ctx) },
        'Replay to this endpoint')) : null,
    detail ? attemptsTable(detail) : h('p', { class: 'muted' }, 'Attempts not loaded (many destinations).'));
}

export async function renderEvent(ctx) {
  const id = ctx.args[0];
  const ev = await api(`/v1/events/${enc(id)}`);
  const ds = ev.deliveries || [];
  const focus = ctx.params.delivery;
  const order = focus ? [...ds.filter((d) => d.id === focus), ...ds.filter((d) => d.id !== focus)] : ds;
  const shown = order.slice(0, DETAILED);
  const [details, healths] = await Promise.all([
    Promise.all(shown.map((d) => api(`/v1/deliveries/${enc(d.id)}`).catch(() => null))),
    // The endpoints' URLs, from their health (which carries no secret).
    Promise.all([...new Set(shown.map((d) => d.endpoint_id))].map((e) =>
      api(`/v1/endpoints/${enc(e)}/health`).catch(() => null))),
  ]);
  const urls = new Map(healths.filter(Boolean).map((x) => [x.endpoint_id, x.url]));
  const counts = {};
  for (const d of ds) counts[d.status] = (counts[d.status] || 0) + 1;
  // While a destination is still open the page follows it (a replay in progress becomes delivered here).
  if (ds.some((d) => d.status === 'pending' || d.status === 'retrying')) ctx.every(2000, () => ctx.rerender());
  return [
    h('p', { class: 'crumbs' }, h('a', { href: href('events') }, 'Events'), ' › ', t(ev.id)),
    h('h1', { tabindex: '-1', class: 'break' }, 'Event ', h('span', { class: 'mono' }, visible(ev.id))),
    section('Event', facts([
      ['Type', t(ev.type), 'type'],
      ['Account', t(ev.account ?? '—')],
      ['Resource', ev.resource ? t(`${ev.resource.type ?? ''}/${ev.resource.id ?? ''}${ev.resource.version != null ? ` version ${ev.resource.version}` : ''}`) : '—'],
      ['Created', timeEl(ev.created_at)],
      ['Fanned out', timeEl(ev.dispatched_at)],
      ['Destinations', ds.length ? Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', ') : 'none'],
      ev.error ? ['Refused by the relay', h('span', { class: 'bad' }, t(ev.error))] : null,
    ], 'Event')),
    section('Payload', h('pre', { class: 'payload', tabindex: '0', 'aria-label': 'Payload' },
      visible(JSON.stringify(ev.data, null, 2), { keepLines: true }))),
    section('Destinations', order.length
      ? order.map((d, i) => destination(d, details[i], urls.get(d.endpoint_id), ctx))
      : h('p', { class: 'muted' }, 'No endpoint takes this event.')),
  ];
}

