// The MCP server as users of Node install it: `npx -y http://127.0.0.1:PORT/mcp.tgz`, the npm
// package aas-server serves (mcp/npm/, a bridge from stdio to the server's /v1/mcp), driven by
// the official MCP TypeScript SDK client (StdioClientTransport) against aas-server-fake.
//
// npm runs with its cache, its user config and HOME in the test's own directory, so nothing of
// the user's is read or written, and with a registry that does not exist: the package has no
// dependencies, and installing it must not need one.
//
// usage: node test_npx.mjs AAS_SERVER_FAKE   (run by tests/mcp/run with ONLY=npx)
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { checkedCaller, testServer, textOf, sandboxes, waitFor, waitNoneActive, sleep, destroyAll,
         progressRecorder, checkProgress } from './harness.mjs';

const SERVER = process.argv[2] || process.env.AAS_SERVER_FAKE;
assert.ok(SERVER, 'usage: test_npx.mjs AAS_SERVER_FAKE');
// A create that outlasts a progress heartbeat (1 s), so that progress and cancellation have one to report on.
// One MCP session kept: a new one ends the one before (the tests use one client at a time), so a test can
// make the server forget a bridge's session.
const srv = testServer(SERVER, { name: 'mcp-npx-agent', prefix: 'aas-mcp-npx-test.',
                                 env: { AAS_FAKE_CREATE_DELAY_MS: '2500' }, args: ['--mcp-sessions', '1'] });
const home = mkdtempSync(join(tmpdir(), 'aas-mcp-npx-home.'));
let base, key, tgz;

before(async () => {
  await srv.start();
  ({ base, key } = srv);
  tgz = `${base}/mcp.tgz`;
  writeFileSync(join(home, 'npmrc'), '');
});

after(async () => {
  await srv.stop();
  rmSync(home, { recursive: true, force: true });
});

const opened = new Set();
afterEach(async () => {
  for (const c of opened) {
    try {
      await c.close();
    } catch { /* already closed */ }
  }
  opened.clear();
  await destroyAll(srv);
});

// What npx and the bridge get: npm kept to the test's directory, no registry, no prompts.
const npmEnv = extra => ({
  HOME: home,
  npm_config_cache: join(home, 'npm-cache'),
  npm_config_userconfig: join(home, 'npmrc'),
  npm_config_registry: 'http://127.0.0.1:9/',
  npm_config_update_notifier: 'false',
  npm_config_audit: 'false',
  npm_config_fund: 'false',
  npm_config_loglevel: 'error',
  ...extra,
});

// The client, and the bridge's stderr; connect() rejects when initialize does.
async function connect(env) {
  const client = new Client({ name: 'libsaas-npx-test', version: '1.0.0' });
  const transport = new StdioClientTransport({ command: 'npx', args: ['-y', tgz], env: npmEnv(env), stderr: 'pipe' });
  let stderr = '';
  transport.stderr.on('data', d => { stderr += d; });
  opened.add(client);
  await client.connect(transport);
  return { client, stderr: () => stderr };
}

// GET path with a Host of our choosing (fetch would not send one): status, headers, body.
function get(path, host) {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: srv.port, path, headers: { Host: host } }, res => {
      const parts = [];
      res.on('data', d => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(parts) }));
    });
    req.on('error', reject);
    req.end();
  });
}

