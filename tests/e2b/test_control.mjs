// The control plane through the official e2b SDK (docs/e2b.md): create, list
// with filters and pages, getInfo, setTimeout, pause, connect (which
// resumes), kill, and the errors the SDK turns into its classes; plus raw
// requests for what the Python SDK sends and requires (its v1 create, the keys
// its models insist on) and for the features answered as missing.
//
// usage: node test_control.mjs AAS_SERVER_FAKE   (run by tests/e2b/run)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import net from 'node:net';
import { Sandbox, SandboxNotFoundError, NotFoundError, AuthenticationError, SandboxError, ServiceBusyError,
         RateLimitError } from 'e2b';
import { testServer, e2bKey, sleep } from './harness.mjs';

const SERVER = process.argv[2];
assert.ok(SERVER, 'usage: test_control.mjs AAS_SERVER_FAKE');
// No key cache: a revoked key is refused at its next request. The file makes more sandboxes in a minute than
// the default creates_per_minute (20) allows, and tests no limit of it: forks and creates here must not meet it.
const srv = testServer(SERVER, { args: ['--key-cache-ttl', '0', '--creates-per-minute', '100'] });

before(() => srv.start());
after(() => srv.stop());

// A raw control-plane request with the account's e2b_ key, as the Python SDK sends it.
async function e2b(method, path, body, key = e2bKey(srv.key)) {
  const res = await fetch(`${srv.base}/e2b${path}`, {
    method, headers: { 'X-API-KEY': key, 'Content-Type': 'application/json', 'lang_version': '3.12' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
}

const near = (date, ms, what) =>
  assert.ok(Math.abs(date.getTime() - (Date.now() + ms)) < 15000, `${what}: ${date.toISOString()} is now + ${ms} ms`);

test('the key in its e2b_ spelling: the Python SDK\'s pattern, the same secret', () => {
  const k = e2bKey(srv.key);
  assert.match(k, /^e2b_[0-9a-f]+$/);
  assert.equal(k.length, 4 + 86);
  // aas-server shows it (the key on stdin, never on the command line).
  assert.equal(execFileSync(SERVER, ['e2b-key'], { input: `${srv.key}\n` }).toString(), `${k}\n`);
  const bad = spawnSync(SERVER, ['e2b-key'], { input: 'e2b_00\n' });
  assert.equal(bad.status, 2);
  assert.equal(bad.stdout.toString(), '');
});

test('create, getInfo, setTimeout, list, pause, connect, kill', async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000, metadata: { 'a b': 'c&d=e', run: 'one' },
                                            envs: { A: '1' } });
  try {
    assert.match(sbx.sandboxId, /^[a-z0-9]+$/, 'an E2B id: lower-case letters and digits, no "-"');
    // The same sandbox under our own API.
    const mine = await srv.rest('GET', `/v1/sandboxes/sbx-${sbx.sandboxId}`);
    assert.equal(mine.status, 200);
    assert.equal(mine.body.status, 'ready');

    let info = await sbx.getInfo();
    assert.equal(info.sandboxId, sbx.sandboxId);
    assert.equal(info.templateId, 'base');
    assert.equal(info.state, 'running');
    assert.deepEqual(info.metadata, { 'a b': 'c&d=e', run: 'one' });
    assert.equal(typeof info.cpuCount, 'number');
    assert.ok(info.memoryMB > 0);
    assert.match(info.envdVersion, /^\d+\.\d+\.\d+$/);
    near(info.endAt, 120_000, 'endAt');

    await sbx.setTimeout(600_000);
    info = await Sandbox.getInfo(sbx.sandboxId);
    near(info.endAt, 600_000, 'endAt after setTimeout');

    // A second sandbox, other metadata: the filter finds each; pages of one walk both.
    const other = await Sandbox.create({ metadata: { run: 'two' } });
    try {
      const found = await Sandbox.list({ query: { state: ['running'], metadata: { 'a b': 'c&d=e' } } }).nextItems();
      assert.deepEqual(found.map(s => s.sandboxId), [sbx.sandboxId]);
      const two = await Sandbox.list({ query: { metadata: { run: 'two' } } }).nextItems();
      assert.deepEqual(two.map(s => s.sandboxId), [other.sandboxId]);
      const pages = Sandbox.list({ limit: 1 });
      const seen = [];
      while (pages.hasNext) {
        const items = await pages.nextItems();
        assert.ok(items.length <= 1);
        seen.push(...items.map(s => s.sandboxId));
      }
      assert.deepEqual(seen.sort(), [sbx.sandboxId, other.sandboxId].sort());
      assert.equal((await Sandbox.list({ query: { state: ['paused'] } }).nextItems()).length, 0);
    } finally {
      assert.equal(await other.kill(), true);
    }

    // Pause: true, then false (409: already paused); the list sees it paused.
    assert.equal(await sbx.pause(), true);
    assert.equal((await sbx.getInfo()).state, 'paused');
    assert.equal(await sbx.pause(), false);
    const paused = await Sandbox.list({ query: { state: ['paused'] } }).nextItems();
    assert.deepEqual(paused.map(s => s.sandboxId), [sbx.sandboxId]);

    // Connect resumes it, with the same access token.
    const again = await Sandbox.connect(sbx.sandboxId);
    assert.equal(again.sandboxId, sbx.sandboxId);
    assert.equal((await again.getInfo()).state, 'running');
    const created = await e2b('POST', `/v2/sandboxes/${sbx.sandboxId}/connect`, {});
    assert.equal(created.status, 200, 'a running sandbox connects with 200');
    const detail = await e2b('GET', `/sandboxes/${sbx.sandboxId}`);
    assert.equal(created.body.envdAccessToken, detail.body.envdAccessToken);
    assert.match(created.body.envdAccessToken, /^acc-[a-z0-9]+\.[0-9a-f]{64}$/);
    assert.notEqual(created.body.envdAccessToken, e2bKey(srv.key));
  } finally {
    assert.equal(await sbx.kill(), true);
  }
  // Gone: kill says false, getInfo and connect say not found, ours says destroyed.
  assert.equal(await sbx.kill(), false);
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId), SandboxNotFoundError);
  await assert.rejects(Sandbox.connect(sbx.sandboxId), SandboxNotFoundError);
  await assert.rejects(sbx.setTimeout(1000), NotFoundError);
  assert.equal((await srv.rest('GET', `/v1/sandboxes/sbx-${sbx.sandboxId}`)).body.status, 'destroyed');
});

