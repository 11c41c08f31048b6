// Watching a directory through the official e2b SDK (docs/e2b.md, "Watching
// a directory"): files.watchDir's events as files change, recursive or
// not, stop(), the call's timeoutMs ending the watch through onExit, the
// errors at the start and the bound on watches. The Python SDK's polling
// trio (CreateWatcher, GetWatcherEvents, RemoveWatcher) is driven raw, as
// it sends them. Against aas-server-fake, whose "guest" plays the watcher
// on its files (tests/fake).
//
// usage: node test_watch.mjs AAS_SERVER_FAKE   (run by tests/e2b/run)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, FilesystemEventType, FileNotFoundError, InvalidArgumentError, RateLimitError, TimeoutError } from 'e2b';
import { testServer, sleep } from './harness.mjs';

const SERVER = process.argv[2];
assert.ok(SERVER, 'usage: test_watch.mjs AAS_SERVER_FAKE');
// Room for the bound's test: 8 watches of one sandbox run at once, each a running command.
const srv = testServer(SERVER, { args: ['--max-executions', '32'] });
let sbx, token;

before(async () => {
  await srv.start();
  sbx = await Sandbox.create();
  token = (await (await fetch(`${srv.base}/e2b/sandboxes/${sbx.sandboxId}`,
                              { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })).json()).envdAccessToken;
});
after(() => srv.stop());

async function until(pred, what) {
  for (let i = 0; i < 500 && !pred(); i++) await sleep(10);
  assert.ok(pred(), what);
}

// A unary Connect call, as the Python SDK sends one.
async function unary(method, body) {
  const res = await fetch(`${srv.base}/e2b-sandbox/filesystem.Filesystem/${method}`, {
    method: 'POST', body: JSON.stringify(body),
    headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': token,
               'Content-Type': 'application/json', 'Connect-Protocol-Version': '1' },
  });
  return { status: res.status, body: await res.json() };
}

test('watchDir: create and write events as files change, names relative, then stop', async () => {
  const events = [];
  const h = await sbx.files.watchDir('/workspace/w', e => events.push(e), { recursive: false })
    .catch(e => e);
  // A directory that does not exist yet is FileNotFoundError, as envd says.
  assert.ok(h instanceof FileNotFoundError, `${h}`);
  await sbx.files.write('/workspace/w/seed.txt', 'x');
  const w = await sbx.files.watchDir('/workspace/w', e => events.push(e));
  await sbx.files.write('/workspace/w/a.txt', 'hello');
  await until(() => events.some(e => e.name === 'a.txt' && e.type === FilesystemEventType.CREATE), 'a create');
  await until(() => events.some(e => e.name === 'a.txt' && e.type === FilesystemEventType.WRITE), 'a write');
  assert.ok(!events.some(e => e.name === 'seed.txt'), 'what was there before is no change');
  await sbx.files.write('/workspace/w/sub/deep.txt', 'y');
  await sbx.files.write('/workspace/w/a.txt', 'again');
  await until(() => events.filter(e => e.name === 'a.txt' && e.type === FilesystemEventType.WRITE).length >= 2,
              'a second write');
  assert.ok(!events.some(e => e.name.includes('deep')), 'not recursive: nothing from below');
  await w.stop();
  const n = events.length;
  await sbx.files.write('/workspace/w/b.txt', 'late');
  await sleep(300);
  assert.equal(events.length, n, 'nothing after stop()');
});

