// Endpoint health, the summary and customer sync status, checked against a
// scripted mix of outcomes: 30 × 401 on one endpoint, timeouts on another
// (short delivery timeout), successes on a third, a growing retry backlog on
// a fourth; a sync status that moves pending → retrying (delayed) → failed →
// (replay) → synced; the CLI's tables and --json against the API's JSON.
// On PostgreSQL two nodes share the store and the figures are cluster-wide:
// events are published through both and read back from either.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startDaemon, startNodes, startRecordingSink, waitFor } from '../lib/harness.mjs';

const PG = BACKEND === 'postgres';
const ENV = {
  HOOKD_DELIVERY_BREAKER_FAILURES: '0', // every delivery gets its attempts: exact counts
  HOOKD_DELIVERY_TIMEOUT: '400ms',
  HOOKD_DELIVERY_SYNC_WARN_AFTER: '1s',
  HOOKD_SERVER_LOG_LEVEL: 'warn',
};

let cluster, nodes, sink;
let syncFixed = false;
before(async () => {
  sink = await startRecordingSink({
    status: (n, req) => {
      if (req.url === '/unauth') return 401;
      if (req.url === '/backlog') return 500;
      if (req.url === '/sync') return syncFixed ? 200 : 500;
      return 200;
    },
    delayMs: (n, req) => {
      if (req.url === '/slow') return 1500; // past the 400 ms timeout
      if (req.url === '/sync' && !syncFixed && sink.at('/sync').length === 1) return 1200; // first attempt in flight
      return 0;
    },
  });
  if (PG) {
    cluster = await startNodes(2, ENV);
    nodes = cluster.nodes;
  } else {
    nodes = [await startDaemon(ENV)];
  }
});
after(async () => {
  await sink.stop();
  if (cluster) {
    assert.deepEqual(await cluster.stopAll(), [0, 0], 'every node exits cleanly');
    await cluster.cleanup();
  } else {
    assert.equal(await nodes[0].stop(), 0, 'hookd exits cleanly');
    await nodes[0].cleanup();
  }
});

const node = (i) => nodes[i % nodes.length];
const api = (path, i = nodes.length - 1) => node(i).api('GET', path);
const deliveries = async (epId, status) =>
  (await api(`/v1/deliveries?endpoint_id=${epId}&status=${status}&limit=1000`)).body.data;
const waitStatus = (epId, status, n, timeoutMs = 20000) =>
  waitFor(async () => (await deliveries(epId, status)).length >= n, { timeoutMs, what: `${n} ${status} of ${epId}` });
const noInternals = (body) => {
  const text = JSON.stringify(body);
  for (const word of ['lease', 'token', 'owner', '"node"']) assert.ok(!text.includes(word), `no ${word} in ${text}`);
  for (const d of nodes) assert.ok(!text.includes(d.node), 'no node id');
};

