// aas-server's MCP endpoint (POST /v1/mcp) driven by the official MCP
// TypeScript SDK client over Streamable HTTP, against aas-server-fake (the
// server's code with the fake VM driver), plus raw fetches for the transport
// rules the SDK hides (sessions, Origin, malformed JSON).
//
// usage: node test_http.mjs AAS_SERVER_FAKE   (run by tests/mcp/run)
//
// Real-VM mode: with AAS_TEST_IMAGES set (a directory holding the tiny image),
// the given binary is the REAL aas-server, started with --images DIR --image
// tiny --templates off (cold boots: see harness.mjs), and the agent session
// also serves a preview page from inside the guest and fetches it through the
// server's preview Host header; run_code runs on a sandbox of the default image (its code server),
// and the official @e2b/code-interpreter SDK then drives the same sandbox through the server's E2B face.
// Every sandbox is destroyed and tests/integration/vm-cleanup runs on the state
// directory afterwards, pass or fail.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import Ajv from 'ajv';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IMAGES, checkedCaller, testServer, textOf, sandboxes, waitFor, waitNoneActive, sleep,
         progressRecorder, checkProgress, busyForkResume } from './harness.mjs';

const SERVER = process.argv[2] || process.env.AAS_SERVER_FAKE;
assert.ok(SERVER, 'usage: test_http.mjs AAS_SERVER_FAKE');
// Browser pages from ALLOWED may use the endpoint (--mcp-allowed-origins).
const ALLOWED = 'https://agent.example';
// The fake driver's VMs take 2.5 s to create, as a real boot takes seconds, so
// that progress and cancellation have a create in flight to report on.
const srv = testServer(SERVER, { name: 'mcp-agent', prefix: 'aas-mcp-test.',
                                 env: IMAGES ? {} : { AAS_FAKE_CREATE_DELAY_MS: '2500' },
                                 args: ['--mcp-allowed-origins', `${ALLOWED}, https://other-allowed.example`] });
let base, endpoint, key, port;

let guest;
before(async () => {
  // run_code's guest: a code server's TEST DOUBLE (canned answers: "chart" is a 1x1 PNG), mapped to guest
  // port 49999 of the fake driver's VMs; with real VMs the image's own code server answers.
  if (!IMAGES) {
    const portFile = join(tmpdir(), `aas-mcp-code-guest.${process.pid}`);
    guest = spawn('python3', [process.env.AAS_CODE_GUEST, portFile], { stdio: 'inherit' });
    for (let i = 0; i < 100 && !existsSync(portFile); i++) await sleep(100);
    process.env.SAAS_FAKE_PORTS = `49999=127.0.0.1:${readFileSync(portFile, 'utf8').trim()}`;
    rmSync(portFile, { force: true });
  }
  await srv.start();
  ({ base, key, port } = srv);
  endpoint = new URL(`${base}/v1/mcp`);
});

after(async () => {
  await srv.stop();
  if (guest) guest.kill();
});

// GET through the server with a preview Host header (fetch() does not let us set Host).
function previewGet(host, path = '/') {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: Number(port), path, method: 'GET', headers: { Host: host } },
      res => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', d => { body += d; });
        res.on('end', () => resolve({ status: res.statusCode, body }));
      });
    req.on('error', reject);
    req.setTimeout(30000, () => req.destroy(new Error('preview request timed out')));
    req.end();
  });
}

async function connect(headers = {}) {
  const client = new Client({ name: 'libsaas-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(endpoint, { requestInit: { headers } });
  await client.connect(transport);
  return { client, transport };
}

const authed = () => connect({ Authorization: `Bearer ${key}` });

// Raw JSON-RPC over fetch.
async function rpc(body, headers = {}) {
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* SSE or empty */ }
  return { res, text, json };
}

async function rawSession(extra = {}) {
  const { res } = await rpc({ jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } }, extra);
  assert.equal(res.status, 200);
  const sid = res.headers.get('mcp-session-id');
  assert.match(sid, /^[0-9a-f]{32}$/);
  return sid;
}

