// What test_http.mjs and test_stdio.mjs share: an aas-server started for the
// run on a free loopback port with a fresh state directory and one account,
// and its teardown (every sandbox destroyed, the server stopped and checked,
// and in real-VM mode tests/integration/vm-cleanup run on the state
// directory), pass or fail.
//
// Real-VM mode: with AAS_TEST_IMAGES set (a directory holding the tiny image)
// the server binary is the REAL aas-server, started with --images DIR --image
// tiny --templates off. Otherwise it is aas-server-fake (the server's code with the fake VM
// driver).
import assert from 'node:assert/strict';
import Ajv from 'ajv';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync, rmSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const IMAGES = process.env.AAS_TEST_IMAGES || '';
// tests/integration/vm-cleanup: from the source tree (run copies these files into the build tree).
const VM_CLEANUP = process.env.AAS_VM_CLEANUP ||
  join(dirname(fileURLToPath(import.meta.url)), '..', 'integration', 'vm-cleanup');

export const textOf = r => r.content.filter(c => c.type === 'text').map(c => c.text).join('\n');

// A caller of client's tools (tools as tools/list gave them) that checks every result: not isError, its
// structuredContent valid against the tool's outputSchema (compiled by Ajv with ajvOptions), and its text
// the same JSON. call(name, args) gives the structuredContent; seen holds the names called.
export function checkedCaller(client, tools, ajvOptions) {
  const ajv = new Ajv(ajvOptions);
  const validators = Object.fromEntries(tools.map(t => [t.name, ajv.compile(t.outputSchema)]));
  const seen = new Set();
  const call = async (name, args) => {
    const r = await client.callTool({ name, arguments: args });
    assert.ok(!r.isError, `${name}: ${textOf(r)}`);
    assert.ok(validators[name](r.structuredContent), `${name}: ${JSON.stringify(validators[name].errors)}`);
    assert.deepEqual(JSON.parse(textOf(r)), r.structuredContent, `${name}: text is the same JSON`);
    seen.add(name);
    return r.structuredContent;
  };
  return { call, seen };
}
export const sleep = ms => new Promise(r => setTimeout(r, ms));

// With the fake driver: a fork and a resume refused for room (its next two restores, asked through the fake's
// `busy-restores` command), as the REST API's 503 busy with Retry-After. Each result says when to call again
// and not the host's facts; the sandbox stays paused, and the same resume then works. `call` is checkedCaller's.
export async function busyForkResume(client, call) {
  const sb = await call('create_sandbox', {});
  await call('run_command', { sandbox_id: sb.id, command: 'busy-restores 2' }); // the fork's child, the resume
  let r = await client.callTool({ name: 'fork_sandbox', arguments: { sandbox_id: sb.id } });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /fork_sandbox failed: .*no room for it right now.*\(busy: try again in 10 s\)\. .*make the same call again/);
  assert.doesNotMatch(textOf(r), /MiB|fake:/, 'the host\'s facts are not the tenant\'s');
  await call('pause_sandbox', { sandbox_id: sb.id });
  r = await client.callTool({ name: 'resume_sandbox', arguments: { sandbox_id: sb.id } });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /resume_sandbox failed: .*\(busy: try again in 10 s\)/);
  assert.equal((await call('get_sandbox', { sandbox_id: sb.id })).status, 'paused');
  assert.equal((await call('resume_sandbox', { sandbox_id: sb.id })).status, 'ready');
  await call('destroy_sandbox', { sandbox_id: sb.id });
}


// An aas-server for the run: `bin` is aas-server or aas-server-fake; `env` is
// added to its environment, `args` to its command line. Call start() in before() and stop() in after():
// stop() cleans up whatever start() got to, even when it failed halfway.
// Once started: base (origin), port, key (the account's API key), state.
export function testServer(bin, { name = 'mcp-agent', prefix = 'aas-mcp-test.', env = {}, args = [] } = {}) {
  const work = mkdtempSync(join(tmpdir(), prefix));
  const srv = { work, state: join(work, 'state'), base: null, port: null, key: null, proc: null };
  srv.start = () => startServer(srv, bin, name, env, args);
  srv.stop = () => stopServer(srv);
  return srv;
}