test('watchDir: recursive, a relative path, and the timeout through onExit', async () => {
  const events = [];
  let exited = null;
  const w = await sbx.files.watchDir('r', e => events.push(e),
                                     { recursive: true, timeoutMs: 2000, onExit: err => { exited = err ?? 'none'; } })
    .catch(e => e);
  assert.ok(w instanceof FileNotFoundError, 'r does not exist yet');
  await sbx.files.write('r/top.txt', '1');
  const w2 = await sbx.files.watchDir('r', e => events.push(e),
                                      { recursive: true, timeoutMs: 2000, onExit: err => { exited = err ?? 'none'; } });
  await sbx.files.write('r/d/e/deep.txt', '2');
  await until(() => events.some(e => e.name === 'd/e/deep.txt' && e.type === FilesystemEventType.CREATE),
              `a create below, named from the watched directory: ${JSON.stringify(events)}`);
  await until(() => exited !== null, 'the watch ends at its timeoutMs');
  assert.ok(exited instanceof TimeoutError, `onExit gets a TimeoutError: ${exited}`);
  await w2.stop();
});

test('watchDir: refusals and the bound of 8 watches per sandbox', async () => {
  await assert.rejects(sbx.files.watchDir('/workspace/w/a.txt', () => {}), InvalidArgumentError, 'a file');
  await assert.rejects(sbx.files.watchDir('/workspace/w', () => {}, { user: 'root' }), InvalidArgumentError);
  await assert.rejects(sbx.files.watchDir('/workspace/w', () => {}, { includeEntry: true }), InvalidArgumentError);
  const hs = [];
  const running = async () => (await srv.rest('GET', `/v1/sandboxes/sbx-${sbx.sandboxId}/executions?running=true`))
    .body.executions.length;
  try {
    for (let i = 0; i < 8; i++) hs.push(await sbx.files.watchDir('/workspace/w', () => {}, { timeoutMs: 0 }));
    await assert.rejects(sbx.files.watchDir('/workspace/w', () => {}), RateLimitError);
    assert.equal(await running(), 8, 'each watch is a command in the guest');
    assert.equal((await sbx.commands.list()).length, 0, 'but none the tenant\'s: commands.list() shows no watcher');
    // A stopped watch gives its place back (its watcher is killed).
    await hs.pop().stop();
    let again = null;
    for (let i = 0; i < 100 && !again; i++) {
      again = await sbx.files.watchDir('/workspace/w', () => {}, { timeoutMs: 0 }).catch(() => null);
      if (!again) await sleep(20);
    }
    assert.ok(again, 'a place again after stop()');
    hs.push(again);
  } finally {
    for (const h of hs) await h.stop();
  }
  // The watchers are gone with their streams: no command of theirs runs on.
  let left = await running();
  for (let i = 0; i < 200 && left > 0; i++) {
    await sleep(20);
    left = await running();
  }
  assert.equal(left, 0, 'every watcher killed with its stream');
});

test('the polling trio: CreateWatcher, GetWatcherEvents, RemoveWatcher', async () => {
  const created = await unary('CreateWatcher', { path: '/workspace/w', recursive: false });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const id = created.body.watcherId;
  assert.ok(id);
  await sbx.files.write('/workspace/w/polled.txt', 'p');
  let events = [];
  for (let i = 0; i < 300 && !events.some(e => e.name === 'polled.txt'); i++) {
    const got = await unary('GetWatcherEvents', { watcherId: id });
    assert.equal(got.status, 200, JSON.stringify(got.body));
    events = events.concat(got.body.events);
    await sleep(10);
  }
  assert.ok(events.some(e => e.name === 'polled.txt' && e.type === 'EVENT_TYPE_CREATE'), JSON.stringify(events));
  const again = await unary('GetWatcherEvents', { watcherId: id });
  assert.ok(!again.body.events.some(e => e.name === 'polled.txt' && e.type === 'EVENT_TYPE_CREATE'),
            'a poll takes the events it returns');
  assert.equal((await unary('RemoveWatcher', { watcherId: id })).status, 200);
  const gone = await unary('GetWatcherEvents', { watcherId: id });
  assert.equal(gone.status, 404);
  assert.equal(gone.body.code, 'not_found');
  assert.equal((await unary('CreateWatcher', { path: '/nope' })).body.code, 'not_found');
  assert.equal((await unary('CreateWatcher', { path: '' })).body.code, 'invalid_argument');
});
