// The E2B face against our own REST on the same aas-server and the same real
// VMs (bench/run --e2b writes what this prints into bench/RESULTS.md): the
// official e2b SDK (tests/e2b/package.json's pinned version) next to plain
// HTTP requests to /v1, each figure's rounds alternating between the two so a
// load that changes weighs on both.
//   create, then the first run('true')   Sandbox.create + commands.run against
//                                        POST /v1/sandboxes + POST .../exec
//   run('true') round trip               commands.run against POST .../exec, on one sandbox
//   64 MiB write, and read               files.write / files.read (the SDK's /files)
//                                        against PUT / GET /v1/sandboxes/{id}/files, on one sandbox;
//                                        the write also with the SDK's useOctetStream (a raw body, not
//                                        FormData) and from a ReadableStream, against the same PUTs;
//                                        a write the gateway bounds lower (413) is measured at the
//                                        largest power of two of MiB under its bound, and says so
//   watchDir, a write's first event      files.watchDir against the same inotify watcher as a /v1 exec
//                                        stream, on one sandbox of BENCH_WATCH_IMAGE (needs python3)
// Every create is a clone of the template (built first, untimed), as a user's
// server makes them; the sandboxes are destroyed as the rounds go. With the
// server's log (SERVER_LOG), each timed create first waits for the clone the
// driver starts ahead (spares=1, "started ahead" in the log) and must have
// taken it: under load starting one takes longer than a round, and a create
// that finds none clones whole, several times slower, whichever way it came.
//
// usage: node e2b-bench.mjs BASE_URL API_KEY [SERVER_LOG]   (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY set)
//        BENCH_CREATES (5), BENCH_RUNS (30), BENCH_FILES (3), BENCH_WATCHES (10): rounds of each way;
//        BENCH_WATCH_IMAGE: the watchDir row's image (none: no row); BENCH_WATCH_ONLY=1: that row alone
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Sandbox } from 'e2b';

const [BASE, KEY, LOG] = process.argv.slice(2);
assert.ok(BASE && KEY, 'usage: e2b-bench.mjs BASE_URL API_KEY');
const CREATES = Number(process.env.BENCH_CREATES || 5);
const RUNS = Number(process.env.BENCH_RUNS || 30);
const FILES = Number(process.env.BENCH_FILES || 3);
const MIB = 64;
// The watchDir row's sandbox image ('' skips the row: the face's watcher needs python3, not in `tiny`).
const WATCH = process.env.BENCH_WATCH_IMAGE ?? '';
const WATCHES = Number(process.env.BENCH_WATCHES || 10);
const WATCH_ONLY = WATCH && process.env.BENCH_WATCH_ONLY === '1'; // the watchDir row alone
// Our REST's side of the watchDir row: inotify on a directory (the face's watcher's mask), a line once
// the watch is set, then each event's name in hex (a write may make a temporary name first), out at
// the name it was given. Written without a single quote.
const OUR_WATCHER = [
  'import ctypes,os,struct,sys',
  'c=ctypes.CDLL(None,use_errno=True);fd=c.inotify_init1(0)',
  'assert fd>=0 and c.inotify_add_watch(fd,os.fsencode(sys.argv[1]),0x2|0x4|0x40|0x80|0x100|0x200|0x400|0x800|0x2000000)>=0',
  'print("ready",flush=True)',
  'while True:',
  ' b=os.read(fd,65536);i=0',
  ' while i+16<=len(b):',
  '  w,m,k,n=struct.unpack_from("iIII",b,i);nm=b[i+16:i+16+n].rstrip(b"\\0");i+=16+n',
  '  print(nm.hex(),flush=True)',
  '  if nm==os.fsencode(sys.argv[2]):sys.exit(0)',
].join('\n');
const auth = { Authorization: `Bearer ${KEY}` };
// The SDK's file calls without its 60 s request timeout, as the plain requests to /v1 have none: on a
// loaded machine a 64 MiB transfer to a TCG guest may take longer, and the figure is the time it takes.
const NO_TIMEOUT = { requestTimeoutMs: 0 };

