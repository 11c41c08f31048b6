// The code interpreter's port (49999) through the E2B face against the REAL code server: the
// official @e2b/code-interpreter SDK (pinned in package.json) -> aas-server-fake's E2B face -> the
// engine (saas_code_*) -> images/guest/aas-code/aas-code, started here on the host with Debian's
// Python (python3-ipykernel, jupyter-client, matplotlib, pandas) and mapped into the fake driver as
// guest port 49999 (SAAS_FAKE_PORTS). test_code.mjs checks the face against a canned double; this
// one checks that the engine and the real server agree on the wire (docs/e2b-wire.md section 4):
// real Python values, a matplotlib PNG, a DataFrame's HTML and data, a traceback, JavaScript and
// bash, contexts, and the SDK's timeout on a real kernel that then answers again.
// No VM: the real server in a VM is tested by the integration tests.
//
// Skips (exit 0, "SKIP:") when the host's Python lacks the kernel's packages.
//
// usage: node test_code_real.mjs AAS_SERVER_FAKE   (run by tests/e2b/run)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, openSync, readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Sandbox } from '@e2b/code-interpreter';
import { TimeoutError } from 'e2b';
import { testServer, sleep } from './harness.mjs';

const SERVER = process.argv[2];
assert.ok(SERVER, 'usage: test_code_real.mjs AAS_SERVER_FAKE');
const CODE_SERVER = process.env.AAS_CODE_SERVER ||
  join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'images', 'guest', 'aas-code', 'aas-code');
// Debian's Python, named explicitly: it is the one with the distribution's kernel packages.
const PYTHON = '/usr/bin/python3';
const probe = spawnSync(PYTHON, ['-c', 'import ipykernel, jupyter_client, matplotlib, pandas'], { stdio: 'ignore' });
if (probe.error || probe.status !== 0) {
  console.log(`SKIP: ${PYTHON} with ipykernel, jupyter_client, matplotlib and pandas is needed`);
  process.exit(0);
}

const srv = testServer(SERVER);
let code, sbx, cwd;

// A free loopback port: bind 0, read it, close (the code server binds it right after).
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

async function listening(port) {
  return new Promise(resolve => {
    const c = net.connect(port, '127.0.0.1');
    c.once('connect', () => { c.destroy(); resolve(true); });
    c.once('error', () => resolve(false));
  });
}

before(async () => {
  const port = await freePort();
  cwd = join(srv.work, 'code');
  mkdirSync(cwd);
  const log = openSync(join(srv.work, 'code.log'), 'a');
  code = spawn(PYTHON, [CODE_SERVER, '--listen', `127.0.0.1:${port}`, '--no-warm', '--cwd', cwd,
                        '--runtime-dir', join(srv.work, 'code-runtime')],
               { stdio: ['ignore', log, log] });
  let up = false;
  for (let i = 0; i < 200 && !up && code.exitCode === null; i++) {
    up = await listening(port);
    if (!up) await sleep(100);
  }
  assert.ok(up, `the code server listens: ${readFileSync(join(srv.work, 'code.log'), 'utf8')}`);
  // The fake driver's guest port 49999 is the real code server (the server inherits the environment).
  process.env.SAAS_FAKE_PORTS = `49999=127.0.0.1:${port}`;
  await srv.start();
  sbx = await Sandbox.create();
});
after(async () => {
  if (code) {
    code.kill();
    if (code.exitCode === null) await new Promise(r => code.once('exit', r));
  }
  await srv.stop();
});

// For an assertion's message: what the code server and aas-server logged last.
function logTails() {
  const tail = name => {
    try {
      return readFileSync(join(srv.work, name), 'utf8').slice(-4000);
    } catch (e) {
      return `(${e.message})`;
    }
  };
  return `code.log ends:\n${tail('code.log')}\nserver.log ends:\n${tail('server.log')}`;
}

test('a variable kept across runs; stdout streamed as it comes', async () => {
  await sbx.runCode('x = 41');
  let exe = await sbx.runCode('x + 1');
  assert.equal(exe.text, '42');
  assert.equal(exe.error, undefined);
  assert.ok(exe.executionCount >= 2);
  const out = [];
  exe = await sbx.runCode("print('hi')", { onStdout: m => out.push(m.line) });
  assert.deepEqual(out, ['hi\n']);
  assert.deepEqual(exe.logs.stdout, ['hi\n']);
  assert.equal(exe.text, undefined, 'print leaves no value');
});

