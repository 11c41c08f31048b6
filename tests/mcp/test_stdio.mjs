// aas-mcp, the stdio MCP server, driven by the official MCP TypeScript SDK
// client (StdioClientTransport) against aas-server-fake (the server's code
// with the fake VM driver), plus a raw child process for the line framing the
// SDK hides (malformed lines, notifications, batches, EOF).
//
// usage: node test_stdio.mjs AAS_SERVER_FAKE AAS_MCP   (run by tests/mcp/run)
//
// Real-VM mode: with AAS_TEST_IMAGES set (a directory holding the tiny image),
// the given server binary is the REAL aas-server, started with --images DIR
// --image tiny --templates off (cold boots: see harness.mjs), and the agent
// session also checks the guest's user and working directory. Every sandbox is destroyed and tests/integration/vm-cleanup
// runs on the state directory afterwards, pass or fail (harness.mjs).
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { IMAGES, checkedCaller, testServer, textOf, sandboxes, waitFor, waitNoneActive, sleep, destroyAll,
         progressRecorder, checkProgress, busyForkResume } from './harness.mjs';

const SERVER = process.argv[2] || process.env.AAS_SERVER_FAKE;
const AAS_MCP = process.argv[3] || process.env.AAS_MCP;
assert.ok(SERVER && AAS_MCP, 'usage: test_stdio.mjs AAS_SERVER_FAKE AAS_MCP');
// The fake driver's VMs take 2.5 s to create, as a real boot takes seconds, so
// that progress and cancellation have a create in flight to report on.
const srv = testServer(SERVER, { name: 'mcp-stdio-agent', prefix: 'aas-mcp-stdio-test.',
                                 env: IMAGES ? {} : { AAS_FAKE_CREATE_DELAY_MS: '2500' } });
let base, key;

before(async () => {
  await srv.start();
  ({ base, key } = srv);
});

after(() => srv.stop());

// What a test opened is closed after it, pass or fail: a failed test must not leave aas-mcp
// children running (node would wait for them) or sandboxes that fail the next test's checks.
const opened = new Set();
afterEach(async () => {
  for (const o of opened) {
    try {
      if (o.close) await o.close();
      else if (o.exitCode === null && o.signalCode === null) o.kill('SIGTERM');
    } catch { /* already closed */ }
  }
  opened.clear();
  await destroyAll(srv);
});

// The environment aas-mcp gets: the SDK adds only a few safe variables (PATH, HOME, ...).
const envWith = (extra) => ({ AAS_BASE_URL: base, ...extra });

async function connect(env) {
  const client = new Client({ name: 'libsaas-stdio-test', version: '1.0.0' });
  const transport = new StdioClientTransport({ command: AAS_MCP, args: [], env, stderr: 'pipe' });
  let stderr = '';
  transport.stderr.on('data', d => { stderr += d; });
  await client.connect(transport);
  opened.add(client);
  return { client, transport, stderr: () => stderr };
}

test('--version and --help', () => {
  assert.match(execFileSync(AAS_MCP, ['--version']).toString(), /^aas-mcp \d+\.\d+/);
  const help = execFileSync(AAS_MCP, ['--help']).toString();
  assert.match(help, /AAS_API_KEY/);
  assert.match(help, /AAS_BASE_URL/);
});

