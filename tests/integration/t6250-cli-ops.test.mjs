// The CLI people read (design §12 "CLI output") for the operations commands:
// hookd replay, tokens, alerts, health, summary, sync, trace and audit. Each
// table row and record line is checked against the API's JSON for the same
// data, --json is the API's body byte for byte, --watch --count N prints N
// snapshots, text written by SQL with escape sequences never reaches the
// terminal raw, and the usage rules of every other command apply.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import { startDaemon, waitFor, HOOKD, TOKEN } from '../lib/harness.mjs';
import { parseTable, parseRecord, utc, txt, cut, timeCell } from '../lib/cli_output.mjs';

let d, sink;
const ESC = '\x1b';

before(async () => {
  // /fail answers 401, everything else 200.
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(req.url.startsWith('/fail') ? 401 : 200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  sink = { url: (p) => `http://127.0.0.1:${server.address().port}${p}`,
    stop: () => new Promise((r) => server.close(r)) };
  d = await startDaemon({ HOOKD_INBOX_WORKERS: '2' });
});
after(async () => { assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); await sink.stop(); });

const env = () => ({ ...process.env, HOOKD_ADMIN_URL: `http://127.0.0.1:${d.adminPort}`, HOOKD_ADMIN_TOKEN: TOKEN });
const cli = (args) => execFileSync(HOOKD, args, { env: env(), encoding: 'utf8', timeout: 15000 });
const run = (args) => spawnSync(HOOKD, args, { env: env(), encoding: 'utf8', timeout: 15000 });
/** The admin API's body exactly as sent. */
async function rawApi(path, method = 'GET', body) {
  const res = await fetch(`http://127.0.0.1:${d.adminPort}${path}`, { method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined });
  assert.ok(res.status >= 200 && res.status < 300, `${path}: ${res.status}`);
  return res.text();
}

/** A record's sub-table "\nTITLE (N):\n  table" as rows. */
function subTable(text, title, n) {
  const [, rest] = text.split(`\n${title} (${n}):\n`);
  assert.ok(rest !== undefined, `sub-table ${title} (${n}) in ${text}`);
  return parseTable(rest.split('\n\n')[0].replace(/^ {2}/gm, ''));
}

/**
 * A record's time line: absolute and relative. slackS: the line may be that
 * many seconds after iso (a time the server computes from its clock, such as
 * a window's start, moves on between the API call and the CLI's).
 */
function timeLine(line, iso, slackS = 0) {
  if (iso === null) return assert.equal(line, '-');
  const m = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)Z \((just now|\d+ [smhd] ago|in \d+ [smhd])\)$/.exec(line);
  assert.ok(m, `a time line: ${line}`);
  if (slackS === 0) return assert.equal(`${m[1]} ${m[2]}Z`, utc(iso));
  const d = Date.parse(`${m[1]}T${m[2]}Z`) - Date.parse(iso.slice(0, 19) + 'Z');
  assert.ok(d >= 0 && d <= slackS * 1000, `${line} is ${d} ms after ${iso}`);
}
/** Every scalar of obj (flattened "a.b") against the record's lines. */
function recordMatches(rec, obj, prefix = '') {
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix + k;
    if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length) {
      recordMatches(rec, v, `${key}.`);
    } else if (Array.isArray(v)) {
      continue;
    } else if (typeof v === 'string' && (k.endsWith('_at') || ['at', 'since', 'until'].includes(k))) {
      timeLine(rec[key], v);
    } else {
      assert.equal(rec[key], txt(v), key);
    }
  }
}
/** Drops what moves between two reads (ages, windows measured from now). */
const still = (x) => JSON.parse(JSON.stringify(x, (k, v) => (k === 'age_ms' || k === 'since' || k === 'until' ? undefined : v)));
/** --watch 100ms --count n: n snapshots, each opening with its line. */
function snapshots(args, n) {
  const out = cli([...args, '--watch', '100ms', '--count', String(n)]);
  const marks = out.match(/^--- snapshot \d+ at \S+ ---$/gm) || [];
  assert.deepEqual(marks.map((m) => /snapshot (\d+)/.exec(m)[1]), Array.from({ length: n }, (_, i) => String(i + 1)));
  return out.split(/^--- snapshot \d+ at \S+ ---\n/m).filter(Boolean);
}

let okEp, failEp, okEvent, deadEvents = [];