// The entries of a tar archive (ustar): name, mode, size, data; every header's checksum checked.
function untar(tar) {
  const files = [];
  const octal = (b, at, n) => parseInt(b.subarray(at, at + n).toString('latin1').replace(/\0.*$/s, '').trim() || '0', 8);
  for (let at = 0; at + 512 <= tar.length;) {
    const h = tar.subarray(at, at + 512);
    if (h.every(b => b === 0))
      break;
    let sum = 0;
    for (let i = 0; i < 512; i++)
      sum += i >= 148 && i < 156 ? 32 : h[i];
    assert.equal(octal(h, 148, 8), sum, 'a header checksum');
    assert.equal(h.subarray(257, 263).toString('latin1'), 'ustar\0');
    const size = octal(h, 124, 12);
    files.push({ name: h.subarray(0, 100).toString('utf8').replace(/\0.*$/s, ''), mode: octal(h, 100, 8),
                 type: String.fromCharCode(h[156]), data: tar.subarray(at + 512, at + 512 + size) });
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return files;
}

test('GET /mcp.tgz: a gzip Node reads, an npm package naming the server it came from', async () => {
  const res = await fetch(tgz);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'application/gzip');
  const gz = Buffer.from(await res.arrayBuffer());
  const files = untar(gunzipSync(gz));
  assert.deepEqual(files.map(f => [f.name, f.mode, f.type]), [
    ['package/package.json', 0o644, '0'], ['package/bin/aas-mcp.js', 0o755, '0'], ['package/server.json', 0o644, '0']]);
  const pkg = JSON.parse(files[0].data.toString());
  assert.equal(pkg.name, 'aas-mcp');
  assert.deepEqual(pkg.bin, { 'aas-mcp': 'bin/aas-mcp.js' });
  assert.equal(pkg.dependencies, undefined, 'no dependencies: nothing but Node is needed');
  assert.match(files[1].data.toString(), /^#!\/usr\/bin\/env node\n/);
  assert.deepEqual(JSON.parse(files[2].data.toString()), { base_url: base });
  // The same request, the same bytes (made once, kept).
  assert.deepEqual(Buffer.from(await (await fetch(tgz)).arrayBuffer()), gz);

  // Another Host, another default server: lowercased, with its port.
  let r = await get('/mcp.tgz', 'Sandbox.Example.COM:8443');
  assert.equal(r.status, 200);
  assert.equal(r.headers.vary, 'Host');
  const named = untar(gunzipSync(r.body)).find(f => f.name === 'package/server.json');
  assert.deepEqual(JSON.parse(named.data.toString()), { base_url: 'http://sandbox.example.com:8443' });
  // A Host that is not a host and port is never written into a package.
  for (const host of ['evil"x', 'a b', 'example.com/path', 'user@example.com', 'example.com:99999', '[::1']) {
    r = await get('/mcp.tgz', host);
    assert.equal(r.status, 400, host);
    const body = JSON.parse(r.body.toString());
    assert.equal(body.error.code, 'bad_host');
    assert.match(body.error.message, /--public-url/);
  }
});

test('npx -y URL/mcp.tgz: the tools of /v1/mcp, and a whole agent session', async () => {
  const { client, stderr } = await connect({ AAS_API_KEY: key });
  assert.equal(client.getServerVersion().name, 'libsaas');
  assert.deepEqual(client.getServerCapabilities().tools, { listChanged: false });
  const { tools } = await client.listTools();
  // The sixteen of the C aas-mcp, and get_service_info: this is the server's own list.
  assert.deepEqual(tools.map(t => t.name).sort(), ['create_sandbox', 'destroy_sandbox', 'expose_port',
    'extend_sandbox', 'fork_sandbox', 'get_sandbox', 'get_service_info', 'get_usage', 'list_files', 'list_sandboxes',
    'pause_sandbox', 'read_file', 'resume_sandbox', 'run_code', 'run_command', 'set_network_policy', 'unexpose_port', 'write_file']);
  const { call } = checkedCaller(client, tools, { strict: false });

  const sb = await call('create_sandbox', { size: 'small', timeout_seconds: 600 });
  assert.match(sb.id, /^sbx-/);
  assert.equal(sb.status, 'ready');
  const x = await call('run_command', { sandbox_id: sb.id, command: 'echo hello' });
  assert.equal(x.exit_code, 0);
  assert.equal(x.stdout, 'hello\n');
  const bin = Buffer.from([0, 1, 2, 0xff, 0xfe, 0x80, 10, 0x41, 13, 10]);
  assert.equal((await call('write_file', { sandbox_id: sb.id, path: 'out/data.bin', content: bin.toString('base64'),
                                           encoding: 'base64' })).bytes, bin.length);
  assert.deepEqual(Buffer.from((await call('read_file', { sandbox_id: sb.id, path: 'out/data.bin' })).content, 'base64'),
                   bin);
  await call('write_file', { sandbox_id: sb.id, path: 'lines.txt', content: 'one\ntwo\n"three" \u00e9\u2028\n' });
  assert.equal((await call('read_file', { sandbox_id: sb.id, path: 'lines.txt' })).content, 'one\ntwo\n"three" \u00e9\u2028\n');
  assert.equal((await call('destroy_sandbox', { sandbox_id: sb.id })).status, 'destroyed');
  assert.deepEqual(await (async () => (await sandboxes(srv, 'active')).map(s => s.id))(), []);
  assert.match(stderr(), /aas-mcp: connected to http:\/\/127\.0\.0\.1:\d+ as account acc-/);
  assert.ok(!stderr().includes(key), 'the key is never logged');
});

test('progress comes through as it happens; a cancelled create gets no response and leaves nothing', async () => {
  const { client } = await connect({ AAS_API_KEY: key });
  const rec = progressRecorder(client);
  const r = await client.callTool({ name: 'create_sandbox', arguments: {} }, undefined, { onprogress: rec.onprogress });
  assert.ok(!r.isError, textOf(r));
  await sleep(100); // a notification the SDK dropped reaches onerror a tick after the result
  checkProgress(rec.done());
  await destroyAll(srv);

  const errors = [];
  client.onerror = e => errors.push(e);
  const before = new Set((await sandboxes(srv)).map(s => s.id));
  const ac = new AbortController();
  const seen = [];
  const call = client.callTool({ name: 'create_sandbox', arguments: {} }, undefined, {
    signal: ac.signal,
    onprogress: p => { seen.push(p); if (seen.length === 2) ac.abort('the test cancels'); },
  });
  await assert.rejects(call, /the test cancels/);
  await client.ping(); // the bridge is not held up meanwhile
  await waitFor('the cancelled create\'s sandbox to be destroyed', async () =>
    (await sandboxes(srv)).find(s => !before.has(s.id) && s.status === 'destroyed'));
  await waitNoneActive(srv);
  await sleep(300);
  assert.deepEqual(errors.map(String), [], 'no response came for the cancelled request');
});

test('a session the server ended is opened again, and the call goes through', async () => {
  const { client, stderr } = await connect({ AAS_API_KEY: key });
  assert.ok((await client.listTools()).tools.length >= 17);
  // Another client's initialize ends the bridge's session (--mcp-sessions 1).
  const res = await fetch(`${base}/v1/mcp`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
                           params: { protocolVersion: '2025-06-18', capabilities: {},
                                     clientInfo: { name: 'another', version: '1' } } }),
  });
  assert.equal(res.status, 200, await res.text());
  const r = await client.callTool({ name: 'list_sandboxes', arguments: {} });
  assert.ok(!r.isError, textOf(r));
  await waitFor('stderr to say the session is opened again',
                () => /the server ended the MCP session; opening a new one/.test(stderr()), 10000);
});

