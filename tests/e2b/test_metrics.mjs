// Sandbox metrics through the official e2b SDK (docs/e2b.md, "Metrics"):
// getMetrics with and without a window, the numbers against getInfo's shape,
// the raw shapes the Python SDK requires, /sandboxes/metrics, envd's own
// GET /metrics, and the refusals. The server samples every 200 ms here, so
// the samples change while the test runs; the fake driver's numbers are
// predictable: one CPU-second per command, a quarter of the memory and a MiB
// per command held, the files written as disk.
//
// usage: node test_metrics.mjs AAS_SERVER_FAKE   (run by tests/e2b/run)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, SandboxNotFoundError } from 'e2b';
import { testServer, e2bKey, sleep } from './harness.mjs';

const SERVER = process.argv[2];
assert.ok(SERVER, 'usage: test_metrics.mjs AAS_SERVER_FAKE');
const srv = testServer(SERVER, { args: ['--metrics-interval', '200'] });

before(() => srv.start());
after(() => srv.stop());

const MIB = 1024 * 1024;

async function e2b(method, path, key = e2bKey(srv.key)) {
  const res = await fetch(`${srv.base}/e2b${path}`, { method, headers: { 'X-API-KEY': key } });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

// Until fn() holds, asking again as the samples come (no time is asserted: only that it comes).
async function until(fn, what) {
  for (let i = 0; i < 300; i++) {
    const v = await fn();
    if (v) return v;
    await sleep(100);
  }
  assert.fail(`never: ${what}`);
}

test('getMetrics: samples in E2B\'s shape, as large as the sandbox, growing with its work', async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  try {
    const info = await sbx.getInfo();
    // The JS SDK's info leaves the disk out; the raw answer has it.
    const { diskSizeMB } = (await e2b('GET', `/sandboxes/${sbx.sandboxId}`)).body;
    const first = await sbx.getMetrics();
    assert.ok(Array.isArray(first) && first.length >= 1, 'a running sandbox has at least one sample');
    for (const m of first) {
      assert.ok(m.timestamp instanceof Date && !isNaN(m.timestamp), 'timestamp is a Date');
      assert.equal(m.cpuCount, info.cpuCount);
      assert.equal(m.memTotal, info.memoryMB * MIB);
      assert.equal(m.diskTotal, diskSizeMB * MIB);
      assert.ok(m.cpuUsedPct >= 0 && m.cpuUsedPct <= 100, `cpuUsedPct ${m.cpuUsedPct}`);
      assert.ok(m.memUsed > 0 && m.memUsed <= m.memTotal, `memUsed ${m.memUsed}`);
      assert.ok(m.diskUsed >= 0 && m.diskUsed <= m.diskTotal);
    }
    for (let i = 1; i < first.length; i++) assert.ok(first[i].timestamp >= first[i - 1].timestamp, 'oldest first');

    // Work shows: commands take CPU and memory, a file takes disk.
    await sbx.commands.run('echo one');
    await sbx.commands.run('echo two');
    await sbx.files.write('/workspace/blob.txt', 'x'.repeat(5000));
    const busy = await until(async () => {
      const all = await sbx.getMetrics();
      const last = all[all.length - 1];
      return last.diskUsed >= 5000 && last.memUsed >= first[0].memUsed + 2 * MIB ? all : null;
    }, 'a sample after the work');
    assert.ok(busy.some(m => m.cpuUsedPct > 0), 'some sample saw the commands\' CPU');
    assert.ok(busy.length > first.length, 'samples are kept over time');

    // A window: only what was taken in it (the SDK sends whole seconds).
    const mid = busy[busy.length - 1].timestamp;
    const after = await sbx.getMetrics({ start: new Date(mid.getTime() + 1000), end: new Date(mid.getTime() + 1000) });
    for (const m of after) assert.ok(m.timestamp.getTime() >= Math.floor(mid.getTime() / 1000 + 1) * 1000);
    const before = await sbx.getMetrics({ start: new Date(0), end: new Date(first[0].timestamp.getTime() - 60_000) });
    assert.deepEqual(before, [], 'a window before the sandbox ran is empty');

    // The static form, by id.
    const again = await Sandbox.getMetrics(sbx.sandboxId);
    assert.ok(again.length >= 1);
  } finally {
    await sbx.kill();
  }
  // A killed sandbox is not found, as E2B's SDK maps the 404.
  await assert.rejects(Sandbox.getMetrics(sbx.sandboxId), SandboxNotFoundError);
});

test('the raw shapes: every key Python requires, /sandboxes/metrics, envd\'s /metrics', async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  try {
    const r = await e2b('GET', `/sandboxes/${sbx.sandboxId}/metrics`);
    assert.equal(r.status, 200);
    const m = r.body[r.body.length - 1];
    for (const k of ['timestamp', 'timestampUnix', 'cpuUsedPct', 'cpuCount', 'memUsed', 'memTotal', 'memCache',
                     'diskUsed', 'diskTotal'])
      assert.ok(k in m, `SandboxMetric has ${k}`);
    assert.equal(m.timestampUnix, Math.floor(new Date(m.timestamp).getTime() / 1000));

    const many = await e2b('GET', `/sandboxes/metrics?sandbox_ids=${sbx.sandboxId},zzzz`);
    assert.equal(many.status, 200);
    assert.deepEqual(Object.keys(many.body.sandboxes), [sbx.sandboxId], 'one not there is left out');
    assert.equal(many.body.sandboxes[sbx.sandboxId].cpuCount, m.cpuCount);
    const none = await e2b('GET', '/sandboxes/metrics');
    assert.equal(none.status, 400);

    // envd's own /metrics, with the sandbox's access token (getInfo's raw answer holds it).
    const token = (await e2b('GET', `/sandboxes/${sbx.sandboxId}`)).body.envdAccessToken;
    const url = `${srv.base}/e2b-sandbox/metrics`;
    const headers = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' };
    const envd = await fetch(url, { headers: { ...headers, 'X-Access-Token': token } });
    assert.equal(envd.status, 200);
    const em = await envd.json();
    assert.equal(em.cpu_count, m.cpuCount);
    assert.equal(em.mem_total, m.memTotal);
    assert.equal(em.mem_total_mib, m.memTotal / MIB);
    assert.ok(typeof em.ts === 'number' && typeof em.cpu_used_pct === 'number');
    const refused = await fetch(url, { headers: { ...headers, 'X-Access-Token': 'not-the-token' } });
    assert.equal(refused.status, 401);
  } finally {
    await sbx.kill();
  }
});

test('refusals: bad times, another account\'s sandbox', async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  try {
    for (const q of ['start=yesterday', 'end=-1', 'start=20&end=10', 'start=1234567890123'])
      assert.equal((await e2b('GET', `/sandboxes/${sbx.sandboxId}/metrics?${q}`)).status, 400, q);
    const other = srv.admin('account', 'create', '--name', 'someone-else');
    const r = await e2b('GET', `/sandboxes/${sbx.sandboxId}/metrics`, e2bKey(other));
    assert.deepEqual([r.status, r.body.code], [404, 404]);
    // Our own REST API has them too.
    const mine = await srv.rest('GET', `/v1/sandboxes/sbx-${sbx.sandboxId}/metrics`);
    assert.equal(mine.status, 200);
    assert.ok(mine.body.count >= 1 && mine.body.metrics[0].vcpus >= 1);
  } finally {
    await sbx.kill();
  }
});
