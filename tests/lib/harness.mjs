// Test harness for scenario tests: starts `hookd serve` on a fresh store (SQLite,
// or with HOOKD_TEST_BACKEND=postgres a database of its own in the cluster of
// HOOKD_TEST_PG), several nodes on one database, `hookd listen` sinks and
// in-process counting sinks, talks to the admin API, runs SQL with the sqlite3
// CLI or psql. Every wait is bounded; every process is killed when the test ends.
import { spawn, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, readFileSync, chmodSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir, hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

export const ROOT = resolve(new URL('../..', import.meta.url).pathname);
export const HOOKD = process.env.HOOKD_BIN || join(ROOT, 'build/hookd');
export const TOOLS = join(process.env.HOOKD_TEST_LIB || join(ROOT, 'build-asan'), 'tests/tools');
/** At least 32 characters: hookd refuses a shorter admin token. */
export const TOKEN = 'test-admin-token-0123456789abcdef';

// One unlabelled sample of a daemon's /metrics (a counter or gauge), as a number.
export async function metricValue(d, name) {
  const res = await fetch(`http://127.0.0.1:${d.adminPort}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  if (res.status !== 200) throw new Error(`GET /metrics: ${res.status}`);
  const line = (await res.text()).split('\n').find((l) => l.startsWith(`${name} `));
  if (!line) throw new Error(`${name} is not exported`);
  return Number(line.split(' ')[1]);
}
/** 'sqlite' (default) or 'postgres' (HOOKD_TEST_BACKEND=postgres; needs HOOKD_TEST_PG). */
export const BACKEND = process.env.HOOKD_TEST_BACKEND === 'postgres' ? 'postgres' : 'sqlite';
/** The test cluster's URL (scripts/pg.sh start prints it), or ''. */
export const PG_CLUSTER = process.env.HOOKD_TEST_PG || '';

const children = new Set();
const clusters = new Set(); // clusters a test started itself: stopped at exit whatever happens
process.on('exit', () => {
  for (const c of children) { try { c.kill('SIGKILL'); } catch {} }
  for (const dir of clusters) {
    try { execFileSync('bash', [join(ROOT, 'scripts/pg.sh'), 'stop', dir], { stdio: 'ignore', timeout: 30000 }); } catch {}
  }
});

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls fn until it returns a truthy value or timeoutMs passes (then throws with what). */
export async function waitFor(fn, { timeoutMs = 10000, intervalMs = 20, what = 'condition' } = {}) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await sleep(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
}

export function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.unref();
    s.on('error', rej);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => res(port)); });
  });
}

function track(child, name) {
  children.add(child);
  child.on('exit', () => children.delete(child));
  child.stderrText = '';
  child.stderr.on('data', (d) => {
    child.stderrText += d.toString();
    if (process.env.HOOKD_TEST_VERBOSE) process.stderr.write(`[${name}] ${d}`);
  });
  return child;
}

/** Prints the tail of a node's stderr (to the test's output) when it did not exit 0. */
function keepStderr(d, code) {
  const text = d.child.stderrText;
  const tail = text.length > 20000 ? `…${text.slice(-20000)}` : text;
  const how = code === null ? `killed (${d.child.signalCode})` : `exit code ${code}`;
  process.stderr.write(`\n[hookd ${d.node}: ${how}; its stderr follows]\n${tail}\n[end of hookd ${d.node} stderr]\n`);
}

function waitExit(child, timeoutMs = 10000) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((res) => {
    const t = setTimeout(() => { child.kill('SIGKILL'); }, timeoutMs);
    child.once('exit', (code) => { clearTimeout(t); res(code); });
  });
}

/**
 * A `hookd listen` sink. opts: respond, delay, status (array of "PATH=CODE"),
 * secrets (array). Records every request it answered in `requests`.
 */
export async function startSink(opts = {}) {
  const args = ['listen', '--listen', '127.0.0.1:0', '--json'];
  if (opts.respond) args.push('--respond', opts.respond);
  if (opts.delay) args.push('--delay', opts.delay);
  for (const s of opts.status || []) args.push('--status', s);
  for (const s of opts.secrets || []) args.push('--secret', s);
  const child = track(spawn(HOOKD, args, { stdio: ['ignore', 'pipe', 'pipe'] }), 'sink');
  const sink = { child, requests: [], port: 0 };
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (line.trim()) sink.requests.push(JSON.parse(line));
  });
  await waitFor(() => /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(child.stderrText) || child.exitCode !== null,
    { what: 'sink to listen' });
  const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(child.stderrText);
  if (!m) throw new Error(`sink did not start: ${child.stderrText}`);
  sink.port = Number(m[1]);
  sink.url = (path = '/hook') => `http://127.0.0.1:${sink.port}${path}`;
  sink.waitCount = (n, timeoutMs = 10000) =>
    waitFor(() => sink.requests.length >= n, { timeoutMs, what: `${n} requests at the sink (have ${sink.requests.length})` });
  sink.stop = async () => { child.kill('SIGTERM'); await waitExit(child, 5000); };
  return sink;
}

/* ---- stores ------------------------------------------------------------- */

/** Runs SQL through psql with the sqlite3 CLI's output shape: one row a line, `|` between columns. */
export function psql(dsn, query) {
  return execFileSync('psql', ['-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-d', dsn, '-c', query],
    { encoding: 'utf8', timeout: 30000, maxBuffer: 256 << 20 }).trim();
}

/** The URL of database `name` in the cluster of clusterDsn (postgres:///hookd?host=… → postgres:///name?host=…). */
export function pgDatabaseUrl(clusterDsn, name) {
  const m = /^(postgres(?:ql)?:\/\/[^/?]*)(\/[^?]*)?(\?.*)?$/.exec(clusterDsn);
  if (!m) throw new Error(`not a postgres URL: ${clusterDsn}`);
  return `${m[1]}/${name}${m[3] || ''}`;
}

let storeSeq = 0;

/**
 * A fresh, empty store: a SQLite file in a temp dir, or (backend 'postgres', or
 * opts.cluster given) a new database in the cluster. Returns {kind, url, db
 * (SQLite path), sql(query), drop()}.
 */
export function newStore(opts = {}) {
  const cluster = opts.cluster || (BACKEND === 'postgres' ? PG_CLUSTER : '');
  if (cluster) {
    const name = `hookd_t${process.pid}_${++storeSeq}_${Date.now() % 100000}`;
    psql(cluster, `CREATE DATABASE ${name}`);
    const url = pgDatabaseUrl(cluster, name);
    return {
      kind: 'postgres', url, name, db: null,
      // PostgreSQL has no file to keep the key beside: every node of the store gets this one.
      secretKey: randomBytes(32).toString('hex'),
      sql: (q) => psql(url, q),
      drop: () => { try { psql(cluster, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`); } catch {} },
    };
  }
  if (BACKEND === 'postgres') throw new Error('HOOKD_TEST_BACKEND=postgres needs HOOKD_TEST_PG');
  const dir = mkdtempSync(join(tmpdir(), 'hookd-test-'));
  const db = join(dir, 'hookd.db');
  return {
    kind: 'sqlite', url: `sqlite:${db}`, db, dir,
    sql: (q) => sql(db, q),
    drop: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * A throwaway PostgreSQL cluster of the test's own (scripts/pg.sh), for tests
 * that stop the server. {dir, dsn, stop(), start(), destroy()}.
 */
export function startCluster() {
  const root = mkdtempSync(join(tmpdir(), 'hookd-pgo-'));
  chmodSync(root, 0o755);
  const dir = join(root, 'cluster');
  clusters.add(dir);
  const pg = (...args) => execFileSync('bash', [join(ROOT, 'scripts/pg.sh'), ...args],
    { encoding: 'utf8', timeout: 60000, stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  const dsn = pg('start', dir);
  return {
    dir, dsn,
    stop: () => pg('ctl', dir, 'stop'),
    start: () => pg('ctl', dir, 'start'),
    destroy: () => {
      try { pg('stop', dir); } catch {}
      clusters.delete(dir);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/* ---- daemons ------------------------------------------------------------ */

/**
 * A `hookd serve` on a store (opts.store, shared and not dropped by cleanup;
 * else a fresh one of its own). env adds HOOKD_* settings; fast retries by default.
 */
export async function startDaemon(env = {}, opts = {}) {
  const store = opts.store || newStore(opts);
  const d = {
    store,
    storeUrl: store.url,
    db: store.db,
    dir: store.dir,
    adminPort: await freePort(),
    publicPort: await freePort(),
    child: null,
    logs: '',
  };
  d.node = `${hostname()}:${d.adminPort}`;
  d.env = {
    ...process.env,
    HOOKD_SERVER_STORE: store.url,
    HOOKD_SERVER_ADMIN_TOKEN: TOKEN,
    ...(store.secretKey ? { HOOKD_SERVER_SECRET_KEY: store.secretKey } : {}),
    HOOKD_SERVER_ADMIN_LISTEN: `127.0.0.1:${d.adminPort}`,
    HOOKD_SERVER_PUBLIC_LISTEN: `127.0.0.1:${d.publicPort}`,
    HOOKD_DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true',
    HOOKD_DELIVERY_RETRY_SCHEDULE: '100ms,200ms,300ms',
    HOOKD_DELIVERY_JITTER: '0',
    HOOKD_DELIVERY_TIMEOUT: '2s',
    HOOKD_DELIVERY_CONNECT_TIMEOUT: '1s',
    // hookd's own alert events would join other tests' outbox, events and deliveries: the alert tests turn them on
    HOOKD_ALERTS_ENABLED: 'false',
    ...env,
  };
  if (env.HOOKD_SERVER_NODE_ID) d.node = env.HOOKD_SERVER_NODE_ID;
  const bin = opts.bin || HOOKD;
  d.start = async () => {
    d.stderrKept = false;
    d.child = track(spawn(bin, ['serve'], { env: d.env, stdio: ['ignore', 'pipe', 'pipe'] }), 'hookd');
    d.child.stdout.on('data', () => {});
    await waitFor(async () => {
      if (d.child.exitCode !== null) throw new Error(`hookd exited ${d.child.exitCode}: ${d.child.stderrText}`);
      try { return (await fetch(`http://127.0.0.1:${d.publicPort}/healthz`)).status === 200; } catch { return false; }
    }, { timeoutMs: 15000, what: 'hookd to be healthy' });
  };
  /**
   * Graceful stop; returns the exit code (sanitizer reports make it non-zero).
   * A node that exits non-zero (now, or earlier on its own) or must be killed
   * has its stderr's tail printed, once, so a failing exit code comes with its reason.
   */
  d.stop = async () => {
    if (!d.child) return undefined;
    let code = d.child.exitCode;
    if (code === null && d.child.signalCode === null) {
      d.child.kill('SIGTERM');
      code = await waitExit(d.child, 15000);
    }
    if (!d.stderrKept) {
      d.stderrKept = true;
      d.logs += d.child.stderrText;
      if (code !== 0) keepStderr(d, code);
    }
    return code;
  };
  d.kill9 = async () => { d.child.kill('SIGKILL'); await waitExit(d.child); d.logs += d.child.stderrText; d.stderrKept = true; };
  d.cleanup = async () => { await d.stop(); if (!opts.store) store.drop(); };
  d.api = async (method, path, body, headers = {}) => {
    const init = { method, headers: { authorization: `Bearer ${TOKEN}`, ...headers } };
    if (body !== undefined) {
      init.body = typeof body === 'string' ? body : JSON.stringify(body);
      init.headers['content-type'] = 'application/json';
    }
    const res = await fetch(`http://127.0.0.1:${d.adminPort}${path}`, init);
    const text = await res.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { json = text; }
    return { status: res.status, body: json, headers: res.headers };
  };
  d.createEndpoint = async (fields) => {
    const r = await d.api('POST', '/v1/endpoints', fields);
    if (r.status !== 201) throw new Error(`endpoint create: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  d.publish = async (fields, headers) => {
    const r = await d.api('POST', '/v1/events', fields, headers);
    if (r.status !== 201 && r.status !== 200) throw new Error(`publish: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  /** All deliveries of an event, via the API. */
  d.deliveriesOf = async (eventId) => (await d.api('GET', `/v1/events/${eventId}`)).body.deliveries;
  d.waitDelivery = async (eventId, status, timeoutMs = 10000) =>
    waitFor(async () => {
      const ds = await d.deliveriesOf(eventId);
      return ds && ds.length > 0 && ds.every((x) => x.status === status) && ds;
    }, { timeoutMs, what: `deliveries of ${eventId} to be ${status}` });
  d.sql = (query) => store.sql(query);
  d.cli = (args, extraEnv = {}) => execFileSync(HOOKD, args, {
    env: { ...process.env, HOOKD_ADMIN_URL: `http://127.0.0.1:${d.adminPort}`, HOOKD_ADMIN_TOKEN: TOKEN, ...extraEnv },
    encoding: 'utf8', timeout: 10000,
  });
  try {
    // A free port can be taken by someone else (an outgoing connection's source port, another
    // process) between freePort() and hookd's bind: the first start then tries other ports.
    for (let attempt = 1; ; attempt++) {
      try {
        await d.start();
        break;
      } catch (e) {
        const chosen = env.HOOKD_SERVER_ADMIN_LISTEN || env.HOOKD_SERVER_PUBLIC_LISTEN; // the caller's: kept
        if (attempt >= 3 || chosen || !/Address already in use/.test(e.message)) throw e;
        d.adminPort = await freePort();
        d.publicPort = await freePort();
        d.env.HOOKD_SERVER_ADMIN_LISTEN = `127.0.0.1:${d.adminPort}`;
        d.env.HOOKD_SERVER_PUBLIC_LISTEN = `127.0.0.1:${d.publicPort}`;
        if (!env.HOOKD_SERVER_NODE_ID) d.node = `${hostname()}:${d.adminPort}`;
      }
    }
  } catch (e) {
    if (!opts.store) store.drop();
    throw e;
  }
  return d;
}

/**
 * n `hookd serve` processes on ONE fresh database (PostgreSQL only): distinct
 * admin and public ports, so distinct default node ids (hostname:admin_port).
 * env applies to all; perNode[i] adds to node i's. Returns {nodes, store, sql, cleanup}.
 */
export async function startNodes(n, env = {}, opts = {}) {
  const store = newStore(opts);
  const nodes = [];
  try {
    for (let i = 0; i < n; i++) nodes.push(await startDaemon({ ...env, ...(opts.perNode?.[i] || {}) }, { ...opts, store }));
  } catch (e) {
    for (const d of nodes) await d.stop();
    store.drop();
    throw e;
  }
  return {
    nodes,
    store,
    sql: (q) => store.sql(q),
    /** Stops every node; returns their exit codes. */
    stopAll: async () => { const codes = []; for (const d of nodes) codes.push(await d.stop()); return codes; },
    cleanup: async () => { for (const d of nodes) await d.stop(); store.drop(); },
  };
}

/**
 * An in-process HTTP receiver that counts: per path, how often each webhook-id
 * arrived, and how many requests were open at once. opts.delayMs(n, req) and
 * opts.status(n, req) script the answers (n counts from 1); opts.checkBody
 * compares each body's id with its webhook-id. Cheap enough for hundreds of
 * thousands of requests.
 */
export async function startCountingSink(opts = {}) {
  const sink = {
    total: 0, open: 0, maxOpen: 0,
    bodyMismatches: 0, // opts.checkBody: arrivals whose body id is not their webhook-id
    byPath: new Map(), // path → Map(webhook-id → count)
    openByPath: new Map(), maxOpenByPath: new Map(), // path → requests open now / at most at once
    arrivals: [],      // [ms, path, webhook-id] when opts.keepArrivals
    overlaps: 0,       // arrivals while a request of the same path and webhook-id was still open
  };
  const openById = new Map(); // `${path} ${webhook-id}` → requests open now
  const server = createHttpServer((req, res) => {
    const n = ++sink.total;
    sink.open++;
    if (sink.open > sink.maxOpen) sink.maxOpen = sink.open;
    const pathOpen = (sink.openByPath.get(req.url) || 0) + 1;
    sink.openByPath.set(req.url, pathOpen);
    if (pathOpen > (sink.maxOpenByPath.get(req.url) || 0)) sink.maxOpenByPath.set(req.url, pathOpen);
    let closed = false;
    const close = () => { if (!closed) { closed = true; sink.openByPath.set(req.url, sink.openByPath.get(req.url) - 1); } };
    res.on('close', close); // the sender gave up (its timeout) before an answer
    const id = req.headers['webhook-id'] || '';
    const key = `${req.url} ${id}`;
    const openNow = openById.get(key) || 0;
    if (openNow > 0) sink.overlaps++;
    openById.set(key, openNow + 1);
    let idClosed = false;
    res.on('close', () => {
      if (idClosed) return;
      idClosed = true;
      const left = openById.get(key) - 1;
      if (left > 0) openById.set(key, left); else openById.delete(key);
    });
    let ids = sink.byPath.get(req.url);
    if (!ids) sink.byPath.set(req.url, ids = new Map());
    ids.set(id, (ids.get(id) || 0) + 1);
    if (opts.keepArrivals) sink.arrivals.push([Date.now(), req.url, id]);
    const chunks = [];
    if (opts.checkBody) req.on('data', (c) => chunks.push(c)); else req.resume();
    req.on('end', () => {
      if (opts.checkBody) {
        let bodyId;
        try { bodyId = JSON.parse(Buffer.concat(chunks).toString()).id; } catch {}
        if (bodyId !== id) sink.bodyMismatches++;
      }
      const answer = () => {
        close();
        sink.open--; // before the answer leaves: the sender cannot have seen it yet
        res.writeHead(opts.status ? opts.status(n, req) : 200, { 'content-type': 'text/plain' });
        res.end('ok');
      };
      const delay = opts.delayMs ? opts.delayMs(n, req) : 0;
      if (delay === Infinity) { res.on('close', () => { sink.open--; }); return; } // never answers
      if (delay > 0) setTimeout(answer, delay); else answer();
    });
  });
  server.keepAliveTimeout = 60000;
  server.headersTimeout = 70000;
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  sink.port = server.address().port;
  sink.url = (path = '/hook') => `http://127.0.0.1:${sink.port}${path}`;
  /** Distinct webhook-ids seen at a path (or at all paths). */
  sink.distinct = (path) => {
    if (path !== undefined) return sink.byPath.get(path)?.size || 0;
    let k = 0;
    for (const ids of sink.byPath.values()) k += ids.size;
    return k;
  };
  /** [path, webhook-id, count] of every id that arrived more than once. */
  sink.repeats = () => {
    const out = [];
    for (const [path, ids] of sink.byPath) for (const [id, c] of ids) if (c > 1) out.push([path, id, c]);
    return out;
  };
  sink.stop = () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); });
  return sink;
}

/** Runs SQL through the sqlite3 CLI (a separate process, like any application). */
export function sql(db, query) {
  return execFileSync('sqlite3', ['-cmd', '.timeout 5000', db, query], { encoding: 'utf8', timeout: 15000 }).trim();
}

export function readText(path) { return readFileSync(path, 'utf8'); }

/** A fresh Standard Webhooks secret: "whsec_" + base64 of 32 random bytes. */
export function newSecret() {
  const bytes = new Uint8Array(32);
  globalThis.crypto.getRandomValues(bytes);
  return 'whsec_' + Buffer.from(bytes).toString('base64');
}

/**
 * An in-process HTTP receiver that keeps every request whole: {n, method, path,
 * headers (lower-cased names), rawHeaders (as sent, [name, value, …]), body
 * (text), at}. opts.status(n, req) scripts the answer (default 200), opts.delayMs(n, req) its delay.
 */
export async function startRecordingSink(opts = {}) {
  const sink = { requests: [] };
  const server = createHttpServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const n = sink.requests.length + 1;
      sink.requests.push({ n, method: req.method, path: req.url, headers: req.headers, rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
      const answer = () => {
        res.writeHead(opts.status ? opts.status(n, req) : 200, { 'content-type': 'text/plain' });
        res.end('ok');
      };
      const delay = opts.delayMs ? opts.delayMs(n, req) : 0;
      if (delay > 0) setTimeout(answer, delay); else answer();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  sink.port = server.address().port;
  sink.url = (path = '/hook') => `http://127.0.0.1:${sink.port}${path}`;
  sink.at = (path) => sink.requests.filter((r) => r.path === path);
  sink.stop = () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); });
  return sink;
}
