// One journey through the official e2b SDK over REAL VMs (docs/e2b.md,
// "Tested against"): the real aas-server with the libvirt driver, the tiny
// image its default (AAS_TEST_IMAGES, harness.mjs), templates on as a user's
// server has them. The SDK's calls are those of test_commands.mjs,
// test_files.mjs and test_control.mjs; what this adds is a real guest under
// them: its shell, its filesystem, SSH and the control port, snapshots.
//
// Two sandboxes, the fewest the path takes: the server's first create boots
// cold and starts the template's build (nothing builds one before a create
// asks); the commands run there while it builds. The second create is a
// clone of the template (its log line says so); files, pause and resume run
// there. The VMs are the test's cost: no more of them.
//
// usage: AAS_TEST_IMAGES=DIR node test_vm.mjs AAS_SERVER   (run by tests/e2b/run)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, CommandExitError } from 'e2b';
import { testServer, IMAGES, sleep } from './harness.mjs';

const SERVER = process.argv[2];
assert.ok(SERVER && IMAGES, 'usage: AAS_TEST_IMAGES=DIR test_vm.mjs AAS_SERVER');
const srv = testServer(SERVER);
let first, clone;

before(() => srv.start());
after(() => srv.stop());

// A test that, failing, shows the server's log (what a real guest did is in it; the harness removes it).
const vmTest = (name, fn) => test(name, async t => {
  try {
    await fn(t);
  } catch (e) {
    console.error(`${name}: the server's log ends:\n${srv.log().slice(-30000)}`);
    throw e;
  }
});

// The VM's line in the server's log (lib/driver/libvirt): "VM sbx-ID up in N ms (clone, ..." or "(cold boot, ...".
const upLine = id => srv.log().split('\n').find(l => l.includes(`VM sbx-${id} up in `)) || '';

async function templatesReady() {
  const res = await fetch(`${srv.base}/metrics`);
  const m = /^aas_templates\{state="ready"\} (\d+)$/m.exec(await res.text());
  return m && Number(m[1]) > 0;
}

vmTest('the first create: base, metadata and envs, a real guest', async () => {
  first = await Sandbox.create({ metadata: { journey: 'vm' }, envs: { FROM_CREATE: 'yes' }, timeoutMs: 600_000 });
  const info = await first.getInfo();
  assert.equal(info.templateId, 'base', 'the default template');
  assert.deepEqual(info.metadata, { journey: 'vm' });
  assert.equal(info.state, 'running');
  assert.match(upLine(first.sandboxId), /\(cold boot/, 'the first create boots cold: no template yet');
  const r = await first.commands.run('uname -s; id -un; hostname');
  assert.equal(r.stdout, `Linux\nsandbox\nsbx-${first.sandboxId}\n`, 'a real guest, its own machine, not root');
});

vmTest('commands.run: stdout, stderr, exit codes, envs, cwd', async () => {
  const r = await first.commands.run('echo out; echo err >&2');
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, 'out\n');
  assert.equal(r.stderr, 'err\n');
  await assert.rejects(first.commands.run('echo gone >&2; exit 3'), err => {
    assert.ok(err instanceof CommandExitError, `${err}`);
    assert.equal(err.exitCode, 3);
    assert.equal(err.stderr, 'gone\n');
    return true;
  });
  const env = await first.commands.run('echo "$FROM_CREATE $FROM_RUN"', { envs: { FROM_RUN: 'a b' } });
  assert.equal(env.stdout, 'yes a b\n', 'the sandbox\'s envs from create and the call\'s');
  assert.equal((await first.commands.run('pwd')).stdout, '/workspace\n');
  assert.equal((await first.commands.run('mkdir -p sub && pwd', { cwd: '/tmp' })).stdout, '/tmp\n');
  await first.commands.run('mkdir -p sub');
  assert.equal((await first.commands.run('pwd', { cwd: 'sub' })).stdout, '/workspace/sub\n');
});

vmTest('onStdout: a line arrives while the command still runs', async () => {
  // The command waits for a file that is made only once its first line came: the line cannot be
  // held to the end (the run would never end), and no clock is asserted.
  const go = `/tmp/go-${process.pid}`;
  const lines = [];
  let made = null;
  const r = await first.commands.run(`echo first; while [ ! -e ${go} ]; do sleep 0.1; done; echo second`, {
    timeoutMs: 120_000,
    onStdout: d => {
      lines.push(d);
      if (!made && lines.join('').includes('first\n')) made = first.files.write(go, '');
    },
  });
  assert.ok(made, 'the first line came before the end');
  await made;
  assert.equal(lines.join(''), 'first\nsecond\n');
  assert.equal(r.stdout, 'first\nsecond\n');
});