test('initialize, 18 tools, annotations and schemas', async () => {
  const { client, transport } = await connect();
  assert.equal(client.getServerVersion().name, 'libsaas');
  assert.deepEqual(client.getServerCapabilities().tools, { listChanged: false });
  assert.ok(transport.sessionId);
  const { tools, nextCursor } = await client.listTools();
  assert.equal(nextCursor, undefined);
  const names = tools.map(t => t.name).sort();
  assert.deepEqual(names, ['create_sandbox', 'destroy_sandbox', 'expose_port', 'extend_sandbox', 'fork_sandbox',
    'get_sandbox', 'get_service_info', 'get_usage', 'list_files', 'list_sandboxes', 'pause_sandbox', 'read_file',
    'resume_sandbox', 'run_code', 'run_command', 'set_network_policy', 'unexpose_port', 'write_file']);
  // Strict, as the MCP Inspector's strict mode: no union types (type: [..., "null"]), no unknown keywords,
  // and whole schemas (mcp/schemas/ names shared shapes with $ref; tools/list sends them inlined).
  const ajv = new Ajv({ strict: true, allowUnionTypes: false });
  const walk = (s, where) => {
    if (Array.isArray(s)) return s.forEach((v, i) => walk(v, `${where}[${i}]`));
    if (!s || typeof s !== 'object') return;
    assert.ok(!Array.isArray(s.type), `${where}: a type array ${JSON.stringify(s.type)}`);
    assert.ok(!('$ref' in s), `${where}: a $ref left in`);
    for (const [k, v] of Object.entries(s)) walk(v, `${where}.${k}`);
  };
  for (const t of tools) {
    assert.ok(t.description.length > 40, `${t.name} has a description`);
    assert.equal(t.inputSchema.type, 'object');
    assert.equal(t.outputSchema.type, 'object');
    walk(t.inputSchema, `${t.name}.inputSchema`);
    walk(t.outputSchema, `${t.name}.outputSchema`);
    ajv.compile(t.inputSchema);
    ajv.compile(t.outputSchema);
    for (const h of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'])
      assert.equal(typeof t.annotations[h], 'boolean', `${t.name}.${h}`);
  }
  const byName = Object.fromEntries(tools.map(t => [t.name, t]));
  assert.equal(byName.read_file.annotations.readOnlyHint, true);
  assert.equal(byName.destroy_sandbox.annotations.destructiveHint, true);
  assert.match(byName.run_command.description, /&/);
  assert.match(byName.create_sandbox.description, /break-system-packages/);
  // Keyless discovery works.
  const info = await client.callTool({ name: 'get_service_info', arguments: {} });
  assert.ok(!info.isError, textOf(info));
  assert.ok(info.structuredContent.sizes.length >= 1);
  assert.deepEqual(JSON.parse(textOf(info)), info.structuredContent);
  await transport.terminateSession();
  await client.close();
});

test('a whole agent session; every structuredContent validates against its outputSchema', async () => {
  const { client } = await authed();
  const { tools } = await client.listTools(); // primes the SDK's outputSchema validators
  const { call, seen } = checkedCaller(client, tools, { strict: true, allowUnionTypes: false });

  const sb = await call('create_sandbox', { size: 'small', timeout_seconds: 600 });
  assert.match(sb.id, /^sbx-/);
  assert.equal(sb.status, 'ready');
  const id = sb.id;

  let x = await call('run_command', { sandbox_id: id, command: 'echo hello' });
  assert.equal(x.exit_code, 0);
  assert.equal(x.stdout, 'hello\n');
  x = await call('run_command', { sandbox_id: id, command: 'exit 3' });
  assert.equal(x.exit_code, 3);
  x = await call('run_command', { sandbox_id: id, command: 'no-such-program' });
  assert.equal(x.exit_code, 127);
  assert.match(x.stderr, /not found/);
  x = await call('run_command', { sandbox_id: id, command: 'cat', stdin: 'in "quotes"\n' });
  assert.equal(x.stdout, 'in "quotes"\n');
  // A command that times out is an isError result that says to use & (on this sandbox, which the
  // calls below go on using: a VM boot fewer than a sandbox of its own).
  const late = await client.callTool({ name: 'run_command',
                                       arguments: { sandbox_id: id, command: 'sleep 10', timeout_seconds: 1 } });
  assert.equal(late.isError, true);
  assert.match(textOf(late), /timed out/);
  assert.match(textOf(late), /&/);

  const bin = Buffer.from([0, 1, 2, 0xff, 0xfe, 0x80, 10, 0x41]);
  const w = await call('write_file', { sandbox_id: id, path: 'out/data.bin', content: bin.toString('base64'),
                                       encoding: 'base64' });
  assert.equal(w.bytes, bin.length);
  let rf = await call('read_file', { sandbox_id: id, path: 'out/data.bin' });
  assert.equal(rf.encoding, 'base64');
  assert.deepEqual(Buffer.from(rf.content, 'base64'), bin);
  await call('write_file', { sandbox_id: id, path: 'hello.txt', content: 'héllo "world"\n' });
  rf = await call('read_file', { sandbox_id: id, path: 'hello.txt' });
  assert.equal(rf.encoding, 'utf-8');
  assert.equal(rf.content, 'héllo "world"\n');

  const lf = await call('list_files', { sandbox_id: id });
  assert.ok(lf.entries.some(e => e.path.endsWith('/out/data.bin') && e.size === bin.length), JSON.stringify(lf));

  const ep = await call('expose_port', { sandbox_id: id, port: 8000 });
  assert.match(ep.url, /^https?:\/\//);
  const g = await call('get_sandbox', { sandbox_id: id });
  assert.equal(g.ports[0].port, 8000);
  // A running sandbox's use as the host sees it: its newest sample (the schema check above holds its shape).
  assert.ok(g.usage && g.usage.memory_total > 0 && g.usage.vcpus === g.vcpus, JSON.stringify(g.usage));
  assert.ok(g.usage.memory_used <= g.usage.memory_total && g.usage.disk_used >= 0, JSON.stringify(g.usage));
  if (IMAGES) {
    // Real VM: a page served from inside the guest, fetched through the preview Host header.
    const page = 'hello from the guest via MCP\n';
    await call('write_file', { sandbox_id: id, path: '/workspace/index.html', content: page });
    x = await call('run_command', { sandbox_id: id, command: 'busybox httpd -p 8000 -h /workspace &' });
    assert.equal(x.exit_code, 0, JSON.stringify(x));
    // The URL's host is the exposure's own name under the preview domain; the server's port is ours.
    const host = `${new URL(ep.url).hostname}:${port}`;
    let pr = null;
    for (let i = 0; i < 50; i++) {
      pr = await previewGet(host, '/index.html');
      if (pr.status === 200) break;
      await new Promise(r => setTimeout(r, 200));
    }
    assert.equal(pr.status, 200, `preview through ${host}: ${pr.body}`);
    assert.equal(pr.body, page);
  }
  const ux = await call('unexpose_port', { sandbox_id: id, port: 8000 });
  assert.equal(ux.exposed, false);
  assert.equal((await call('get_sandbox', { sandbox_id: id })).ports.length, 0);
  if (IMAGES) {
    const gone = await previewGet(`${new URL(ep.url).hostname}:${port}`, '/index.html');
    assert.equal(gone.status, 404, `an un-exposed port's preview: ${gone.body}`);
  }
  // Egress: read on every sandbox, changed at runtime, a bad rule named (with the fake driver: a real host's enforcement is vm.egress's).
  assert.ok(['isolated', 'internet'].includes(sb.network.mode), `default network ${sb.network.mode}`);
  if (!IMAGES) {
    const np = await call('set_network_policy', { sandbox_id: id, allow: ['PyPI.org', '*.pythonhosted.org'] });
    assert.equal(np.network.mode, 'policy');
    assert.deepEqual(np.network.allow, ['pypi.org', '*.pythonhosted.org']);
    assert.deepEqual(np.network.denied, { connections: 0, lookups: 0 });
    const badRule = await client.callTool({ name: 'set_network_policy', arguments: { sandbox_id: id, allow: ['10.1.2.3/8'] } });
    assert.equal(badRule.isError, true);
    assert.match(badRule.content[0].text, /10\.1\.2\.3\/8/);
    await call('set_network_policy', { sandbox_id: id, network: 'isolated' });
  }
  const ext = await call('extend_sandbox', { sandbox_id: id, seconds: 300 });
  assert.ok(Date.parse(ext.expires_at) > Date.parse(sb.expires_at));
  const ls = await call('list_sandboxes', {});
  assert.ok(ls.sandboxes.some(s => s.id === id));
  const u = await call('get_usage', {});
  assert.equal(u.active_sandboxes, 1);
  // A period by dates (a date `to` includes its day) and by RFC 3339 times.
  const today = new Date().toISOString().slice(0, 10);
  const tomorrow = new Date(Date.parse(today) + 86400000).toISOString().slice(0, 10);
  let ud = await call('get_usage', { from: today, to: today });
  assert.equal(ud.usage.from, `${today}T00:00:00.000Z`);
  assert.equal(ud.usage.to, `${tomorrow}T00:00:00.000Z`);
  assert.ok(ud.usage.sandboxes.some(l => l.sandbox_id === id), JSON.stringify(ud.usage));
  ud = await call('get_usage', { from: '2020-01-01T00:00:00Z', to: '2020-01-02T12:00:00+02:00' });
  assert.equal(ud.usage.to, '2020-01-02T10:00:00.000Z');
  assert.deepEqual(ud.usage.sandboxes, []);
  ud = await call('get_usage', { days: 2, to: '2020-01-03' });
  assert.equal(ud.usage.from, '2020-01-02T00:00:00.000Z');
  for (const [args, re] of [[{ from: 'yesterday' }, /RFC 3339/], [{ to: '2025-02-30' }, /RFC 3339/],
                            [{ from: today, days: 3 }, /not both/], [{ from: tomorrow, to: today }, /before/]]) {
    const bad = await client.callTool({ name: 'get_usage', arguments: args });
    assert.equal(bad.isError, true, JSON.stringify(args));
    assert.match(textOf(bad), re);
  }
  await call('get_service_info', {});
  const d = await call('destroy_sandbox', { sandbox_id: id });
  assert.equal(d.status, 'destroyed');
  await call('list_sandboxes', { status: 'destroyed', limit: 5 });
  // set_network_policy only with the fake driver (above).
  assert.equal(seen.size, IMAGES ? 13 : 14, `every tool was called: ${[...seen]}`);

  // Mistakes an agent can fix are tool results with isError and a next step.
  let r = await client.callTool({ name: 'run_command', arguments: { sandbox_id: id, command: 'echo hi' } });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /create_sandbox/);
  r = await client.callTool({ name: 'get_sandbox', arguments: { sandbox_id: 'sbx-nope' } });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /list_sandboxes/);
  r = await client.callTool({ name: 'run_command', arguments: { command: 'echo hi' } });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /sandbox_id/);
  r = await client.callTool({ name: 'no_such_tool', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /tools\/list/);
  await client.close();
});