test('a matplotlib line chart comes back as a PNG with a size', async () => {
  const results = [];
  const exe = await sbx.runCode('import matplotlib.pyplot as plt; plt.plot([1,2,3]); plt.show()',
                                { onResult: r => results.push(r) });
  assert.equal(exe.error, undefined, JSON.stringify(exe.error));
  const withPng = exe.results.filter(r => r.png);
  assert.equal(withPng.length, 1, `one PNG result: ${JSON.stringify(exe.results.map(r => r.formats()))}`);
  assert.equal(results.filter(r => r.png).length, 1, 'onResult saw it');
  const png = Buffer.from(withPng[0].png, 'base64');
  assert.deepEqual(png.subarray(0, 8), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  assert.equal(png.subarray(12, 16).toString('latin1'), 'IHDR');
  assert.ok(png.readUInt32BE(16) > 0, 'width');
  assert.ok(png.readUInt32BE(20) > 0, 'height');
});

test('a pandas DataFrame: its HTML table, its text and its data', async () => {
  const exe = await sbx.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})");
  assert.equal(exe.error, undefined, JSON.stringify(exe.error));
  const r = exe.results.find(x => x.isMainResult);
  assert.ok(r, 'the last value is the main result');
  assert.match(r.html, /<table/);
  assert.match(r.text, /a\s+b/);
  assert.ok(r.formats().includes('html'));
  assert.ok(r.data, `the DataFrame's data (E2B's "data" key): ${JSON.stringify(Object.keys(r))}`);
  assert.deepEqual(Object.keys(r.data).sort(), ['a', 'b']);
});

test('an exception: its name, value and traceback', async () => {
  const errors = [];
  const exe = await sbx.runCode('1/0', { onError: e => errors.push(e) });
  assert.equal(exe.error.name, 'ZeroDivisionError');
  assert.match(exe.error.value, /division by zero/);
  assert.match(exe.error.traceback, /ZeroDivisionError/);
  assert.equal(errors.length, 1);
  assert.equal(exe.text, undefined);
});

