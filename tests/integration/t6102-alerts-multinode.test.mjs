// Alerts on three nodes of one PostgreSQL database: every node evaluates the
// rules every 150 ms, yet each alert opens once and resolves once, and its
// operational events reach the subscribed endpoint once each.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { startNodes, startRecordingSink, startCountingSink, newSecret, waitFor, BACKEND } from '../lib/harness.mjs';
import { ALERT_ENV, waitAlert, opsEvents, sendInbound } from '../lib/alerts.mjs';

const skip = BACKEND !== 'postgres' && 'several nodes need PostgreSQL';
let cluster, ops, sink;
const IN = newSecret();

before(async () => {
  if (skip) return;
  ops = await startRecordingSink();
  sink = await startCountingSink({ status: (n, req) => (req.url === '/bad' ? 500 : 200) });
  cluster = await startNodes(3, ALERT_ENV);
});
after(async () => {
  if (skip) return;
  assert.deepEqual(await cluster.stopAll(), [0, 0, 0], 'every node exits cleanly');
  await cluster.cleanup();
  await ops.stop();
  await sink.stop();
});

test('each alert opens and resolves once across three evaluating nodes', { skip }, async () => {
  const [a, b, c] = cluster.nodes;
  await a.createEndpoint({ url: ops.url('/ops'), event_types: ['hookd.*'] });
  const bad = await b.createEndpoint({ url: sink.url('/bad'), event_types: ['invoice.*'] });
  const off = await c.createEndpoint({ url: sink.url('/off'), event_types: ['x.*'] });
  assert.equal((await c.api('POST', `/v1/endpoints/${off.id}/disable`, {})).status, 200);
  assert.equal((await a.api('POST', '/v1/sources', { name: 'pay', verify: { scheme: 'standard-webhooks',
    secrets: [IN] } })).status, 201);
  await waitFor(async () => {
    for (const n of cluster.nodes) if (await sendInbound(n, 'pay', IN, `msg_${Math.random()}`, { bad: true }) !== 401) return false;
    return true;
  }, { what: 'every node knows the source' });
  for (const account of ['acme', 'globex']) await a.publish({ type: 'invoice.created', account, data: {} });

  const expected = [['error_rate', bad.id], ['dead_letters', bad.id], ['no_success', '*'],
    ['signature_rejections', 'pay'], ['endpoint_disabled', off.id]];
  const opened = [];
  for (const [rule, subject] of expected) opened.push(await waitAlert(a, rule, subject, 'open'));
  assert.equal((await b.api('POST', `/v1/endpoints/${off.id}/enable`)).status, 200);
  for (const [rule, subject] of expected) await waitAlert(c, rule, subject, 'resolved');
  // a few more passes of every node: nothing opens again, nothing is published twice
  await new Promise((r) => setTimeout(r, 1000));
  const rows = cluster.sql('SELECT rule, subject, count(*) FROM hookd_alerts GROUP BY rule, subject ORDER BY rule')
    .split('\n').map((l) => l.split('|'));
  for (const [rule, subject] of expected) {
    const row = rows.find((r) => r[0] === rule && r[1] === subject);
    assert.ok(row, `${rule}/${subject} recorded`);
    assert.equal(row[2], '1', `${rule}/${subject} opened once`);
  }
  await waitFor(() => opsEvents(ops).length >= 2 * expected.length, { what: 'every operational event delivered' });
  const events = opsEvents(ops);
  for (const o of opened) {
    const mine = events.filter((e) => e.data.id === o.id);
    assert.equal(mine.length, 2, `${o.rule}: one opening and one resolution (${mine.map((e) => e.type)})`);
  }
  assert.equal(new Set(events.map((e) => e.webhookId)).size, events.length, 'no event arrived twice');
  // the nodes' counters add up to the alerts: each change was made by exactly one node
  let openedTotal = 0, resolvedTotal = 0;
  for (const n of cluster.nodes) {
    const text = (await n.api('GET', '/metrics')).body;
    openedTotal += Number(/^hookd_alerts_opened_total (\d+)$/m.exec(text)[1]);
    resolvedTotal += Number(/^hookd_alerts_resolved_total (\d+)$/m.exec(text)[1]);
  }
  const all = Number(cluster.sql('SELECT count(*) FROM hookd_alerts'));
  assert.equal(openedTotal, all);
  assert.equal(resolvedTotal, Number(cluster.sql('SELECT count(*) FROM hookd_alerts WHERE resolved_at IS NOT NULL')));
});
