// Help is complete (design §12 "CLI output"): `hookd FAMILY -h` and `hookd
// FAMILY SUB -h` (and `hookd health -h` and the other one-command families)
// print the synopsis and the shared options that command takes — -c/--config,
// --json (unless --json is its input), --utc, -h — and --watch/--count exactly
// for the commands that accept them; every option a command accepts is named
// in its help. Acceptance is probed by running the command with the option
// against an unreachable admin API: a refusal says "does not apply here" or
// "unknown option". No daemon, no store.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { BACKEND, HOOKD } from '../lib/harness.mjs';

// No store is involved: the SQLite pass runs these; the PostgreSQL pass reports them skipped.
const skip = BACKEND === 'postgres' ? 'no store involved: run on the SQLite pass' : false;

const FAMILIES = ['endpoints', 'events', 'deliveries', 'sources', 'inbox', 'replay', 'tokens', 'alerts'];
const SINGLES = ['health', 'summary', 'sync', 'trace', 'audit'];
const env = { ...process.env, HOOKD_ADMIN_URL: 'http://127.0.0.1:1', HOOKD_ADMIN_TOKEN: 'x'.repeat(32) };

function run(args) {
  return new Promise((resolve) => {
    const child = spawn(HOOKD, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.on('data', (c) => { stdout += c; });
    child.stderr.on('data', (c) => { stderr += c; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 15000);
    child.on('close', (status) => { clearTimeout(timer); resolve({ status, stdout, stderr }); });
  });
}

/** Runs jobs (functions returning promises) a few at a time. */
async function pool(jobs, width = 6) {
  const results = new Array(jobs.length);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < jobs.length) {
      const i = next++;
      results[i] = await jobs[i]();
    }
  }));
  return results;
}

/** Whether the command accepts the option (it may still fail for other reasons: no id, no API). */
async function accepts(cmd, option) {
  const r = await run([...cmd, `--${option}`, 'x']);
  return !/does not apply here|unknown option/.test(r.stderr);
}

const optionsIn = (text) => [...new Set([...text.matchAll(/--([a-z][a-z-]*)/g)].map((m) => m[1]))];

/** The commands of a family, from its help: [['endpoints', 'create'], …]. */
async function commandsOf(family) {
  const r = await run([family, '-h']);
  assert.equal(r.status, 0, r.stderr);
  const subs = [...r.stdout.matchAll(new RegExp(`^  hookd ${family} \\[?([a-z-]+)`, 'gm'))].map((m) => m[1]);
  assert.ok(subs.length >= 2, `${family} -h lists its subcommands: ${r.stdout}`);
  return { help: r.stdout, commands: subs.map((s) => [family, s]) };
}