test('errors the SDK maps: unknown sandbox, bad key, revoked key, unknown template', async () => {
  await assert.rejects(Sandbox.connect('zzzz'), SandboxNotFoundError);
  await assert.rejects(Sandbox.getInfo('not-an-id'), SandboxNotFoundError);
  assert.equal(await Sandbox.kill('abcdefgh'), false);

  await assert.rejects(Sandbox.create({ apiKey: 'e2b_' + '0'.repeat(40) }), AuthenticationError);
  await assert.rejects(Sandbox.list({ apiKey: 'aas_sk_nope' }).nextItems(), AuthenticationError);

  // A second key of the account works in both spellings; revoked, neither does.
  const account = (await srv.rest('GET', '/v1/account')).body;
  const second = srv.admin('key', 'create', '--account', account.id, '--name', 'second');
  assert.equal((await Sandbox.list({ apiKey: e2bKey(second) }).nextItems()).length, 0);
  assert.equal((await Sandbox.list({ apiKey: second }).nextItems()).length, 0);
  const line = srv.admin('key', 'list', '--account', account.id).split('\n').find(l => / second /.test(l) ||
                                                                                   l.includes(second.slice(0, 11)));
  assert.ok(line, 'the second key is listed');
  srv.admin('key', 'revoke', '--id', line.split(/\s+/)[0]);
  await assert.rejects(Sandbox.list({ apiKey: e2bKey(second) }).nextItems(), AuthenticationError);
  await assert.rejects(Sandbox.list({ apiKey: second }).nextItems(), AuthenticationError);

  await assert.rejects(Sandbox.create('no-such-template'), err => {
    assert.ok(err instanceof SandboxError, `${err}`);
    assert.match(err.message, /400/);
    assert.match(err.message, /unknown template "no-such-template".*base/);
    return true;
  });
});