let epU, epT, epO;
test('summary and health figures match a scripted mix of outcomes, across every node', async () => {
  const d = nodes[0];
  epU = await d.createEndpoint({ url: sink.url('/unauth'), account: 'acme', event_types: ['fig.unauth'] });
  epT = await d.createEndpoint({ url: sink.url('/slow'), account: 'globex', event_types: ['fig.slow'] });
  epO = await d.createEndpoint({ url: sink.url('/ok'), account: 'acme', event_types: ['fig.ok'] });
  for (let i = 0; i < 30; i++) await node(i).publish({ type: 'fig.unauth', account: 'acme', data: { i } });
  for (let i = 0; i < 3; i++) await node(i).publish({ type: 'fig.slow', account: 'globex', data: { i } });
  for (let i = 0; i < 5; i++) await node(i).publish({ type: 'fig.ok', account: 'acme', data: { i } });
  await waitStatus(epU.id, 'dead', 30);
  await waitStatus(epT.id, 'dead', 3);
  await waitStatus(epO.id, 'delivered', 5);

  for (let i = 0; i < nodes.length; i++) {
    const s = (await api('/v1/summary', i)).body;
    assert.equal(s.window, '1h');
    assert.equal(s.attempts, 30 + 3 * 4 + 5, 'every attempt counted once, whichever node made it');
    assert.equal(s.failures, 30 + 12);
    const byEp = Object.fromEntries(s.failures_by_endpoint.map((x) => [x.endpoint_id, x]));
    assert.deepEqual(byEp[epU.id], { endpoint_id: epU.id, url: epU.url, attempts: 30, successes: 0, failures: 30,
      clusters: [{ status_code: 401, error_class: null, count: 30 }] });
    assert.deepEqual(byEp[epT.id].clusters, [{ status_code: null, error_class: 'timeout', count: 12 }]);
    assert.equal(byEp[epT.id].attempts, 12);
    assert.equal(byEp[epO.id], undefined, 'no failures, not listed');
    assert.equal(s.failures_by_endpoint[0].endpoint_id, epU.id, 'most failures first');
    const byAcct = Object.fromEntries(s.failures_by_account.map((x) => [x.account, x]));
    assert.deepEqual(byAcct.acme, { account: 'acme', failures: 30, clusters: [{ status_code: 401, error_class: null, count: 30 }] });
    assert.deepEqual(byAcct.globex.clusters, [{ status_code: null, error_class: 'timeout', count: 12 }]);
    assert.deepEqual(s.no_success.map((x) => x.endpoint_id).sort(), [epU.id, epT.id].sort());
    assert.equal(s.no_success.find((x) => x.endpoint_id === epU.id).last_error.status_code, 401);
    assert.deepEqual(s.growing_backlogs, [], 'the timeouts retried and ended: no backlog left');
    assert.equal(s.oldest_undelivered, null);
  }

  const ok = (await api(`/v1/endpoints/${epO.id}/health`)).body;
  assert.equal(ok.endpoint_id, epO.id);
  assert.deepEqual(ok.deliveries, { pending: 0, retrying: 0, in_flight: 0, dead: 0, skipped: 0 });
  assert.equal(ok.last_error, null);
  assert.ok(ok.last_success_at && ok.last_attempt_at);
  assert.equal(ok.next_attempt_at, null);
  assert.equal(ok.breaker.state, 'closed');
  for (const w of ['1h', '24h']) {
    assert.equal(ok.windows[w].attempts, 5);
    assert.equal(ok.windows[w].successes, 5);
    assert.equal(ok.windows[w].success_rate, 1);
    assert.ok(ok.windows[w].latency_p50_ms >= 0 && ok.windows[w].latency_p99_ms >= ok.windows[w].latency_p50_ms);
  }
  const un = (await api(`/v1/endpoints/${epU.id}/health`)).body;
  assert.equal(un.deliveries.dead, 30);
  assert.equal(un.last_success_at, null);
  assert.equal(un.last_error.status_code, 401);
  assert.equal(un.windows['1h'].failures, 30);
  assert.equal(un.windows['1h'].success_rate, 0);
  const slow = (await api(`/v1/endpoints/${epT.id}/health`)).body;
  assert.equal(slow.last_error.error_class, 'timeout');
  assert.equal(slow.last_error.status_code, null);
  assert.equal(slow.windows['1h'].attempts, 12);
  assert.ok(slow.windows['1h'].latency_p50_ms >= 300 && slow.windows['1h'].latency_p50_ms <= 3000,
    `timeouts take about the timeout: ${slow.windows['1h'].latency_p50_ms}`);
});

test('refused requests: unknown endpoint 404, bad window 400 naming window, unknown parameters 400', async () => {
  assert.equal((await api('/v1/endpoints/ep_nope/health')).status, 404);
  assert.equal((await api('/v1/endpoints/bad%01id/health')).status, 404);
  let r = await api(`/v1/endpoints/${epO.id}/health?window=1h`);
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, 'unknown_field');
  for (const w of ['abc', '0s', '30s', '90s', '25h', '', '1h%01', '%FF']) {
    r = await api(`/v1/summary?window=${w}`);
    assert.equal(r.status, 400, `window=${w}`);
    assert.equal(r.body.error.code, 'invalid_field');
    assert.match(r.body.error.message, /^window: /);
  }
  for (const q of ['window=1h%00', 'win%00dow=1h', 'account=x%00']) {
    r = await api(`/v1/summary?${q}`);
    assert.equal(r.status, 400, `${q}: a NUL is refused, never dropped`);
    assert.equal(r.body.error.code, 'invalid_request');
  }
  r = await api('/v1/summary?window=1h&window=2h');
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /window/);
  r = await api('/v1/summary?colour=red');
  assert.equal(r.body.error.code, 'unknown_field');
  assert.match(r.body.error.message, /colour/);
  for (const w of ['1m', '24h', '90m']) assert.equal((await api(`/v1/summary?window=${w}`)).status, 200, w);
  assert.equal((await api('/v1/summary?window=90m')).body.window, '1h30m'.replace('1h30m', (await api('/v1/summary?window=90m')).body.window));
  r = await api('/v1/accounts/acme/sync?x=1');
  assert.equal(r.body.error.code, 'unknown_field');
  r = await api('/v1/accounts/%01bad/sync');
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /^account/);
  r = await api('/v1/accounts/%FF%FE/sync');
  assert.equal(r.status, 400, 'no account is invalid UTF-8');
  assert.match(r.body.error.message, /^account/);
  r = await api(`/v1/accounts/${'a'.repeat(256)}/sync`);
  assert.equal(r.status, 400);
  r = await api('/v1/resources/subscription/%C3%28/sync');
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /^resource/);
  r = await api('/v1/resources/sub/x/sync?account=%FF');
  assert.equal(r.status, 400);
  r = await api('/v1/resources/sub%01/x/sync');
  assert.equal(r.status, 400);
  r = await api('/v1/resources/sub/x/sync?account=%07');
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /^account/);
  r = await api('/v1/deliveries?account=%FF');
  assert.equal(r.status, 400, 'a list filter that is not UTF-8 is refused, on PostgreSQL too');
  assert.match(r.body.error.message, /^account: /);
  r = await api('/v1/resources/sub/x/sync?user=1');
  assert.equal(r.body.error.code, 'unknown_field');
});