test('setup: a delivered and dead deliveries, a machine with an entity, an alert written by SQL', async () => {
  okEp = await d.createEndpoint({ url: sink.url('/ok'), account: 'acme', event_types: ['order.*'] });
  failEp = await d.createEndpoint({ url: sink.url('/fail'), account: 'acme', event_types: ['invoice.*'],
    retry_schedule: '50ms' });
  okEvent = await d.publish({ type: 'order.paid', account: 'acme', data: { n: 1 },
    resource: { type: 'order', id: 'o-1', version: 1 } });
  for (let i = 0; i < 2; i++) deadEvents.push(await d.publish({ type: 'invoice.paid', account: 'acme', data: { i } }));
  await d.waitDelivery(okEvent.id, 'delivered');
  for (const ev of deadEvents) await d.waitDelivery(ev.id, 'dead');
  let r = await d.api('POST', '/v1/machines', { name: 'order', versioning: 'contiguous',
    transitions: [{ on: 'order.created', from: [null], to: 'created' }, { on: 'order.paid', from: ['created'], to: 'paid' }] });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  r = await d.api('POST', '/v1/sources', { name: 'shop', verify: { scheme: 'none' }, event_id: '/id', event_type: '/type',
    entity: { kind: 'order', id: '/data/order', version: '/data/version' }, handler: { machine: 'order' } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  for (const [id, type, version] of [['in-1', 'order.created', 1], ['in-2', 'order.paid', 2]]) {
    const res = await fetch(`http://127.0.0.1:${d.publicPort}/in/shop`, { method: 'POST',
      headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id, type, data: { order: 'o-9', version } }) });
    assert.equal(res.status, 200);
  }
  await waitFor(async () => (await d.api('GET', '/v1/entities/order/o-9')).body?.version === 2, { what: 'the entity applied' });
  const now = Date.now();
  d.sql(`INSERT INTO hookd_alerts (id, rule, subject, message, details, opened_at, resolved_at) VALUES
    ('alr_t6250a', 'dead_letters', '${failEp.id}', 'dead letters on ' || '${ESC}[31m' || 'evil', '{"count":2}', ${now - 5000}, NULL),
    ('alr_t6250b', 'error_rate', '${okEp.id}', 'fine again', '{}', ${now - 90000}, ${now - 30000})`);
});

test('hookd replay range|delivery|event|list|get: sentences, rows and lines match the API', async () => {
  const dry = cli(['replay', 'range', '--endpoint', failEp.id, '--dry-run']);
  assert.equal(dry, '2 deliveries would be replayed (dry run; limit 1000)\n');
  assert.equal(cli(['replay', 'range', '--endpoint', failEp.id, '--dry-run', '--json']),
    await rawApi('/v1/replays', 'POST', { endpoint_id: failEp.id, dry_run: true }) + '\n');
  const [dead] = await d.deliveriesOf(deadEvents[0].id);
  const one = cli(['replay', 'delivery', dead.id]);
  const m = /^replayed (dlv_\S+): (\S+) \(replay (rpl_\S+)\)\n$/.exec(one);
  assert.ok(m, one);
  assert.equal(m[1], dead.id);
  assert.equal(m[2], 'pending', 'the answer shows the delivery as the replay left it');
  const rec = cli(['replay', 'get', m[3]]);
  const api = (await d.api('GET', `/v1/replays/${m[3]}`)).body;
  const lines = parseRecord(rec);
  assert.equal(lines.filter, JSON.stringify(api.filter));
  delete api.filter;
  for (const k of ['id', 'kind', 'actor', 'matched', 'replayed', 'skipped']) assert.equal(lines[k], txt(api[k]), k);
  timeLine(lines.created_at, api.created_at);
  assert.match(lines['progress.pending'], /^\d+$/);
  const ev = cli(['replay', 'event', deadEvents[1].id, '--endpoint', failEp.id]);
  assert.equal(parseRecord(ev).kind, 'event');
  await waitFor(async () => (await d.api('GET', '/v1/replays')).body.data.every((r) => r.done), { what: 'replays done' });
  for (const absolute of [false, true]) {
    const list = (await d.api('GET', '/v1/replays')).body;
    const t = parseTable(cli(['replay', 'list', ...(absolute ? ['--utc'] : [])]));
    assert.deepEqual(t.titles, ['ID', 'KIND', 'ACTOR', 'ACCOUNT', 'CREATED', 'MATCHED', 'REPLAYED', 'SKIPPED', 'PROGRESS', 'DONE']);
    assert.equal(t.rows.length, list.data.length);
    list.data.forEach((r, i) => {
      for (const [title, key] of [['ID', 'id'], ['KIND', 'kind'], ['ACTOR', 'actor'], ['ACCOUNT', 'account'],
        ['MATCHED', 'matched'], ['REPLAYED', 'replayed'], ['SKIPPED', 'skipped'], ['DONE', 'done']]) {
        assert.equal(t.rows[i][title], txt(r[key]), title);
      }
      timeCell(t.rows[i].CREATED, r.created_at, absolute);
      assert.match(t.rows[i].PROGRESS, /^pending \d+, delivered \d+, failed \d+, superseded \d+$/);
    });
  }
  assert.equal(cli(['replay', 'list', '--json']), await rawApi('/v1/replays') + '\n');
  for (const s of snapshots(['replay', 'list'], 2)) assert.match(s, /^ID\s+KIND\s+ACTOR/);
  const r = run(['replay', 'range', '--watch']);
  assert.equal(r.status, 2, 'a replay is not a read: no --watch');
  assert.match(r.stderr, /--watch does not apply here/);
});