// Real VMs: the default image's own code server (the tiny image has none), in one cold-booted sandbox
// (templates are off here): its Python is warm a while after the boot, and run_code says so until then.
test('run_code on a real VM: a matplotlib chart as MCP image content the SDK client decodes; then the E2B SDK',
     { skip: IMAGES ? false : 'real VMs only (run_code against the double is the next test)' }, async () => {
  const { client } = await authed();
  await client.listTools(); // the SDK then checks each structuredContent against run_code's outputSchema
  // A cold boot of the default image outlasts the SDK's 60 s default for a request under TCG.
  const made = await client.callTool({ name: 'create_sandbox', arguments: { image: 'default' } }, undefined,
                                     { timeout: 600_000 });
  assert.equal(made.isError, false, textOf(made));
  const id = made.structuredContent.id;
  const run = (code, more = {}) => client.callTool({ name: 'run_code', arguments: { sandbox_id: id, code, ...more } },
                                                   undefined, { timeout: 300_000 });
  let res = await waitFor('the code server to answer', async () => {
    const r = await run('x = 6\nx * 7');
    return r.isError ? null : r;
  }, 600_000);
  assert.equal(res.structuredContent.results[0].formats['text/plain'], '42');
  res = await run('import matplotlib.pyplot as plt\nplt.plot([1, 3, 2, 4])\nplt.show()');
  assert.equal(res.isError, false, textOf(res));
  const image = res.content.find(c => c.type === 'image');
  assert.ok(image, `an image content item: ${JSON.stringify(res.content.map(c => c.type))}`);
  assert.equal(image.mimeType, 'image/png');
  const png = Buffer.from(image.data, 'base64');
  assert.deepEqual(png.subarray(0, 8), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  assert.equal(png.subarray(12, 16).toString('latin1'), 'IHDR');
  const [w, h] = [png.readUInt32BE(16), png.readUInt32BE(20)];
  assert.ok(w >= 200 && w <= 4000 && h >= 150 && h <= 3000, `a chart's size: ${w}x${h}`);
  assert.equal(png.subarray(-8, -4).toString('latin1'), 'IEND', 'the whole PNG');
  res = await run('x');
  assert.equal(res.structuredContent.results[0].formats['text/plain'], '6', 'the variable lived on');
  res = await run('1 / 0');
  assert.equal(res.isError, false, 'an exception is a result');
  assert.equal(res.structuredContent.error.name, 'ZeroDivisionError');
  res = await run('import time\ntime.sleep(3600)', { timeout_seconds: 2 });
  assert.equal(res.isError, true);
  assert.match(textOf(res), /interrupted; its context and variables stay/);
  res = await run('x + 1');
  assert.equal(res.structuredContent.results[0].formats['text/plain'], '7', 'interrupted, the context lives on');
  await e2bCodeInterpreter(id);
  await client.callTool({ name: 'destroy_sandbox', arguments: { sandbox_id: id } });
  await client.close();
});

// The official @e2b/code-interpreter SDK (pinned as tests/e2b pins it) on that same sandbox, through
// the server's E2B face (E2B_API_URL, E2B_SANDBOX_URL, the key in E2B's shape, as tests/e2b/harness.mjs
// sets them): Sandbox.connect, runCode with its callbacks, language and envs, a chart's PNG and
// chart, an error cut in the guest's kernel, the four context calls, and JavaScript's top-level
// await on the guest's Node 22. e2b.code.real runs the SDK against the code server on the host;
// this is the guest's, with the image's own Python and Node. No VM of its own.
async function e2bCodeInterpreter(id) {
  process.env.E2B_API_URL = `${base}/e2b`;
  process.env.E2B_SANDBOX_URL = `${base}/e2b-sandbox`;
  process.env.E2B_API_KEY = 'e2b_' + Buffer.from(key.slice('aas_sk_'.length), 'latin1').toString('hex');
  delete process.env.E2B_DOMAIN;
  delete process.env.E2B_DEBUG;
  const { Sandbox } = await import('@e2b/code-interpreter');
  const sbx = await Sandbox.connect(id.replace(/^sbx-/, ''), { timeoutMs: 600_000 });
  const slow = { timeoutMs: 300_000 }; // a run under TCG, not the SDK's 60 s

  // The default Python context is MCP's run_code's: its x is there.
  const out = [], seen = [];
  let exe = await sbx.runCode("print('from e2b', x)\nx * 7",
                              { ...slow, onStdout: m => out.push(m.line), onResult: r => seen.push(r.text) });
  assert.equal(exe.error, undefined, JSON.stringify(exe.error));
  assert.deepEqual(out, ['from e2b 6\n']);
  assert.deepEqual(seen, ['42']);
  assert.equal(exe.text, '42');
  exe = await sbx.runCode("import os\nos.environ.get('FROM_E2B', 'unset')", { ...slow, language: 'python', envs: { FROM_E2B: 'yes' } });
  assert.equal(exe.text, 'yes', 'envs for this run');
  assert.equal((await sbx.runCode("os.environ.get('FROM_E2B', 'unset')", slow)).text, 'unset', 'and for no other');

  // A chart: its PNG decodes to a whole image of a chart's size; its chart is E2B's (matplotlib of the image).
  exe = await sbx.runCode('import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n' +
                          "ax.boxplot([[85, 90, 78, 92, 88, 40]], patch_artist=True)\nax.set_ylabel('score (pts)')\n" +
                          'plt.show()', slow);
  const r = exe.results.find(x => x.png);
  assert.ok(r, `a PNG: ${JSON.stringify(exe.results.map(x => x.formats()))} ${JSON.stringify(exe.error)}`);
  const png = Buffer.from(r.png, 'base64');
  assert.deepEqual(png.subarray(0, 8), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  const [w, h] = [png.readUInt32BE(16), png.readUInt32BE(20)];
  assert.ok(w >= 200 && w <= 4000 && h >= 150 && h <= 3000, `a chart's size: ${w}x${h}`);
  assert.equal(png.subarray(-8, -4).toString('latin1'), 'IEND', 'the whole PNG');
  assert.equal(r.chart.type, 'box_and_whisker');
  assert.equal(r.chart.y_unit, 'pts');
  assert.deepEqual(r.chart.elements, [{ label: '1', min: 78, first_quartile: 79.75, median: 86.5, third_quartile: 89.5,
                                        max: 92, outliers: [40] }]);

  // An exception of 10 MB: the guest's kernel cuts it (the code server, its parent, grows by far less
  // than it: uncut, it held several copies), the SDK gets its start within the bounds.
  const hwm = "int(next(l for l in open(f'/proc/{os.getppid()}/status') if l.startswith('VmHWM')).split()[1]) * 1024";
  await sbx.runCode(`before = ${hwm}`, slow);
  exe = await sbx.runCode("raise ValueError('x' * 10_000_000)", slow);
  assert.equal(exe.error.name, 'ValueError');
  assert.equal(exe.error.value, 'x'.repeat(1 << 20));
  assert.match(exe.error.traceback, /the middle of this traceback is cut/);
  exe = await sbx.runCode(`(${hwm}) - before`, slow);
  assert.ok(Number(exe.text) < 20 << 20, `the code server grew by ${exe.text} bytes`);

  // Contexts: created with a cwd, listed, apart from the default, restarted (its state gone), removed.
  const ctx = await sbx.createCodeContext({ language: 'python', cwd: '/tmp', ...slow });
  assert.equal(ctx.cwd, '/tmp');
  await sbx.runCode('y = 5', { ...slow, context: ctx });
  assert.equal((await sbx.runCode('import os\n(y, os.getcwd())', { ...slow, context: ctx })).text, "(5, '/tmp')");
  assert.equal((await sbx.runCode('y', slow)).error?.name, 'NameError', 'the default context has no y');
  assert.ok((await sbx.listCodeContexts()).some(c => c.id === ctx.id));
  await sbx.restartCodeContext(ctx);
  assert.equal((await sbx.runCode('y', { ...slow, context: ctx })).error?.name, 'NameError', 'a restart forgets');
  await sbx.removeCodeContext(ctx);
  assert.ok(!(await sbx.listCodeContexts()).some(c => c.id === ctx.id));

  // JavaScript on the guest's Node (22: the image's): a top-level await, rewritten as Node's REPL does,
  // its declarations kept for the next run.
  const js = await sbx.createCodeContext({ language: 'javascript', ...slow });
  exe = await sbx.runCode('const t = await Promise.resolve(20); let u = t + 1; u * 2', { ...slow, context: js });
  assert.equal(exe.error, undefined, JSON.stringify(exe.error));
  assert.equal(exe.text, '42');
  exe = await sbx.runCode('[t + u, Number(process.versions.node.split(".")[0])]', { ...slow, context: js });
  assert.equal(exe.text, '[ 41, 22 ]');
  await sbx.removeCodeContext(js);
}

test('run_code: a chart comes back as MCP image content the SDK client decodes', async (t) => {
  if (IMAGES) return t.skip('the double\'s canned answers: the test above runs the real code server');
  const { client } = await connect({ Authorization: `Bearer ${key}` });
  await client.listTools(); // the SDK then checks each structuredContent against run_code's outputSchema
  const made = await client.callTool({ name: 'create_sandbox', arguments: {} });
  const id = made.structuredContent.id;
  let res = await client.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: 'chart' } });
  assert.equal(res.isError, false, JSON.stringify(res));
  const image = res.content.find(c => c.type === 'image');
  assert.ok(image, 'an image content item');
  assert.equal(image.mimeType, 'image/png');
  const png = Buffer.from(image.data, 'base64');
  assert.deepEqual(png.subarray(0, 8), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  assert.equal(png.readUInt32BE(16), 1, 'its width');
  assert.deepEqual(res.structuredContent.results[0].binary, ['image/png']);
  assert.equal(res.structuredContent.results[0].formats['image/png'], undefined, 'the bytes travel once');
  assert.equal(res.content[0].type, 'text');
  await client.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: 'x = 5' } });
  res = await client.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: 'x' } });
  assert.equal(res.structuredContent.results[0].formats['text/plain'], '5', 'a variable survives');
  res = await client.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: 'boom' } });
  assert.equal(res.isError, false, 'an exception is a result');
  assert.equal(res.structuredContent.error.name, 'ValueError');
  res = await client.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: 'hang', timeout_seconds: 1 } });
  assert.equal(res.isError, true);
  assert.match(textOf(res), /interrupted; its context and variables stay/);
  res = await client.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: 'x', language: 'cobol' } });
  assert.equal(res.isError, true);
  // A call the client cancels (notifications/cancelled, from an AbortSignal) interrupts a run gone silent
  // at the engine's next tick, not at its 60 s timeout: the double counts the runs it was hung up on.
  const interrupts = async () => Number((await client.callTool({ name: 'run_code',
    arguments: { sandbox_id: id, code: 'interrupts' } })).structuredContent.stdout);
  const before = await interrupts();
  const ac = new AbortController();
  const silent = client.callTool({ name: 'run_code', arguments: { sandbox_id: id, code: 'hang', timeout_seconds: 60 } },
                                 undefined, { signal: ac.signal });
  setTimeout(() => ac.abort(), 500);
  await assert.rejects(silent);
  let n = before;
  for (let i = 0; i < 100 && n === before; i++) {
    await new Promise(r => setTimeout(r, 100));
    n = await interrupts();
  }
  assert.equal(n, before + 1, 'the cancelled call\'s run was interrupted');
  await client.callTool({ name: 'destroy_sandbox', arguments: { sandbox_id: id } });
  await client.close();
});

