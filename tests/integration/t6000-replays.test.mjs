// Replays as an audited operation: one dead delivery after the endpoint is
// fixed (same webhook-id, fresh timestamp and signature, valid for the
// standardwebhooks library), one event to all or one endpoint, a bounded
// range (dry run, limit refusal, progress counts), nothing in flight sent
// twice, and every replay recorded with who, filter and progress.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import swh from 'standardwebhooks';
import { startDaemon, startRecordingSink, waitFor, sleep } from '../lib/harness.mjs';

let d, sink;
let failing = true; // /fix answers 500 while set
before(async () => {
  d = await startDaemon({ HOOKD_DELIVERY_BREAKER_FAILURES: '0' }); // failures here are the point: no breaker
  sink = await startRecordingSink({
    status: (n, req) => (req.url.startsWith('/fix') && failing ? 500 : req.url === '/gone' ? 400 : 200),
    delayMs: (n, req) => (req.url === '/slow' ? 1500 : 0),
  });
});
after(async () => { await sink.stop(); assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

const verify = (secret, r) => new swh.Webhook(secret).verify(r.body, r.headers);
const replayOf = async (id) => (await d.api('GET', `/v1/replays/${id}`)).body;

test('a dead delivery replayed after the fix: delivered, same webhook-id, new valid signature, recorded', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/fix'), event_types: ['fix.*'], account: 'acme' });
  const ev = await d.publish({ type: 'fix.one', account: 'acme', data: { n: 1 } });
  const [dead] = await d.waitDelivery(ev.id, 'dead');
  const before = sink.at('/fix');
  failing = false;
  await sleep(1100); // a new second: the replay's timestamp differs
  const r = await d.api('POST', `/v1/deliveries/${dead.id}/replay`, {});
  assert.equal(r.status, 202);
  assert.match(r.body.replay_id, /^rpl_/);
  await d.waitDelivery(ev.id, 'delivered');
  const last = sink.at('/fix').at(-1);
  assert.equal(sink.at('/fix').length, before.length + 1);
  assert.equal(last.headers['webhook-id'], ev.id, 'same webhook-id');
  assert.notEqual(last.headers['webhook-signature'], before.at(-1).headers['webhook-signature']);
  assert.ok(Number(last.headers['webhook-timestamp']) > Number(before.at(-1).headers['webhook-timestamp']));
  assert.equal(verify(ep.secret, last).id, ev.id, 'the standardwebhooks library accepts the new signature');
  const rec = await waitFor(async () => { const x = await replayOf(r.body.replay_id); return x.done && x; });
  assert.equal(rec.kind, 'delivery');
  assert.equal(rec.actor, 'admin');
  assert.equal(rec.account, 'acme');
  assert.deepEqual(rec.filter, { delivery_id: dead.id });
  assert.equal(rec.matched, 1);
  assert.equal(rec.replayed, 1);
  assert.deepEqual(rec.progress, { pending: 0, delivered: 1, failed: 0, superseded: 0 });
  // The delivery log of §12: time, code, duration, class, the retry decision.
  const full = (await d.api('GET', `/v1/deliveries/${dead.id}`)).body;
  const failed = full.attempts.find((a) => a.status_code === 500);
  assert.equal(failed.error_class, 'http_5xx');
  assert.equal(full.attempts.at(-1).error_class, null);
  assert.equal(full.attempts.at(-1).retry.will_retry, false);
  assert.equal(full.endpoint_id, ep.id);
  assert.match(full.summary, /^delivered \(HTTP 200 in \d+ ms\)$/);
  assert.equal(failed.endpoint_id, ep.id);
  assert.ok(failed.duration_ms >= 0 && failed.started_at && failed.response !== undefined);
  const retried = full.attempts.find((a) => a.retry.will_retry);
  assert.ok(retried && retried.retry.at, 'a failure that was retried says when');
});

test('replaying something pending or in flight does not send it twice', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/slow'), event_types: ['slow.*'] });
  const ev = await d.publish({ type: 'slow.one', data: {} });
  const [dl] = await waitFor(async () => {
    const ds = await d.deliveriesOf(ev.id);
    return ds?.length && ds; // queued or in flight: the sink takes 1.5 s to answer
  });
  const one = await d.api('POST', `/v1/deliveries/${dl.id}/replay`, {});
  assert.equal(one.status, 409);
  assert.equal(one.body.error.code, 'not_replayable');
  const byEvent = await d.api('POST', `/v1/events/${ev.id}/replay`, {});
  assert.equal(byEvent.status, 202);
  assert.equal(byEvent.body.replayed, 0);
  assert.equal(byEvent.body.skipped, 1, 'counted as skipped, left as it is');
  await d.waitDelivery(ev.id, 'delivered');
  await sleep(300);
  assert.equal(sink.at('/slow').length, 1, 'sent once');
  assert.equal(ep.id, dl.endpoint_id);
});