test('hookd tokens create|list|revoke: the token once, rows match the API, revoke in a sentence', async () => {
  const made = run(['tokens', 'create', '--account', 'acme', '--ttl', '1h', '--description', 'ops team']);
  assert.equal(made.status, 0, made.stderr);
  const rec = parseRecord(made.stdout);
  assert.match(rec.token, /^hkat_[A-Za-z0-9_-]{43}$/);
  assert.equal(rec.description, 'ops team');
  assert.equal(rec.status, 'active');
  assert.equal(rec.scope, 'read');
  timeLine(rec.expires_at, (await d.api('GET', `/v1/tokens?account=acme`)).body.data.find((x) => x.id === rec.id).expires_at);
  // The API refuses control characters in a description; a row written by SQL still shows escaped.
  d.sql(`UPDATE hookd_tokens SET description = 'ops ' || '${ESC}[2J' || ' team' WHERE id = '${rec.id}'`);
  assert.match(made.stderr, /shown this once/);
  assert.ok(!made.stdout.includes(ESC));
  const api = (await d.api('GET', '/v1/tokens')).body;
  const t = parseTable(cli(['tokens', 'list', '--utc']));
  assert.deepEqual(t.titles, ['ID', 'ACCOUNT', 'SCOPE', 'STATUS', 'CREATED', 'EXPIRES', 'DESCRIPTION']);
  assert.equal(t.rows.length, api.data.length);
  api.data.forEach((tok, i) => {
    for (const [title, key] of [['ID', 'id'], ['ACCOUNT', 'account'], ['SCOPE', 'scope'], ['STATUS', 'status']]) {
      assert.equal(t.rows[i][title], txt(tok[key]), title);
    }
    timeCell(t.rows[i].CREATED, tok.created_at, true);
    timeCell(t.rows[i].EXPIRES, tok.expires_at, true);
  });
  assert.equal(t.rows.find((row) => row.ID === rec.id).DESCRIPTION, 'ops \\e[2J team');
  assert.ok(!cli(['tokens', 'list']).includes(rec.token), 'lists never show the token');
  assert.equal(cli(['tokens', 'list', '--json']), await rawApi('/v1/tokens') + '\n');
  assert.equal(cli(['tokens', 'revoke', rec.id]), `revoked ${rec.id}: revoked\n`);
  assert.equal(JSON.parse(cli(['tokens', 'revoke', rec.id, '--json'])).status, 'revoked');
  assert.equal(snapshots(['tokens', 'list'], 3).length, 3);
});

test('hookd alerts [list]|get: rows match the API; a hostile message is escaped', async () => {
  const api = (await d.api('GET', '/v1/alerts')).body;
  const out = cli(['alerts']);
  assert.ok(!out.includes(ESC), JSON.stringify(out));
  for (const absolute of [false, true]) {
    const t = parseTable(cli(['alerts', 'list', ...(absolute ? ['--utc'] : [])]));
    assert.deepEqual(t.titles, ['ID', 'RULE', 'SUBJECT', 'STATUS', 'OPENED', 'RESOLVED', 'MESSAGE']);
    assert.equal(t.rows.length, api.data.length);
    api.data.forEach((al, i) => {
      for (const [title, key] of [['ID', 'id'], ['RULE', 'rule'], ['SUBJECT', 'subject'], ['STATUS', 'status']]) {
        assert.equal(t.rows[i][title], txt(al[key]), title);
      }
      timeCell(t.rows[i].OPENED, al.opened_at, absolute);
      timeCell(t.rows[i].RESOLVED, al.resolved_at, absolute);
      assert.equal(t.rows[i].MESSAGE, cut(al.message.replaceAll(ESC, '\\e')));
    });
  }
  const rows = parseTable(out).rows;
  assert.equal(rows.find((r) => r.ID === 'alr_t6250a').MESSAGE, 'dead letters on \\e[31mevil');
  assert.match(rows.find((r) => r.ID === 'alr_t6250b').RESOLVED, /^\d+ s ago$/);
  const rec = parseRecord(cli(['alerts', 'get', 'alr_t6250a']));
  const one = (await d.api('GET', '/v1/alerts/alr_t6250a')).body;
  assert.equal(rec.details, JSON.stringify(one.details));
  assert.equal(rec.message, 'dead letters on \\e[31mevil');
  timeLine(rec.opened_at, one.opened_at);
  assert.equal(rec.resolved_at, '-');
  assert.equal(cli(['alerts', '--json']), await rawApi('/v1/alerts') + '\n');
  assert.equal(cli(['alerts', 'get', 'alr_t6250b', '--json']), await rawApi('/v1/alerts/alr_t6250b') + '\n');
  assert.equal(snapshots(['alerts'], 2).length, 2);
});