async function rest(method, path, body, headers = { 'Content-Type': 'application/json' }) {
  const res = await fetch(`${BASE}${path}`, { method, headers: { ...auth, ...headers }, body });
  const buf = Buffer.from(await res.arrayBuffer());
  assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${buf.toString().slice(0, 500)}`);
  return buf;
}
const json = async (method, path, body) => JSON.parse((await rest(method, path, JSON.stringify(body))).toString());
const restCreate = () => json('POST', '/v1/sandboxes', { size: 'small' });
const restExec = async id => assert.equal((await json('POST', `/v1/sandboxes/${id}/exec`, { command: 'true' })).exit_code, 0);
const restDestroy = id => rest('DELETE', `/v1/sandboxes/${id}`);

const ms = () => performance.now();
const median = a => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
const p95 = a => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.ceil(s.length * 0.95) - 1)]; };
const f1 = x => x.toFixed(1);

async function templatesReady() {
  const m = /^aas_templates\{state="ready"\} (\d+)$/m.exec(await (await fetch(`${BASE}/metrics`)).text());
  return m && Number(m[1]) > 0;
}

// The template first: a create starts its build (its own VM boots cold); the timed creates are clones.
{
  const warm = await restCreate();
  for (let i = 0; i < 2400 && !(await templatesReady()); i++) await new Promise(r => setTimeout(r, 250));
  assert.ok(await templatesReady(), 'the template was built');
  await restDestroy(warm.id);
}

// The log's lines that say a clone was started ahead, and that a create took one.
const logCount = re => LOG ? readFileSync(LOG, 'utf8').split('\n').filter(l => re.test(l)).length : 0;
const startedAhead = () => logCount(/ started ahead for template /);
const tookSpare = () => logCount(/ up in \d+ ms \(clone, .*started ahead/);
async function spareReady() {
  if (!LOG) return;
  for (let i = 0; i < 1200 && startedAhead() <= tookSpare(); i++) await new Promise(r => setTimeout(r, 250));
  assert.ok(startedAhead() > tookSpare(), 'a clone was started ahead for the next create');
}

const rows = [];
const row = r => { rows.push(r); console.error(r.join(' | ')); }; // as they come: a run cut short says what it had
// create, then the first run('true'), alternating which way goes first in each round.
if (!WATCH_ONLY) {
  const sdk = [], ours = [];
  for (let i = 0; i < CREATES; i++) {
    for (const way of i % 2 ? ['ours', 'sdk'] : ['sdk', 'ours']) {
      await spareReady();
      const took = tookSpare();
      const t0 = ms();
      if (way === 'sdk') {
        const sbx = await Sandbox.create();
        assert.equal((await sbx.commands.run('true')).exitCode, 0);
        sdk.push(ms() - t0);
        await sbx.kill();
      } else {
        const sb = await restCreate();
        await restExec(sb.id);
        ours.push(ms() - t0);
        await restDestroy(sb.id);
      }
      if (LOG) assert.equal(tookSpare(), took + 1, `the ${way} create took the clone started ahead`);
    }
  }
  row([`create, then the first \`run('true')\` (${CREATES} clones each way${LOG ? ', each from a clone started ahead' : ''})`,
             `median ${f1(median(sdk))} ms, p95 ${f1(p95(sdk))} ms`,
             `median ${f1(median(ours))} ms, p95 ${f1(p95(ours))} ms`, median(sdk) / median(ours), '≤ 1.2x']);
}

