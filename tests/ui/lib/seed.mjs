// Scripted data for the dashboard's browser tests, made through the API and a
// local sink: endpoints that succeed, fail with 401, fail until fixed, and
// answer hostile bodies; events to each; an inbound source with a state
// machine, an entity with a trace, a quarantined item and refused requests.
import { createServer } from 'node:http';
import assert from 'node:assert/strict';
import { startDaemon, waitFor } from '../../lib/harness.mjs';
import { launch, openPage, login } from './browser.mjs';

export const ORDER = {
  name: 'order', versioning: 'none',
  transitions: [
    { on: 'order.created', from: [null], to: 'created' },
    { on: 'order.paid', from: ['created'], to: 'paid' },
    { on: 'order.fulfilled', from: ['paid'], to: 'fulfilled' },
  ],
};

// Hostile text: markup, an event handler, bidi overrides, controls, a zero-width joiner.
export const HOSTILE_TEXT = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">\u202Egnp.exe\u202C';
// With C0 controls too (the API refuses them in descriptions and names, a payload can carry them).
export const HOSTILE = `${HOSTILE_TEXT}\u0007\u001b[31m`;

/**
 * A sink: /ok 200, /unauth 401, /flaky 503 until sink.fix(), /hostile 500 with a markup body,
 * /binary 500 with bytes that are not UTF-8.
 */
export async function startDashboardSink() {
  const sink = { fixed: false, requests: 0 };
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      sink.requests++;
      const path = req.url;
      if (path === '/ok' || (path === '/flaky' && sink.fixed)) { res.writeHead(200); res.end('ok'); return; }
      if (path === '/unauth') { res.writeHead(401, { 'content-type': 'text/plain' }); res.end('invalid token'); return; }
      if (path === '/hostile') {
        res.writeHead(500, { 'content-type': 'text/html' });
        res.end(`<html><body>${HOSTILE}<iframe src="javascript:alert(1)"></iframe></body></html>`);
        return;
      }
      if (path === '/binary') {
        res.writeHead(500, { 'content-type': 'application/octet-stream' });
        res.end(Buffer.from([0x3c, 0x62, 0xff, 0xfe, 0xc3, 0x28, 0x00, 0x3e]));
        return;
      }
      res.writeHead(503); res.end('down for maintenance');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  sink.url = (p) => `http://127.0.0.1:${server.address().port}${p}`;
  sink.fix = () => { sink.fixed = true; };
  sink.stop = () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); });
  return sink;
}

const must = (r, what) => {
  if (r.status >= 300) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
};

/** The outbound side: endpoints and events; answers the endpoints and some event ids. */
export async function seedOutbound(d, sink) {
  const ep = {};
  ep.ok = must(await d.api('POST', '/v1/endpoints', { url: sink.url('/ok'), account: 'acme', event_types: ['order.*'],
    description: 'Orders CRM' }), 'ok endpoint');
  ep.unauth = must(await d.api('POST', '/v1/endpoints', { url: sink.url('/unauth'), account: 'acme',
    event_types: ['invoice.*'], description: 'Billing (bad token)' }), 'unauth endpoint');
  ep.flaky = must(await d.api('POST', '/v1/endpoints', { url: sink.url('/flaky'), account: 'globex',
    event_types: ['user.*'], retry_schedule: '100ms', description: 'Search indexer' }), 'flaky endpoint');
  ep.hostile = must(await d.api('POST', '/v1/endpoints', { url: sink.url('/hostile'), account: 'evil',
    event_types: ['evil.*'], retry_schedule: '100ms', description: `Hostile ${HOSTILE_TEXT}` }), 'hostile endpoint');
  const ev = { ok: [], unauth: [], flaky: [] };
  for (let i = 0; i < 3; i++) ev.ok.push(must(await d.api('POST', '/v1/events', { type: 'order.paid', account: 'acme',
    resource: { type: 'order', id: `o-${i}`, version: 1 }, data: { order: `o-${i}`, total: 100 + i } }), 'event').id);
  for (let i = 0; i < 3; i++) ev.unauth.push(must(await d.api('POST', '/v1/events', { type: 'invoice.sent',
    account: 'acme', data: { invoice: i } }), 'event').id);
  for (let i = 0; i < 2; i++) ev.flaky.push(must(await d.api('POST', '/v1/events', { type: 'user.updated',
    account: 'globex', data: { user: i } }), 'event').id);
  ev.hostile = must(await d.api('POST', '/v1/events', { type: 'evil.x', account: 'evil',
    data: { note: HOSTILE, nested: { html: '<b onmouseover=alert(1)>x</b>' } } }), 'hostile event').id;
  const settled = async (id, status) => waitFor(async () => {
    const r = await d.api('GET', `/v1/events/${id}`);
    return r.body.deliveries?.length && r.body.deliveries.every((x) => x.status === status);
  }, { timeoutMs: 15000, what: `event ${id} ${status}` });
  for (const id of ev.ok) await settled(id, 'delivered');
  for (const id of ev.unauth) await settled(id, 'dead');
  for (const id of ev.flaky) await settled(id, 'dead');
  await settled(ev.hostile, 'dead');
  return { ep, ev };
}