test('hookd health ENDPOINT: every figure of the API in a line; --watch refreshes it', async () => {
  const api = (await d.api('GET', `/v1/endpoints/${failEp.id}/health`)).body;
  const out = cli(['health', failEp.id]);
  const rec = parseRecord(out);
  recordMatches(rec, still(api));
  assert.equal(rec['deliveries.dead'], String(api.deliveries.dead));
  assert.equal(rec['last_error.status_code'], '401');
  timeLine(rec['last_error.at'], api.last_error.at);
  assert.match(rec['windows.1h.attempts'], /^[1-9]\d*$/);
  assert.deepEqual(still(JSON.parse(cli(['health', failEp.id, '--json']))), still(api));
  const snaps = snapshots(['health', failEp.id], 2);
  for (const s of snaps) assert.equal(parseRecord(s).endpoint_id, failEp.id);
  const lines = cli(['health', okEp.id, '--json', '--watch', '100ms', '--count', '2']).trim().split('\n');
  assert.equal(lines.length, 2);
  for (const l of lines) assert.equal(JSON.parse(l).endpoint_id, okEp.id);
});

test('hookd summary: the figures in lines, each list a sub-table whose rows match the API', async () => {
  const api = (await d.api('GET', '/v1/summary')).body;
  const out = cli(['summary']);
  const rec = parseRecord(out);
  for (const k of ['window', 'attempts', 'failures']) assert.equal(rec[k], txt(api[k]), k);
  timeLine(rec.since, api.since, 10);
  timeLine(rec.until, api.until, 10);
  const byEp = subTable(out, 'failures_by_endpoint', api.failures_by_endpoint.length);
  assert.deepEqual(byEp.titles, ['ENDPOINT', 'URL', 'ATTEMPTS', 'FAILURES', 'CLUSTERS']);
  api.failures_by_endpoint.forEach((row, i) => {
    assert.equal(byEp.rows[i].ENDPOINT, row.endpoint_id);
    assert.equal(byEp.rows[i].URL, row.url);
    assert.equal(byEp.rows[i].FAILURES, String(row.failures));
    assert.equal(byEp.rows[i].CLUSTERS, row.clusters.map((c) => `${c.count} x ${c.status_code ?? c.error_class}`).join(', '));
  });
  assert.equal(byEp.rows.find((r) => r.ENDPOINT === failEp.id).CLUSTERS, `${api.failures_by_endpoint[0].failures} x 401`);
  const byAcct = subTable(out, 'failures_by_account', api.failures_by_account.length);
  assert.deepEqual(byAcct.rows.map((r) => r.ACCOUNT), api.failures_by_account.map((r) => txt(r.account)));
  const silent = subTable(out, 'no_success', api.no_success.length);
  assert.deepEqual(silent.titles, ['ENDPOINT', 'URL', 'ATTEMPTS', 'LAST_SUCCESS', 'LAST_ERROR']);
  assert.equal(silent.rows[0].ENDPOINT, failEp.id);
  assert.equal(silent.rows[0].LAST_SUCCESS, '-');
  assert.deepEqual(still(JSON.parse(cli(['summary', '--window', '2h', '--json']))),
    still((await d.api('GET', '/v1/summary?window=2h')).body));
  assert.equal(snapshots(['summary', '--window', '5m'], 2).length, 2);
  assert.equal(run(['summary', '--window', 'soon']).status, 1, 'the API said 400');
});

