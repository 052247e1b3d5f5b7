// The CLI people read (design §12 "CLI output"): every converted command
// against a daemon with data. Each table row's cells are checked against the
// API's JSON for the same data, --json is the API's body byte for byte,
// --watch with --count prints that many snapshots, values written by SQL with
// escape sequences never reach the terminal raw, and colours appear only on a
// terminal without NO_COLOR.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import { startDaemon, newSecret, waitFor, HOOKD, TOKEN, BACKEND } from '../lib/harness.mjs';
import { parseTable, parseRecord, REL, utc, txt, cut, timeCell } from '../lib/cli_output.mjs';

let d, sink;
const IN = newSecret();
const ESC = '\x1b';

before(async () => {
  // /fail answers 503 with escape sequences in its body (the response snippet); everything else 200.
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const fail = req.url.startsWith('/fail');
      res.writeHead(fail ? 503 : 200, { 'content-type': 'text/plain' });
      res.end(fail ? `${ESC}[31mboom\r\n` : 'ok');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  sink = { url: (p) => `http://127.0.0.1:${server.address().port}${p}`,
    stop: () => new Promise((r) => server.close(r)) };
  // One quick retry, then a long wait: the failing delivery stays "retrying" with a next attempt a minute away.
  d = await startDaemon({ HOOKD_DELIVERY_RETRY_SCHEDULE: '100ms,60s' });
});
after(async () => { assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); await sink.stop(); });

const env = (extra = {}) => ({ ...process.env, HOOKD_ADMIN_URL: `http://127.0.0.1:${d.adminPort}`,
  HOOKD_ADMIN_TOKEN: TOKEN, ...extra });
const cli = (args, extra) => execFileSync(HOOKD, args, { env: env(extra), encoding: 'utf8', timeout: 15000 });
/** The admin API's body exactly as sent. */
async function rawApi(path) {
  const res = await fetch(`http://127.0.0.1:${d.adminPort}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 200, path);
  return res.text();
}



let okEp, failEp, okEvent, failEvent;

test('setup: endpoints, a delivered and a retrying delivery, an inbox item', async () => {
  okEp = await d.createEndpoint({ url: sink.url('/ok'), account: 'acme', event_types: ['order.*'] });
  failEp = await d.createEndpoint({ url: sink.url('/fail'), account: 'beta', event_types: ['invoice.*', 'x.*'] });
  okEvent = await d.publish({ type: 'order.paid', account: 'acme', data: { order_id: 42 } });
  failEvent = await d.publish({ type: 'invoice.paid', account: 'beta', data: { n: 1 } });
  await d.waitDelivery(okEvent.id, 'delivered');
  await waitFor(async () => {
    const [dl] = await d.deliveriesOf(failEvent.id);
    return dl && dl.status === 'retrying' && dl.attempt_count === 2;
  }, { what: 'the failing delivery to wait for its long retry' });
  const r = await d.api('POST', '/v1/sources', { name: 'shop', verify: { scheme: 'none' }, event_id: 'header:X-Id',
    entity: { kind: 'order', id: '/order_id' }, handler: { forward: { url: sink.url('/app'), secret: IN } } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const res = await fetch(`http://127.0.0.1:${d.publicPort}/in/shop`, { method: 'POST',
    headers: { 'content-type': 'application/json', 'x-id': 'msg-1' }, body: '{"type":"order.paid","order_id":"o-7"}' });
  assert.equal(res.status, 200);
  await waitFor(async () => (await d.api('GET', '/v1/inbox')).body.data[0]?.status === 'processed',
    { what: 'the inbox item to be processed' });
});

test('hookd endpoints list|get: each row and line matches the API', async () => {
  for (const absolute of [false, true]) {
    const api = (await d.api('GET', '/v1/endpoints')).body;
    const t = parseTable(cli(['endpoints', 'list', ...(absolute ? ['--utc'] : [])]));
    assert.deepEqual(t.titles, ['ID', 'URL', 'ACCOUNT', 'TYPES', 'STATE', 'BREAKER', 'ORDERING', 'CREATED']);
    assert.equal(t.rows.length, api.data.length);
    api.data.forEach((ep, i) => {
      const row = t.rows[i];
      assert.equal(row.ID, ep.id);
      assert.equal(row.URL, ep.url);
      assert.equal(row.ACCOUNT, txt(ep.account));
      assert.equal(row.TYPES, ep.event_types.join(','));
      assert.equal(row.STATE, ep.enabled ? 'enabled' : 'disabled');
      assert.equal(row.BREAKER, ep.breaker.state);
      assert.equal(row.ORDERING, ep.ordering);
      timeCell(row.CREATED, ep.created_at, absolute);
    });
  }
  const one = (await d.api('GET', `/v1/endpoints/${failEp.id}`)).body;
  const rec = parseRecord(cli(['endpoints', 'get', failEp.id]));
  for (const k of ['id', 'url', 'account', 'ordering', 'signing', 'secret']) assert.equal(rec[k], txt(one[k]), k);
  assert.equal(rec.event_types, one.event_types.join(','));
  assert.equal(rec['breaker.state'], one.breaker.state);
  assert.equal(rec['breaker.consecutive_failures'], String(one.breaker.consecutive_failures));
  assert.match(rec.created_at, new RegExp(`^${utc(one.created_at)} \\((just now|\\d+ [smhd] ago)\\)$`));
  assert.equal(await rawApi('/v1/endpoints') + '\n', cli(['endpoints', 'list', '--json']));
});

