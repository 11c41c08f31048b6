// Terminals through the official e2b SDK (docs/e2b.md, "PTY"): pty.create
// with its size and onData, sendInput, resize, a second subscriber with
// pty.connect, disconnect and a late connect after the end, kill, the exit
// status through wait(), cwd and envs, the bounds and the refusals. Against
// aas-server-fake, whose "shell" (tests/fake) greets with
// "fake-shell TERM CxR tty", echoes what it is sent, answers a resize with
// "resize CxR", "pwd" with its directory and "echo $NAME" with a variable,
// and ends at "exit" or "exit N".
//
// usage: node test_pty.mjs AAS_SERVER_FAKE   (run by tests/e2b/run)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, CommandExitError, InvalidArgumentError, NotFoundError, RateLimitError, TimeoutError } from 'e2b';
import { testServer, sleep } from './harness.mjs';

const SERVER = process.argv[2];
assert.ok(SERVER, 'usage: test_pty.mjs AAS_SERVER_FAKE');
const srv = testServer(SERVER, { args: ['--pty-per-sandbox', '3'] });
let sbx;

before(async () => {
  await srv.start();
  sbx = await Sandbox.create();
});
after(() => srv.stop());

const enc = s => new TextEncoder().encode(s);

// A terminal whose output is collected as text; until(re) waits for it to match.
async function terminal(opts = {}) {
  const t = { text: '' };
  const dec = new TextDecoder();
  t.handle = await sbx.pty.create({ cols: 80, rows: 24, onData: d => { t.text += dec.decode(d, { stream: true }); },
                                    ...opts });
  t.until = async re => {
    for (let i = 0; i < 500 && !re.test(t.text); i++) await sleep(10);
    assert.match(t.text, re);
  };
  return t;
}

test('pty.create: the size and TERM, echo, resize, and exit through wait()', async () => {
  const t = await terminal();
  assert.ok(t.handle.pid > 0);
  await t.until(/fake-shell xterm-256color 80x24 tty\r\n/);
  await sbx.pty.sendInput(t.handle.pid, enc('echo hello\n'));
  await t.until(/echo hello\n/);
  await sbx.pty.resize(t.handle.pid, { cols: 100, rows: 30 });
  await t.until(/resize 100x30\r\n/);
  const listed = await sbx.commands.list();
  const mine = listed.find(p => p.pid === t.handle.pid);
  assert.ok(mine, 'a running terminal is listed');
  assert.equal(mine.cmd, '/bin/bash');
  assert.deepEqual(mine.args, ['-i', '-l']);
  await sbx.pty.sendInput(t.handle.pid, enc('exit\n'));
  const r = await t.handle.wait();
  assert.equal(r.exitCode, 0);
  assert.ok(!(await sbx.commands.list()).some(p => p.pid === t.handle.pid), 'an ended terminal is not listed');
});

test('pty: an exit status, a second subscriber, disconnect and a late connect', async () => {
  const t = await terminal();
  const pid = t.handle.pid;
  await t.until(/fake-shell/);
  // A second subscriber sees what comes after it connected.
  let seen = '';
  const second = await sbx.pty.connect(pid, { onData: d => { seen += new TextDecoder().decode(d); } });
  assert.equal(second.pid, pid);
  await sbx.pty.sendInput(pid, enc('after\n'));
  await t.until(/after\n/);
  for (let i = 0; i < 500 && !seen.includes('after'); i++) await sleep(10);
  assert.ok(seen.includes('after\n'), `the second subscriber got the output: ${JSON.stringify(seen)}`);
  assert.ok(!seen.includes('fake-shell'), 'and not what came before it');
  // The first one leaves; the terminal runs on.
  await t.handle.disconnect();
  await sbx.pty.sendInput(pid, enc('exit 7\n'));
  await assert.rejects(second.wait(), err => {
    assert.ok(err instanceof CommandExitError, `${err}`);
    assert.equal(err.exitCode, 7);
    return true;
  });
  // Ended, but still there to connect to for a while: its end at once.
  const late = await sbx.pty.connect(pid, { onData: () => {} });
  await assert.rejects(late.wait(), err => err instanceof CommandExitError && err.exitCode === 7);
  assert.equal(await sbx.pty.kill(pid), false, 'an ended terminal cannot be killed');
});

test('pty.kill, and kill through the handle', async () => {
  const t = await terminal();
  await t.until(/fake-shell/);
  assert.equal(await sbx.pty.kill(t.handle.pid), true);
  await assert.rejects(t.handle.wait(), err => {
    assert.ok(err instanceof CommandExitError, `${err}`);
    assert.equal(err.exitCode, -1);
    assert.match(err.message, /signal: killed/);
    return true;
  });
  assert.equal(await sbx.pty.kill(t.handle.pid), false);
  const u = await terminal();
  assert.equal(await u.handle.kill(), true);
  await assert.rejects(u.handle.wait(), CommandExitError);
  await assert.rejects(sbx.pty.sendInput(u.handle.pid, enc('x')), NotFoundError);
  await assert.rejects(sbx.pty.sendInput(999999, enc('x')), NotFoundError);
  await assert.rejects(sbx.pty.resize(999999, { cols: 10, rows: 10 }), NotFoundError);
  assert.equal(await sbx.pty.kill(999999), false);
});

