// Overview: is everything flowing? The last hour's events and delivery
// attempts per second, the queue by state, the oldest open work, open alerts,
// the endpoints that need attention and the inbound counts. It reads
// /v1/stats, /v1/summary and /v1/alerts (one page each) and refreshes itself
// in place every few seconds, keeping the reader's focus and scroll.
import { api, h, fmtAgo } from '/lib/hookd.js';
import { barChart } from './chart.js';
import { section, facts, table, badge, clusterText, endpointLink, fmtCount, ageText, timeEl, t, href, refreshInto,
  errorBox } from './common.js';

export const REFRESH_MS = 5000;

async function load() {
  const [stats, summary, alerts] = await Promise.all([
    api('/v1/stats', { query: { window: '1h' } }),
    api('/v1/summary', { query: { window: '1h' } }),
    api('/v1/alerts', { query: { status: 'open', limit: 20 } }),
  ]);
  return { stats, summary, alerts };
}

function perSecond(count, minutes) {
  if (!minutes) return '—';
  const v = count / (minutes * 60);
  return `${v < 10 ? v.toFixed(2) : Math.round(v)}/s`;
}

function figures({ stats, alerts }) {
  const q = stats.deliveries;
  const full = stats.minutes.slice(-6, -1); // the last five whole minutes
  const sum = (k) => full.reduce((a, m) => a + (m[k] || 0), 0);
  return [
    section('Right now',
      facts([
        ['Events (last 5 min)', perSecond(sum('events'), full.length), 'events_rate'],
        ['Delivery attempts (last 5 min)', perSecond(sum('attempts'), full.length), 'attempts_rate'],
        ['Open alerts', fmtCount(alerts.data.length) + (alerts.next_cursor ? '+' : ''), 'alerts_open'],
        ['Oldest open work', stats.oldest_open ? ageText(stats.oldest_open.age_ms) : 'none', 'oldest_open'],
      ], 'Rates'),
    ),
    section('Queue',
      facts([
        ['Pending', fmtCount(q.pending), 'pending'],
        ['Retrying', fmtCount(q.retrying), 'retrying'],
        ['In flight', fmtCount(q.in_flight), 'in_flight'],
        ['Not fanned out yet', fmtCount(q.undispatched), 'undispatched'],
        ['Dead', h('a', { href: href('dead', { status: 'dead' }), 'data-key': 'dead' }, fmtCount(q.dead)), 'dead'],
        ['Skipped', h('a', { href: href('dead', { status: 'skipped' }), 'data-key': 'skipped' }, fmtCount(q.skipped)),
          'skipped'],
      ], 'Deliveries by state')),
    section('Inbound',
      facts([
        ['Accepted (last hour)', fmtCount(stats.totals.inbound), 'inbound_accepted'],
        ['Rejected (all time)', fmtCount(stats.rejected.total), 'inbound_rejected'],
        ['Waiting', fmtCount(stats.inbox.pending + stats.inbox.deferred), 'inbox_waiting'],
        ['Quarantined', h('a', { href: href('inbound', { status: 'quarantined' }), 'data-key': 'quarantined' },
          fmtCount(stats.inbox.quarantined)),
          'inbox_quarantined'],
      ], 'Inbound'),
      Object.keys(stats.rejected.by_reason).length
        ? h('p', { class: 'muted' }, 'Rejections by reason: ', Object.entries(stats.rejected.by_reason)
          .map(([k, v]) => `${t(k)} ${fmtCount(v)}`).join(', '))
        : null),
  ];
}

function charts({ stats }) {
  return section('Last hour',
    h('div', { class: 'charts' },
      barChart({ title: 'Events per second', minutes: stats.minutes,
        series: [{ key: 'events', label: 'events', cls: 'c-events' }] }),
      barChart({ title: 'Delivery attempts per second', minutes: stats.minutes,
        series: [{ key: 'successes', label: 'succeeded', cls: 'c-ok' }, { key: 'failures', label: 'failed', cls: 'c-bad' }] })));
}

function attention({ summary, alerts }) {
  const rows = new Map();
  for (const e of summary.failures_by_endpoint) {
    rows.set(e.endpoint_id, { id: e.endpoint_id, url: e.url, why: `${fmtCount(e.failures)} of ${fmtCount(e.attempts)} attempts failed`,
      clusters: clusterText(e.clusters) });
  }
  for (const e of summary.no_success) {
    const r = rows.get(e.endpoint_id) || { id: e.endpoint_id, url: e.url, clusters: '—' };
    r.why = `no success in the last hour (${fmtCount(e.attempts)} attempts)`;
    rows.set(e.endpoint_id, r);
  }
  for (const e of summary.growing_backlogs) {
    const r = rows.get(e.endpoint_id) || { id: e.endpoint_id, url: e.url, clusters: '—', why: '' };
    r.why = `${r.why ? `${r.why}; ` : ''}retry backlog grew by ${fmtCount(e.growth)} to ${fmtCount(e.retrying)}`;
    rows.set(e.endpoint_id, r);
  }
  return [
    section('Open alerts',
      table('Open alerts', ['Alert', 'Subject', 'What', 'Opened'], alerts.data.map((a) => [
        badge(t(a.rule)),
        a.subject && a.subject.startsWith('ep_') ? endpointLink(a.subject, a.subject) : t(a.subject),
        t(a.message), timeEl(a.opened_at)]), { empty: 'No open alerts.' })),
    section('Endpoints needing attention',
      table('Endpoints needing attention', ['Endpoint', 'Why', 'Failures by status'], [...rows.values()].map((r) => [
        endpointLink(r.id, r.url, `attention-${r.id}`), r.why, r.clusters]), { empty: 'Every endpoint is delivering.' })),
  ];
}

function body(data) {
  return [
    h('p', { class: 'muted updated' }, `Updated ${fmtAgo(Date.now())}; refreshes every ${REFRESH_MS / 1000} s.`),
    h('div', { class: 'grid-3' }, figures(data)),
    charts(data),
    attention(data),
  ];
}

export async function renderOverview(ctx) {
  const live = h('div', { id: 'overview-live' }, body(await load()));
  ctx.every(REFRESH_MS, async () => {
    try {
      const data = await load();
      if (ctx.alive()) refreshInto(live, body(data));
    } catch (err) {
      if (ctx.alive()) refreshInto(live, [errorBox(err)]);
    }
  });
  return [h('h1', { tabindex: '-1' }, 'Overview'), live];
}