test('an event to all or to one endpoint; an endpoint without a delivery of it is 404', async () => {
  const a = await d.createEndpoint({ url: sink.url('/all-a'), event_types: ['all.*'] });
  const b = await d.createEndpoint({ url: sink.url('/all-b'), event_types: ['all.*'] });
  const other = await d.createEndpoint({ url: sink.url('/all-x'), event_types: ['nothing.*'] });
  const ev = await d.publish({ type: 'all.one', data: {} });
  await d.waitDelivery(ev.id, 'delivered');
  const toA = await d.api('POST', `/v1/events/${ev.id}/replay`, { endpoint_id: a.id });
  assert.equal(toA.status, 202);
  assert.equal(toA.body.kind, 'event');
  assert.equal(toA.body.replayed, 1);
  await waitFor(() => sink.at('/all-a').length === 2);
  const all = await d.api('POST', `/v1/events/${ev.id}/replay`, {});
  assert.equal(all.status, 202);
  assert.equal(all.body.matched, 2);
  await waitFor(() => sink.at('/all-a').length === 3 && sink.at('/all-b').length === 2);
  assert.equal((await d.api('POST', `/v1/events/${ev.id}/replay`, { endpoint_id: other.id })).status, 404);
  assert.equal((await d.api('POST', `/v1/events/evt_nope/replay`, {})).status, 404);
  assert.equal((await d.api('POST', `/v1/events/${ev.id}/replay`, { endpoint: a.id })).body.error.code, 'unknown_field');
  assert.equal((await d.api('POST', `/v1/events/${ev.id}/replay`, { endpoint_id: 'a b' })).status, 400);
  assert.equal(b.id.length > 0, true);
});