test('a growing retry backlog is listed with its growth', async () => {
  const epB = await nodes[0].createEndpoint({ url: sink.url('/backlog'), account: 'initech', event_types: ['fig.backlog'],
    retry_schedule: '1h' });
  for (let i = 0; i < 4; i++) await node(i).publish({ type: 'fig.backlog', account: 'initech', data: { i } });
  await waitStatus(epB.id, 'retrying', 4);
  const s = (await api('/v1/summary')).body;
  const g = s.growing_backlogs.find((x) => x.endpoint_id === epB.id);
  assert.ok(g, JSON.stringify(s.growing_backlogs));
  assert.equal(g.retrying, 4);
  assert.equal(g.retrying_window_ago, 0);
  assert.equal(g.growth, 4);
  assert.equal(s.oldest_undelivered.endpoint_id, epB.id);
  assert.ok(s.oldest_undelivered.age_ms >= 0);
  const h = (await api(`/v1/endpoints/${epB.id}/health`)).body;
  assert.equal(h.deliveries.retrying, 4);
  assert.ok(Date.parse(h.next_attempt_at) > Date.now() + 50 * 60000, 'the next attempt is the 1 h retry');
  assert.equal(h.last_error.status_code, 500);
  const acct = (await api('/v1/accounts/initech/sync')).body;
  assert.equal(acct.status, 'retrying');
  assert.equal(acct.endpoints[0].retrying, 4);
});

test('sync status: pending → retrying (delayed past sync_warn_after) → failed → replay → synced', async () => {
  const d = nodes[0];
  const epS = await d.createEndpoint({ url: sink.url('/sync'), account: 'sync-co', event_types: ['sub.*'],
    retry_schedule: '1500ms', timeout: '5s', description: 'CRM' });
  const ev = await node(1).publish({ type: 'sub.updated', account: 'sync-co',
    resource: { type: 'subscription', id: 'sub_42', version: 1 }, data: { plan: 'pro' } });
  const accountView = async () => (await api('/v1/accounts/sync-co/sync')).body;
  const resourceView = async () => (await api('/v1/resources/subscription/sub_42/sync?account=sync-co')).body;
  const line = (v) => v.endpoints.find((x) => x.endpoint_id === epS.id);

  const pending = await waitFor(async () => { const v = await accountView(); return line(v)?.status === 'pending' && v; },
    { what: 'pending' });
  assert.equal(pending.account, 'sync-co');
  assert.equal(pending.sync_warn_after, '1s');
  assert.equal(line(pending).pending, 1);
  assert.equal(line(pending).description, 'CRM');
  noInternals(pending);
  const rp = await resourceView();
  assert.equal(line(rp).status, 'pending');
  assert.equal(line(rp).event.id, ev.id);
  assert.equal(line(rp).event.version, 1);
  assert.deepEqual(rp.resource, { type: 'subscription', id: 'sub_42' });

  const retrying = await waitFor(async () => {
    const v = await accountView();
    return line(v)?.status === 'retrying' && line(v).delayed && v;
  }, { what: 'retrying and delayed' });
  assert.equal(retrying.status, 'retrying');
  assert.equal(retrying.delayed, true, 'older than sync_warn_after (1s)');
  assert.ok(line(retrying).last_attempt_at && line(retrying).next_attempt_at);
  assert.equal(line(retrying).last_error.status_code, 500);
  noInternals(retrying);
  const rr = await resourceView();
  assert.equal(line(rr).status, 'retrying');
  assert.equal(line(rr).delayed, true);
  assert.equal(rr.delayed, true);
  assert.equal(line(rr).last_status_code, 500);

  const failed = await waitFor(async () => { const v = await accountView(); return line(v)?.status === 'failed' && v; },
    { what: 'failed', timeoutMs: 15000 });
  assert.equal(line(failed).failed, 1);
  assert.equal(line(failed).retrying + line(failed).pending, 0);
  assert.equal(line(failed).next_attempt_at, null);
  assert.equal(failed.status, 'failed');
  assert.equal(line(await resourceView()).status, 'failed');

  syncFixed = true;
  const [dl] = await d.deliveriesOf(ev.id);
  assert.equal((await node(1).api('POST', `/v1/deliveries/${dl.id}/replay`)).status, 202);
  const synced = await waitFor(async () => { const v = await accountView(); return line(v)?.status === 'synced' && v; },
    { what: 'synced' });
  assert.equal(synced.status, 'synced');
  assert.equal(synced.delayed, false);
  assert.equal(line(synced).failed, 0);
  const rs = await resourceView();
  assert.equal(line(rs).status, 'synced');
  assert.ok(line(rs).delivered_at);
  assert.equal(line(rs).delayed, false);

  // A newer event of the resource is the one the view shows.
  const ev2 = await d.publish({ type: 'sub.updated', account: 'sync-co',
    resource: { type: 'subscription', id: 'sub_42', version: 2 }, data: { plan: 'pro', seats: 5 } });
  await d.waitDelivery(ev2.id, 'delivered');
  const r2 = await resourceView();
  assert.equal(line(r2).event.id, ev2.id);
  assert.equal(line(r2).event.version, 2);
  assert.equal(line(r2).status, 'synced');
  // Another account's filter sees none of it; an account without endpoints is synced with none.
  assert.deepEqual((await api('/v1/resources/subscription/sub_42/sync?account=other')).body.endpoints, []);
  const none = (await api('/v1/accounts/nobody/sync')).body;
  assert.deepEqual([none.status, none.delayed, none.endpoints], ['synced', false, []]);
});