test('pty: the call\'s timeoutMs ends the terminal', async () => {
  const t = await terminal({ timeoutMs: 1500 });
  await t.until(/fake-shell/);
  await assert.rejects(t.handle.wait(), err => err instanceof TimeoutError || err instanceof CommandExitError);
  // The terminal was hung up on at the same deadline.
  for (let i = 0; i < 300 && (await sbx.commands.list()).some(p => p.pid === t.handle.pid); i++) await sleep(10);
  assert.ok(!(await sbx.commands.list()).some(p => p.pid === t.handle.pid));
});

// Type a line; the fake shell answers "pwd" and "echo $NAME" on the line after the echo.
async function ask(t, line) {
  const from = t.text.length;
  await sbx.pty.sendInput(t.handle.pid, enc(`${line}\n`));
  const re = new RegExp(`${line.replace(/[$]/g, '\\$')}\n([^\r]*)\r\n`);
  for (let i = 0; i < 500 && !re.test(t.text.slice(from)); i++) await sleep(10);
  const m = re.exec(t.text.slice(from));
  assert.ok(m, `an answer to ${line}: ${JSON.stringify(t.text.slice(from))}`);
  return m[1];
}

test('pty.create with cwd and envs: the shell starts there with them, and with the sandbox\'s envs', async () => {
  const own = await Sandbox.create({ envs: { FROM_SANDBOX: 'sb', BOTH: 'sandbox' } });
  const prev = sbx;
  sbx = own;
  try {
    const t = await terminal({ cwd: '/tmp/work dir', envs: { FOO: 'bar baz', BOTH: 'terminal' } });
    await t.until(/fake-shell xterm-256color 80x24 tty\r\n/);
    assert.equal(await ask(t, 'pwd'), '/tmp/work dir');
    assert.equal(await ask(t, 'echo $FOO'), 'bar baz');
    assert.equal(await ask(t, 'echo $BOTH'), 'terminal', 'the terminal\'s own win over the sandbox\'s');
    assert.equal(await ask(t, 'echo $FROM_SANDBOX'), 'sb');
    // The locale the SDK always sends goes with them; TERM is the terminal's type, not a variable beside it.
    assert.equal(await ask(t, 'echo $LANG'), 'C.UTF-8');
    assert.equal(await ask(t, 'echo $TERM'), '');
    await t.handle.kill();
    // A relative cwd is under the home (/workspace), "~" is the home; none is the login shell's own start.
    const rel = await terminal({ cwd: 'proj' });
    assert.equal(await ask(rel, 'pwd'), '/workspace/proj');
    assert.equal(await ask(rel, 'echo $BOTH'), 'sandbox');
    await rel.handle.kill();
    const tilde = await terminal({ cwd: '~/x' });
    assert.equal(await ask(tilde, 'pwd'), '/workspace/x');
    await tilde.handle.kill();
    // exec's bounds: a name no shell takes, and a directory with a control character.
    await assert.rejects(terminal({ envs: { '1X': 'y' } }),
                         err => err instanceof InvalidArgumentError && /shell name/.test(err.message));
    await assert.rejects(terminal({ cwd: '/tmp/a\u0001b' }),
                         err => err instanceof InvalidArgumentError && /control character/.test(err.message));
  } finally {
    sbx = prev;
    await own.kill();
  }
});

test('pty: refusals (root, a bad size, stdin calls) and the per-sandbox bound', async () => {
  await assert.rejects(sbx.pty.create({ cols: 80, rows: 24, onData: () => {}, user: 'root' }), InvalidArgumentError);
  await assert.rejects(sbx.pty.create({ cols: 0, rows: 24, onData: () => {} }), InvalidArgumentError);
  await assert.rejects(sbx.pty.create({ cols: 80, rows: 5000, onData: () => {} }), InvalidArgumentError);
  // TERM in envs is the terminal's type.
  const home = await terminal({ cwd: '/workspace', envs: { TERM: 'vt100' } });
  await home.until(/fake-shell vt100 80x24 tty/);
  await assert.rejects(sbx.commands.sendStdin(home.handle.pid, 'x'), InvalidArgumentError);
  await assert.rejects(sbx.commands.closeStdin(home.handle.pid), InvalidArgumentError);
  // --pty-per-sandbox 3: a fourth at once is refused.
  const more = [await terminal(), await terminal()];
  await assert.rejects(terminal(), RateLimitError);
  for (const t of [home, ...more]) await t.handle.kill();
  // A terminal is not a command: no pty input to a command.
  const cmd = await sbx.commands.run('cat', { background: true, stdin: true });
  await assert.rejects(sbx.pty.sendInput(cmd.pid, enc('x')), InvalidArgumentError);
  await assert.rejects(sbx.pty.resize(cmd.pid, { cols: 10, rows: 10 }), InvalidArgumentError);
  await cmd.kill();
});