test('keyless and wrong-key tool calls are isError results with guidance, not 401', async () => {
  const { client } = await connect();
  let r = await client.callTool({ name: 'run_command', arguments: { sandbox_id: 'sbx-x', command: 'ls' } });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /Authorization: Bearer/);
  await client.close();
  const wrong = await connect({ 'x-api-key': 'aas_sk_wrongwrongwrong' });
  r = await wrong.client.callTool({ name: 'list_sandboxes', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /unknown or revoked/);
  assert.match(textOf(r), /\/dashboard\/keys/); // where a person makes one
  await wrong.client.close();
});

test('transport rules: sessions, Origin, Accept, versions, methods', async () => {
  const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
  // No session id: 400; unknown: 404.
  assert.equal((await rpc(list)).res.status, 400);
  const unknown = await rpc(list, { 'Mcp-Session-Id': '0123456789abcdef0123456789abcdef' });
  assert.equal(unknown.res.status, 404);
  // Bad Origin: 403 (before anything else); own loopback origin and the configured ones: fine; none: fine.
  for (const origin of ['https://evil.example', 'https://agent.example.evil.example', 'http://agent.example',
                        `http://127.0.0.1:${Number(port) + 1}`, 'null']) {
    const bad = await rpc(list, { Origin: origin });
    assert.equal(bad.res.status, 403, origin);
    assert.match(bad.json.error.message, /Origin/);
  }
  for (const origin of [ALLOWED, 'https://other-allowed.example', `http://localhost:${port}`])
    await rawSession({ Origin: origin });
  const evilInit = await rpc({ jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } },
    { Origin: 'https://evil.example' });
  assert.equal(evilInit.res.status, 403);
  assert.equal(evilInit.res.headers.get('mcp-session-id'), null);
  await rawSession();
  const sid = await rawSession({ Origin: base });
  // A session may be used from an allowed Origin, not from another.
  assert.equal((await rpc(list, { 'Mcp-Session-Id': sid, Origin: ALLOWED })).res.status, 200);
  assert.equal((await rpc(list, { 'Mcp-Session-Id': sid, Origin: 'https://evil.example' })).res.status, 403);
  // Malformed JSON: -32700.
  const parse = await rpc('{"jsonrpc": "2.0", "id": 1, "method": ', { 'Mcp-Session-Id': sid });
  assert.equal(parse.res.status, 400);
  assert.equal(parse.json.error.code, -32700);
  // Invalid request: -32600.
  const inval = await rpc({ jsonrpc: '1.0', id: 1, method: 'ping' }, { 'Mcp-Session-Id': sid });
  assert.equal(inval.json.error.code, -32600);
  // Unknown methods (server/discover too): -32601.
  for (const method of ['no/such', 'server/discover']) {
    const um = await rpc({ jsonrpc: '2.0', id: 3, method }, { 'Mcp-Session-Id': sid });
    assert.equal(um.res.status, 200);
    assert.equal(um.json.error.code, -32601);
    assert.equal(um.json.id, 3);
  }
  // Invalid params: -32602.
  const ip = await rpc({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { arguments: {} } },
                       { 'Mcp-Session-Id': sid });
  assert.equal(ip.json.error.code, -32602);
  const cur = await rpc({ jsonrpc: '2.0', id: 5, method: 'tools/list', params: { cursor: 'bogus' } },
                        { 'Mcp-Session-Id': sid });
  assert.equal(cur.json.error.code, -32602);
  // ping; notifications -> 202 with no body.
  const ping = await rpc({ jsonrpc: '2.0', id: 6, method: 'ping' }, { 'Mcp-Session-Id': sid });
  assert.deepEqual(ping.json.result, {});
  for (const n of [{ jsonrpc: '2.0', method: 'notifications/initialized' },
                   { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 6 } }]) {
    const nr = await rpc(n, { 'Mcp-Session-Id': sid });
    assert.equal(nr.res.status, 202);
    assert.equal(nr.text, '');
  }
  // Unsupported MCP-Protocol-Version: 400.
  const v = await rpc(list, { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '1999-01-01' });
  assert.equal(v.res.status, 400);
  // Only SSE accepted: one event, with the SSE headers.
  const sse = await rpc(list, { 'Mcp-Session-Id': sid, Accept: 'text/event-stream' });
  assert.equal(sse.res.status, 200);
  assert.match(sse.res.headers.get('content-type'), /text\/event-stream/);
  assert.equal(sse.res.headers.get('cache-control'), 'no-cache');
  const data = JSON.parse(sse.text.split('\n').find(l => l.startsWith('data: ')).slice(6));
  assert.equal(data.result.tools.length, 18);
  // GET: 405 with Allow.
  const get = await fetch(endpoint, { headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid } });
  await get.text();
  assert.equal(get.status, 405);
  assert.match(get.headers.get('allow'), /POST/);
  // Version negotiation: an unknown version gets the newest.
  const init = await rpc({ jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2099-01-01', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } });
  assert.equal(init.json.result.protocolVersion, '2025-11-25');
  // DELETE ends the session; it is unknown afterwards.
  const del = await fetch(endpoint, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid } });
  assert.ok(del.status === 204 || del.status === 200);
  assert.equal((await rpc(list, { 'Mcp-Session-Id': sid })).res.status, 404);
  // A key in the URL is refused.
  const inUrl = await fetch(`${endpoint}?api_key=${key}`, { method: 'POST', body: '{}' });
  await inUrl.text();
  assert.equal(inUrl.status, 400);
});

