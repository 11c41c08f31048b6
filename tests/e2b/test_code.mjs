// The code interpreter's port (49999) through the E2B face, driven by the official
// @e2b/code-interpreter SDK (pinned in package.json): runCode with its callbacks, language and
// envs, a variable kept across runs, a PNG result, an error's traceback, contexts created,
// listed, restarted and removed, two contexts apart, an unknown context, the SDK's timeout (the
// context lives on), the tokens each call needs, and domain mode's 49999-ID host.
//
// Against aas-server-fake, whose guest port 49999 is a TEST DOUBLE of the code server
// (tests/integration/server/code_guest.py, canned answers chosen by the code: "x = N", "x",
// "print S", "chart", "boom", "hang", "interrupts", "toomany"; mapped with SAAS_FAKE_PORTS), not a real kernel: what
// is tested is the face and the engine between the SDK and a code server, not Python.
//
// usage: node test_code.mjs AAS_SERVER_FAKE   (run by tests/e2b/run)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Sandbox } from '@e2b/code-interpreter';
import { NotFoundError, SandboxError, TimeoutError } from 'e2b';
import { testServer, sleep } from './harness.mjs';

const SERVER = process.argv[2];
assert.ok(SERVER, 'usage: test_code.mjs AAS_SERVER_FAKE');
const GUEST = process.env.AAS_CODE_GUEST ||
  join(dirname(fileURLToPath(import.meta.url)), '..', 'integration', 'server', 'code_guest.py');
const DOMAIN = 'e2b.localhost';
const srv = testServer(SERVER, { args: ['--e2b-domain', DOMAIN] });
let guest, sbx;

before(async () => {
  const portFile = join(srv.work, 'guest.port');
  guest = spawn('python3', [GUEST, portFile], { stdio: 'inherit' });
  for (let i = 0; i < 100 && !existsSync(portFile); i++) await sleep(100);
  assert.ok(existsSync(portFile), 'the code server double listens');
  // The fake driver's guest port 49999 is the double (the server inherits the environment).
  process.env.SAAS_FAKE_PORTS = `49999=127.0.0.1:${readFileSync(portFile, 'utf8').trim()}`;
  await srv.start();
  sbx = await Sandbox.create();
});
after(async () => {
  await srv.stop();
  guest.kill();
});

test('runCode: a value, stdout as it comes, a variable kept, envs', async () => {
  const out = [];
  let exe = await sbx.runCode('print hello', { onStdout: m => out.push(m.line) });
  assert.deepEqual(exe.logs.stdout, ['hello\n']);
  assert.deepEqual(out, ['hello\n']);
  assert.equal(exe.error, undefined);
  assert.ok(exe.executionCount >= 1);
  await sbx.runCode('x = 41');
  exe = await sbx.runCode('x');
  assert.equal(exe.text, '41');
  exe = await sbx.runCode('x', { language: 'javascript' });
  assert.equal(exe.error.name, 'NameError', 'another language has its own context');
  exe = await sbx.runCode('env', { envs: { GREETING: 'hi' } });
  assert.deepEqual(JSON.parse(exe.logs.stdout.join('')), { GREETING: 'hi' });
});

