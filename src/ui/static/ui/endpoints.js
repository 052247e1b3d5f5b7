// Endpoints: the table with each row's health (one page of endpoints, then
// each row's /health), and one endpoint's page: its health, status-code
// clusters, outcomes per minute, recent deliveries (one page), and the
// actions enable, disable, rotate secret (the new secret shown once) and
// send a test event.
import { api, h, mount, visible } from '/lib/hookd.js';
import { barChart } from './chart.js';
import { section, facts, table, badge, clusterText, endpointLink, eventLink, fmtCount, pct, timeEl, t, href, enc,
  pager, filterForm, confirmDialog, announce } from './common.js';

const PAGE = 25;

function lastError(e) {
  if (!e) return '—';
  const what = e.status_code ? `HTTP ${e.status_code}` : visible(e.error_class || 'error');
  return h('span', {}, h('span', { class: 'bad' }, what), ' ', timeEl(e.at));
}

function queued(d) {
  return `${fmtCount(d.pending)} / ${fmtCount(d.retrying)} / ${fmtCount(d.in_flight)}`;
}

function stateOf(ep) {
  return ep.enabled ? badge('enabled') : badge('disabled');
}

export async function renderEndpoints(ctx) {
  const { params } = ctx;
  const page = await api('/v1/endpoints', { query: { limit: PAGE, cursor: params.cursor, account: params.account } });
  const health = await Promise.all(page.data.map((ep) =>
    api(`/v1/endpoints/${enc(ep.id)}/health`).catch(() => null)));
  const rows = page.data.map((ep, i) => {
    const hl = health[i];
    return [
      h('div', {}, endpointLink(ep.id, ep.url), ep.description ? h('div', { class: 'muted small' }, t(ep.description)) : null),
      t(ep.account ?? '—'),
      stateOf(ep),
      badge(ep.breaker?.state ?? 'closed'),
      hl ? timeEl(hl.last_success_at) : '—',
      hl ? lastError(hl.last_error) : '—',
      hl ? timeEl(hl.next_attempt_at) : '—',
      hl ? queued(hl.deliveries) : '—',
      hl ? pct(hl.windows['1h'].success_rate) : '—',
    ];
  });
  return [
    h('h1', { tabindex: '-1' }, 'Endpoints'),
    filterForm('endpoints', params, [{ name: 'account', label: 'Account' }], { label: 'Filter endpoints' }),
    table('Endpoints with their health', ['Endpoint', 'Account', 'State', 'Breaker', 'Last success', 'Last error',
      'Next attempt', 'Queued / retrying / in flight', 'Success (1 h)'], rows, { empty: 'No endpoints.' }),
    pager('endpoints', params, page.next_cursor),
  ];
}

function outcomes(stats) {
  return barChart({ title: 'Attempts per minute', minutes: stats.minutes, perSecond: false, unit: '/min',
    series: [{ key: 'successes', label: 'succeeded', cls: 'c-ok' }, { key: 'failures', label: 'failed', cls: 'c-bad' }] });
}

function clustersOf(summary, id, day) {
  const e = summary.failures_by_endpoint.find((x) => x.endpoint_id === id);
  if (!e && day.failures > 0) {
    // The summary lists the endpoints with the most failures (at most 100); this one is not among them.
    return h('p', { id: 'clusters' }, `${fmtCount(day.failures)} of ${fmtCount(day.attempts)} attempts failed in the last 24 hours; `,
      'their status codes are listed only for the endpoints with the most failures.');
  }
  const rows = (e?.clusters || []).map((c) => [
    c.status_code ? `HTTP ${c.status_code}` : visible(c.error_class ?? 'error'), fmtCount(c.count)]);
  return h('div', { id: 'clusters' },
    e ? h('p', {}, `${fmtCount(e.failures)} of ${fmtCount(e.attempts)} attempts failed in the last 24 hours: `,
      h('strong', {}, clusterText(e.clusters))) : null,
    table('Failures by status code', ['Status', 'Failures'], rows, { empty: 'No failures in the last 24 hours.' }));
}

function deliveriesTable(page) {
  return table('Recent deliveries', ['Delivery', 'Event', 'Status', 'Attempts', 'Last code', 'Last error',
    'Next attempt', 'Created'], page.data.map((d) => [
    h('a', { href: href(`events/${enc(d.event_id)}`, { delivery: d.id }), class: 'mono' }, visible(d.id)),
    eventLink(d.event_id), badge(d.status), fmtCount(d.attempt_count), d.last_status_code ?? '—',
    h('span', { class: 'clip' }, t(d.last_error ?? '—')), timeEl(d.next_attempt_at), timeEl(d.created_at)]),
  { empty: 'No deliveries yet.' });
}

// One action's button: runs fn, reports in the status box, then re-renders the page.
function action(label, fn, ctx, { danger = false } = {}) {
  return h('button', { type: 'button', class: danger ? 'danger' : '', onclick: async (e) => {
    const b = e.currentTarget;
    b.disabled = true;
    try {
      const message = await fn();
      if (message !== false) {
        await ctx.rerender();
        if (message) announce(message);
      }
    } catch (err) {
      announce(err.message, { error: true });
    } finally {
      if (b.isConnected) b.disabled = false;
    }
  } }, label);
}

