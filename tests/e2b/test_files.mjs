// Files through the official e2b SDK (docs/e2b.md): write and read (text,
// bytes, several files at once, octet-stream), exists, getInfo, list,
// makeDir, remove, rename, and the errors the SDK maps; against
// aas-server-fake.
//
// usage: node test_files.mjs AAS_SERVER_FAKE   (run by tests/e2b/run)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, FileNotFoundError, InvalidArgumentError, NotFoundError, SandboxError } from 'e2b';
import { testServer } from './harness.mjs';

const SERVER = process.argv[2];
assert.ok(SERVER, 'usage: test_files.mjs AAS_SERVER_FAKE');
const srv = testServer(SERVER);
let sbx;

before(async () => {
  await srv.start();
  sbx = await Sandbox.create();
});
after(() => srv.stop());

test('write and read: text, bytes, an octet stream, several files at once', async () => {
  const info = await sbx.files.write('/workspace/a.txt', 'hello\n');
  assert.equal(info.path, '/workspace/a.txt');
  assert.equal(info.name, 'a.txt');
  assert.equal(await sbx.files.read('/workspace/a.txt'), 'hello\n');
  // Relative and "~" are under /workspace, E2B's home here.
  await sbx.files.write('rel/b.txt', 'bee');
  assert.equal(await sbx.files.read('/workspace/rel/b.txt'), 'bee');
  assert.equal(await sbx.files.read('~/rel/b.txt'), 'bee');
  // Bytes, every value, and an empty file.
  const bytes = new Uint8Array(256).map((_, i) => i);
  await sbx.files.write('/workspace/bin', bytes.buffer);
  assert.deepEqual(new Uint8Array(await sbx.files.read('/workspace/bin', { format: 'bytes' })), bytes);
  await sbx.files.write('/workspace/empty', '');
  assert.equal(await sbx.files.read('/workspace/empty'), '');
  // As an octet stream (the SDK's other encoding).
  await sbx.files.write('/workspace/oct', 'octets', { useOctetStream: true });
  assert.equal(await sbx.files.read('/workspace/oct'), 'octets');
  // Several at once: one multipart request, each part at its filename.
  const many = await sbx.files.write([{ path: '/workspace/m1', data: 'one' }, { path: 'm2', data: 'two' },
                                      { path: '/workspace/q"uote', data: 'three' }]);
  assert.deepEqual(many.map(f => f.path), ['/workspace/m1', '/workspace/m2', '/workspace/q"uote']);
  assert.equal(await sbx.files.read('/workspace/m2'), 'two');
  assert.equal(await sbx.files.read('/workspace/q"uote'), 'three');
  // The raw answer names the file (a quote in its name made safe).
  const detail = await (await fetch(`${srv.base}/e2b/sandboxes/${sbx.sandboxId}`,
                                  { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })).json();
  const res = await fetch(`${srv.base}/e2b-sandbox/files?path=${encodeURIComponent('/workspace/q"uote')}`,
                          { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': detail.envdAccessToken } });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-disposition'), 'inline; filename="q_uote"');
  assert.equal(await res.text(), 'three');
});

// aas-server-fake's guest lists every file under a path and no directory, at any depth, and a
// missing path as an empty one (tests/fake): what a listing says of directories, depth and missing
// paths is the real guest's, for a test with VMs (docs/e2b.md). Here: files as their directory lists them.
test('exists, getInfo, list', async () => {
  await sbx.files.write('/workspace/dir/x.txt', '12345');
  assert.equal(await sbx.files.exists('/workspace/dir/x.txt'), true);
  const f = await sbx.files.getInfo('/workspace/dir/x.txt');
  assert.equal(f.type, 'file');
  assert.equal(f.name, 'x.txt');
  assert.equal(f.path, '/workspace/dir/x.txt');
  assert.equal(f.size, 5);
  assert.ok(f.modifiedTime instanceof Date);
  assert.match(f.permissions, /^-[rwx-]{9}$/);
  assert.equal((await sbx.files.getInfo('dir/x.txt')).path, '/workspace/dir/x.txt', 'relative: under /workspace');
  const listed = await sbx.files.list('/workspace/dir');
  assert.deepEqual(listed.map(e => [e.name, e.type, e.size]), [['x.txt', 'file', 5]]);
});

