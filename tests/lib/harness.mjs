// Test harness for scenario tests: starts `hookd serve` on a temp SQLite store
// and `hookd listen` sinks, talks to the admin API, runs SQL with the sqlite3 CLI.
// Every wait is bounded; every process is killed when the test ends.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

export const ROOT = resolve(new URL('../..', import.meta.url).pathname);
export const HOOKD = process.env.HOOKD_BIN || join(ROOT, 'build/hookd');
export const TOOLS = join(process.env.HOOKD_TEST_LIB || join(ROOT, 'build-asan'), 'tests/tools');
export const TOKEN = 'test-admin-token';

const children = new Set();
process.on('exit', () => { for (const c of children) { try { c.kill('SIGKILL'); } catch {} } });

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

/**
 * A daemon on a fresh SQLite store. env adds HOOKD_* settings; fast retries by default.
 */
export async function startDaemon(env = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'hookd-test-'));
  const d = {
    dir,
    db: join(dir, 'hookd.db'),
    adminPort: await freePort(),
    publicPort: await freePort(),
    child: null,
    logs: '',
  };
  d.env = {
    ...process.env,
    HOOKD_SERVER_STORE: `sqlite:${d.db}`,
    HOOKD_SERVER_ADMIN_TOKEN: TOKEN,
    HOOKD_SERVER_ADMIN_LISTEN: `127.0.0.1:${d.adminPort}`,
    HOOKD_SERVER_PUBLIC_LISTEN: `127.0.0.1:${d.publicPort}`,
    HOOKD_DELIVERY_ALLOW_PRIVATE_NETWORKS: 'true',
    HOOKD_DELIVERY_RETRY_SCHEDULE: '100ms,200ms,300ms',
    HOOKD_DELIVERY_JITTER: '0',
    HOOKD_DELIVERY_TIMEOUT: '2s',
    HOOKD_DELIVERY_CONNECT_TIMEOUT: '1s',
    ...env,
  };
  d.start = async () => {
    d.child = track(spawn(HOOKD, ['serve'], { env: d.env, stdio: ['ignore', 'pipe', 'pipe'] }), 'hookd');
    d.child.stdout.on('data', () => {});
    await waitFor(async () => {
      if (d.child.exitCode !== null) throw new Error(`hookd exited ${d.child.exitCode}: ${d.child.stderrText}`);
      try { return (await fetch(`http://127.0.0.1:${d.publicPort}/healthz`)).status === 200; } catch { return false; }
    }, { timeoutMs: 15000, what: 'hookd to be healthy' });
  };
  /** Graceful stop; returns the exit code (sanitizer reports make it non-zero). */
  d.stop = async () => {
    if (!d.child || d.child.exitCode !== null) return d.child?.exitCode;
    d.child.kill('SIGTERM');
    const code = await waitExit(d.child, 15000);
    d.logs += d.child.stderrText;
    return code;
  };
  d.kill9 = async () => { d.child.kill('SIGKILL'); await waitExit(d.child); d.logs += d.child.stderrText; };
  d.cleanup = async () => { await d.stop(); rmSync(dir, { recursive: true, force: true }); };
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
  d.sql = (query) => sql(d.db, query);
  d.cli = (args, extraEnv = {}) => execFileSync(HOOKD, args, {
    env: { ...process.env, HOOKD_ADMIN_URL: `http://127.0.0.1:${d.adminPort}`, HOOKD_ADMIN_TOKEN: TOKEN, ...extraEnv },
    encoding: 'utf8', timeout: 10000,
  });
  await d.start();
  return d;
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
