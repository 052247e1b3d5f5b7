// GET /metrics on the admin listener: Prometheus text that a real parser reads
// (parse-prometheus-text-format), the admin token unless [server] metrics_auth
// = none, and counters and gauges that match a scripted scenario: N events to a
// healthy endpoint, K to one that always answers 500 (4 attempts each, then
// dead), N skipped on a disabled one, and inbound accepted / duplicate /
// rejected requests.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { startDaemon, startCountingSink, newSecret, waitFor, TOKEN } from '../lib/harness.mjs';

const N = 6, K = 3;
let d, sink;
const SECRET = newSecret();

before(async () => {
  sink = await startCountingSink({ status: (n, req) => (req.url === '/bad' ? 500 : 200) });
  d = await startDaemon({ HOOKD_SERVER_METRICS_REFRESH: '0s', HOOKD_ALERTS_ENABLED: 'false',
    HOOKD_DELIVERY_BREAKER_FAILURES: '0' });
});
after(async () => {
  assert.equal(await d.stop(), 0, 'hookd exits cleanly');
  await d.cleanup();
  await sink.stop();
});

async function scrape(token = TOKEN) {
  const res = await fetch(`http://127.0.0.1:${d.adminPort}/metrics`,
    { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text(),
    auth: res.headers.get('www-authenticate') };
}

/** The parsed families by name; sample(name, labels) finds one value. */
function families(text) {
  const byName = new Map();
  for (const f of parsePrometheusTextFormat(text)) byName.set(f.name, f);
  return byName;
}
function sample(fams, name, labels = {}) {
  const f = fams.get(name);
  assert.ok(f, `family ${name} present`);
  const m = f.metrics.find((x) => Object.entries(labels).every(([k, v]) => x.labels?.[k] === v));
  assert.ok(m, `${name} ${JSON.stringify(labels)} present`);
  return f.type === 'HISTOGRAM' ? m : Number(m.value);
}

function sign(id, ts, body) {
  const key = Buffer.from(SECRET.slice('whsec_'.length), 'base64');
  return 'v1,' + createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64');
}
async function inbound(id, { bad = false } = {}) {
  const body = JSON.stringify({ type: 'order.paid', data: { n: 1 } });
  const ts = Math.floor(Date.now() / 1000);
  const res = await fetch(`http://127.0.0.1:${d.publicPort}/in/shop`, {
    method: 'POST', body,
    headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(ts),
      'webhook-signature': bad ? sign(id, ts, body + 'x') : sign(id, ts, body) },
  });
  return res.status;
}

test('the exposition parses, names follow the conventions, and the token is required', async () => {
  const none = await scrape(null);
  assert.equal(none.status, 401);
  assert.equal(none.auth, 'Bearer');
  assert.equal(JSON.parse(none.text).error.code, 'unauthorized');
  assert.equal((await scrape('wrong-token-0123456789abcdef0123456789')).status, 401);
  const r = await scrape();
  assert.equal(r.status, 200);
  assert.match(r.type, /^text\/plain; version=0\.0\.4/);
  const fams = families(r.text);
  for (const [name, f] of fams) {
    assert.match(name, /^hookd_[a-z_]+$/, name);
    if (f.type === 'COUNTER') assert.match(name, /_total$/, `${name} is a counter`);
    assert.ok(f.help && f.help.length > 10, `${name} has help`);
  }
  for (const line of r.text.split('\n').filter((l) => l && !l.startsWith('#'))) {
    // bounded labels: no ids of events, deliveries or endpoints in any label
    assert.doesNotMatch(line, /(evt_|dlv_|ep_|inb_)[0-9a-f]{8}/, line);
  }
  assert.equal(sample(fams, 'hookd_node_info', { node: d.node }), 1);
  for (const name of ['hookd_events_published_total', 'hookd_deliveries_total', 'hookd_attempts_total',
    'hookd_delivery_latency_seconds', 'hookd_queue_deliveries', 'hookd_oldest_pending_age_seconds', 'hookd_in_flight',
    'hookd_endpoints_breaker', 'hookd_inbound_accepted_total', 'hookd_inbound_duplicates_total',
    'hookd_inbound_rejected_total', 'hookd_inbox_items', 'hookd_inbox_outcomes_total', 'hookd_alerts_open',
    'hookd_store_commit_seconds', 'hookd_store_batch_ops', 'hookd_deliveries_leased']) {
    assert.ok(fams.has(name), `${name} exported`);
  }
});