// A raw POST answered as an event stream: each SSE message with the time it arrived.
async function rawEvents(body, headers) {
  const t0 = Date.now();
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
  const events = [];
  let buf = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buf += decoder.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const data = buf.slice(0, i).split('\n').filter(l => l.startsWith('data: ')).map(l => l.slice(6)).join('\n');
      buf = buf.slice(i + 2);
      if (data) events.push({ at: Date.now() - t0, msg: JSON.parse(data) });
    }
  }
  return { res, events };
}

test('create_sandbox with a progress token: notifications/progress, streamed as they happen, then the result', async () => {
  const { client } = await authed();
  const rec = progressRecorder(client);
  const r = await client.callTool({ name: 'create_sandbox', arguments: {} }, undefined, { onprogress: rec.onprogress });
  try {
    assert.ok(!r.isError, textOf(r));
    assert.equal(r.structuredContent.status, 'ready');
    await sleep(100); // a notification the SDK dropped reaches onerror a tick after the result
    checkProgress(rec.done());
  } finally {
    if (r.structuredContent?.id)
      await client.callTool({ name: 'destroy_sandbox', arguments: { sandbox_id: r.structuredContent.id } });
    await client.close();
  }

  // On the wire: an unbuffered event stream whose first event comes long before the response.
  const sid = await rawSession();
  const h = { 'Mcp-Session-Id': sid, Authorization: `Bearer ${key}` };
  const { res, events } = await rawEvents({ jsonrpc: '2.0', id: 9, method: 'tools/call',
    params: { name: 'create_sandbox', arguments: {}, _meta: { progressToken: 'tok-9' } } }, h);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  assert.equal(res.headers.get('cache-control'), 'no-cache');
  assert.equal(res.headers.get('x-accel-buffering'), 'no');
  const last = events.at(-1);
  assert.equal(last.msg.id, 9, JSON.stringify(events));
  assert.equal(last.msg.result.structuredContent.status, 'ready');
  const notes = events.slice(0, -1);
  assert.ok(notes.every(e => e.msg.method === 'notifications/progress' && e.msg.params.progressToken === 'tok-9'));
  checkProgress(notes.map(e => e.msg.params));
  assert.ok(last.at - notes[0].at >= 1000, `the first event was not held back: ${events.map(e => e.at)}`);
  // Without a token the same call is plain JSON.
  const plain = await rpc({ jsonrpc: '2.0', id: 10, method: 'tools/call',
    params: { name: 'destroy_sandbox', arguments: { sandbox_id: last.msg.result.structuredContent.id } } }, h);
  assert.match(plain.res.headers.get('content-type'), /^application\/json/);
  assert.equal(plain.json.result.structuredContent.status, 'destroyed');
  // A progressToken that is neither a string nor an integer is refused.
  const bad = await rpc({ jsonrpc: '2.0', id: 11, method: 'tools/call',
    params: { name: 'get_usage', arguments: {}, _meta: { progressToken: { x: 1 } } } }, h);
  assert.equal(bad.json.error.code, -32602);
  assert.match(bad.json.error.message, /progressToken/);
});