test('initialize, 13 tools (no get_service_info), a whole agent session with valid structuredContent', async () => {
  const { client, stderr } = await connect(envWith({ AAS_API_KEY: key }));
  assert.equal(client.getServerVersion().name, 'libsaas');
  assert.deepEqual(client.getServerCapabilities().tools, { listChanged: false });
  const { tools, nextCursor } = await client.listTools();
  assert.equal(nextCursor, undefined);
  assert.deepEqual(tools.map(t => t.name).sort(), ['create_sandbox', 'destroy_sandbox', 'expose_port',
    'extend_sandbox', 'fork_sandbox', 'get_sandbox', 'get_usage', 'list_files', 'list_sandboxes', 'pause_sandbox',
    'read_file', 'resume_sandbox', 'run_code', 'run_command', 'set_network_policy', 'unexpose_port', 'write_file']);
  const { call, seen } = checkedCaller(client, tools, { strict: false });

  const sb = await call('create_sandbox', { size: 'small', timeout_seconds: 600 });
  assert.match(sb.id, /^sbx-/);
  assert.equal(sb.status, 'ready');
  const id = sb.id;
  let x = await call('run_command', { sandbox_id: id, command: 'echo hello' });
  assert.equal(x.exit_code, 0);
  assert.equal(x.stdout, 'hello\n');
  x = await call('run_command', { sandbox_id: id, command: 'exit 3' });
  assert.equal(x.exit_code, 3);
  if (IMAGES) {
    // Real VM: the unprivileged user, in /workspace, and a file written by a command read back by the tool.
    x = await call('run_command', { sandbox_id: id, command: 'id -un; pwd; echo made-inside > inside.txt' });
    assert.equal(x.stdout, 'sandbox\n/workspace\n', JSON.stringify(x));
    assert.equal((await call('read_file', { sandbox_id: id, path: '/workspace/inside.txt' })).content, 'made-inside\n');
  }

  const bin = Buffer.from([0, 1, 2, 0xff, 0xfe, 0x80, 10, 0x41, 13, 10]);
  const w = await call('write_file', { sandbox_id: id, path: 'out/data.bin', content: bin.toString('base64'),
                                       encoding: 'base64' });
  assert.equal(w.bytes, bin.length);
  const rf = await call('read_file', { sandbox_id: id, path: 'out/data.bin' });
  assert.equal(rf.encoding, 'base64');
  assert.deepEqual(Buffer.from(rf.content, 'base64'), bin);
  await call('write_file', { sandbox_id: id, path: 'lines.txt', content: 'one\ntwo\n"three"\n' });
  assert.equal((await call('read_file', { sandbox_id: id, path: 'lines.txt' })).content, 'one\ntwo\n"three"\n');

  const lf = await call('list_files', { sandbox_id: id });
  assert.ok(lf.entries.some(e => e.path.endsWith('/out/data.bin') && e.size === bin.length), JSON.stringify(lf));
  const ep = await call('expose_port', { sandbox_id: id, port: 8000 });
  assert.match(ep.url, /^https?:\/\//);
  assert.equal((await call('get_sandbox', { sandbox_id: id })).ports[0].port, 8000);
  assert.equal((await call('unexpose_port', { sandbox_id: id, port: 8000 })).exposed, false);
  assert.equal((await call('get_sandbox', { sandbox_id: id })).ports.length, 0);
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
  assert.ok((await call('list_sandboxes', {})).sandboxes.some(s => s.id === id));
  assert.equal((await call('get_usage', {})).active_sandboxes, 1);
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
  assert.equal((await call('destroy_sandbox', { sandbox_id: id })).status, 'destroyed');
  // set_network_policy only with the fake driver (above).
  assert.equal(seen.size, IMAGES ? 12 : 13, `every tool was called: ${[...seen]}`);

  const r = await client.callTool({ name: 'get_service_info', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /tools\/list/);
  await client.close();
  assert.ok(!stderr().includes(key), 'the API key never appears in the log');
});

test('no AAS_API_KEY: tools/list works, a tool call is isError saying how to set AAS_API_KEY', async () => {
  const { client, stderr } = await connect(envWith({}));
  const { tools } = await client.listTools();
  assert.equal(tools.length, 17);
  const r = await client.callTool({ name: 'list_sandboxes', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /AAS_API_KEY/);
  await client.close();
  assert.match(stderr(), /AAS_API_KEY/);
});

test('a wrong AAS_API_KEY: a tool call is isError saying the key is unknown', async () => {
  const { client } = await connect(envWith({ AAS_API_KEY: 'aas_sk_wrongwrongwrong' }));
  const r = await client.callTool({ name: 'get_usage', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /unknown or revoked/);
  assert.match(textOf(r), /AAS_API_KEY/);
  assert.ok(textOf(r).includes(`${base.replace(/\/$/, '')}/dashboard/keys`), textOf(r)); // where to make one
  await client.close();
});

test('AAS_BASE_URL with /v1, or a server not there: tool calls say what is wrong and what to set', async () => {
  const key = 'aas_sk_wrongwrongwrong';
  let { client } = await connect({ AAS_BASE_URL: `${base.replace(/\/$/, '')}/v1`, AAS_API_KEY: key });
  let r = await client.callTool({ name: 'list_sandboxes', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /AAS_BASE_URL/);
  assert.match(textOf(r), /without \/v1/);
  assert.match(textOf(r), /retrying does not help/);
  assert.doesNotMatch(textOf(r), /Retry shortly/);
  await client.close();
  // A loopback port nothing listens on (port 1 needs root to bind: nothing does here).
  ({ client } = await connect({ AAS_BASE_URL: 'http://127.0.0.1:1', AAS_API_KEY: key }));
  r = await client.callTool({ name: 'list_sandboxes', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /cannot reach the libsaas server at http:\/\/127\.0\.0\.1:1/);
  assert.match(textOf(r), /AAS_BASE_URL/);
  await client.close();
});

test('raw lines: malformed -> -32700 with id null, notifications silent, batches, EOF exits 0', async () => {
  const child = spawn(AAS_MCP, [], { env: { PATH: process.env.PATH, AAS_BASE_URL: base },
                                     stdio: ['pipe', 'pipe', 'pipe'] });
  opened.add(child);
  let out = '', err = '';
  child.stdout.on('data', d => { out += d; });
  child.stderr.on('data', d => { err += d; });
  const exited = new Promise(r => child.once('exit', (code, signal) => r({ code, signal })));
  child.stdin.write('{"jsonrpc": "2.0", "id": 1, "method": \n');
  // Batches exist in protocol version 2025-03-26 only.
  child.stdin.write('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}\n');
  child.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
  child.stdin.write('\n');
  child.stdin.write('[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},' +
                    '{"jsonrpc":"2.0","id":3,"method":"no/such"}]\n');
  child.stdin.write('{"jsonrpc":"1.0","id":4,"method":"ping"}\n');
  child.stdin.end('{"jsonrpc":"2.0","id":5,"method":"tools/list"}\n');
  const { code } = await exited;
  assert.equal(code, 0, `exit 0 at EOF; stderr: ${err}`);
  const lines = out.split('\n');
  assert.equal(lines.pop(), '', 'every response ends with a newline');
  assert.equal(lines.length, 5, out);
  const [parse, init, batch, inval, list] = lines.map(l => JSON.parse(l));
  assert.equal(init.result.protocolVersion, '2025-03-26');
  assert.equal(parse.id, null);
  assert.equal(parse.error.code, -32700);
  assert.deepEqual(batch.map(m => m.id), [2, 3]);
  assert.deepEqual(batch[0].result, {});
  assert.equal(batch[1].error.code, -32601);
  assert.equal(inval.error.code, -32600);
  assert.equal(list.id, 5);
  assert.equal(list.result.tools.length, 17);
});

// Spawn aas-mcp, write `input` to it and close stdin; its exit code and its output lines, parsed.
async function rawSession(input) {
  const child = spawn(AAS_MCP, [], { env: { PATH: process.env.PATH, AAS_BASE_URL: base },
                                     stdio: ['pipe', 'pipe', 'pipe'] });
  opened.add(child);
  const out = [], err = [];
  child.stdout.on('data', d => out.push(d));
  child.stderr.on('data', d => err.push(d));
  const exited = new Promise(r => child.once('exit', code => r(code)));
  child.stdin.on('error', () => {}); // it may close stdin before reading it all; the answers say what it did
  child.stdin.end(input);
  const code = await exited;
  const text = Buffer.concat(out).toString();
  assert.equal(code, 0, `exit 0 at EOF; stderr: ${Buffer.concat(err)}`);
  assert.ok(text.endsWith('\n'), 'every response ends with a newline');
  return text.slice(0, -1).split('\n').map(l => JSON.parse(l));
}

test('bounds: batches only in 2025-03-26 and at most 32, never initialize in one, lines at most 24 MiB', async () => {
  const MESSAGE_MAX = 24 << 20, BATCH_MAX = 32;   // AAS_MCP_MESSAGE_MAX, AAS_MCP_BATCH_MAX
  const init = v => JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: v } });
  const pings = n => JSON.stringify(Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: i + 1, method: 'ping' })));
  // Before initialize and in 2025-06-18: a batch is refused whole, with one error.
  let [early, , late] = await rawSession(`${pings(2)}\n${init('2025-06-18')}\n${pings(2)}\n`);
  for (const m of [early, late]) {
    assert.equal(m.error.code, -32600, JSON.stringify(m));
    assert.equal(m.id, null);
    assert.match(m.error.message, /2025-03-26/);
  }
  // 2025-03-26: 32 messages are answered, 33 refused; initialize never comes in a batch.
  const batchInit = JSON.stringify([JSON.parse(init('2025-03-26')), { jsonrpc: '2.0', id: 9, method: 'ping' }]);
  const [, full, over, withInit] = await rawSession(
    `${init('2025-03-26')}\n${pings(BATCH_MAX)}\n${pings(BATCH_MAX + 1)}\n${batchInit}\n`);
  assert.equal(full.length, BATCH_MAX);
  assert.equal(over.error.code, -32600);
  assert.match(over.error.message, new RegExp(`limit of ${BATCH_MAX}`));
  assert.equal(withInit.error.code, -32600);
  assert.match(withInit.error.message, /initialize/);
  // A line of exactly AAS_MCP_MESSAGE_MAX bytes is read; one byte more is skipped with an error, and the next line is read.
  const padded = (n) => { const m = '{"jsonrpc":"2.0","id":7,"method":"ping"}'; return m + ' '.repeat(n - m.length); };
  const [at, tooLong, after] = await rawSession(`${padded(MESSAGE_MAX)}\n${padded(MESSAGE_MAX + 1)}\n` +
                                                 '{"jsonrpc":"2.0","id":8,"method":"ping"}\n');
  assert.deepEqual(at, { jsonrpc: '2.0', id: 7, result: {} });
  assert.equal(tooLong.error.code, -32600);
  assert.equal(tooLong.id, null);
  assert.match(tooLong.error.message, new RegExp(`at most ${MESSAGE_MAX} bytes`));
  assert.equal(after.id, 8);
});