test('the Python SDK\'s calls and the keys its models require', async () => {
  // Python creates with the v1 call, always with a timeout, metadata, envVars and secure.
  const made = await e2b('POST', '/sandboxes', { templateID: 'base', timeout: 300, metadata: {}, envVars: {},
                                                 secure: true });
  assert.equal(made.status, 201);
  for (const k of ['sandboxID', 'templateID', 'clientID', 'envdVersion', 'envdAccessToken'])
    assert.ok(k in made.body, `create answers ${k}`);
  const id = made.body.sandboxID;
  const detail = await e2b('GET', `/sandboxes/${id}`);
  for (const k of ['templateID', 'sandboxID', 'clientID', 'startedAt', 'endAt', 'envdVersion', 'cpuCount', 'memoryMB',
                   'diskSizeMB', 'state'])
    assert.ok(k in detail.body, `getInfo answers ${k}`);
  const listed = await e2b('GET', '/v2/sandboxes?state=running,paused');
  assert.equal(listed.status, 200);
  for (const k of ['templateID', 'sandboxID', 'clientID', 'startedAt', 'endAt', 'cpuCount', 'memoryMB', 'diskSizeMB',
                   'state', 'envdVersion'])
    assert.ok(k in listed.body[0], `list answers ${k}`);
  const v1 = await e2b('POST', `/sandboxes/${id}/connect`, { timeout: 60 });
  assert.equal(v1.status, 200);
  // Not found: the status and the body's code both say 404 (Python reads one, JS the other).
  const gone = await e2b('GET', '/sandboxes/zzzz');
  assert.deepEqual([gone.status, gone.body.code], [404, 404]);
  assert.equal(typeof gone.body.message, 'string');
  const del = await e2b('DELETE', `/sandboxes/${id}`);
  assert.equal(del.status, 204);
  const bad = await e2b('GET', '/v2/sandboxes', undefined, 'e2b_00');
  assert.deepEqual([bad.status, bad.body.code], [401, 401]);
});

test('what libsaas does not do answers so, naming it', async () => {
  for (const [method, path, word] of [['GET', '/v3/templates', 'template'], ['POST', '/v3/templates', 'template'],
                                      ['GET', '/secrets', 'secrets'], ['GET', '/volumes', 'volumes'],
                                      ['GET', '/snapshots', 'snapshots']]) {
    const r = await e2b(method, path, method === 'POST' ? {} : undefined);
    assert.equal(r.status, 501, `${method} ${path}`);
    assert.equal(r.body.code, 501);
    assert.match(r.body.message, new RegExp(word));
  }
  for (const [body, word] of [[{ volumeMounts: [{ name: 'v', path: '/data' }] }, 'volumes'],
                              [{ mcp: { github: {} } }, 'root'],
                              [{ autoResume: { enabled: true } }, 'autoResume'],
                              [{ metadata: { 'e2b.template': 'mine' } }, 'e2b\\.'],
                              [{ envVars: { 'NOT A NAME': '1' } }, 'shell name'],
                              [{ network: { allowPublicTraffic: 'no' } }, 'allowPublicTraffic'],
                              [{ network: { allowPublicTraffic: true } }, 'trafficAccessToken']]) {
    const r = await e2b('POST', '/v2/sandboxes', { templateID: 'base', ...body });
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.match(r.body.message, new RegExp(word));
  }
  assert.equal((await srv.rest('GET', '/v1/sandboxes?status=active')).body.sandboxes.length, 0,
               'nothing refused left a sandbox');
  const r = await e2b('POST', '/v2/sandboxes', '{"templateID": ');
  assert.equal(r.status, 400);
});

// Send a request's head and only the first KiB of its body, and read the answer: one that comes
// is given without the body (the server did not wait for it). The status, or 0 for none in 5 s.
function answerBeforeBody(path, headers, length) {
  return new Promise(resolve => {
    const { port } = new URL(srv.base);
    const sock = net.connect(Number(port), '127.0.0.1');
    let got = '';
    const done = st => { clearTimeout(timer); sock.destroy(); resolve(st); };
    const timer = setTimeout(() => done(0), 5000);
    sock.on('data', d => {
      got += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d+)/.exec(got);
      if (m) done(Number(m[1]));
    });
    sock.on('error', () => done(0));
    const head = Object.entries({ ...headers, 'Content-Length': String(length), Host: '127.0.0.1' })
      .map(([k, v]) => `${k}: ${v}\r\n`).join('');
    sock.write(`POST ${path} HTTP/1.1\r\n${head}\r\n` + 'x'.repeat(1024));
  });
}