// The rest on one sandbox: made through the SDK, reached by both ways (the same VM).
if (!WATCH_ONLY) {
  const sbx = await Sandbox.create({ timeoutMs: 3_600_000 });
  const id = `sbx-${sbx.sandboxId}`;
  try {
    {
      const sdk = [], ours = [];
      for (let i = 0; i < RUNS; i++) {
        let t0 = ms();
        assert.equal((await sbx.commands.run('true')).exitCode, 0);
        sdk.push(ms() - t0);
        t0 = ms();
        await restExec(id);
        ours.push(ms() - t0);
      }
      row([`\`run('true')\` round trip (${RUNS} each way, one sandbox)`,
                 `median ${f1(median(sdk))} ms, p95 ${f1(p95(sdk))} ms`,
                 `median ${f1(median(ours))} ms, p95 ${f1(p95(ours))} ms`, median(sdk) / median(ours), '≤ 1.2x']);
    }
    {
      const data = randomBytes(MIB << 20);
      const bytesOf = b => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength); // what the SDK takes
      const rate = (mib, t) => (mib * 1.048576) / (t / 1000); // MB/s
      // The write: 64 MiB unless the gateway bounds an upload lower (a 413 naming its bound); then the
      // largest power of two of MiB under it, and the row says so.
      // A server that refuses before reading the body may cut the upload before its 413 is read (EPIPE):
      // asked again until the 413 comes.
      let wmib = MIB, note = '';
      for (let tries = 0; ; tries++) {
        try {
          await sbx.files.write('/workspace/big-sdk', bytesOf(data), NO_TIMEOUT);
          break;
        } catch (e) {
          const m = /^413: .*at most (\d+) bytes/.exec(e.message);
          if (!m && tries < 10 && /fetch failed/.test(e.message)) continue;
          if (!m) throw e;
          wmib = 2 ** Math.floor(Math.log2(Number(m[1]) / 1048576));
          note = `; 64 MiB through the SDK: 413, the gateway's bound (${m[1]} bytes)`;
          break;
        }
      }
      const wdata = data.subarray(0, wmib << 20), wbytes = bytesOf(wdata);
      // The read: the same 64 MiB file both ways, written once by our REST.
      await rest('PUT', `/v1/sandboxes/${id}/files?path=big-ours`, data, { 'Content-Type': 'application/octet-stream' });
      const w = { sdk: [], ours: [] }, r = { sdk: [], ours: [] }, oct = { sdk: [], ours: [] }, str = { sdk: [], ours: [] };
      const sliced = b => {
        let at = 0;
        return new ReadableStream({ pull(c) {
          if (at >= b.length) return c.close();
          c.enqueue(b.subarray(at, at + (1 << 20)));
          at += 1 << 20;
        } });
      };
      for (let i = 0; i < FILES; i++) {
        let t0 = ms();
        await sbx.files.write('/workspace/big-sdk', wbytes, NO_TIMEOUT);
        w.sdk.push(ms() - t0);
        // The same write with the SDK's own option for a raw body (no FormData): where the write's gap is.
        t0 = ms();
        await sbx.files.write('/workspace/big-oct', wbytes, { ...NO_TIMEOUT, useOctetStream: true });
        oct.sdk.push(ms() - t0);
        // And from a stream (1 MiB slices of the same bytes): the SDK sends it as it reads it, no Blob.
        t0 = ms();
        await sbx.files.write('/workspace/big-str', sliced(wdata), NO_TIMEOUT);
        str.sdk.push(ms() - t0);
        t0 = ms();
        await rest('PUT', `/v1/sandboxes/${id}/files?path=big-w`, wdata, { 'Content-Type': 'application/octet-stream' });
        w.ours.push(ms() - t0);
        oct.ours.push(w.ours[w.ours.length - 1]);
        str.ours.push(w.ours[w.ours.length - 1]);
        t0 = ms();
        const got = Buffer.from(await sbx.files.read('/workspace/big-ours', { ...NO_TIMEOUT, format: 'bytes' }));
        r.sdk.push(ms() - t0);
        assert.ok(got.equals(data), 'the SDK read back the 64 MiB');
        t0 = ms();
        const back = await rest('GET', `/v1/sandboxes/${id}/files?path=big-ours`, undefined, {});
        r.ours.push(ms() - t0);
        assert.ok(back.equals(data), 'our REST read back the 64 MiB');
      }
      for (const f of ['big-sdk', 'big-oct', 'big-str'])
        assert.ok((await rest('GET', `/v1/sandboxes/${id}/files?path=${f}`, undefined, {})).equals(wdata),
                  `what the SDK wrote (${f}) arrived whole`);
      for (const [what, m, mib] of [[`${wmib} MiB write`, w, wmib],
                                    [`${wmib} MiB write, the SDK's \`useOctetStream: true\` (not FormData)`, oct, wmib],
                                    [`${wmib} MiB write from a \`ReadableStream\` (1 MiB slices: no Blob, a raw body)`, str, wmib],
                                    [`${MIB} MiB read`, r, MIB]]) {
        const sr = rate(mib, median(m.sdk)), or = rate(mib, median(m.ours));
        row([`${what} (${FILES} each way, one sandbox${what.includes('write') ? note : ''})`,
                   `median ${f1(median(m.sdk))} ms (${f1(sr)} MB/s)`, `median ${f1(median(m.ours))} ms (${f1(or)} MB/s)`,
                   sr / or, '≥ 0.9x']);
      }
    }
  } finally {
    await sbx.kill();
  }
}