test('create_sandbox with a progress token: notifications/progress lines, then the result', async () => {
  const { client } = await connect(envWith({ AAS_API_KEY: key }));
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
});

test('a cancelled create_sandbox gets no response and its sandbox is destroyed', async () => {
  const { client } = await connect(envWith({ AAS_API_KEY: key }));
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
  // The connection is not held up meanwhile.
  await client.ping();
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
});

test('raw lines: calls run while stdin is read; a cancelled call is never answered; EOF waits for calls', async () => {
  const child = spawn(AAS_MCP, [], { env: { PATH: process.env.PATH, AAS_BASE_URL: base, AAS_API_KEY: key },
                                     stdio: ['pipe', 'pipe', 'pipe'] });
  opened.add(child);
  const lines = [];
  let buf = '', err = '';
  const waiters = [];
  child.stdout.on('data', d => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      lines.push(JSON.parse(buf.slice(0, i)));
      buf = buf.slice(i + 1);
    }
    for (const w of waiters.splice(0)) w();
  });
  child.stderr.on('data', d => { err += d; });
  const exited = new Promise(r => child.once('exit', (code, signal) => r({ code, signal })));
  const until = async pred => {
    for (const t = Date.now() + 120000; !lines.some(pred);) {
      assert.ok(Date.now() < t, `timed out; lines so far: ${JSON.stringify(lines)}`);
      await new Promise(r => { waiters.push(r); setTimeout(r, 500); });
    }
    return lines.find(pred);
  };
  const before = new Set((await sandboxes(srv)).map(s => s.id));
  const send = m => child.stdin.write(JSON.stringify(m) + '\n');
  // Two creates at once: 7 to be cancelled, 8 to finish.
  send({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'create_sandbox', arguments: {}, _meta: { progressToken: 'seven' } } });
  send({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'create_sandbox', arguments: {}, _meta: { progressToken: 'eight' } } });
  // Answered while both run.
  send({ jsonrpc: '2.0', id: 1, method: 'ping' });
  await until(l => l.id === 1);
  assert.ok(!lines.some(l => l.id === 7 || l.id === 8), 'ping answered before the creates finished');
  await until(l => l.method === 'notifications/progress' && l.params.progressToken === 'seven' &&
                   /booting/.test(l.params.message));
  send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7, reason: 'test' } });
  send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'nobody' } });
  send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }); // finished
  const done8 = await until(l => l.id === 8);
  assert.equal(done8.result.structuredContent.status, 'ready');
  await waitFor('the cancelled create\'s sandbox to be destroyed', async () =>
    (await sandboxes(srv)).some(s => !before.has(s.id) && s.status === 'destroyed'));
  // EOF: aas-mcp answers what still runs, then exits 0.
  send({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'destroy_sandbox', arguments: { sandbox_id: done8.result.structuredContent.id } } });
  child.stdin.end();
  const { code } = await exited;
  assert.equal(code, 0, `exit 0 at EOF; stderr: ${err}`);
  assert.equal(lines.find(l => l.id === 9).result.structuredContent.status, 'destroyed');
  assert.ok(!lines.some(l => l.id === 7), `no response to the cancelled request: ${JSON.stringify(lines.filter(l => l.id === 7))}`);
  const prog7 = lines.filter(l => l.params?.progressToken === 'seven');
  assert.ok(!prog7.some(l => l.params.message === 'ready'), 'no progress after the cancellation');
  const prog8 = lines.filter(l => l.params?.progressToken === 'eight').map(l => l.params);
  checkProgress(prog8);
  assert.ok(lines.indexOf(done8) > lines.findIndex(l => l.params?.message === 'ready' && l.params.progressToken === 'eight'),
            'the progress comes before the response');
  await waitNoneActive(srv);
});