test('bodies: refused before they are held without a key, bounded with one', async () => {
  const big = JSON.stringify({ templateID: 'base', metadata: { pad: 'x'.repeat(2 << 20) } });
  assert.equal(await answerBeforeBody('/e2b/v2/sandboxes', { 'Content-Type': 'application/json' }, 2 << 20), 401);
  const keyed = await e2b('POST', '/v2/sandboxes', JSON.parse(big));
  assert.deepEqual([keyed.status, keyed.body.code], [413, 413]);
  assert.equal(await answerBeforeBody('/e2b-sandbox/process.Process/List',
                                      { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': 'abc' }, 2 << 20), 401,
               'no access token: refused before its body');
});

test('egress: allowInternetAccess and network lists become the sandbox\'s policy', async () => {
  const closed = await Sandbox.create({ allowInternetAccess: false });
  try {
    const mine = await srv.rest('GET', `/v1/sandboxes/sbx-${closed.sandboxId}`);
    assert.equal(mine.body.network.mode, 'isolated');
    assert.equal((await closed.getInfo()).allowInternetAccess, false);
  } finally {
    await closed.kill();
  }
  const some = await Sandbox.create({ network: { allowOut: ['example.com'], denyOut: ['0.0.0.0/0'] } });
  try {
    const mine = await srv.rest('GET', `/v1/sandboxes/sbx-${some.sandboxId}`);
    assert.equal(mine.body.network.mode, 'policy');
    assert.deepEqual(mine.body.network.allow, ['example.com']);
    // updateNetwork replaces it.
    await some.updateNetwork({ allowOut: ['example.org'], denyOut: ['0.0.0.0/0'] });
    const now = (await srv.rest('GET', `/v1/sandboxes/sbx-${some.sandboxId}`)).body.network;
    assert.deepEqual([now.mode, now.allow], ['policy', ['example.org']]);
    await some.updateNetwork({ allowInternetAccess: false });
    assert.equal((await srv.rest('GET', `/v1/sandboxes/sbx-${some.sandboxId}`)).body.network.mode, 'isolated');
    await assert.rejects(Sandbox.updateNetwork('zzzz', { allowInternetAccess: false }), SandboxNotFoundError);
  } finally {
    await some.kill();
  }
});

test('fork: children of the parent\'s template and metadata, each its own sandbox', async () => {
  const parent = await Sandbox.create({ metadata: { role: 'parent' } });
  try {
    const kids = await parent.fork({ count: 2 });
    assert.equal(kids.length, 2);
    for (const kid of kids) {
      assert.ok(kid instanceof Sandbox, `${kid}`);
      assert.notEqual(kid.sandboxId, parent.sandboxId);
      const info = await kid.getInfo();
      assert.equal(info.state, 'running');
      assert.deepEqual(info.metadata, { role: 'parent' });
      assert.equal((await srv.rest('GET', `/v1/sandboxes/sbx-${kid.sandboxId}`)).body.parent_id,
                   `sbx-${parent.sandboxId}`);
      assert.equal((await kid.commands.run('echo forked')).stdout, 'forked\n');
      assert.equal(await kid.kill(), true);
    }
    await assert.rejects(Sandbox.fork('zzzz'), SandboxNotFoundError);
    const many = await e2b('POST', `/sandboxes/${parent.sandboxId}/fork`, { count: 11 });
    assert.deepEqual([many.status, many.body.code], [400, 400]);
  } finally {
    await parent.kill();
  }
});

test('metadata and envs are the engine\'s: shown, filtered page by page in the store, inherited by commands',
     async () => {
  const made = [];
  try {
    for (let i = 0; i < 3; i++)
      made.push(await Sandbox.create('base', { metadata: { group: 'g1', n: String(i) },
                                               envs: { GREETING: 'hi there', KEEP: 'k' } }));
    made.push(await Sandbox.create('base', { metadata: { group: 'g2' } }));
    // Kept with the sandbox, as our own API shows it: the template is metadata the face keeps for itself.
    const mine = await srv.rest('GET', `/v1/sandboxes/sbx-${made[0].sandboxId}`);
    assert.deepEqual(mine.body.metadata, { 'e2b.template': 'base', group: 'g1', n: '0' });
    assert.deepEqual(mine.body.envs, { GREETING: 'hi there', KEEP: 'k' });
    const info = await made[0].getInfo();
    assert.deepEqual(info.metadata, { group: 'g1', n: '0' }, 'the face\'s own keys are not shown');
    assert.equal(info.templateId, 'base');
    // Our REST list filters the same way (docs/rest.md's form).
    const rest = await srv.rest('GET', `/v1/sandboxes?status=active&metadata=${encodeURIComponent('group=g1&n=1')}`);
    assert.equal(rest.status, 200);
    assert.deepEqual(rest.body.sandboxes.map(s => s.id), [`sbx-${made[1].sandboxId}`]);
    assert.equal((await srv.rest('GET', '/v1/sandboxes?metadata=nopair')).status, 400);
    // Pages of one: the store filters, so every page holds one, and the last says so.
    const pages = Sandbox.list({ query: { metadata: { group: 'g1' } }, limit: 1 });
    const seen = [];
    while (pages.hasNext) {
      const items = await pages.nextItems();
      assert.equal(items.length, 1, 'a filtered page is full');
      seen.push(items[0].sandboxId);
    }
    assert.deepEqual(seen, made.slice(0, 3).map(s => s.sandboxId).reverse(), 'newest first, each once');
    assert.deepEqual((await Sandbox.list({ query: { metadata: { group: 'g1', n: '2' } } }).nextItems())
                       .map(s => s.sandboxId), [made[2].sandboxId]);
    assert.equal((await Sandbox.list({ query: { metadata: { group: 'none' } } }).nextItems()).length, 0);
    // Every command starts with the sandbox's envs; its own win.
    const env = await made[0].commands.run('env', { envs: { KEEP: 'mine' } });
    assert.match(env.stdout, /^GREETING=hi there$/m);
    assert.match(env.stdout, /^KEEP=mine$/m);
    assert.doesNotMatch(env.stdout, /^KEEP=k$/m);
    assert.doesNotMatch((await made[3].commands.run('env')).stdout, /GREETING/);
    // setTimeout may shorten, as E2B's does.
    await made[0].setTimeout(30_000);
    near((await made[0].getInfo()).endAt, 30_000, 'endAt after a shorter setTimeout');
  } finally {
    for (const s of made) await s.kill();
  }
});

test('onTimeout pause: paused at its timeout and listed so, connect resumes, autoResume on a command', async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 2_000, lifecycle: { onTimeout: 'pause' } });
  const auto = await Sandbox.create('base', { timeoutMs: 2_000, envs: { A: '1' },
                                              lifecycle: { onTimeout: 'pause', autoResume: true } });
  try {
    assert.deepEqual((await sbx.getInfo()).lifecycle, { onTimeout: 'pause', autoResume: false });
    assert.deepEqual((await auto.getInfo()).lifecycle, { onTimeout: 'pause', autoResume: true });
    // The reaper (a sweep a second) pauses both at their timeout rather than ending them.
    const paused = async () => (await Sandbox.list({ query: { state: ['paused'] } }).nextItems())
      .map(s => s.sandboxId).sort();
    const want = [sbx.sandboxId, auto.sandboxId].sort();
    for (let i = 0; i < 150 && (await paused()).length < 2; i++) await sleep(200);
    assert.deepEqual(await paused(), want);
    const info = await sbx.getInfo();
    assert.equal(info.state, 'paused');
    assert.ok(info.endAt.getTime() > Date.now() + 3600_000, 'kept paused for the account\'s longest lifetime');
    assert.equal(await sbx.isRunning(), false);
    // A command on a sandbox without autoResume is refused: it stays paused.
    await assert.rejects(sbx.commands.run('echo no'));
    assert.equal((await sbx.getInfo()).state, 'paused');
    // connect resumes it.
    const back = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60_000 });
    assert.equal((await back.getInfo()).state, 'running');
    assert.equal((await back.commands.run('echo back')).stdout, 'back\n');
    // autoResume: a health probe (isRunning) leaves it paused; a command resumes it, which then keeps a while.
    assert.equal(await auto.isRunning(), false);
    assert.equal((await auto.getInfo()).state, 'paused');
    assert.match((await auto.commands.run('env')).stdout, /^A=1$/m);
    const resumed = await auto.getInfo();
    assert.equal(resumed.state, 'running');
    assert.ok(resumed.endAt.getTime() > Date.now() + 30_000, 'resumed on use, it keeps a while');
    assert.equal(await auto.isRunning(), true);
  } finally {
    await sbx.kill();
    await auto.kill();
  }
});