test('a wrong key, or none: isError results that name AAS_API_KEY and /dashboard/keys', async () => {
  let { client, stderr } = await connect({ AAS_API_KEY: 'aas_sk_' + 'x'.repeat(43) });
  // Discovery needs no key.
  assert.ok((await client.listTools()).tools.length >= 17);
  let r = await client.callTool({ name: 'list_sandboxes', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /AAS_API_KEY is unknown or revoked/);
  assert.ok(textOf(r).includes(`${base}/dashboard/keys`), textOf(r));
  // Logged before the result is written, but stderr and stdout are two pipes: its bytes may come later.
  await waitFor('stderr to say the key is unknown', () => /does not know AAS_API_KEY/.test(stderr()), 10000);
  await client.close();

  ({ client } = await connect({}));
  r = await client.callTool({ name: 'create_sandbox', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /needs an API key, and none was set\. Set one in the AAS_API_KEY environment variable/);
  assert.ok(textOf(r).includes(`${base}/dashboard/keys`), textOf(r));
  assert.deepEqual(await sandboxes(srv, 'active'), [], 'nothing was made');
});

test('AAS_BASE_URL: overrides the default; a path in it, or no server there, says what to set', async () => {
  // Overridden: a server on another address (the same one, by its other name) is the one used.
  const { client } = await connect({ AAS_API_KEY: key, AAS_BASE_URL: `http://localhost:${srv.port}` });
  const r = await client.callTool({ name: 'list_sandboxes', arguments: {} });
  assert.ok(!r.isError, textOf(r));
  await client.close();

  // The mistake the docs warn about: /v1 on the end. initialize itself says so (nothing can work), and stderr.
  let s;
  await assert.rejects(connect({ AAS_API_KEY: key, AAS_BASE_URL: `${base}/v1` }).then(c => { s = c; }),
                       /AAS_BASE_URL is "http:\/\/127\.0\.0\.1:\d+\/v1", which aas-mcp cannot use: it has a path.*without \/v1/s);
  assert.equal(s, undefined);

  // Nothing listening there: what is wrong, and where to look.
  await assert.rejects(connect({ AAS_API_KEY: key, AAS_BASE_URL: 'http://127.0.0.1:9' }),
                       /cannot reach the libsaas server at http:\/\/127\.0\.0\.1:9 .*AAS_BASE_URL/s);
});