// Through aas-mcp's remote client and the REST create: the same arguments and errors as /v1/mcp's (mcp.http).
test('create_sandbox with metadata and envs over stdio', { skip: IMAGES ? 'the fake driver only' : false }, async () => {
  const { client } = await connect(envWith({ AAS_API_KEY: key }));
  const { tools } = await client.listTools();
  const { call } = checkedCaller(client, tools, { strict: false });
  const sb = await call('create_sandbox', { metadata: { team: 'blue' }, envs: { GREETING: 'hi there' } });
  assert.deepEqual(sb.metadata, { team: 'blue' });
  assert.deepEqual(sb.envs, { GREETING: 'hi there' });
  const x = await call('run_command', { sandbox_id: sb.id, command: 'env' }); // the fake's env: what it was given
  assert.equal(x.stdout, 'GREETING=hi there\n');
  for (const [args, re] of [[{ metadata: ['team'] }, /"metadata" must be an object/],
                            [{ envs: { 'A B': 'c' } }, /envs/]]) {
    const r = await client.callTool({ name: 'create_sandbox', arguments: args });
    assert.equal(r.isError, true);
    assert.match(textOf(r), re);
  }
});

// A fork and a resume refused for room (harness.mjs): the REST 503's Retry-After, read by aas-mcp's remote
// client, said to the agent.
test('a resume or fork refused for room says when to try again', { skip: IMAGES ? 'the fake driver only' : false },
     async () => {
  const { client } = await connect(envWith({ AAS_API_KEY: key }));
  const { tools } = await client.listTools();
  await busyForkResume(client, checkedCaller(client, tools, { strict: false }).call);
  await client.close();
});
