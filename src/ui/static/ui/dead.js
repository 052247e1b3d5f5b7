// Dead letters and skipped deliveries: filters (status, endpoint, account,
// created time) over one page of /v1/deliveries, replay of one, and a range
// replay of everything the filters match: a dry run gives the count, a
// dialog asks to confirm, then the replay runs and its record shows its
// progress. The replay history refreshes itself while a replay is running.
import { api, h, visible } from '/lib/hookd.js';
import { table, badge, endpointLink, eventLink, fmtCount, timeEl, t, href, enc, pager, filterForm, confirmDialog,
  announce, refreshInto, errorBox, section } from './common.js';

const FIELDS = [
  { name: 'status', label: 'Status', type: 'select', options: [['dead', 'Dead'], ['skipped', 'Skipped']] },
  { name: 'endpoint_id', label: 'Endpoint id', placeholder: 'ep_…' },
  { name: 'account', label: 'Account' },
  { name: 'since', label: 'Created from', type: 'datetime-local' },
  { name: 'until', label: 'Created until', type: 'datetime-local' },
];

function filterOf(params) {
  return { status: params.status || 'dead', endpoint_id: params.endpoint_id || undefined,
    account: params.account || undefined, since: params.since || undefined, until: params.until || undefined };
}

async function replayOne(d, ctx) {
  try {
    await api(`/v1/deliveries/${enc(d.id)}/replay`, { method: 'POST', body: {} });
    await ctx.rerender();
    announce(`Delivery ${d.id} replayed; it is pending again.`);
  } catch (err) {
    announce(err.message, { error: true });
  }
}

async function replayRange(filter) {
  const body = { ...filter };
  for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
  let dry;
  try {
    dry = await api('/v1/replays', { method: 'POST', body: { ...body, dry_run: true } });
  } catch (err) {
    announce(err.code === 'range_too_large' ? `${err.message} Narrow the filters.` : err.message, { error: true });
    return;
  }
  if (!dry.count) {
    announce('No delivery matches these filters: nothing to replay.');
    return;
  }
  const words = [filter.endpoint_id && `endpoint ${filter.endpoint_id}`, filter.account && `account ${filter.account}`,
    filter.since && `created from ${new Date(filter.since).toLocaleString()}`,
    filter.until && `until ${new Date(filter.until).toLocaleString()}`].filter(Boolean).join(', ');
  const ok = await confirmDialog({ title: `Replay ${fmtCount(dry.count)} deliveries?`, confirm: `Replay ${fmtCount(dry.count)}`,
    body: [h('p', { id: 'dry-run-count' }, `${fmtCount(dry.count)} ${filter.status} deliveries match`,
      words ? ` (${visible(words)})` : '', '. Each is sent again to its endpoint.'),
    h('p', { class: 'muted' }, `Dry run; at most ${fmtCount(dry.limit)} are replayed at once.`)] });
  if (!ok) {
    announce('Replay cancelled; nothing was sent.');
    return;
  }
  try {
    const rec = await api('/v1/replays', { method: 'POST', body });
    location.hash = href(`replays/${enc(rec.id)}`);
  } catch (err) {
    announce(err.message, { error: true });
  }
}

export async function renderDead(ctx) {
  const { params } = ctx;
  const filter = filterOf(params);
  const page = await api('/v1/deliveries', { query: { ...filter, limit: 25, cursor: params.cursor } });
  const title = filter.status === 'skipped' ? 'Skipped deliveries' : 'Dead letters';
  return [
    h('h1', { tabindex: '-1' }, title),
    filterForm('dead', { ...params, status: filter.status }, FIELDS, { label: 'Filter dead letters' }),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'primary', onclick: () => replayRange(filter) }, 'Replay all matching…'),
      h('a', { href: href('replays') }, 'Replay history')),
    table(title, ['Delivery', 'Event', 'Endpoint', 'Account', 'Attempts', 'Last code', 'Last error', 'Created', ''],
      page.data.map((d) => [
        h('a', { href: href(`events/${enc(d.event_id)}`, { delivery: d.id }), class: 'mono' }, visible(d.id)),
        eventLink(d.event_id), endpointLink(d.endpoint_id, d.endpoint_id), t(d.account ?? '—'),
        fmtCount(d.attempt_count), d.last_status_code ?? '—', h('span', { class: 'clip' }, t(d.last_error ?? '—')),
        timeEl(d.created_at),
        h('button', { type: 'button', 'data-key': `replay-${d.id}`, 'aria-label': `Replay delivery ${d.id}`,
          onclick: () => replayOne(d, ctx) }, 'Replay')]),
      { empty: `No ${filter.status} deliveries match.` }),
    pager('dead', params, page.next_cursor),
  ];
}

function progress(r) {
  const p = r.progress || {};
  const total = Math.max(1, r.replayed || 0);
  const done = (p.delivered || 0) + (p.failed || 0) + (p.superseded || 0);
  return h('div', { class: 'progress-cell' },
    h('progress', { max: total, value: done, 'aria-label': `Replay ${r.id} progress` }),
    h('span', { class: 'small' }, `${fmtCount(p.delivered)} delivered, ${fmtCount(p.pending)} pending, ` +
      `${fmtCount(p.failed)} failed` + (p.superseded ? `, ${fmtCount(p.superseded)} superseded` : '')));
}

function filterText(f) {
  if (!f || typeof f !== 'object') return '—';
  return visible(Object.entries(f).filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => `${k}=${v}`).join(' ') || 'all');
}

function replaysTable(list) {
  return table('Replays', ['Replay', 'Kind', 'By', 'Filter', 'Matched', 'Replayed', 'Skipped', 'Progress', 'State', 'Started'],
    list.map((r) => [
      h('a', { href: href(`replays/${enc(r.id)}`), class: 'mono' }, visible(r.id)), t(r.kind), t(r.actor),
      filterText(r.filter), fmtCount(r.matched), fmtCount(r.replayed), fmtCount(r.skipped), progress(r),
      badge(r.done ? 'done' : 'running'), timeEl(r.created_at)]), { empty: 'No replays yet.' });
}

export async function renderReplays(ctx) {
  const { params } = ctx;
  const id = ctx.args[0];
  const load = async () => (id ? { data: [await api(`/v1/replays/${enc(id)}`)], next_cursor: null }
    : api('/v1/replays', { query: { limit: 25, cursor: params.cursor, account: params.account } }));
  let page = await load();
  const live = h('div', { id: 'replays-live' }, replaysTable(page.data));
  const tick = async () => {
    if (!page.data.some((r) => !r.done)) return;
    try {
      page = await load();
      if (ctx.alive()) refreshInto(live, replaysTable(page.data));
    } catch (err) {
      if (ctx.alive()) refreshInto(live, errorBox(err));
    }
  };
  ctx.every(1000, tick);
  return [
    id ? h('p', { class: 'crumbs' }, h('a', { href: href('replays') }, 'Replays'), ' › ', t(id)) : null,
    h('h1', { tabindex: '-1' }, id ? 'Replay' : 'Replay history'),
    section(id ? 'Progress' : 'Replays', live),
    id ? null : pager('replays', params, page.next_cursor),
  ];
}