export async function renderEndpoint(ctx) {
  const id = ctx.args[0];
  const { params } = ctx;
  const [ep, health, stats, summary, page] = await Promise.all([
    api(`/v1/endpoints/${enc(id)}`),
    api(`/v1/endpoints/${enc(id)}/health`),
    api('/v1/stats', { query: { window: '1h', endpoint_id: id } }),
    api('/v1/summary', { query: { window: '24h' } }),
    api('/v1/deliveries', { query: { endpoint_id: id, limit: 20, cursor: params.cursor } }),
  ]);
  const w = health.windows;
  const secretBox = h('div', { id: 'secret-box', 'aria-live': 'polite' });
  const actions = h('div', { class: 'actions', role: 'group', 'aria-label': 'Endpoint actions' },
    ep.enabled
      ? action('Disable', async () => {
        if (!await confirmDialog({ title: 'Disable this endpoint?', danger: true, confirm: 'Disable',
          body: [h('p', {}, 'No deliveries are sent to ', h('strong', {}, visible(ep.url)),
            ' while it is disabled; new ones are skipped and can be replayed later.')] })) return false;
        await api(`/v1/endpoints/${enc(id)}/disable`, { method: 'POST', body: { reason: 'disabled from the dashboard' } });
        return 'Endpoint disabled.';
      }, ctx, { danger: true })
      : action('Enable', async () => {
        await api(`/v1/endpoints/${enc(id)}/enable`, { method: 'POST', body: {} });
        return 'Endpoint enabled.';
      }, ctx),
    action('Rotate secret', async () => {
      if (!await confirmDialog({ title: 'Rotate the signing secret?', confirm: 'Rotate',
        body: [h('p', {}, 'A new secret signs from now on; the old one stays valid for the rotation grace period.')] })) {
        return false;
      }
      const r = await api(`/v1/endpoints/${enc(id)}/secret/rotate`, { method: 'POST', body: {} });
      await ctx.rerender();
      const box = document.getElementById('secret-box');
      if (box && r.secret) {
        mount(box, h('div', { class: 'note-box' },
          h('p', {}, h('strong', {}, 'New secret (shown once; copy it now):')),
          h('code', { class: 'secret', id: 'new-secret', tabindex: '0' }, r.secret)));
        box.querySelector('#new-secret').focus();
      }
      return false;
    }, ctx),
    ep.enabled ? action('Send test event', async () => {
      const r = await api(`/v1/endpoints/${enc(id)}/test`, { method: 'POST', body: {} });
      return `Test event ${r.id} sent.`;
    }, ctx) : null);

  return [
    h('p', { class: 'crumbs' }, h('a', { href: href('endpoints') }, 'Endpoints'), ' › ', t(ep.id)),
    h('h1', { tabindex: '-1', class: 'break' }, visible(ep.url)),
    ep.description ? h('p', { class: 'muted' }, t(ep.description)) : null,
    actions, secretBox,
    h('div', { class: 'grid-2' },
      section('Settings', facts([
        ['State', [stateOf(ep), ep.disabled_reason ? h('span', { class: 'muted' }, ' ', t(ep.disabled_reason)) : null]],
        ['Account', t(ep.account ?? '—')],
        ['Event types', t((ep.event_types || []).join(', ') || 'all application events')],
        ['Ordering', t(ep.ordering)],
        ['Signing', t(ep.signing)],
        ['Id', h('span', { class: 'mono' }, t(ep.id))],
      ], 'Settings')),
      section('Health', facts([
        ['Breaker', badge(health.breaker?.state ?? 'closed'), 'breaker'],
        ['Last success', timeEl(health.last_success_at), 'last_success'],
        ['Last error', lastError(health.last_error), 'last_error'],
        ['Next attempt', timeEl(health.next_attempt_at), 'next_attempt'],
        ['Pending / retrying / in flight', queued(health.deliveries), 'queued'],
        ['Dead / skipped', `${fmtCount(health.deliveries.dead)} / ${fmtCount(health.deliveries.skipped)}`, 'dead'],
        ['Success rate 1 h / 24 h', `${pct(w['1h'].success_rate)} / ${pct(w['24h'].success_rate)}`, 'success_rate'],
        ['Latency p50 / p99 (1 h)', w['1h'].latency_p50_ms === null ? '—'
          : `${Math.round(w['1h'].latency_p50_ms)} ms / ${Math.round(w['1h'].latency_p99_ms)} ms`],
        health.oldest_undelivered ? ['Oldest undelivered', timeEl(health.oldest_undelivered.created_at)] : null,
      ], 'Health'))),
    section('Status-code clusters', clustersOf(summary, id, w['24h'])),
    section('Outcomes over the last hour', outcomes(stats)),
    section('Recent deliveries',
      h('p', {}, h('a', { href: href('dead', { endpoint_id: id }) }, 'Dead letters of this endpoint')),
      deliveriesTable(page), pager(`endpoints/${enc(id)}`, params, page.next_cursor)),
  ];
}