test('counters and gauges match the scenario', async () => {
  const before = families((await scrape()).text);
  const base = (name, labels) => sample(before, name, labels);
  await d.createEndpoint({ url: sink.url('/good'), event_types: ['order.*'] });
  await d.createEndpoint({ url: sink.url('/bad'), event_types: ['invoice.*'] });
  const off = await d.createEndpoint({ url: sink.url('/off'), event_types: ['order.*'] });
  assert.equal((await d.api('POST', `/v1/endpoints/${off.id}/disable`, { reason: 'maintenance' })).status, 200);
  const ids = [];
  for (let i = 0; i < N; i++) ids.push((await d.publish({ type: 'order.created', data: { i } })).id);
  for (let i = 0; i < K; i++) ids.push((await d.publish({ type: 'invoice.created', data: { i } })).id);
  for (const id of ids.slice(N)) await d.waitDelivery(id, 'dead', 15000);
  await waitFor(async () => {
    const ds = (await d.api('GET', '/v1/deliveries?status=delivered&limit=1000')).body.data;
    return ds.length === N;
  }, { what: 'the good deliveries' });

  // inbound: 2 accepted, 1 duplicate, 1 bad signature
  assert.equal((await d.api('POST', '/v1/sources', { name: 'shop', verify: { scheme: 'standard-webhooks',
    secrets: [SECRET] }, event_type: '/type' })).status, 201);
  assert.equal(await inbound('msg_a'), 200);
  assert.equal(await inbound('msg_b'), 200);
  assert.equal(await inbound('msg_a'), 200);
  assert.equal(await inbound('msg_c', { bad: true }), 401);

  const fams = await waitFor(async () => {
    const f = families((await scrape()).text);
    return sample(f, 'hookd_attempts_total', { class: '5xx' }) - base('hookd_attempts_total', { class: '5xx' }) === 4 * K && f;
  }, { what: 'every attempt counted' });
  const delta = (name, labels) => sample(fams, name, labels) - base(name, labels);
  assert.equal(delta('hookd_events_published_total'), N + K);
  assert.equal(delta('hookd_deliveries_created_total'), 2 * N + K);
  assert.equal(delta('hookd_deliveries_total', { outcome: 'delivered' }), N);
  assert.equal(delta('hookd_deliveries_total', { outcome: 'dead' }), K);
  assert.equal(delta('hookd_deliveries_total', { outcome: 'retrying' }), 3 * K);
  assert.equal(delta('hookd_deliveries_total', { outcome: 'skipped' }), N);
  assert.equal(delta('hookd_attempts_total', { class: '2xx' }), N);
  assert.equal(delta('hookd_attempts_total', { class: '4xx' }), 0);
  assert.equal(delta('hookd_attempts_total', { class: 'error' }), 0);
  const lat = sample(fams, 'hookd_delivery_latency_seconds');
  assert.equal(Number(lat.count) - Number(base('hookd_delivery_latency_seconds').count), N);
  assert.ok(Number(lat.sum) >= 0 && Number(lat.sum) < 60 * N, `latency sum ${lat.sum}`);
  assert.equal(Number(lat.buckets['+Inf']), Number(lat.count), '+Inf bucket holds every observation');
  assert.equal(sample(fams, 'hookd_queue_deliveries', { status: 'dead' }), K);
  assert.equal(sample(fams, 'hookd_queue_deliveries', { status: 'skipped' }), N);
  assert.equal(sample(fams, 'hookd_queue_deliveries', { status: 'pending' }), 0);
  assert.equal(sample(fams, 'hookd_queue_deliveries', { status: 'retrying' }), 0);
  assert.equal(sample(fams, 'hookd_oldest_pending_age_seconds'), 0);
  assert.equal(sample(fams, 'hookd_in_flight'), 0);
  assert.equal(sample(fams, 'hookd_deliveries_leased'), 0);
  assert.equal(sample(fams, 'hookd_endpoints_disabled'), 1);
  const breakers = ['closed', 'open', 'half_open'].map((s) => sample(fams, 'hookd_endpoints_breaker', { state: s }));
  assert.equal(breakers.reduce((a, b) => a + b, 0), 3, 'every endpoint in one breaker state');
  assert.equal(delta('hookd_inbound_accepted_total'), 2);
  assert.equal(delta('hookd_inbound_duplicates_total'), 1);
  assert.equal(delta('hookd_inbound_rejected_total', { reason: 'bad_signature' }), 1);
  assert.equal(sample(fams, 'hookd_inbox_items', { status: 'pending' }), 2, 'no handler: both wait pending');
  const commits = sample(fams, 'hookd_store_commit_seconds');
  assert.ok(Number(commits.count) > 0);
  assert.equal(Number(sample(fams, 'hookd_store_batch_ops').count), Number(commits.count));
});

test('the oldest pending age and queue depth see work that waits', async () => {
  // An endpoint that answers 500 with a long retry schedule holds a retrying delivery.
  await d.createEndpoint({ url: sink.url('/bad'), event_types: ['slow.*'], retry_schedule: '1h' });
  const ev = await d.publish({ type: 'slow.created', data: {} });
  await d.waitDelivery(ev.id, 'retrying');
  await new Promise((r) => setTimeout(r, 1100));
  const fams = families((await scrape()).text);
  assert.equal(sample(fams, 'hookd_queue_deliveries', { status: 'retrying' }), 1);
  assert.ok(sample(fams, 'hookd_oldest_pending_age_seconds') >= 1, 'age counts from the delivery');
});

test('metrics_auth = none lets a scraper in without the token; a bad value is refused', async () => {
  const open = await startDaemon({ HOOKD_SERVER_METRICS_AUTH: 'none', HOOKD_ALERTS_ENABLED: 'false' });
  try {
    const res = await fetch(`http://127.0.0.1:${open.adminPort}/metrics`);
    assert.equal(res.status, 200);
    assert.ok(families(await res.text()).has('hookd_node_info'));
    // the rest of the admin API still needs the token
    assert.equal((await fetch(`http://127.0.0.1:${open.adminPort}/v1/alerts`)).status, 401);
  } finally {
    assert.equal(await open.stop(), 0);
    await open.cleanup();
  }
  await assert.rejects(startDaemon({ HOOKD_SERVER_METRICS_AUTH: 'sometimes' }), /metrics_auth/);
});