test('results: a PNG decodes, an error carries its traceback', async () => {
  const results = [];
  let exe = await sbx.runCode('chart', { onResult: r => results.push(r) });
  assert.equal(results.length, 1);
  assert.ok(exe.results[0].formats().includes('png'));
  const png = Buffer.from(exe.results[0].png, 'base64');
  assert.deepEqual(png.subarray(0, 8), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  assert.equal(png.readUInt32BE(16), 1, 'width');
  const errors = [];
  exe = await sbx.runCode('boom', { onError: e => errors.push(e), onStderr: () => {} });
  assert.equal(exe.error.name, 'ValueError');
  assert.equal(exe.error.value, 'boom');
  assert.match(exe.error.traceback, /ValueError: boom/);
  assert.equal(errors.length, 1);
  assert.deepEqual(exe.logs.stderr, ['about to fail\n']);
});

test('contexts: create, list, run apart, restart, remove, unknown', async () => {
  const a = await sbx.createCodeContext({ language: 'python', cwd: '/tmp' });
  const b = await sbx.createCodeContext({ language: 'bash' });
  assert.equal(a.cwd, '/tmp');
  assert.equal(b.language, 'bash');
  const ids = (await sbx.listCodeContexts()).map(c => c.id);
  assert.ok(ids.includes(a.id) && ids.includes(b.id));
  await sbx.runCode('x = 7', { context: a });
  assert.equal((await sbx.runCode('x', { context: a })).text, '7');
  assert.equal((await sbx.runCode('x', { context: b })).error.name, 'NameError', 'two contexts do not share');
  await sbx.restartCodeContext(a);
  assert.equal((await sbx.runCode('x', { context: a })).error.name, 'NameError', 'a restart forgets');
  await sbx.removeCodeContext(a.id);
  assert.ok(!(await sbx.listCodeContexts()).map(c => c.id).includes(a.id));
  await assert.rejects(sbx.runCode('x', { context: a }), NotFoundError);
  await assert.rejects(sbx.removeCodeContext('nosuch'), NotFoundError);
});

test('the SDK\'s timeout interrupts the run; the context lives on', async () => {
  const interrupts = async () => Number((await sbx.runCode('interrupts')).logs.stdout.join(''));
  const before = await interrupts();
  // "hang" prints once and is then silent: the face learns of the SDK's leaving from the engine's
  // ticks, and cuts the run then (the double counts the hang-up), not at the face's own bound.
  await assert.rejects(sbx.runCode('hang', { timeoutMs: 500 }), TimeoutError);
  let after = before;
  for (let i = 0; i < 60 && after === before; i++) {
    await sleep(500);
    after = await interrupts();
  }
  assert.ok(after > before, 'the silent run was interrupted after the SDK left');
  assert.equal((await sbx.runCode('x')).text, '41');
});

test('what the code server refuses: the SDK\'s error classes, with the guest\'s words', async () => {
  await assert.rejects(sbx.runCode('toomany'), e => e instanceof SandboxError && /429/.test(e.message));
  await assert.rejects(sbx.runCode('1', { context: { id: 'nosuch', language: 'python', cwd: '/' } }),
                       e => e instanceof NotFoundError && /Context nosuch not found/.test(e.message));
});

// What a request without the SDK gets: a token is needed, and either of the sandbox's works.
function raw(method, path, headers, body) {
  const port = new URL(srv.base).port;
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers }, res => {
      const chunks = [];
      res.on('data', c => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.setTimeout(60000, () => req.destroy(new Error(`${method} ${path}: no answer in 60 s`)));
    req.end(body);
  });
}

test('tokens: none is refused; the envd token or the traffic token opens it; domain mode', async () => {
  const base = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49999' };
  let r = await raw('GET', '/e2b-sandbox/contexts', base);
  assert.equal(r.status, 401, r.text);
  r = await raw('GET', '/e2b-sandbox/contexts', { ...base, 'E2B-Traffic-Access-Token': 'acc-x.00' });
  assert.equal(r.status, 401, r.text);
  r = await raw('GET', '/e2b-sandbox/contexts', { ...base, 'E2B-Traffic-Access-Token': sbx.trafficAccessToken });
  assert.equal(r.status, 200, r.text);
  r = await raw('GET', '/e2b-sandbox/health', { ...base, 'X-Access-Token': sbx.envdAccessToken ?? sbx.connectionConfig?.accessToken ?? '' });
  // (The SDK keeps the envd token to itself in some versions: the traffic token is what this checks above.)
  assert.ok(r.status === 200 || r.status === 401, r.text);
  // Domain mode: 49999-ID.DOMAIN, with the traffic token, the same calls.
  const host = `49999-${sbx.sandboxId}.${DOMAIN}`;
  r = await raw('POST', '/execute', { Host: host, 'Content-Type': 'application/json',
                                      'E2B-Traffic-Access-Token': sbx.trafficAccessToken }, JSON.stringify({ code: 'x' }));
  assert.equal(r.status, 200, r.text);
  const lines = r.text.trim().split('\n').map(l => JSON.parse(l));
  assert.equal(lines.at(-1).type, 'end_of_execution');
  assert.equal(lines.find(l => l.type === 'result').text, '41');
  r = await raw('GET', '/contexts', { Host: host });
  assert.equal(r.status, 401, 'domain mode without a token');
  r = await raw('POST', '/execute', { Host: host, 'Content-Type': 'application/json',
                                      'E2B-Traffic-Access-Token': sbx.trafficAccessToken },
                JSON.stringify({ code: 'x', language: 'python', context_id: 'c' }));
  assert.equal(r.status, 400);
  assert.match(r.text, /Only one of context_id or language/);
});
