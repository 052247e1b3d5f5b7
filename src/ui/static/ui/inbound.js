// Inbound: the inbox by source and status (one page of /v1/inbox), the
// refusals of a source by reason, quarantined or deferred items with replay,
// one item's page with its payload, and an entity's trace (by received time
// or by version) with each event's from → to and result.
import { api, h, visible } from '/lib/hookd.js';
import { section, facts, table, badge, fmtCount, timeEl, t, href, enc, pager, filterForm, announce } from './common.js';

const STATUSES = [['', 'Any'], ['pending', 'Pending'], ['processed', 'Processed'], ['deferred', 'Deferred'],
  ['quarantined', 'Quarantined']];

async function replayItem(it, ctx) {
  try {
    await api(`/v1/inbox/${enc(it.id)}/replay`, { method: 'POST', body: {} });
    await ctx.rerender();
    announce(`Inbox item ${it.id} is pending again.`);
  } catch (err) {
    announce(err.message, { error: true });
  }
}

function entityLink(e) {
  if (!e || !e.kind || !e.id) return '—';
  return h('a', { href: href('trace', { kind: e.kind, id: e.id }) }, visible(`${e.kind}/${e.id}`));
}

function rejections(source, r) {
  const counts = Object.entries(r.counts || {});
  return section(`Rejections of ${source}`,
    counts.length ? h('p', {}, 'By reason: ', counts.map(([k, v]) => `${visible(k)} ${fmtCount(v)}`).join(', '))
      : h('p', { class: 'muted' }, 'Nothing refused.'),
    table('Recent rejections', ['When', 'Reason', 'From', 'Size'], r.data.map((x) => [
      timeEl(x.at), badge(x.reason), t(x.peer ?? '—'), `${fmtCount(x.size)} B`]), { empty: 'No recent rejections.' }));
}

export async function renderInbound(ctx) {
  const { params } = ctx;
  const [sources, page, rej] = await Promise.all([
    api('/v1/sources', { query: { limit: 100 } }),
    api('/v1/inbox', { query: { source: params.source, status: params.status, limit: 25, cursor: params.cursor } }),
    params.source ? api(`/v1/sources/${enc(params.source)}/rejections`, { query: { limit: 10 } }).catch(() => null) : null,
  ]);
  const fields = [
    { name: 'source', label: 'Source', type: 'select',
      options: [['', 'Any'], ...sources.data.map((s) => [s.name, visible(s.name)])] },
    { name: 'status', label: 'Status', type: 'select', options: STATUSES },
  ];
  return [
    h('h1', { tabindex: '-1' }, 'Inbound'),
    h('p', {}, h('a', { href: href('trace') }, 'Trace an entity'), ' · ',
      h('a', { href: href('inbound', { status: 'quarantined' }) }, 'Quarantined items')),
    filterForm('inbound', params, fields, { label: 'Filter the inbox' }),
    table('Inbox', ['Item', 'Source', 'Event', 'Type', 'Entity', 'Status', 'Result', 'Attempts', 'Received', 'Error', ''],
      page.data.map((it) => [
        h('a', { href: href(`inbox/${enc(it.id)}`), class: 'mono' }, visible(it.id)), t(it.source), t(it.event_id),
        t(it.event_type ?? '—'), entityLink(it.entity), badge(it.status), t(it.result ?? '—'), fmtCount(it.attempts),
        timeEl(it.received_at), h('span', { class: 'clip' }, t(it.error ?? '—')),
        it.status === 'quarantined' || it.status === 'deferred'
          ? h('button', { type: 'button', 'data-key': `replay-${it.id}`, 'aria-label': `Replay inbox item ${it.id}`,
            onclick: () => replayItem(it, ctx) }, 'Replay') : '']),
      { empty: 'No inbox items match.' }),
    pager('inbound', params, page.next_cursor),
    params.source && rej ? rejections(params.source, rej) : null,
  ];
}

export async function renderInboxItem(ctx) {
  const it = await api(`/v1/inbox/${enc(ctx.args[0])}`);
  return [
    h('p', { class: 'crumbs' }, h('a', { href: href('inbound') }, 'Inbound'), ' › ', t(it.id)),
    h('h1', { tabindex: '-1', class: 'break' }, 'Inbox item ', h('span', { class: 'mono' }, visible(it.id))),
    it.status === 'quarantined' || it.status === 'deferred'
      ? h('div', { class: 'actions' }, h('button', { type: 'button', onclick: () => replayItem(it, ctx) }, 'Replay')) : null,
    section('Item', facts([
      ['Source', t(it.source)], ['Event id', t(it.event_id)], ['Type', t(it.event_type ?? '—')],
      ['Entity', entityLink(it.entity)], ['Version', it.version ?? '—'], ['Status', badge(it.status)],
      ['Result', t(it.result ?? '—')], ['Attempts', fmtCount(it.attempts)], ['Duplicates', fmtCount(it.dup_count)],
      ['Signature verified', it.signature_verified ? 'yes' : 'no'], ['Received', timeEl(it.received_at)],
      ['Processed', timeEl(it.processed_at)], ['Next attempt', timeEl(it.next_attempt_at)],
      it.error ? ['Error', h('span', { class: 'bad' }, t(it.error))] : null,
    ], 'Inbox item')),
    section('Payload', h('pre', { class: 'payload', tabindex: '0', 'aria-label': 'Payload' },
      visible(JSON.stringify(it.payload, null, 2), { keepLines: true }))),
  ];
}

export async function renderTrace(ctx) {
  const { params } = ctx;
  const fields = [
    { name: 'kind', label: 'Entity kind', placeholder: 'order' },
    { name: 'id', label: 'Entity id' },
    { name: 'order', label: 'Order', type: 'select', options: [['received', 'By received time'], ['version', 'By version']] },
  ];
  const head = [h('h1', { tabindex: '-1' }, 'Entity trace'), filterForm('trace', params, fields,
    { submit: 'Show trace', label: 'Entity' })];
  if (!params.kind || !params.id) return [...head, h('p', { class: 'muted' }, 'Name an entity to see its events.')];
  let tr;
  try {
    tr = await api(`/v1/entities/${enc(params.kind)}/${enc(params.id)}/trace`,
      { query: { order: params.order || 'received' } });
  } catch (err) {
    if (err.status !== 404) throw err;
    return [...head, h('p', { class: 'note-box' }, 'No entity ', h('strong', {}, visible(`${params.kind}/${params.id}`)),
      ': no event has named it yet.')];
  }
  return [
    ...head,
    section('Entity', facts([
      ['Entity', t(`${tr.kind}/${tr.id}`), 'entity'], ['State', tr.state === null ? 'none yet' : t(tr.state), 'state'],
      ['Version', tr.version ?? '—', 'version'], ['Order', tr.order === 'version' ? 'by version' : 'by received time'],
    ], 'Entity')),
    section('Events', table(`Events of ${tr.kind}/${tr.id}`, ['Received', 'Version', 'Type', 'From → to', 'Status',
      'Result', 'Worker', 'Duplicates', 'Error'], tr.events.map((e) => [
      h('a', { href: href(`inbox/${enc(e.inbox_id)}`) }, timeEl(e.received_at)), e.version ?? '—', t(e.type ?? '—'),
      e.from === null && e.to === null ? '—' : h('span', { class: 'transition' }, t(e.from ?? '∅'), ' → ', t(e.to ?? '∅')),
      badge(e.status), t(e.result ?? '—'), t(e.worker ?? '—'), fmtCount(e.dup_count),
      h('span', { class: 'clip' }, t(e.error ?? '—'))]), { empty: 'No events for this entity.' })),
  ];
}