test('hookd events list|get: rows match the API; get shows the deliveries as a sub-table', async () => {
  const api = (await d.api('GET', '/v1/events')).body;
  const t = parseTable(cli(['events', 'list', '--utc']));
  assert.deepEqual(t.titles, ['ID', 'TYPE', 'ACCOUNT', 'RESOURCE', 'CREATED', 'DISPATCHED', 'ERROR']);
  assert.equal(t.rows.length, api.data.length);
  api.data.forEach((ev, i) => {
    assert.equal(t.rows[i].ID, ev.id);
    assert.equal(t.rows[i].TYPE, ev.type);
    assert.equal(t.rows[i].ACCOUNT, txt(ev.account));
    assert.equal(t.rows[i].RESOURCE, '-');
    timeCell(t.rows[i].CREATED, ev.created_at, true);
    timeCell(t.rows[i].DISPATCHED, ev.dispatched_at, true);
    assert.equal(t.rows[i].ERROR, txt(ev.error));
  });
  const out = cli(['events', 'get', okEvent.id]);
  const rec = parseRecord(out);
  assert.equal(rec.id, okEvent.id);
  assert.equal(rec.data, '{"order_id":42}');
  const [, sub] = out.split('\ndeliveries (1):\n');
  const rows = parseTable(sub.replace(/^ {2}/gm, '')).rows;
  const full = (await d.api('GET', `/v1/events/${okEvent.id}`)).body;
  assert.equal(rows[0].ID, full.deliveries[0].id);
  assert.equal(rows[0].STATUS, 'delivered');
  assert.equal(await rawApi(`/v1/events/${okEvent.id}`) + '\n', cli(['events', 'get', okEvent.id, '--json']));
});