// No room for a new sandbox (the fake's next creates refused for room, as a host short of memory or QEMU uids,
// asked through a command): E2B's 503 with Retry-After, the SDK's ServiceBusyError saying when; no sandbox was
// made, and once the busy spell is over a create works.
test('no room now: a create is ServiceBusyError with Retry-After, and the next create after it works', async () => {
  const sbx = await Sandbox.create('base');
  const before = (await Sandbox.list().nextItems()).length;
  try {
    await sbx.commands.run('busy-creates 2');
    await assert.rejects(Sandbox.create('base'), e => {
      assert.ok(e instanceof ServiceBusyError, `${e?.name}: ${e?.message}`);
      assert.match(e.message, /no room for it right now.*try again in 10 s/);
      assert.doesNotMatch(e.message, /MiB|QEMU|fake:/, 'the host\'s facts are not the tenant\'s');
      return true;
    });
    const r = await e2b('POST', '/sandboxes', { templateID: 'base' });
    assert.deepEqual([r.status, r.body.code], [503, 503], 'the Python SDK\'s raw create');
    assert.equal(r.headers.get('retry-after'), '10');
    assert.match(r.body.message, /try again in 10 s/);
    assert.equal((await Sandbox.list().nextItems()).length, before, 'a busy create made no sandbox');
    const after = await Sandbox.create('base');
    try {
      assert.equal((await after.commands.run('echo made')).stdout, 'made\n', 'after the busy spell, a create works');
    } finally {
      await after.kill();
    }
  } finally {
    await sbx.kill();
  }
});