test('an exception of 30 MB: cut in the kernel, bounded through the engine and the face, flagged over REST',
     async () => {
  // The code server's bound (--max-error, 1 MiB) and the engine's (max_output, 1 MiB by default) hold; the
  // traceback keeps where the run began and where it raised. (Before these bounds such a message did not
  // fit the engine's bound on a line, and the run came with no error at all.)
  const big = "raise ValueError('x' * 30_000_000)";
  const exe = await sbx.runCode(big);
  assert.ok(exe.error, `the run's error: ${JSON.stringify(exe).slice(0, 2000)}\n${logTails()}`);
  assert.equal(exe.error.name, 'ValueError');
  assert.equal(exe.error.value, 'x'.repeat(1 << 20));
  assert.ok(Buffer.byteLength(exe.error.traceback) <= 1 << 20, `${Buffer.byteLength(exe.error.traceback)}`);
  const plain = exe.error.traceback.replace(/\x1b\[[0-9;]*m/g, '');
  assert.match(plain, /----> 1 raise ValueError[^]*\n\[\.\.\. aas-code: the middle of this traceback is cut \.\.\.\]\nx{1000}/);
  assert.equal((await sbx.runCode('1 + 1')).text, '2', 'the context runs on');
  // REST (the libsaas id: sbx- and the E2B one) flags the cut; with a smaller max_output the engine cuts
  // too, its own way.
  const run = body => srv.rest('POST', `/v1/sandboxes/sbx-${sbx.sandboxId}/code/run`, body);
  let res = await run({ code: big, max_output: 65536 });
  assert.equal(res.status, 200, JSON.stringify(res.body).slice(0, 500));
  assert.equal(res.body.error.truncated, true);
  assert.equal(res.body.error.value, 'x'.repeat(65536));
  assert.ok(Buffer.byteLength(res.body.error.traceback) <= 65536);
  assert.match(res.body.error.traceback.replace(/\x1b\[[0-9;]*m/g, ''), /----> 1 raise ValueError[^]*\n\[\.\.\. cut \.\.\.\]\nx+$/);
  res = await run({ code: '1 / 0' });
  assert.equal(res.body.error.name, 'ZeroDivisionError');
  assert.equal(res.body.error.truncated, false);
});

test('JavaScript and bash', async () => {
  let exe = await sbx.runCode('let a = 2; a * 21', { language: 'javascript' });
  assert.equal(exe.error, undefined, JSON.stringify(exe.error));
  assert.equal(exe.text, '42');
  const out = [];
  exe = await sbx.runCode('echo hi', { language: 'bash', onStdout: m => out.push(m.line) });
  assert.equal(exe.error, undefined, JSON.stringify(exe.error));
  assert.deepEqual(exe.logs.stdout, ['hi\n']);
  assert.deepEqual(out, ['hi\n']);
});

test('contexts: create, list, run apart, restart, remove', async () => {
  // An explicit cwd: the engine's default, /workspace, is the guest's, not this host's.
  const a = await sbx.createCodeContext({ language: 'python', cwd });
  const b = await sbx.createCodeContext({ language: 'python', cwd });
  assert.equal(a.language, 'python');
  assert.equal(a.cwd, cwd);
  assert.deepEqual((await sbx.runCode('import os; print(os.getcwd())', { context: a })).logs.stdout, [`${cwd}\n`]);
  assert.notEqual(a.id, b.id);
  const ids = (await sbx.listCodeContexts()).map(c => c.id);
  assert.ok(ids.includes(a.id) && ids.includes(b.id), JSON.stringify(ids));
  await sbx.runCode('y = 7', { context: a });
  assert.equal((await sbx.runCode('y', { context: a })).text, '7');
  assert.equal((await sbx.runCode('y', { context: b })).error?.name, 'NameError', 'two contexts do not share');
  await sbx.restartCodeContext(a);
  assert.equal((await sbx.runCode('y', { context: a })).error?.name, 'NameError', 'a restart forgets');
  await sbx.removeCodeContext(a.id);
  await sbx.removeCodeContext(b);
  const left = (await sbx.listCodeContexts()).map(c => c.id);
  assert.ok(!left.includes(a.id) && !left.includes(b.id), JSON.stringify(left));
});

test('the SDK\'s timeout interrupts a silent run on a real kernel; the context answers again', async () => {
  const ctx = await sbx.createCodeContext({ language: 'python', cwd });
  // Silent until its end, 60 s away: the face notices the SDK gone at the engine's next tick and
  // the kernel gets its KeyboardInterrupt then; had it not, `stopped` would not be set (the run
  // would end by itself, much later, and the next one wait for it).
  await assert.rejects(sbx.runCode('import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    stopped = True',
                                   { context: ctx, timeoutMs: 2000 }), TimeoutError);
  const exe = await sbx.runCode('stopped', { context: ctx });
  assert.equal(exe.error, undefined, JSON.stringify(exe.error));
  assert.equal(exe.text, 'True');
  await sbx.removeCodeContext(ctx);
});

test('charts: a line, bar, scatter, pie and box-and-whisker chart as E2B\'s Result.chart', async () => {
  const chartOf = async code => {
    const exe = await sbx.runCode(`import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n${code}\nplt.show()`);
    assert.equal(exe.error, undefined, JSON.stringify(exe.error));
    const r = exe.results.find(x => x.png);
    assert.ok(r && r.chart, `a chart beside the PNG: ${JSON.stringify(exe.results.map(x => x.formats()))}`);
    return r.chart;
  };
  let c = await chartOf("ax.plot([1, 2, 3], [4, 5, 6], label='a'); ax.set_title('T'); ax.set_xlabel('time (s)')");
  assert.equal(c.type, 'line');
  assert.equal(c.title, 'T');
  assert.equal(c.x_label, 'time (s)');
  assert.equal(c.x_unit, 's');
  assert.equal(c.x_scale, 'linear');
  assert.deepEqual(c.elements, [{ label: 'a', points: [[1, 4], [2, 5], [3, 6]] }]);
  assert.equal(c.x_ticks.length, c.x_tick_labels.length);
  c = await chartOf("ax.bar(['x', 'y'], [3, 5], label='g')");
  assert.equal(c.type, 'bar');
  assert.deepEqual(c.elements, [{ label: 'x', group: 'g', value: 3 }, { label: 'y', group: 'g', value: 5 }]);
  c = await chartOf("ax.scatter([1, 2], [3, 4], label='p')");
  assert.equal(c.type, 'scatter');
  assert.deepEqual(c.elements, [{ label: 'p', points: [[1, 3], [2, 4]] }]);
  c = await chartOf("ax.pie([1, 3], labels=['a', 'b'])");
  assert.equal(c.type, 'pie');
  assert.deepEqual(c.elements, [{ label: 'a', angle: 90, radius: 1 }, { label: 'b', angle: 270, radius: 1 }]);
  // The SDK's BoxAndWhiskerChart: Chart2D's labels and units, each box's five numbers and its outliers.
  c = await chartOf("ax.boxplot([[85, 90, 78, 92, 88, 40]], labels=['A'], patch_artist=True); ax.set_ylabel('score (pts)')");
  assert.equal(c.type, 'box_and_whisker');
  assert.equal(c.y_unit, 'pts');
  assert.deepEqual(c.elements, [{ label: 'A', min: 78, first_quartile: 79.75, median: 86.5, third_quartile: 89.5, max: 92,
                                  outliers: [40] }]);
});
