// The data plane's first calls through the official e2b SDK (docs/e2b.md):
// commands.run (output, exit codes, CommandExitError, envs, cwd, streaming
// callbacks), background commands with list, sendStdin/closeStdin, connect
// and kill, isRunning, and the per-sandbox access token. Against
// aas-server-fake, whose "guest" knows a few commands (tests/fake): echo,
// exit N, lines N, env, pwd, cat, wait.
//
// usage: node test_commands.mjs AAS_SERVER_FAKE   (run by tests/e2b/run)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox, CommandExitError, InvalidArgumentError, NotFoundError, RateLimitError } from 'e2b';
import { testServer, e2bKey } from './harness.mjs';

const SERVER = process.argv[2];
assert.ok(SERVER, 'usage: test_commands.mjs AAS_SERVER_FAKE');
// Room for the stream bound's test: 33 streams from one address, 32 commands running at once.
const srv = testServer(SERVER, { args: ['--per-ip-connections', '64', '--max-executions', '64'] });
let sbx;

before(async () => {
  await srv.start();
  sbx = await Sandbox.create({ envs: { FROM_CREATE: 'yes' } });
});
after(() => srv.stop());

// A raw request to the data plane, as the SDK routes it (E2B_SANDBOX_URL and the two headers).
async function envd(path, { token = null, id = sbx.sandboxId, method = 'GET', headers = {}, body } = {}) {
  const h = { 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49983', ...headers };
  if (token) h['X-Access-Token'] = token;
  const res = await fetch(`${srv.base}/e2b-sandbox${path}`, { method, headers: h, body });
  const text = await res.text();
  return { status: res.status, text, headers: res.headers };
}

test('commands.run: output, exit code, and the error for a failing one', async () => {
  const r = await sbx.commands.run('echo hi');
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, 'hi\n');
  assert.equal(r.stderr, '');
  const lines = await sbx.commands.run('lines 3');
  assert.equal(lines.stdout, 'line 1\nline 2\nline 3\n');
  assert.equal(lines.stderr, 'done\n');
  await assert.rejects(sbx.commands.run('exit 3'), err => {
    assert.ok(err instanceof CommandExitError, `${err}`);
    assert.equal(err.exitCode, 3);
    assert.match(err.message, /exit status 3/);
    return true;
  });
});