test('a cancelled create_sandbox gets no response and its sandbox is destroyed', async () => {
  const { client } = await authed();
  const errors = [];
  client.onerror = e => errors.push(e);
  const before = new Set((await sandboxes(srv)).map(s => s.id));
  const ac = new AbortController();
  const seen = [];
  const call = client.callTool({ name: 'create_sandbox', arguments: {} }, undefined, {
    signal: ac.signal,
    // Cancel once the create is under way (its first heartbeat).
    onprogress: p => { seen.push(p); if (seen.length === 2) ac.abort('the test cancels'); },
  });
  await assert.rejects(call, /the test cancels/);
  // The sandbox the create made is destroyed once it exists; nothing is left running.
  const made = await waitFor('the cancelled create\'s sandbox to be destroyed', async () =>
    (await sandboxes(srv)).find(s => !before.has(s.id) && s.status === 'destroyed'));
  await waitNoneActive(srv);
  const act = await client.callTool({ name: 'list_sandboxes', arguments: { status: 'active' } });
  assert.deepEqual(act.structuredContent.sandboxes, []);
  const all = await client.callTool({ name: 'list_sandboxes', arguments: {} });
  assert.equal(all.structuredContent.sandboxes.find(s => s.id === made.id).status, 'destroyed');
  await sleep(300);
  assert.deepEqual(errors.map(String), [], 'no response came for the cancelled request');
  await client.close();

  // On the wire: the event stream of a cancelled call ends without a response; a cancelled
  // plain call (no progress token) is answered with an empty event stream.
  const sid = await rawSession();
  const h = { 'Mcp-Session-Id': sid, Authorization: `Bearer ${key}` };
  const streamed = rawEvents({ jsonrpc: '2.0', id: 21, method: 'tools/call',
    params: { name: 'create_sandbox', arguments: {}, _meta: { progressToken: 21 } } }, h);
  const plain = rpc({ jsonrpc: '2.0', id: 22, method: 'tools/call', params: { name: 'create_sandbox', arguments: {} } }, h);
  await sleep(1200);
  for (const requestId of [21, 22, 'no-such-request']) {
    const c = await rpc({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason: 'test' } }, h);
    assert.equal(c.res.status, 202);
  }
  const { events } = await streamed;
  assert.ok(events.length >= 1 && events.every(e => e.msg.method === 'notifications/progress'), JSON.stringify(events));
  const p = await plain;
  assert.equal(p.res.status, 200);
  assert.match(p.res.headers.get('content-type'), /^text\/event-stream/);
  assert.equal(p.text, '');
  await waitNoneActive(srv);
  // Cancelling a request that already finished changes nothing; the session goes on.
  const c = await rpc({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 10 } }, h);
  assert.equal(c.res.status, 202);
  assert.deepEqual((await rpc({ jsonrpc: '2.0', id: 23, method: 'ping' }, h)).json.result, {});
});