test('errors: missing files, root', async () => {
  await assert.rejects(sbx.files.read('/workspace/missing'), FileNotFoundError);
  await assert.rejects(sbx.files.write('/workspace/r', 'x', { user: 'root' }), InvalidArgumentError);
  await assert.rejects(sbx.files.read('/workspace/a.txt', { user: 'root' }), InvalidArgumentError);
});

// makeDir, remove and rename as envd answers them (docs/e2b.md): makeDir says whether it made the
// directory; remove takes a file or a tree, and a missing path is no error (envd's RemoveAll);
// rename makes the destination's parents, replaces a file there and answers the moved entry.
test('makeDir, remove, rename', async () => {
  assert.equal(await sbx.files.makeDir('/workspace/nd'), true);
  assert.equal(await sbx.files.makeDir('/workspace/nd'), false, 'already there');
  assert.equal(await sbx.files.makeDir('~/nd/a/b/c'), true, 'nested: parents made');
  assert.equal((await sbx.files.getInfo('/workspace/nd/a/b')).type, 'dir');
  assert.deepEqual((await sbx.files.list('/workspace/nd/a')).map(e => [e.name, e.type]).slice(0, 1), [['b', 'dir']]);
  await sbx.files.write('/workspace/nd/a/b/c/f.txt', 'eff');
  await assert.rejects(sbx.files.makeDir('/workspace/nd/a/b/c/f.txt'), InvalidArgumentError, 'a file is there');

  // rename: a file into a new directory, then over another file; a directory with its contents.
  const moved = await sbx.files.rename('/workspace/nd/a/b/c/f.txt', '/workspace/mv/g.txt');
  assert.equal(moved.path, '/workspace/mv/g.txt');
  assert.equal(moved.name, 'g.txt');
  assert.equal(moved.type, 'file');
  assert.equal(await sbx.files.read('/workspace/mv/g.txt'), 'eff');
  assert.equal(await sbx.files.exists('/workspace/nd/a/b/c/f.txt'), false);
  await sbx.files.write('/workspace/mv/h.txt', 'aitch');
  await sbx.files.rename('/workspace/mv/g.txt', 'mv/h.txt');
  assert.equal(await sbx.files.read('/workspace/mv/h.txt'), 'eff', 'a file at the destination is replaced');
  const dir = await sbx.files.rename('/workspace/mv', '/workspace/mv2');
  assert.equal(dir.type, 'dir');
  assert.equal(await sbx.files.read('/workspace/mv2/h.txt'), 'eff');
  await assert.rejects(sbx.files.rename('/workspace/missing', '/workspace/x'), FileNotFoundError);
  await assert.rejects(sbx.files.rename('/workspace/missing', '/workspace/x'), NotFoundError);
  await assert.rejects(sbx.files.rename('/workspace/mv2', '/workspace/mv2/inside'), InvalidArgumentError);

  // remove: a file, a tree; a missing path is fine, as with envd.
  await sbx.files.remove('/workspace/mv2/h.txt');
  assert.equal(await sbx.files.exists('/workspace/mv2/h.txt'), false);
  await sbx.files.remove('/workspace/nd');
  assert.equal(await sbx.files.exists('/workspace/nd/a/b/c'), false);
  assert.equal(await sbx.files.exists('/workspace/nd'), false);
  await sbx.files.remove('/workspace/nd');

  // Root is refused, as for every call (the sandbox user is the only one).
  await assert.rejects(sbx.files.makeDir('/workspace/r', { user: 'root' }), InvalidArgumentError);
  await assert.rejects(sbx.files.remove('/workspace/mv2', { user: 'root' }), InvalidArgumentError);
  await assert.rejects(sbx.files.rename('/workspace/mv2', '/workspace/r', { user: 'root' }), InvalidArgumentError);
  assert.equal(await sbx.files.exists('/workspace/mv2'), true);
  // Outside what the sandbox user may write: permission denied, not a server failure.
  await assert.rejects(sbx.files.makeDir('/etc/nope'), err => {
    assert.ok(err instanceof SandboxError, `${err}`);
    assert.match(err.message, /permission/i);
    return true;
  });
});
