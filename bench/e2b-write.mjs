// The E2B face's 64 MiB write with no VM (bench/run --e2b-write starts aas-server-fake for it, whose
// file writes take the bytes in memory): which part of the SDK's write is the SDK's own work in Node and
// which the gateway's, five ways in turn on one sandbox, each round's order rotated, after a warm-up:
//   sdkForm     the SDK's files.write of an ArrayBuffer (its default: multipart FormData)
//   plainForm   the same multipart body, built once in a Buffer, POSTed to the same /files by a plain fetch
//   sdkOctet    the SDK's files.write with useOctetStream: true (a raw body)
//   plainOctet  the same raw Buffer POSTed to the same /files by a plain fetch
//   restPut     PUT /v1/sandboxes/{id}/files (our REST), the same Buffer
// The gateway's side is the same request bytes for sdkForm and plainForm (and for the two raw ones): what
// differs between them is the client's. The Node process's CPU per write says how much of each is Node's.
//
// usage: node e2b-write.mjs BASE_URL API_KEY   (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY set)
//        BENCH_FILES (3): rounds of each way
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Sandbox } from 'e2b';

const [BASE, KEY] = process.argv.slice(2);
assert.ok(BASE && KEY, 'usage: e2b-write.mjs BASE_URL API_KEY');
const ROUNDS = Number(process.env.BENCH_FILES || 3);
const MIB = 64;
const sbx = await Sandbox.create({ timeoutMs: 3_600_000 });
const id = `sbx-${sbx.sandboxId}`;
const data = randomBytes(MIB << 20);
const bytes = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength); // what the SDK takes
const boundary = '----e2bwriteboundary7MA4YWxkTrZu0gW';
const multipart = Buffer.concat([
  Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="/workspace/w"\r\n` +
              'Content-Type: application/octet-stream\r\n\r\n'),
  data, Buffer.from(`\r\n--${boundary}--\r\n`)]);
const files = `${process.env.E2B_SANDBOX_URL}/files?path=${encodeURIComponent('/workspace/w')}`;
const face = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': sbx.envdAccessToken };
async function ok(res) {
  const text = await res.text();
  assert.ok(res.status < 300, `${res.status} ${text.slice(0, 500)}`);
}
const ways = {
  sdkForm: () => sbx.files.write('/workspace/w', bytes, { requestTimeoutMs: 0 }),
  plainForm: async () => ok(await fetch(files, { method: 'POST', body: multipart, headers: {
    ...face, 'Content-Type': `multipart/form-data; boundary=${boundary}` } })),
  sdkOctet: () => sbx.files.write('/workspace/w', bytes, { requestTimeoutMs: 0, useOctetStream: true }),
  plainOctet: async () => ok(await fetch(files, { method: 'POST', body: data, headers: {
    ...face, 'Content-Type': 'application/octet-stream' } })),
  restPut: async () => ok(await fetch(`${BASE}/v1/sandboxes/${id}/files?path=w`, { method: 'PUT', body: data, headers: {
    Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/octet-stream' } })),
};
const what = {
  sdkForm: 'the SDK\'s `files.write` (FormData, its default)',
  plainForm: 'the same multipart bytes from one Buffer, a plain `fetch` (the face, no SDK)',
  sdkOctet: 'the SDK\'s `files.write`, `useOctetStream: true`',
  plainOctet: 'the same raw Buffer to the same `/files`, a plain `fetch`',
  restPut: '`PUT /v1/sandboxes/{id}/files` (our REST)',
};
const names = Object.keys(ways), wall = {}, cpu = {};
for (const n of names) { wall[n] = []; cpu[n] = []; }
try {
  for (let i = 0; i < ROUNDS + 1; i++) {
    for (let k = 0; k < names.length; k++) {
      const way = names[(i + k) % names.length];
      const c0 = process.cpuUsage(), t0 = performance.now();
      await ways[way]();
      const t = performance.now() - t0, c = process.cpuUsage(c0);
      if (i) {
        wall[way].push(t);
        cpu[way].push((c.user + c.system) / 1000);
      }
    }
  }
} finally {
  await sbx.kill();
}
const p50 = a => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
const rate = t => (MIB * 1.048576) / (t / 1000);
console.log(`| ${MIB} MiB write, fake driver (${ROUNDS} each way, p50) | at the client | MB/s | of our REST's | Node's CPU a write |`);
console.log('|---|---|---|---|---|');
for (const n of names)
  console.log(`| ${what[n]} | ${p50(wall[n]).toFixed(0)} ms | ${rate(p50(wall[n])).toFixed(1)} | ` +
              `${(rate(p50(wall[n])) / rate(p50(wall.restPut))).toFixed(2)}x | ${p50(cpu[n]).toFixed(0)} ms |`);
