// Where the E2B face's run('true') round trip goes on a real VM (bench/run --e2b-split): five ways in
// turn on one sandbox, each round's order rotated, after a warm-up:
//   sdk      the official e2b SDK's commands.run('true')
//   plain    the same process.Process/Start request as a plain fetch (the face without the SDK)
//   burn     the same, the client burning BURN ms of CPU when the start event comes (a client that works
//            while the command runs, as the SDK does, made measurable)
//   events   POST /v1/sandboxes/{id}/exec as an event stream (our own REST: a background execution
//            followed, the same structure as the Start)
//   rest     POST /v1/sandboxes/{id}/exec (our own REST: the command run by the request's thread)
// For each: the client's time; from the server's log (--log-level debug), the request's time (headers
// to its last byte) and the execution's (the engine's job: recorded, the driver's run in the guest,
// finished); Node's CPU between the response's headers and its end (undici's diagnostics channels).
// Requests are sequential, so the log's Start and exec lines come in the rounds' order.
//
// usage: node e2b-split.mjs BASE_URL API_KEY SERVER_LOG   (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY set)
//        BENCH_RUNS (25): rounds; BENCH_WARMUP (3); BURN (3): ms of CPU
import dc from 'node:diagnostics_channel';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Sandbox } from 'e2b';

const [BASE, KEY, LOG] = process.argv.slice(2);
assert.ok(BASE && KEY && LOG, 'usage: e2b-split.mjs BASE_URL API_KEY SERVER_LOG');
const RUNS = Number(process.env.BENCH_RUNS || 25), WARMUP = Number(process.env.BENCH_WARMUP || 3);
const BURN = Number(process.env.BURN || 3);
const auth = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' };
const now = () => performance.now();
const cpuMs = () => { const c = process.cpuUsage(); return (c.user + c.system) / 1000; };
let headersCpu = null, windowCpu = 0;
dc.subscribe('undici:request:headers', () => { headersCpu = cpuMs(); });
dc.subscribe('undici:request:trailers', () => {
  if (headersCpu !== null) windowCpu = cpuMs() - headersCpu;
  headersCpu = null;
});

const sbx = await Sandbox.create({ timeoutMs: 3_600_000 });
const id = `sbx-${sbx.sandboxId}`;
// What the SDK sends for run('true') (e2b 2.x): one envelope (flags 0, length, JSON) and its headers.
const msg = Buffer.from(JSON.stringify({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'true'] }, stdin: false }));
const envelope = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), msg]);
envelope.writeUInt32BE(msg.length, 1);
async function start(burn) {
  const res = await fetch(`${process.env.E2B_SANDBOX_URL}/process.Process/Start`, {
    method: 'POST', body: envelope, headers: {
      'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1', 'Connect-Timeout-Ms': '60000',
      'Keepalive-Ping-Interval': '50', 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983',
      'X-Access-Token': sbx.envdAccessToken,
    },
  });
  let text = '', first = true;
  for await (const chunk of res.body) {
    text += Buffer.from(chunk).toString('latin1');
    if (first && burn)
      for (const t = now(); now() - t < burn;);
    first = false;
  }
  assert.equal(res.status, 200, text);
  assert.match(text, /"exitCode":0/);
}
async function exec(headers) {
  const res = await fetch(`${BASE}/v1/sandboxes/${id}/exec`, { method: 'POST', headers: { ...auth, ...headers },
                                                              body: JSON.stringify({ command: 'true' }) });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.match(text, /exit/);
}
const ways = {
  sdk: async () => assert.equal((await sbx.commands.run('true')).exitCode, 0),
  plain: () => start(0),
  burn: () => start(BURN),
  events: () => exec({ Accept: 'text/event-stream' }),
  rest: () => exec({}),
};
const names = Object.keys(ways);
const order = [], wall = {}, cpu = {};
for (const n of names) { wall[n] = []; cpu[n] = []; }
try {
  for (let i = 0; i < WARMUP + RUNS; i++) {
    for (let k = 0; k < names.length; k++) {
      const way = names[(i + k) % names.length];
      windowCpu = 0;
      const t0 = now();
      await ways[way]();
      order.push(i >= WARMUP ? way : null);
      if (i >= WARMUP) {
        wall[way].push(now() - t0);
        cpu[way].push(windowCpu);
      }
    }
  }
} finally {
  await sbx.kill();
}

// The server's side: each Start or exec request's line, with the execution line logged before it.
const server = {}, job = {};
for (const n of names) { server[n] = []; job[n] = []; }
{
  let exe = null, k = 0;
  for (const line of readFileSync(LOG, 'utf8').split('\n')) {
    let m = / execution exe-\S+ in \S+: \w+, exit -?\d+, (\d+) ms$/.exec(line);
    if (m) { exe = Number(m[1]); continue; }
    m = / POST (\S+) 200 ([\d.]+)ms /.exec(line);
    if (!m || !(/Process\/Start$/.test(m[1]) || /\/exec$/.test(m[1]))) continue;
    const way = order[k++];
    if (way && exe !== null) {
      server[way].push(Number(m[2]));
      job[way].push(exe);
    }
    exe = null;
  }
  assert.equal(k, order.length, 'one Start or exec line in the log for each request');
}
const p50 = a => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
const f1 = x => x.toFixed(1);
const what = {
  sdk: 'the SDK\'s `commands.run(\'true\')`',
  plain: 'the same `process.Process/Start`, a plain `fetch`',
  burn: `the same, the client burning ${BURN} ms of CPU at the start event`,
  events: '`POST /v1/.../exec` as an event stream (ours, a background execution followed)',
  rest: '`POST /v1/.../exec` (ours, run by the request\'s thread)',
};
console.log(`| way (${RUNS} rounds, p50) | at the client | the server's request | the execution (engine's job) | ` +
            'Node\'s CPU, headers to end |');
console.log('|---|---|---|---|---|');
for (const n of names)
  console.log(`| ${what[n]} | ${f1(p50(wall[n]))} ms | ${f1(p50(server[n]))} ms | ${f1(p50(job[n]))} ms | ` +
              `${p50(cpu[n]).toFixed(2)} ms |`);