// No room for a fork's child or a resume (the fake's next restores refused for memory, asked through a command):
// E2B's own 503 for no room now, the SDK's ServiceBusyError, with Retry-After and when in its message; nothing
// changed. A resume on use (autoResume) is the data plane's 429 / resource_exhausted, the SDK's RateLimitError.
test('no room now: ServiceBusyError with Retry-After for fork and resume, RateLimitError for autoResume on use',
     async () => {
  const sbx = await Sandbox.create('base');
  const auto = await Sandbox.create('base', { lifecycle: { onTimeout: 'pause', autoResume: true } });
  const busy = (e, cls) => {
    assert.ok(e instanceof cls, `${e?.name}: ${e?.message}`);
    assert.match(e.message, /no room for it right now.*try again in 10 s/);
    assert.doesNotMatch(e.message, /MiB|fake:/, 'the host\'s facts are not the tenant\'s');
    return true;
  };
  const raw = (r, what) => {
    assert.deepEqual([r.status, r.body.code], [503, 503], what);
    assert.equal(r.headers.get('retry-after'), '10', what);
    assert.match(r.body.message, /try again in 10 s/, what);
  };
  try {
    await sbx.commands.run('busy-restores 4');
    await assert.rejects(sbx.fork(), e => busy(e, ServiceBusyError));
    raw(await e2b('POST', `/sandboxes/${sbx.sandboxId}/fork`, {}), 'a raw fork');
    assert.equal(await sbx.pause(), true);
    await assert.rejects(Sandbox.connect(sbx.sandboxId), e => busy(e, ServiceBusyError));
    raw(await e2b('POST', `/sandboxes/${sbx.sandboxId}/resume`, {}), 'the Python SDK\'s resume');
    assert.equal((await sbx.getInfo()).state, 'paused', 'a busy resume leaves it paused');
    const back = await Sandbox.connect(sbx.sandboxId);
    assert.equal((await back.getInfo()).state, 'running', 'connect resumes it once there is room');
    // autoResume: a command (Connect RPC) and a file read (envd's REST) on it while there is no room.
    await auto.commands.run('busy-restores 2');
    assert.equal(await auto.pause(), true);
    await assert.rejects(auto.commands.run('echo hi'), e => busy(e, RateLimitError));
    await assert.rejects(auto.files.read('/etc/hostname'), e => busy(e, RateLimitError));
    assert.equal((await auto.getInfo()).state, 'paused');
    assert.equal((await auto.commands.run('echo on use')).stdout, 'on use\n');
  } finally {
    await sbx.kill();
    await auto.kill();
  }
});