test('hookd sync ACCOUNT and --resource TYPE ID: lines and the endpoints sub-table match the API', async () => {
  const api = (await d.api('GET', '/v1/accounts/acme/sync')).body;
  const out = cli(['sync', 'acme', '--utc']);
  const rec = parseRecord(out);
  for (const k of ['account', 'status', 'delayed', 'sync_warn_after']) assert.equal(rec[k], txt(api[k]), k);
  const t = subTable(out, 'endpoints', api.endpoints.length);
  assert.deepEqual(t.titles, ['ENDPOINT', 'URL', 'STATUS', 'DELAYED', 'PENDING', 'RETRYING', 'FAILED', 'LAST_ATTEMPT',
    'NEXT_ATTEMPT', 'LAST_ERROR']);
  api.endpoints.forEach((e, i) => {
    for (const [title, key] of [['ENDPOINT', 'endpoint_id'], ['URL', 'url'], ['STATUS', 'status'], ['DELAYED', 'delayed'],
      ['PENDING', 'pending'], ['RETRYING', 'retrying'], ['FAILED', 'failed']]) {
      assert.equal(t.rows[i][title], txt(e[key]), title);
    }
    timeCell(t.rows[i].LAST_ATTEMPT, e.last_attempt_at, true);
    timeCell(t.rows[i].NEXT_ATTEMPT, e.next_attempt_at, true);
  });
  assert.equal(cli(['sync', 'acme', '--json']), await rawApi('/v1/accounts/acme/sync') + '\n');
  const res = (await d.api('GET', '/v1/resources/order/o-1/sync?account=acme')).body;
  const rout = cli(['sync', '--resource', 'order', 'o-1', '--account', 'acme']);
  const rrec = parseRecord(rout);
  assert.equal(rrec['resource.type'], 'order');
  assert.equal(rrec['resource.id'], 'o-1');
  const rt = subTable(rout, 'endpoints', res.endpoints.length);
  assert.equal(rt.rows[0].ENDPOINT, okEp.id);
  assert.equal(rt.rows[0].STATUS, 'synced');
  assert.equal(rt.rows[0].EVENT, okEvent.id);
  assert.equal(rt.rows[0].VERSION, '1');
  assert.equal(cli(['sync', '--resource', 'order', 'o-1', '--json']), await rawApi('/v1/resources/order/o-1/sync') + '\n');
  assert.equal(snapshots(['sync', 'acme'], 2).length, 2);
  let r = run(['sync']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /hookd sync: an argument is missing/);
  r = run(['sync', 'acme', '--account', 'x']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--account goes with --resource/);
});

test('hookd trace KIND ID and hookd audit: records with the events as a sub-table', async () => {
  const api = (await d.api('GET', '/v1/entities/order/o-9/trace')).body;
  const out = cli(['trace', 'order', 'o-9']);
  const rec = parseRecord(out);
  assert.equal(rec.state, 'paid');
  assert.equal(rec.version, '2');
  const t = subTable(out, 'events', api.events.length);
  assert.deepEqual(t.titles, ['EVENT_ID', 'TYPE', 'VERSION', 'FROM', 'TO', 'RESULT', 'RECEIVED', 'PROCESSED', 'WORKER', 'DUPS']);
  api.events.forEach((e, i) => {
    for (const [title, key] of [['EVENT_ID', 'event_id'], ['TYPE', 'type'], ['VERSION', 'version'], ['FROM', 'from'],
      ['TO', 'to'], ['RESULT', 'result'], ['WORKER', 'worker'], ['DUPS', 'dup_count']]) {
      assert.equal(t.rows[i][title], cut(txt(e[key])), title);
    }
    timeCell(t.rows[i].RECEIVED, e.received_at, false);
  });
  assert.equal(cli(['trace', 'order', 'o-9', '--order', 'version', '--json']),
    await rawApi('/v1/entities/order/o-9/trace?order=version') + '\n');
  assert.equal(snapshots(['trace', 'order', 'o-9'], 2).length, 2);
  const audit = (await d.api('GET', '/v1/audit?source=shop')).body;
  const arec = parseRecord(cli(['audit', '--source', 'shop']));
  recordMatches(arec, audit);
  assert.equal(arec.ok, 'true');
  assert.equal(cli(['audit', '--source', 'shop', '--json']), await rawApi('/v1/audit?source=shop') + '\n');
  let r = run(['trace', 'order']);
  assert.equal(r.status, 2);
  r = run(['trace', 'order', 'o-9', '--source', 'shop']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /hookd trace: --source does not apply here/);
  r = run(['health']);
  assert.equal(r.status, 2);
  assert.equal(run(['health', 'ep_missing']).status, 1, 'the API said 404');
  r = run(['health', '-h']);
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^usage: hookd health ENDPOINT_ID/);
});