vmTest('background: list, connect, sendStdin, kill', async () => {
  const cat = await first.commands.run('cat', { background: true, stdin: true, timeoutMs: 0 });
  assert.ok(cat.pid > 0);
  assert.ok((await first.commands.list()).some(p => p.pid === cat.pid), 'listed while it runs');
  const seen = [];
  const again = await first.commands.connect(cat.pid, { timeoutMs: 0, onStdout: d => seen.push(d) });
  assert.equal(again.pid, cat.pid);
  await first.commands.sendStdin(cat.pid, 'abc\n');
  for (let i = 0; i < 600 && !seen.join('').includes('abc\n'); i++) await sleep(100);
  assert.equal(seen.join(''), 'abc\n', 'the guest\'s cat echoed the input to the connected handle');
  assert.equal(await first.commands.kill(cat.pid), true);
  await assert.rejects(again.wait(), CommandExitError, 'killed: a non-zero end');
  await assert.rejects(cat.wait(), CommandExitError);
  assert.ok(!(await first.commands.list()).some(p => p.pid === cat.pid), 'gone from the list');
});

vmTest('the second create is a clone of the template', async () => {
  // The template was built while the commands ran; wait for it (a cold boot and a saved state under TCG).
  for (let i = 0; i < 1200 && !(await templatesReady()); i++) await sleep(250);
  assert.ok(await templatesReady(), 'the template is ready');
  clone = await Sandbox.create({ metadata: { journey: 'clone' } });
  assert.match(upLine(clone.sandboxId), /\(clone, /, `a clone: ${upLine(clone.sandboxId)}`);
  assert.equal((await clone.commands.run('hostname')).stdout, `sbx-${clone.sandboxId}\n`, 'its own machine');
});

vmTest('files: text, bytes, many at once, list, exists, getInfo', async () => {
  await clone.files.write('/workspace/a.txt', 'hello\n');
  assert.equal(await clone.files.read('/workspace/a.txt'), 'hello\n');
  assert.equal((await clone.commands.run('cat a.txt')).stdout, 'hello\n', 'the guest sees what was written');
  // Every byte value, NUL and 0xff among them, both ways.
  const bytes = new Uint8Array(512).map((_, i) => (i * 7) & 0xff);
  await clone.files.write('/workspace/bin', bytes.buffer);
  assert.deepEqual(new Uint8Array(await clone.files.read('/workspace/bin', { format: 'bytes' })), bytes);
  assert.equal((await clone.commands.run('wc -c < bin')).stdout.trim(), '512');
  const many = await clone.files.write(Array.from({ length: 8 }, (_, i) => ({ path: `dir/f${i}`, data: `file ${i}` })));
  assert.deepEqual(many.map(f => f.path), Array.from({ length: 8 }, (_, i) => `/workspace/dir/f${i}`));
  assert.equal(await clone.files.read('dir/f5'), 'file 5');
  const listed = await clone.files.list('/workspace/dir');
  assert.deepEqual(listed.map(e => [e.name, e.type]).sort(), Array.from({ length: 8 }, (_, i) => [`f${i}`, 'file']));
  assert.equal(await clone.files.exists('/workspace/dir/f7'), true);
  assert.equal(await clone.files.exists('/workspace/dir/nope'), false);
  const f = await clone.files.getInfo('/workspace/bin');
  assert.equal(f.type, 'file');
  assert.equal(f.size, 512);
  assert.equal(f.path, '/workspace/bin');
});

vmTest('getInfo, setTimeout, list, connect, pause and resume, kill', async () => {
  await clone.setTimeout(900_000);
  const info = await Sandbox.getInfo(clone.sandboxId);
  assert.ok(Math.abs(info.endAt.getTime() - (Date.now() + 900_000)) < 60_000, `endAt ${info.endAt.toISOString()}`);
  const mine = await Sandbox.list({ query: { metadata: { journey: 'clone' } } }).nextItems();
  assert.deepEqual(mine.map(s => s.sandboxId), [clone.sandboxId]);
  assert.equal((await Sandbox.list().nextItems()).length, 2);
  const same = await Sandbox.connect(first.sandboxId);
  assert.equal((await same.commands.run('echo $FROM_CREATE')).stdout, 'yes\n', 'connect: the same sandbox');

  // A running process and a file outlive a pause and resume (the driver's snapshot of the VM).
  const bg = await clone.commands.run('sleep 600', { background: true, timeoutMs: 0 });
  const pid = (await clone.commands.run('pgrep -x sleep || pidof sleep')).stdout.trim();
  assert.match(pid, /^\d+$/);
  await bg.disconnect();
  assert.equal(await clone.pause(), true);
  assert.equal((await clone.getInfo()).state, 'paused');
  assert.deepEqual((await Sandbox.list({ query: { state: ['paused'] } }).nextItems()).map(s => s.sandboxId),
                   [clone.sandboxId]);
  const resumed = await Sandbox.connect(clone.sandboxId);
  assert.equal((await resumed.getInfo()).state, 'running');
  assert.equal(await resumed.files.read('/workspace/a.txt'), 'hello\n', 'the file outlived the pause');
  assert.equal((await resumed.commands.run(`kill -0 ${pid} && echo alive`)).stdout, 'alive\n',
               'the process outlived the pause');

  assert.equal(await resumed.kill(), true);
  assert.equal(await first.kill(), true);
  assert.equal(await first.isRunning(), false);
  assert.equal((await Sandbox.list().nextItems()).length, 0);
});