test('hookd deliveries list|get: rows match the API; attempts as a sub-table with the retry in plain words', async () => {
  const api = (await d.api('GET', '/v1/deliveries')).body;
  const t = parseTable(cli(['deliveries', 'list']));
  assert.deepEqual(t.titles, ['ID', 'EVENT', 'ENDPOINT', 'ACCOUNT', 'STATUS', 'ATTEMPTS', 'NEXT_ATTEMPT', 'CODE', 'ERROR']);
  assert.equal(t.rows.length, api.data.length);
  api.data.forEach((dl, i) => {
    const row = t.rows[i];
    assert.equal(row.ID, dl.id);
    assert.equal(row.EVENT, dl.event_id);
    assert.equal(row.ENDPOINT, dl.endpoint_id);
    assert.equal(row.ACCOUNT, txt(dl.account));
    assert.equal(row.STATUS, dl.status);
    assert.equal(row.ATTEMPTS, String(dl.attempt_count));
    timeCell(row.NEXT_ATTEMPT, dl.next_attempt_at, false);
    assert.equal(row.CODE, txt(dl.last_status_code));
    assert.equal(row.ERROR, cut(txt(dl.last_error)));
  });
  const [failing] = await d.deliveriesOf(failEvent.id);
  assert.match(t.rows.find((r) => r.ID === failing.id).NEXT_ATTEMPT, /^in \d+ s$/);

  const out = cli(['deliveries', 'get', failing.id]);
  const rec = parseRecord(out);
  assert.equal(rec.status, 'retrying');
  assert.equal(rec.attempt_count, '2');
  assert.match(rec.outcome, /^HTTP 503, retry in (\d+) s$/);
  const left = Number(/in (\d+) s/.exec(rec.outcome)[1]);
  assert.ok(left > 40 && left <= 60, `the retry is about a minute away: ${rec.outcome}`);
  const full = (await d.api('GET', `/v1/deliveries/${failing.id}`)).body;
  const [, sub] = out.split('\nattempts (2):\n');
  const rows = parseTable(sub.replace(/^ {2}/gm, '')).rows;
  assert.deepEqual(parseTable(sub.replace(/^ {2}/gm, '')).titles,
    ['N', 'STARTED', 'DURATION', 'CODE', 'RESULT', 'ERROR', 'RESPONSE']);
  full.attempts.forEach((a, i) => {
    assert.equal(rows[i].N, String(a.n));
    assert.match(rows[i].STARTED, REL);
    assert.match(rows[i].DURATION, /^\d+(\.\d)? m?s$/);
    assert.equal(rows[i].CODE, String(a.status_code));
    assert.equal(rows[i].RESULT, `HTTP ${a.status_code}`);
    assert.equal(rows[i].ERROR, txt(a.error));
    // The response snippet held ESC and CR: shown escaped, never raw.
    assert.equal(a.response, `${ESC}[31mboom\r\n`);
    assert.equal(rows[i].RESPONSE, '\\e[31mboom\\r\\n');
  });
  assert.ok(!out.includes(ESC) && !out.includes('\r'), 'no raw control bytes reach the terminal');
  const [delivered] = await d.deliveriesOf(okEvent.id);
  assert.match(parseRecord(cli(['deliveries', 'get', delivered.id])).outcome,
    /^delivered (just now|\d+ [smhd] ago) \(HTTP 200\)$/);
  // Byte for byte but for what counts down between the two reads: retry.in_ms and the summary's "retry in 59 s".
  const still = (body) => body.replace(/"in_ms":\d+/g, '"in_ms":N').replace(/retry in [^"()]+/g, 'retry in T');
  assert.equal(still(await rawApi(`/v1/deliveries/${failing.id}`) + '\n'),
    still(cli(['deliveries', 'get', failing.id, '--json'])));
  assert.equal(await rawApi('/v1/deliveries?status=retrying') + '\n',
    cli(['deliveries', 'list', '--status', 'retrying', '--json']));
});

test('a hostile error written by SQL: escape sequences and CR are shown escaped in tables and records', async () => {
  const [failing] = await d.deliveriesOf(failEvent.id);
  const chr = BACKEND === 'postgres' ? 'chr' : 'char';
  d.sql(`UPDATE hookd_deliveries SET last_error = ${chr}(27) || '[2J' || ${chr}(13) || 'evil' || ${chr}(155) || 'x'
         WHERE id = '${failing.id}'`);
  const table = cli(['deliveries', 'list']);
  const rec = cli(['deliveries', 'get', failing.id]);
  for (const out of [table, rec]) {
    assert.ok(!out.includes(ESC) && !out.includes('\r') && !out.includes('\u009b'), JSON.stringify(out));
  }
  assert.equal(parseRecord(rec).last_error, '\\e[2J\\revil\\u009Bx');
  assert.equal(parseTable(table).rows.find((r) => r.ID === failing.id).ERROR, '\\e[2J\\revil\\u009Bx');
});

test('hookd inbox list|get and hookd sources list|get|rejections: rows match the API', async () => {
  const api = (await d.api('GET', '/v1/inbox')).body;
  const t = parseTable(cli(['inbox', 'list', '--utc']));
  assert.deepEqual(t.titles, ['ID', 'SOURCE', 'EVENT_ID', 'STATUS', 'RESULT', 'ATTEMPTS', 'RECEIVED', 'ERROR']);
  api.data.forEach((it, i) => {
    for (const [title, key] of [['ID', 'id'], ['SOURCE', 'source'], ['EVENT_ID', 'event_id'], ['STATUS', 'status'],
      ['RESULT', 'result'], ['ATTEMPTS', 'attempts'], ['ERROR', 'error']]) {
      assert.equal(t.rows[i][title], cut(txt(it[key])), title);
    }
    timeCell(t.rows[i].RECEIVED, it.received_at, true);
  });
  const item = (await d.api('GET', `/v1/inbox/${api.data[0].id}`)).body;
  const rec = parseRecord(cli(['inbox', 'get', item.id]));
  assert.equal(rec.status, 'processed');
  assert.equal(rec['entity.kind'], 'order');
  assert.equal(rec['entity.id'], 'o-7');
  assert.equal(rec.payload, JSON.stringify(item.payload));
  assert.equal(await rawApi(`/v1/inbox/${item.id}`) + '\n', cli(['inbox', 'get', item.id, '--json']));

  const sources = (await d.api('GET', '/v1/sources')).body;
  const s = parseTable(cli(['sources', 'list']));
  assert.deepEqual(s.titles, ['NAME', 'SCHEME', 'EVENT_ID', 'ENTITY', 'FORWARD_TO', 'CREATED', 'UPDATED']);
  sources.data.forEach((src, i) => {
    assert.equal(s.rows[i].NAME, src.name);
    assert.equal(s.rows[i].SCHEME, src.verify.scheme);
    assert.equal(s.rows[i].EVENT_ID, txt(src.event_id));
    assert.equal(s.rows[i].ENTITY, txt(src.entity?.kind));
    assert.equal(s.rows[i].FORWARD_TO, txt(src.handler?.forward?.url));
  });
  assert.equal(parseRecord(cli(['sources', 'get', 'shop']))['verify.scheme'], 'none');
  assert.equal(await rawApi('/v1/sources') + '\n', cli(['sources', 'list', '--json']));
  const rej = cli(['sources', 'rejections', 'shop']);
  assert.match(rej, /^AT\s+REASON\s+PEER\s+SIZE\s+SHA256$/m);
});

test('hookd apply prints a table of items and a summary table', () => {
  const file = join(tmpdir(), `hookd-t6200-${process.pid}.json`);
  writeFileSync(file, JSON.stringify({ endpoints: [{ url: sink.url('/applied'), account: 'acct-apply' }] }));
  const first = cli(['apply', file]);
  const items = parseTable(first.split('\n\n')[0]).rows;
  assert.equal(items.length, 1);
  assert.equal(items[0].KIND, 'endpoint');
  assert.equal(items[0].NAME, sink.url('/applied'));
  assert.equal(items[0].RESULT, 'created');
  assert.match(items[0].ID, /^ep_/);
  assert.match(first, /^endpoints\s+1\s+0\s+0\s+0$/m);
  assert.match(cli(['apply', file]), /^endpoints\s+0\s+0\s+1\s+0$/m);
});

test('--watch with --count prints that many snapshots; with --json one body per line', async () => {
  const out = cli(['deliveries', 'list', '--watch', '100ms', '--count', '3']);
  const marks = out.match(/^--- snapshot \d+ at \S+ ---$/gm);
  assert.deepEqual(marks.map((m) => /snapshot (\d+)/.exec(m)[1]), ['1', '2', '3']);
  const tables = out.split(/^--- snapshot \d+ at \S+ ---\n/m).filter(Boolean);
  assert.equal(tables.length, 3);
  for (const t of tables) assert.match(t, /^ID\s+EVENT\s+ENDPOINT/);
  const [failing] = await d.deliveriesOf(failEvent.id);
  const rec = cli(['deliveries', 'get', failing.id, '--watch=100ms', '--count', '2']);
  assert.equal(rec.match(/^outcome /gm).length, 2);
  const lines = cli(['endpoints', 'list', '--json', '--watch', '100ms', '--count', '2']).trim().split('\n');
  assert.equal(lines.length, 2);
  for (const l of lines) assert.deepEqual(JSON.parse(l), (await d.api('GET', '/v1/endpoints')).body);
});

test('a watch stops on SIGINT', async () => {
  const { spawn } = await import('node:child_process');
  const child = spawn(HOOKD, ['endpoints', 'list', '--watch', '100ms'], { env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  child.stdout.on('data', (b) => { text += b; });
  await waitFor(() => (text.match(/--- snapshot/g) || []).length >= 2, { what: 'two snapshots' });
  child.kill('SIGINT');
  const code = await new Promise((r) => child.on('exit', (c) => r(c)));
  assert.equal(code, 0);
});

test('usage: --watch only on reads, a bounded interval, --count needs --watch', () => {
  const run = (args) => spawnSync(HOOKD, args, { env: env(), encoding: 'utf8', timeout: 10000 });
  let r = run(['endpoints', 'enable', okEp.id, '--watch']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--watch does not apply here/);
  r = run(['endpoints', 'list', '--watch', '10ms']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--watch takes an interval from 100ms to 1h/);
  r = run(['endpoints', 'list', '--count', '2']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--count applies to --watch/);
  r = run(['endpoints', 'list', '--watch', '100ms', '--count', '0']);
  assert.equal(r.status, 2);
  // An API error is printed escaped on stderr and exits 1.
  r = run(['deliveries', 'get', `dlv_${ESC}[2J`]);
  assert.equal(r.status, 1);
  assert.ok(!r.stderr.includes(ESC), r.stderr);
});

test('colours only on a terminal and without NO_COLOR', (t) => {
  const plain = cli(['deliveries', 'list']);
  assert.ok(!plain.includes(ESC), 'no colours into a pipe');
  const probe = spawnSync('script', ['-qec', 'true', '/dev/null'], { encoding: 'utf8' });
  if (probe.status !== 0) return t.skip('script(1) is not available');
  const onTty = (extra) => spawnSync('script', ['-qec', `${HOOKD} deliveries list`, '/dev/null'],
    { env: env(extra), encoding: 'utf8', timeout: 15000 }).stdout;
  const coloured = onTty({ NO_COLOR: '' });
  assert.match(coloured, /\x1b\[32mdelivered\x1b\[0m/);
  assert.match(coloured, /\x1b\[33mretrying\x1b\[0m/);
  assert.ok(!onTty({ NO_COLOR: '1' }).includes(`${ESC}[3`), 'NO_COLOR=1: no colours');
});
