// The E2B face's own cost on one `run('true')`, without VMs (bench/run
// --e2b-fake starts aas-server-fake for it; any server will do): on one
// sandbox, in turn, many rounds, each round's order rotated:
//   the official e2b SDK's commands.run('true');
//   the same process.Process/Start call as a plain fetch (the SDK's request:
//     its envelope, headers and token; the whole answer read): the face
//     without the SDK's own work;
//   POST /v1/sandboxes/{id}/exec of `true`: our REST.
// On the fake driver a command costs next to nothing, so what is left is each
// way's requests: SDK against plain Connect is the SDK's own work in Node,
// plain Connect against REST the face's (routing, token, sandbox and rate
// checks, its stream). The Node process's CPU per call says how much of each
// is the client's.
//
// usage: node e2b-rtt.mjs BASE_URL API_KEY   (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY set)
//        BENCH_RUNS (400): rounds; BENCH_WARMUP (20): rounds first, not counted
import assert from 'node:assert/strict';
import { Sandbox } from 'e2b';

const [BASE, KEY] = process.argv.slice(2);
assert.ok(BASE && KEY, 'usage: e2b-rtt.mjs BASE_URL API_KEY');
const RUNS = Number(process.env.BENCH_RUNS || 400);
const WARMUP = Number(process.env.BENCH_WARMUP || 20);
const auth = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' };

const ms = () => performance.now();
const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.ceil(s.length * p) - 1)]; };
const f2 = x => x.toFixed(2);

const sbx = await Sandbox.create({ timeoutMs: 3_600_000 });
const id = `sbx-${sbx.sandboxId}`;

async function restExec() {
  const res = await fetch(`${BASE}/v1/sandboxes/${id}/exec`, { method: 'POST', headers: auth,
                                                                body: JSON.stringify({ command: 'true' }) });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.equal(body.exit_code, 0);
}

// What the SDK sends for run('true') (e2b 2.x): one envelope (flags 0, length, JSON) and its headers.
const msg = Buffer.from(JSON.stringify({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'true'] }, stdin: false }));
const envelope = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), msg]);
envelope.writeUInt32BE(msg.length, 1);
async function plainStart() {
  const res = await fetch(`${process.env.E2B_SANDBOX_URL}/process.Process/Start`, {
    method: 'POST', body: envelope, headers: {
      'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1', 'Connect-Timeout-Ms': '60000',
      'Keepalive-Ping-Interval': '50', 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983',
      'X-Access-Token': sbx.envdAccessToken,
    },
  });
  const text = Buffer.from(await res.arrayBuffer()).toString('latin1');
  assert.equal(res.status, 200, text);
  assert.match(text, /"exitCode":0/);
}

const ways = {
  sdk: async () => assert.equal((await sbx.commands.run('true')).exitCode, 0),
  plain: plainStart,
  rest: restExec,
};
const names = Object.keys(ways);
const wall = Object.fromEntries(names.map(n => [n, []]));
const cpu = Object.fromEntries(names.map(n => [n, []]));
try {
  for (let i = 0; i < WARMUP + RUNS; i++) {
    // Each round's order rotates: no way always follows the same other's idle connection.
    for (let k = 0; k < names.length; k++) {
      const way = names[(i + k) % names.length];
      const c0 = process.cpuUsage(), t0 = ms();
      await ways[way]();
      const t = ms() - t0, c = process.cpuUsage(c0);
      if (i >= WARMUP) {
        wall[way].push(t);
        cpu[way].push((c.user + c.system) / 1000);
      }
    }
  }
  const p50 = n => pct(wall[n], 0.5);
  const line = (what, n) => `| ${what} | ${f2(p50(n))} ms | ${f2(pct(wall[n], 0.9))} ms | ${f2(pct(cpu[n], 0.5))} ms | ` +
                            `${f2(p50(n) / p50('rest'))}x |`;
  console.log(`| \`run('true')\`, fake driver (${RUNS} rounds) | p50 | p90 | Node's CPU a call, p50 | p50 over REST's |`);
  console.log('|---|---|---|---|---|');
  console.log(line('the SDK\'s `commands.run(\'true\')` (the E2B face)', 'sdk'));
  console.log(line('the same `process.Process/Start`, a plain `fetch` (the face, no SDK)', 'plain'));
  console.log(line('`POST /v1/sandboxes/{id}/exec` (our REST)', 'rest'));
  console.log(`\nThe SDK's own work: ${f2(p50('sdk') - p50('plain'))} ms a call; the face's over our REST: ` +
              `${f2(p50('plain') - p50('rest'))} ms.`);
} finally {
  await sbx.kill();
}