test('range replay: dry run counts and writes nothing, over the limit is refused saying how many, progress counts', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/gone'), event_types: ['range.*'], account: 'rng' });
  const evs = [];
  for (let i = 0; i < 5; i++) evs.push(await d.publish({ type: 'range.x', account: 'rng', data: { i } }));
  for (const ev of evs) await d.waitDelivery(ev.id, 'dead'); // 400: dead at once
  const sent = sink.at('/gone').length;

  const dry = await d.api('POST', '/v1/replays', { endpoint_id: ep.id, status: 'dead', dry_run: true });
  assert.equal(dry.status, 200);
  assert.equal(dry.body.count, 5);
  assert.equal(dry.body.dry_run, true);
  const big = await d.api('POST', '/v1/replays', { endpoint_id: ep.id, limit: 3 });
  assert.equal(big.status, 409);
  assert.equal(big.body.error.code, 'range_too_large');
  assert.match(big.body.error.message, /5 deliveries match, more than the limit of 3/);
  await sleep(200);
  assert.equal(sink.at('/gone').length, sent, 'neither wrote nor sent anything');
  assert.equal((await d.api('GET', '/v1/replays?account=rng')).body.data.length, 0, 'nothing recorded');

  for (const [body, field] of [[{ status: 'delivered' }, 'status'], [{ limit: 10001 }, 'limit'], [{ limit: 0 }, 'limit'],
    [{ since: 'yesterday' }, 'since'], [{ dry_run: 'yes' }, 'dry_run'], [{ account: 'a\u0001' }, 'account'],
    [{ endpoint_id: '../x' }, 'endpoint_id']]) {
    const r = await d.api('POST', '/v1/replays', body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.ok(r.body.error.message.startsWith(field), r.body.error.message);
  }
  assert.equal((await d.api('POST', '/v1/replays', { colour: 1 })).body.error.code, 'unknown_field');
  assert.equal((await d.api('POST', '/v1/replays', '[1]')).body.error.code, 'malformed_json');

  const since = new Date(Date.now() - 60000).toISOString();
  const r = await d.api('POST', '/v1/replays', { endpoint_id: ep.id, account: 'rng', since, limit: 5 });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  assert.equal(r.body.kind, 'range');
  assert.equal(r.body.matched, 5);
  assert.equal(r.body.replayed, 5);
  assert.equal(r.body.skipped, 0);
  assert.deepEqual(r.body.filter, { endpoint_id: ep.id, account: 'rng', status: 'dead', since: r.body.filter.since, limit: 5 });
  const rec = await waitFor(async () => { const x = await replayOf(r.body.id); return x.progress.failed === 5 && x; });
  assert.deepEqual(rec.progress, { pending: 0, delivered: 0, failed: 5, superseded: 0 }, 'dead again: the endpoint still refuses');
  assert.equal(rec.done, true);
  assert.equal(sink.at('/gone').length, sent + 5);
  const list = (await d.api('GET', '/v1/replays?account=rng')).body;
  assert.equal(list.data.length, 1);
  assert.equal(list.data[0].id, r.body.id);
  const page = (await d.api('GET', '/v1/replays?limit=1')).body;
  assert.equal(page.data.length, 1);
  assert.ok(page.next_cursor);
  const page2 = (await d.api('GET', `/v1/replays?limit=1&cursor=${page.next_cursor}`)).body;
  assert.notEqual(page2.data[0].id, page.data[0].id);
  assert.equal((await d.api('GET', '/v1/replays?cursor=zzz')).status, 400);
  assert.equal((await d.api('GET', '/v1/replays?colour=red')).body.error.code, 'unknown_field');
  // A range that matches nothing is a replay of nothing, recorded and done.
  const none = await d.api('POST', '/v1/replays', { endpoint_id: ep.id, status: 'skipped' });
  assert.equal(none.status, 202);
  assert.equal(none.body.matched, 0);
  assert.equal(none.body.done, true);
  assert.equal((await d.api('GET', '/v1/replays/rpl_nope')).status, 404);
});

test('a range larger than one batch is replayed whole, and skipped ones are counted', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/bulk'), event_types: ['bulk.*'] });
  assert.equal((await d.api('POST', `/v1/endpoints/${ep.id}/disable`, {})).status, 200);
  const n = 450;
  await Promise.all(Array.from({ length: n }, (_, i) => d.publish({ type: 'bulk.x', data: { i } })));
  await waitFor(async () => (await d.api('POST', '/v1/replays', { endpoint_id: ep.id, status: 'skipped', dry_run: true })).body.count === n,
    { timeoutMs: 20000 });
  assert.equal((await d.api('POST', `/v1/endpoints/${ep.id}/enable`, {})).status, 200);
  const r = await d.api('POST', '/v1/replays', { endpoint_id: ep.id, status: 'skipped' });
  assert.equal(r.status, 202);
  assert.equal(r.body.matched, n);
  assert.equal(r.body.replayed + r.body.skipped, n);
  await waitFor(async () => (await replayOf(r.body.id)).progress.delivered === r.body.replayed, { timeoutMs: 20000 });
  await waitFor(() => new Set(sink.at('/bulk').map((x) => x.headers['webhook-id'])).size === r.body.replayed, { timeoutMs: 20000 });
  assert.equal(sink.at('/bulk').length, r.body.replayed, 'each sent once');
});