// Against the fake driver only: the engine is the same with VMs, and a second VM would cost mcp.http.vm minutes.
test('create_sandbox with metadata and envs: shown on the sandbox, the envs in every command; bad ones named',
     { skip: IMAGES ? 'the fake driver only' : false }, async () => {
  const { client } = await authed();
  const { tools } = await client.listTools();
  const { call } = checkedCaller(client, tools, { strict: true, allowUnionTypes: false });
  const schema = tools.find(t => t.name === 'create_sandbox').inputSchema;
  assert.equal(schema.properties.metadata.type, 'object');
  assert.equal(schema.properties.envs.maxProperties, 128);
  const sb = await call('create_sandbox', { metadata: { team: 'blue', 'run id': '7' },
                                            envs: { GREETING: 'hi there', LEVEL: '3' } });
  assert.deepEqual(sb.metadata, { 'run id': '7', team: 'blue' });
  assert.deepEqual(sb.envs, { GREETING: 'hi there', LEVEL: '3' });
  // The fake driver's `env` prints the variables a command was given.
  const x = await call('run_command', { sandbox_id: sb.id, command: 'env' });
  assert.equal(x.stdout, 'GREETING=hi there\nLEVEL=3\n');
  const own = await call('run_command', { sandbox_id: sb.id, command: 'env', env: { LEVEL: '4' } });
  assert.equal(own.stdout, 'GREETING=hi there\nLEVEL=4\n', 'run_command\'s env wins');
  assert.deepEqual((await call('get_sandbox', { sandbox_id: sb.id })).metadata, { 'run id': '7', team: 'blue' });
  await call('destroy_sandbox', { sandbox_id: sb.id });
  // The REST create's bounds and errors, each named; nothing is created.
  const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v']));
  for (const [args, re] of [
    [{ metadata: 'team=blue' }, /"metadata" must be an object/],
    [{ metadata: many }, /at most 64/],
    [{ metadata: { team: 7 } }, /"metadata": each value must be a string/],
    [{ metadata: { 'a=b': 'c' } }, /without '='/],
    [{ metadata: { k: 'x'.repeat(1025) } }, /metadata.*1024/],
    [{ envs: ['A=b'] }, /"envs" must be an object/],
    [{ envs: { '1X': 'y' } }, /envs/],
    [{ envs: { A: 'x'.repeat(8193) } }, /envs.*8192/],
  ]) {
    const r = await client.callTool({ name: 'create_sandbox', arguments: args });
    assert.equal(r.isError, true, JSON.stringify(args).slice(0, 80));
    assert.match(textOf(r), re);
  }
  await waitNoneActive(srv);
  await client.close();
});

// A fork and a resume refused for room, as the REST API's 503 busy with Retry-After (harness.mjs).
test('a fork or resume refused for room says when to try again', { skip: IMAGES ? 'the fake driver only' : false },
     async () => {
  const { client } = await authed();
  const { tools } = await client.listTools();
  await busyForkResume(client, checkedCaller(client, tools, { strict: true, allowUnionTypes: false }).call);
  await waitNoneActive(srv);
  await client.close();
});