// watchDir: a change's first event, the SDK's watchDir (the face's watcher, inotify in the guest) against
// the same kind of watcher run through our REST's exec stream, each waiting for the event of a file that
// our REST then writes (the same write both ways, timed from its start). The watcher needs python3: a
// sandbox of WATCH_IMAGE (bench/run maps the template `watch` to it). A fresh watch each round, set
// before the write (watchDir returns once the guest's watches are set; ours prints a line then).
if (WATCH) {
  const wsbx = await Sandbox.create('watch', { timeoutMs: 3_600_000, requestTimeoutMs: 0 });
  const wid = `sbx-${wsbx.sandboxId}`;
  try {
    await json('POST', `/v1/sandboxes/${wid}/exec`, { command: 'mkdir -p /workspace/ws /workspace/wo' });
    const sdk = [], ours = [];
    const put = (dir, name) => rest('PUT', `/v1/sandboxes/${wid}/files?path=/workspace/${dir}/${name}`, 'x',
                                    { 'Content-Type': 'application/octet-stream' });
    for (let i = 0; i < WATCHES; i++) {
      for (const way of i % 2 ? ['ours', 'sdk'] : ['sdk', 'ours']) {
        const name = `f${i}-${way}`;
        if (way === 'sdk') {
          let seen;
          const got = new Promise(r => { seen = r; });
          const h = await wsbx.files.watchDir('/workspace/ws', e => { if (e.name === name) seen(); });
          const t0 = ms();
          await Promise.all([put('ws', name), got]);
          sdk.push(ms() - t0);
          await h.stop();
        } else {
          const ac = new AbortController();
          const res = await fetch(`${BASE}/v1/sandboxes/${wid}/exec`, {
            method: 'POST', signal: ac.signal,
            headers: { ...auth, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
            body: JSON.stringify({ command: `python3 -c '${OUR_WATCHER}' /workspace/wo ${name}` }) });
          assert.equal(res.status, 200, 'our watcher started');
          const reader = res.body.getReader(), dec = new TextDecoder();
          let text = '';
          const until = async what => {
            while (!text.includes(what)) {
              const { done, value } = await reader.read();
              assert.ok(!done, `our watcher's stream ended before "${what}": ${text.slice(-300)}`);
              text += dec.decode(value, { stream: true });
            }
          };
          await until('"data":"ready'); // not the started event's copy of the command
          const t0 = ms();
          await Promise.all([put('wo', name), until(Buffer.from(name).toString('hex'))]);
          ours.push(ms() - t0);
          await until('event: exit'); // it exits at the name's event
          ac.abort();
        }
      }
    }
    row([`\`watchDir\`: a write's first event (${WATCHES} each way, one \`${WATCH}\` sandbox; ours: the same inotify watcher as an exec stream)`,
         `median ${f1(median(sdk))} ms, p95 ${f1(p95(sdk))} ms`,
         `median ${f1(median(ours))} ms, p95 ${f1(p95(ours))} ms`, median(sdk) / median(ours), '≤ 1.2x']);
  } finally {
    await wsbx.kill();
  }
}

console.log('| what | through the SDK (E2B face) | our REST (same run) | ratio | goal |');
console.log('|---|---|---|---|---|');
for (const [what, s, o, ratio, goal] of rows) {
  const met = goal.startsWith('≤') ? ratio <= 1.2 : ratio >= 0.9;
  console.log(`| ${what} | ${s} | ${o} | ${ratio.toFixed(2)}x | ${goal}${met ? '' : ' **missed**'} |`);
}