async function startServer(srv, bin, name, env, extra) {
  const { work, state } = srv;
  const log = openSync(join(work, 'server.log'), 'a');
  const args = ['--listen', '127.0.0.1:0', '--port-file', join(work, 'port'), '--state-dir', state, ...extra];
  // Cold boots, not clones: the progress and cancellation tests need a create that outlasts
  // a progress heartbeat (1 s), and a clone can be done in less (always, with KVM).
  if (IMAGES) args.push('--images', IMAGES, '--image', 'tiny', '--templates', 'off');
  srv.proc = spawn(bin, args, { stdio: ['ignore', log, log], env: { ...process.env, ...env } });
  let exited = false;
  srv.proc.once('exit', () => { exited = true; });
  for (let i = 0; i < 300 && !existsSync(join(work, 'port')) && !exited; i++) await sleep(100);
  assert.ok(existsSync(join(work, 'port')), `the server is listening: ${readFileSync(join(work, 'server.log'), 'utf8')}`);
  srv.port = readFileSync(join(work, 'port'), 'utf8').trim();
  srv.base = `http://127.0.0.1:${srv.port}`;
  srv.key = execFileSync(bin, ['account', 'create', '--name', name, '--state-dir', state],
                         { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
  assert.match(srv.key, /^aas_sk_/);
}

// The account's sandboxes (newest first; `status` active or destroyed filters), through the REST API.
export async function sandboxes(srv, status = '') {
  const res = await fetch(`${srv.base}/v1/sandboxes?limit=1000${status ? `&status=${status}` : ''}`,
                          { headers: { Authorization: `Bearer ${srv.key}` } });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  return body.sandboxes;
}

export const activeSandboxes = srv => sandboxes(srv, 'active');

// Poll fn until it returns something truthy; fail after ms.
export async function waitFor(what, fn, ms = 120000) {
  for (const until = Date.now() + ms; Date.now() < until; await sleep(200)) {
    const v = await fn();
    if (v) return v;
  }
  assert.fail(`timed out after ${ms} ms waiting for ${what}`);
}

// Wait until the account has no sandbox left that is not destroyed (a
// cancelled create_sandbox destroys its sandbox once the create returns).
export async function waitNoneActive(srv, ms = 120000) {
  let left = [];
  for (const until = Date.now() + ms; Date.now() < until;) {
    left = await activeSandboxes(srv);
    if (left.length === 0) return;
    await sleep(250);
  }
  assert.fail(`sandboxes still active after ${ms} ms: ${JSON.stringify(left.map(s => [s.id, s.status]))}`);
}

// Destroy every active sandbox of the server's account (tests call it between tests, so one
// test's leftovers never fail the next).
export async function destroyAll(srv) {
  if (!srv.base || !srv.key) return;
  const h = { Authorization: `Bearer ${srv.key}` };
  for (const s of await activeSandboxes(srv))
    await (await fetch(`${srv.base}/v1/sandboxes/${s.id}`, { method: 'DELETE', headers: h })).text();
}

// Destroy every sandbox, stop the server (it must exit 0: sanitizers report
// non-zero), check the key never reached its log, run vm-cleanup in real-VM
// mode and remove the work directory. Safe to call on a half-started server.
async function stopServer(srv) {
  try {
    await destroyAll(srv);
  } catch (e) {
    console.error('destroying the sandboxes:', e);
  }
  try {
    const log = join(srv.work, 'server.log');
    const readLog = () => existsSync(log) ? readFileSync(log, 'utf8') : '';
    if (srv.proc && srv.proc.exitCode === null && srv.proc.signalCode === null) {
      const exited = new Promise(r => srv.proc.once('exit', (code, signal) => r({ code, signal })));
      srv.proc.kill('SIGTERM');
      const { code, signal } = await exited;
      // The log says why (a sanitizer report, a failed cleanup); it is removed below.
      if (code !== 0) console.error(`aas-server exited ${code} (signal ${signal}); its log ends:\n${readLog().slice(-20000)}`);
      assert.equal(code, 0, `aas-server exits cleanly (signal ${signal}; sanitizers report non-zero)`);
    }
    if (srv.key) assert.ok(!readLog().includes(srv.key), 'the API key never appears in the log');
  } finally {
    if (IMAGES) {
      try {
        execFileSync(VM_CLEANUP, [srv.state], { stdio: 'inherit' });
      } catch (e) {
        console.error('vm-cleanup:', e);
      }
    }
    if (!process.env.KEEP_WORK) rmSync(srv.work, { recursive: true, force: true });
  }
}

// Record a call's progress notifications: pass `onprogress` to callTool, then
// call done() after the result came. The SDK pinned here (1.32.2) retires a
// request's progress handler when its response arrives, while it runs
// notification handlers a microtask later; a notification written just before
// the response (our final "ready") can then miss its handler and go to
// onerror instead ("Received a progress notification for an unknown token",
// typescript-sdk#2580). done() takes such a notification back from the error
// and fails on any other error; it returns the notifications' params in order.
export function progressRecorder(client) {
  const seen = [], errors = [];
  const prior = client.onerror;
  client.onerror = e => errors.push(e);
  return {
    onprogress: p => seen.push(p),
    done() {
      client.onerror = prior;
      for (const e of errors) {
        const m = /^Received a progress notification for an unknown token: (.*)$/s.exec(e.message);
        assert.ok(m, `no other client error: ${e}`);
        const { progressToken, ...params } = JSON.parse(m[1]).params;
        assert.ok(progressToken !== undefined);
        seen.push(params);
      }
      assert.ok(errors.length <= 1, `at most the last notification came with the response: ${errors}`);
      return seen;
    },
  };
}

// create_sandbox's progress: several notifications, progress only increasing,
// the stages named ("creating sandbox", "booting the VM (N s)", ..., "ready").
export function checkProgress(seen) {
  assert.ok(seen.length >= 3, `several notifications: ${JSON.stringify(seen)}`);
  for (let i = 1; i < seen.length; i++)
    assert.ok(seen[i].progress > seen[i - 1].progress, `progress increases: ${JSON.stringify(seen)}`);
  assert.equal(seen[0].message, 'creating sandbox');
  assert.match(seen[1].message, /^booting the VM \(\d+ s\)$/);
  assert.equal(seen.at(-1).message, 'ready');
}