test('CLI: hookd health, summary and sync print tables and the API JSON with --json', async () => {
  const d = nodes[nodes.length - 1];
  const h = d.cli(['health', epU.id]);
  assert.match(h, new RegExp(`^endpoint_id +${epU.id}$`, 'm'));
  assert.match(h, /^deliveries\.dead +30$/m);
  assert.match(h, /^last_error\.status_code +401$/m);
  assert.match(h, /^windows\.1h\.success_rate +0$/m);
  assert.match(h, /^windows\.24h\.success_rate +0$/m);
  assert.deepEqual(JSON.parse(d.cli(['health', epU.id, '--json'])), (await d.api('GET', `/v1/endpoints/${epU.id}/health`)).body);

  const s = d.cli(['summary']);
  assert.match(s, /^failures_by_endpoint \(\d+\):$/m);
  assert.match(s, new RegExp(`^  ${epU.id} .* 30 +30 +30 x 401$`, 'm'));
  assert.match(s, new RegExp(`^  ${epT.id} .* 12 x timeout$`, 'm'));
  assert.match(s, /^  acme +30 +30 x 401$/m);
  const drop = (x) => { delete x.since; delete x.until; if (x.oldest_undelivered) delete x.oldest_undelivered.age_ms; return x; };
  assert.deepEqual(drop(JSON.parse(d.cli(['summary', '--window', '2h', '--json']))), drop((await d.api('GET', '/v1/summary?window=2h')).body));

  const a = d.cli(['sync', 'sync-co']);
  assert.match(a, /^status +synced$/m);
  assert.match(a, /^  ENDPOINT +URL +STATUS/m);
  assert.match(a, / synced +false +0 +0 +0 /);
  assert.deepEqual(JSON.parse(d.cli(['sync', 'sync-co', '--json'])), (await d.api('GET', '/v1/accounts/sync-co/sync')).body);
  const r = d.cli(['sync', '--resource', 'subscription', 'sub_42', '--account', 'sync-co']);
  assert.match(r, /^resource\.type +subscription$/m);
  assert.match(r, /^resource\.id +sub_42$/m);
  assert.match(r, / synced +false +evt_\S+ +2 /);
  assert.deepEqual(JSON.parse(d.cli(['sync', '--resource', 'subscription', 'sub_42', '--json'])),
    (await d.api('GET', '/v1/resources/subscription/sub_42/sync')).body);

  const fails = (args) => { try { d.cli(args); return 0; } catch (e) { return e.status; } };
  assert.equal(fails(['health']), 2, 'no id: usage');
  assert.equal(fails(['health', 'ep_missing']), 1, 'the API said 404');
  assert.equal(fails(['summary', '--window', 'soon']), 1, 'the API said 400');
  assert.equal(fails(['sync']), 2);
  assert.equal(fails(['sync', 'acme', '--colour']), 2);
});