/** The inbound side: a machine, a source, an entity with three events, a quarantined item, refusals. */
export async function seedInbound(d) {
  must(await d.api('POST', '/v1/machines', ORDER), 'machine');
  must(await d.api('POST', '/v1/sources', { name: 'shop', verify: { scheme: 'none' }, event_id: '/id',
    event_type: '/type', entity: { kind: 'order', id: '/data/order' }, handler: { machine: 'order' },
    max_defer: '1s', retry_schedule: '200ms' }), 'source');
  const send = async (body) => fetch(`http://127.0.0.1:${d.publicPort}/in/shop`, { method: 'POST',
    headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const ids = {};
  for (const [id, type] of [['e1', 'order.created'], ['e2', 'order.paid'], ['e3', 'order.fulfilled']]) {
    const r = await send({ id, type, data: { order: 'A-100' } });
    ids[id] = (await r.json()).id;
    await waitFor(async () => (await d.api('GET', `/v1/inbox/${ids[id]}`)).body.status === 'processed',
      { timeoutMs: 10000, what: `${id} processed` });
  }
  // created → fulfilled is not a transition: deferred, then quarantined after max_defer.
  const q = await send({ id: 'q1', type: 'order.fulfilled', data: { order: 'B-200' } });
  ids.quarantined = (await q.json()).id;
  await send('{not json');
  await send({ type: 'order.created' });
  await waitFor(async () => (await d.api('GET', `/v1/inbox/${ids.quarantined}`)).body.status === 'quarantined',
    { timeoutMs: 15000, what: 'quarantined' });
  return ids;
}

/**
 * What a dashboard test file needs, started once: the sink, a daemon, the browser and the scripted
 * data (outbound: endpoints and events; inbound: the machine, source and items). Answers
 * {d, browser, sink, out, inb, stop()}.
 */
export async function startDashboard({ outbound = true, inbound = false } = {}) {
  const fx = { sink: await startDashboardSink() };
  fx.d = await startDaemon({ HOOKD_DELIVERY_BREAKER_FAILURES: '0', HOOKD_SERVER_LOG_LEVEL: 'warn' });
  fx.browser = await launch();
  [fx.out, fx.inb] = await Promise.all([outbound ? seedOutbound(fx.d, fx.sink) : null, inbound ? seedInbound(fx.d) : null]);
  fx.stop = async () => { await fx.browser?.close(); await fx.d?.cleanup(); await fx.sink?.stop(); };
  return fx;
}

/**
 * Runs fn(page) on a fresh page of fx's daemon (logged in unless login is false), then checks that no
 * script error or failed request happened (those matching allow excepted) and closes the page.
 */
export async function withPage(fx, fn, { viewport, allow = null, login: logIn = true } = {}) {
  const page = await openPage(fx.browser, fx.d, viewport ? { viewport } : {});
  try {
    if (logIn) await login(page);
    await fn(page);
    assert.deepEqual(page.problems.filter((p) => !(allow && allow.test(p))), []);
  } finally {
    await page.closeAll();
  }
}