test('commands.run: streaming callbacks, envs, cwd', async () => {
  const out = [], errs = [];
  await sbx.commands.run('lines 2', { onStdout: d => out.push(d), onStderr: d => errs.push(d) });
  assert.equal(out.join(''), 'line 1\nline 2\n');
  assert.equal(errs.join(''), 'done\n');
  const env = await sbx.commands.run('env', { envs: { FROM_RUN: 'also' } });
  assert.match(env.stdout, /^FROM_CREATE=yes$/m, 'the sandbox\'s envs from create');
  assert.match(env.stdout, /^FROM_RUN=also$/m);
  assert.equal((await sbx.commands.run('pwd')).stdout, '/workspace\n', 'E2B\'s home is /workspace');
  assert.equal((await sbx.commands.run('pwd', { cwd: 'sub' })).stdout, '/workspace/sub\n');
  assert.equal((await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n');
});

// envd's start event comes once the process runs: a guest slow to start a command holds it back
// (the fake's `startafter PATH` starts once the host file PATH exists), and the SDK's run() with it.
test('the start event comes when the guest runs the command, not before', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'aas-e2b-start-'));
  const gate = join(dir, 'go');
  try {
    let got = null;
    const run = sbx.commands.run(`startafter ${gate}`, { background: true, timeoutMs: 60000 }).then(h => (got = h));
    // Long enough for a start sent at once to arrive many times over; the gate is still shut.
    await new Promise(r => setTimeout(r, 500));
    assert.equal(got, null, 'no start event while the guest has not run the command');
    writeFileSync(gate, '');
    const h = await run;
    assert.ok(h.pid > 0);
    assert.equal((await h.wait()).exitCode, 0);
    assert.ok(existsSync(gate));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('background commands: list, stdin, connect, kill', async () => {
  const cat = await sbx.commands.run('cat', { background: true, stdin: true, timeoutMs: 0 });
  assert.ok(cat.pid > 0);
  const listed = await sbx.commands.list();
  const mine = listed.find(p => p.pid === cat.pid);
  assert.ok(mine, `pid ${cat.pid} is listed: ${JSON.stringify(listed)}`);
  assert.equal(mine.cmd, '/bin/bash');
  assert.deepEqual(mine.args, ['-l', '-c', 'cat']);
  await sbx.commands.sendStdin(cat.pid, 'abc\n');
  await sbx.commands.closeStdin(cat.pid);
  const done = await cat.wait();
  assert.equal(done.stdout, 'abc\n');
  assert.equal(done.exitCode, 0);

  // A client that leaves detaches: the command runs on (as envd's do).
  const left = await sbx.commands.run('wait', { background: true, timeoutMs: 0 });
  await left.disconnect();
  await new Promise(r => setTimeout(r, 300));
  assert.ok((await sbx.commands.list()).some(p => p.pid === left.pid), 'still running after disconnect');
  assert.equal(await sbx.commands.kill(left.pid), true);

  const waiting = await sbx.commands.run('wait', { background: true, timeoutMs: 0 });
  const again = await sbx.commands.connect(waiting.pid, { timeoutMs: 0 });
  assert.equal(again.pid, waiting.pid);
  assert.equal(await sbx.commands.kill(waiting.pid), true);
  await assert.rejects(again.wait(), CommandExitError, 'killed: a non-zero end');
  await assert.rejects(waiting.wait(), CommandExitError);
  assert.equal(await sbx.commands.kill(waiting.pid), false, 'an ended process is not found');
  assert.equal(await sbx.commands.kill(999999), false);
  await assert.rejects(sbx.commands.connect(999999), NotFoundError);
});

test('no root, for commands and terminals alike', async () => {
  await assert.rejects(sbx.commands.run('echo hi', { user: 'root' }), err => {
    assert.ok(err instanceof InvalidArgumentError, `${err}`);
    assert.match(err.message, /root/);
    return true;
  });
  assert.equal((await sbx.commands.run('echo hi', { user: 'user' })).stdout, 'hi\n', 'E2B\'s default user is ours');
  // Terminals are served (test_pty.mjs); root is refused for them as for commands.
  await assert.rejects(sbx.pty.create({ cols: 80, rows: 24, onData: () => {}, user: 'root' }), err => {
    assert.ok(err instanceof InvalidArgumentError, `${err}`);
    assert.match(err.message, /root/);
    return true;
  });
});

test('the access token: required, the sandbox\'s own, gone with it', async () => {
  const info = await (await fetch(`${srv.base}/e2b/sandboxes/${sbx.sandboxId}`,
                                  { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })).json();
  const token = info.envdAccessToken;
  assert.match(token, /^acc-[a-z0-9]+\.[0-9a-f]{64}$/);
  assert.equal((await envd('/health', { token })).status, 204);
  assert.equal(await sbx.isRunning(), true);
  assert.equal((await envd('/health')).status, 401, 'no token');
  assert.equal((await envd('/health', { token: token.slice(0, -1) + (token.endsWith('0') ? '1' : '0') })).status, 401);
  assert.equal((await envd('/health', { token: process.env.E2B_API_KEY })).status, 401, 'the API key is no token');
  const other = await Sandbox.create();
  try {
    const otherToken = (await (await fetch(`${srv.base}/e2b/sandboxes/${other.sandboxId}`,
                                           { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })).json()).envdAccessToken;
    assert.notEqual(otherToken, token);
    assert.equal((await envd('/health', { token: otherToken })).status, 401, 'another sandbox\'s token');
  } finally {
    await other.kill();
  }
  const unary = await envd('/process.Process/List', { token: 'acc-x.00', method: 'POST', body: '{}',
                                                      headers: { 'Content-Type': 'application/json' } });
  assert.equal(unary.status, 401);
  assert.equal(JSON.parse(unary.text).code, 'unauthenticated');

  const doomed = await Sandbox.create();
  const doomedToken = (await (await fetch(`${srv.base}/e2b/sandboxes/${doomed.sandboxId}`,
                                          { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })).json()).envdAccessToken;
  await doomed.kill();
  assert.equal(await doomed.isRunning(), false, 'a killed sandbox is not running (502)');
  const gone = await envd('/health', { token: doomedToken, id: doomed.sandboxId });
  assert.equal(gone.status, 502);
  await assert.rejects(doomed.commands.run('echo hi'));
});

test('command streams: at most 32 open per account, the next a RateLimitError', async () => {
  const handles = [];
  try {
    for (let i = 0; i < 32; i++) handles.push(await sbx.commands.run('wait', { background: true, timeoutMs: 0 }));
    await assert.rejects(sbx.commands.run('echo hi'), RateLimitError);
    await assert.rejects(sbx.commands.connect(handles[0].pid), RateLimitError, 'a second subscriber needs a slot too');
    // A client that disconnects frees its slot; its command runs on.
    await handles[0].disconnect();
    let r = null;
    for (let i = 0; i < 50 && !r; i++) {
      try {
        r = await sbx.commands.run('echo hi');
      } catch (e) {
        assert.ok(e instanceof RateLimitError, `${e}`);
        await new Promise(res => setTimeout(res, 100));
      }
    }
    assert.equal(r && r.stdout, 'hi\n');
    assert.ok((await sbx.commands.list()).some(p => p.pid === handles[0].pid));
  } finally {
    for (const h of handles) await sbx.commands.kill(h.pid);
  }
});

test('the data plane\'s rate is the account\'s, not the address\'s', async () => {
  // More than an address without a key may make in a second (20), all with the sandbox's token.
  const t0 = Date.now();
  for (let i = 0; i < 60; i++) await sbx.commands.list();
  assert.ok(Date.now() - t0 < 20000);
});

test('the data plane takes from its own account\'s requests_per_second, each account its own', async () => {
  // A second account held to 1 request a second (a bucket of 2 s' worth), set before its first data-plane
  // request: its rate is read then (and kept for --key-cache-ttl, as a key's is).
  const key = srv.admin('account', 'create', '--name', 'slow-agent');
  const account = srv.admin('account', 'list').split('\n').find(l => /\sslow-agent\s/.test(l)).split(/\s+/)[0];
  srv.admin('account', 'limits', '--id', account, '--requests-per-second', '1');
  const slow = await Sandbox.create({ apiKey: e2bKey(key) });
  try {
    const got = await Promise.all(Array.from({ length: 6 }, () =>
      envd('/envs', { id: slow.sandboxId, token: slow.envdAccessToken })));
    const statuses = got.map(r => r.status).sort();
    assert.ok(statuses.filter(s => s === 200).length >= 1 && statuses.filter(s => s === 200).length <= 3,
              `a burst of 2 (and one refilled at most): ${statuses}`);
    const refused = got.find(r => r.status === 429);
    assert.ok(refused, `six at once, past the account's burst: ${statuses}`);
    assert.match(refused.text, /1 requests a second \(requests_per_second\)/);
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    // The first account's sandbox is not held to the second's rate, nor the second to the first's.
    for (let i = 0; i < 10; i++) assert.equal((await envd('/envs', { token: sbx.envdAccessToken })).status, 200);
  } finally {
    await slow.kill();
  }
});