function checkShared(help, what, { json = true, watch }) {
  assert.match(help, /^ {2}-c, --config FILE /m, `${what}: -c`);
  assert.match(help, /^ {2}--utc /m, `${what}: --utc`);
  assert.match(help, /^ {2}-h, --help /m, `${what}: -h`);
  assert.match(help, /HOOKD_ADMIN_URL/, `${what}: the environment`);
  if (json) assert.match(help, /^ {2}--json {2,}print the API's JSON/m, `${what}: --json`);
  assert.equal(/^ {2}--watch \[INTERVAL\] /m.test(help), watch, `${what}: --watch ${watch ? 'named' : 'not named'}`);
  assert.equal(/^ {2}--count N /m.test(help), watch, `${what}: --count ${watch ? 'named' : 'not named'}`);
}

test('every command\'s -h names the shared options it takes and every option it accepts', { skip }, async () => {
  const commands = [];
  const familyHelp = {};
  for (const f of FAMILIES) {
    const { help, commands: subs } = await commandsOf(f);
    familyHelp[f] = help;
    commands.push(...subs);
  }
  commands.push(...SINGLES.map((s) => [s]));
  // The option names to probe: every one any help of the family names.
  const helps = await pool(commands.map((cmd) => () => run([...cmd, '-h'])));
  const checks = [];
  commands.forEach((cmd, i) => {
    const h = helps[i];
    const what = `hookd ${cmd.join(' ')} -h`;
    assert.equal(h.status, 0, `${what}: ${h.stderr}`);
    assert.equal(h.stderr, '', what);
    // (A family's default subcommand shows in brackets: "hookd alerts [list]".)
    const usage = `usage: hookd ${cmd[0]}${cmd[1] ? ` ${cmd[1]}` : ''}`;
    const bracketed = cmd[1] ? `usage: hookd ${cmd[0]} [${cmd[1]}]` : usage;
    assert.ok(h.stdout.startsWith(usage) || h.stdout.startsWith(bracketed), `${what}: ${h.stdout}`);
    const family = familyHelp[cmd[0]] || '';
    for (const option of optionsIn(family + h.stdout))
      if (!['config', 'help'].includes(option)) checks.push({ cmd, what, help: h.stdout, option });
  });
  const accepted = await pool(checks.map((c) => () => accepts(c.cmd, c.option)));
  checks.forEach((c, i) => {
    c.accepted = accepted[i];
    // Named means accepted (no stale help) …
    if (c.option !== 'json' && new RegExp(`--${c.option}(?![a-z-])`).test(c.help.split('\noptions:')[0]))
      assert.ok(c.accepted, `${c.what} names --${c.option}, which the command refuses`);
    // … and accepted means named (complete help).
    if (c.accepted) assert.ok(new RegExp(`--${c.option}(?![a-z-])`).test(c.help), `${c.what} leaves out --${c.option}`);
  });
  commands.forEach((cmd, i) => {
    const what = `hookd ${cmd.join(' ')} -h`;
    const watch = checks.some((c) => c.what === what && c.option === 'watch' && c.accepted);
    const jsonInput = /--json '/.test(helps[i].stdout);
    checkShared(helps[i].stdout, what, { json: !jsonInput, watch });
  });
  // The reads watch; the writes do not.
  const watching = (cmd) => checks.some((c) => c.cmd === cmd && c.option === 'watch' && c.accepted);
  const find = (...cmd) => commands.find((c) => c.join(' ') === cmd.join(' '));
  for (const cmd of [['health'], ['summary'], ['sync'], ['trace'], ['audit'], ['endpoints', 'list'],
    ['endpoints', 'get'], ['deliveries', 'get'], ['alerts', 'list']])
    assert.ok(watching(find(...cmd)), `hookd ${cmd.join(' ')} takes --watch`);
  for (const cmd of [['endpoints', 'create'], ['endpoints', 'delete'], ['events', 'publish'], ['replay', 'range'],
    ['tokens', 'create'], ['inbox', 'replay']])
    assert.ok(!watching(find(...cmd)), `hookd ${cmd.join(' ')} refuses --watch`);
});

test('a family\'s -h says which of its subcommands take --watch', { skip }, async () => {
  const r = await run(['replay', '-h']);
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^hookd replay list, get also take:\n {2}--watch \[INTERVAL\] .*\n {2}--count N /m);
  const e = await run(['endpoints', '--help']);
  assert.match(e.stdout, /^hookd endpoints list, get also take:/m);
  assert.match(e.stdout, /`hookd endpoints SUBCOMMAND --help` describes one\./);
  // A family whose every subcommand watches lists the options with the others.
  const a = await run(['alerts', '-h']);
  assert.match(a.stdout, /every subcommand also takes:\n(?: {2}.*\n)* {2}--watch \[INTERVAL\] /);
  // The family's help on a usage error goes to stderr with status 2.
  const bad = await run(['tokens', 'frobnicate']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown subcommand 'frobnicate'[\s\S]*-c, --config FILE/);
});

test('hookd apply -h describes its options on stdout', { skip }, async () => {
  const r = await run(['apply', '-h']);
  assert.equal(r.status, 0);
  for (const want of [/-c, --config FILE/, /--json {2,}the report/, /-h, --help/, /HOOKD_ADMIN_URL/])
    assert.match(r.stdout, want);
  const bad = await run(['apply']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /^usage: hookd apply/);
});
