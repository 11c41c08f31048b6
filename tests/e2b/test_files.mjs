// Files through the official e2b SDK (docs/e2b.md): write and read (text,
// bytes, several files at once, octet-stream, a file larger than any buffer
// the gateway once had), exists, getInfo, list, makeDir, remove, rename, the
// errors the SDK maps, and uploads a client abandons midway; against
// aas-server-fake.
//
// usage: node test_files.mjs AAS_SERVER_FAKE   (run by tests/e2b/run)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { Sandbox, FileNotFoundError, InvalidArgumentError, NotFoundError, SandboxError } from 'e2b';
import { testServer, sleep } from './harness.mjs';

const SERVER = process.argv[2];
assert.ok(SERVER, 'usage: test_files.mjs AAS_SERVER_FAKE');
// The server's default idle window for kept-alive connections (--header-timeout 10 s), announced as half of it
// (Keep-Alive: timeout=5), so undici retires its pooled connections well before the server cuts them.
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

// Uploads stream through the gateway (docs/e2b.md "Files"): no size is held whole, so a file past the
// 24 MiB the gateway once buffered goes through, both encodings, and reads back byte for byte.
test('large files and several binary files in one write, streamed both ways', async () => {
  const MIB = 1 << 20;
  // 30 MiB: every byte value (257 of them over and over, so no two runs line up alike), and near-boundaries
  // undici's multipart delimiter could be confused with. Filled natively (a JS loop over 30 MiB is slow).
  const big = Buffer.alloc(30 * MIB, Buffer.from(Array.from({ length: 257 }, (_, i) => i & 0xff)));
  const fake = Buffer.from('\r\n------formdata-undici-0\r\n--\r\n\r\n');
  for (let at = 1000; at + fake.length < big.length; at += 3 * MIB + 17) fake.copy(big, at);
  const ab = b => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
  await sbx.files.write('/workspace/big', ab(big));
  const back = Buffer.from(await sbx.files.read('/workspace/big', { format: 'bytes' }));
  assert.equal(back.length, big.length);
  assert.ok(back.equals(big), 'the 30 MiB came back as written');
  assert.equal((await sbx.files.getInfo('/workspace/big')).size, big.length);
  // The read says its length before the bytes (envd's Content-Length; the SDK reads an empty file by it).
  const detail = await (await fetch(`${srv.base}/e2b/sandboxes/${sbx.sandboxId}`,
                                    { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })).json();
  const res = await fetch(`${srv.base}/e2b-sandbox/files?path=/workspace/big`,
                          { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': detail.envdAccessToken } });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-length'), String(big.length));
  await res.arrayBuffer();
  // As an octet stream, the SDK's other encoding.
  await sbx.files.write('/workspace/big-oct', ab(big), { useOctetStream: true });
  assert.ok(Buffer.from(await sbx.files.read('/workspace/big-oct', { format: 'bytes' })).equals(big));
  // Several binary files in one multipart request, each larger than the gateway's 1 MiB pipe but one.
  const files = [{ path: '/workspace/mf/a', data: randomBytes(3 * MIB + 5) }, { path: 'mf/empty', data: Buffer.alloc(0) },
                 { path: '/workspace/mf/b', data: randomBytes(MIB + 1) }, { path: '~/mf/c', data: big.subarray(0, 2 * MIB) }];
  const wrote = await sbx.files.write(files.map(f => ({ path: f.path, data: ab(f.data) })));
  assert.deepEqual(wrote.map(f => f.path), ['/workspace/mf/a', '/workspace/mf/empty', '/workspace/mf/b', '/workspace/mf/c']);
  for (const f of files)
    assert.ok(Buffer.from(await sbx.files.read(f.path, { format: 'bytes' })).equals(f.data), `${f.path} read back`);
  await sbx.files.remove('/workspace/big-oct');
});

// Every response on a kept-alive connection says how long the server keeps it idle: half its window
// (--header-timeout 10 s: 5; undici keeps it that less 2 s). A call after idling past the whole window
// (the SDK's pooled connections unused 10 s and more) goes through on fresh ones.
test('keep-alive: the idle timeout announced on both faces, and calls after idling past it', async () => {
  const res = await fetch(`${srv.base}/e2b/sandboxes/${sbx.sandboxId}`, { headers: { 'X-API-KEY': process.env.E2B_API_KEY } });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('keep-alive'), 'timeout=5', 'the control plane');
  const { envdAccessToken } = await res.json();
  await sbx.files.write('/workspace/ka', 'before');
  const data = await fetch(`${srv.base}/e2b-sandbox/files?path=/workspace/ka`,
                           { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': envdAccessToken } });
  assert.equal(await data.text(), 'before');
  assert.equal(data.headers.get('keep-alive'), 'timeout=5', 'the data plane');
  await sleep(10500);
  assert.equal(await sbx.files.read('/workspace/ka'), 'before');
  await sbx.files.write('/workspace/ka', 'after');
  assert.equal((await sbx.commands.run('true')).exitCode, 0);
  assert.ok(await sbx.isRunning());
});

// A client that goes away midway: the file it was sending is never put in place (its path keeps what it
// had), the files it finished before stay, and what the upload held is given back: more abandoned
// uploads than an account's transfers at once (4, max_transfers) and the next write still goes through.
test('an upload abandoned midway leaves no half file and holds nothing', async () => {
  const detail = await (await fetch(`${srv.base}/e2b/sandboxes/${sbx.sandboxId}`,
                                    { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })).json();
  await sbx.files.write('/workspace/cut', 'old');
  const boundary = 'XBcutXB';
  const head = name => `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\n` +
                       'Content-Type: application/octet-stream\r\n\r\n';
  const open = (type, query) => {
    const req = request(`${srv.base}/e2b-sandbox/files?${query}`, {
      method: 'POST',
      headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': detail.envdAccessToken, 'Content-Type': type },
    });
    req.on('error', () => {}); // the abandonment is ours
    req.flushHeaders();
    return req;
  };
  for (let i = 0; i < 6; i++) {
    // One whole file, then half of the next, then the connection is cut.
    const req = open(`multipart/form-data; boundary=${boundary}`, 'username=user');
    req.write(head(`/workspace/cut-done-${i}`) + 'done' + '\r\n' + head('/workspace/cut'));
    req.write(randomBytes(512 * 1024));
    // Cut once the server has taken the first file (and so is into the second).
    for (let tries = 0; tries < 600 && !(await sbx.files.exists(`/workspace/cut-done-${i}`)); tries++) await sleep(50);
    req.destroy();
    assert.equal(await sbx.files.read(`/workspace/cut-done-${i}`), 'done', 'the file finished before stays');
  }
  // The other encoding, cut the same way.
  const oct = open('application/octet-stream', 'path=%2Fworkspace%2Fcut&username=user');
  oct.write(randomBytes(512 * 1024));
  await sleep(200);
  oct.destroy();
  // Each abandoned write gave its transfer back: this one is not refused (RateLimitError) for them.
  let wrote = false;
  for (let tries = 0; tries < 100 && !wrote; tries++) {
    try {
      await sbx.files.write('/workspace/after-cut', 'fine');
      wrote = true;
    } catch (e) {
      if (!/429|rate/i.test(`${e.name} ${e.message}`)) throw e;
      await sleep(100);
    }
  }
  assert.ok(wrote, 'a write after the abandoned ones');
  assert.equal(await sbx.files.read('/workspace/cut'), 'old', 'never replaced by half a file');
  assert.equal(await sbx.files.read('/workspace/after-cut'), 'fine');
});

// gzip: true: the SDK compresses each file and sends it as an octet stream with Content-Encoding: gzip; the
// gateway inflates it as it comes (docs/e2b.md "Files"), within its bounds: 1 GiB, and past 1 MiB at most 128
// times the compressed bytes (a decompression bomb is refused and its path keeps what it had).
test('gzip uploads: inflated as they come, several members, bounded', async () => {
  const MIB = 1 << 20;
  const text = 'hello gzip\n'.repeat(5000);
  await sbx.files.write('/workspace/gz.txt', text, { gzip: true });
  assert.equal(await sbx.files.read('/workspace/gz.txt'), text);
  const rnd = randomBytes(3 * MIB + 7);
  await sbx.files.write('gz/rnd', rnd.buffer.slice(rnd.byteOffset, rnd.byteOffset + rnd.byteLength), { gzip: true });
  assert.ok(Buffer.from(await sbx.files.read('/workspace/gz/rnd', { format: 'bytes' })).equals(rnd));
  const many = await sbx.files.write([{ path: 'gz/a', data: 'aa' }, { path: '/workspace/gz/b', data: '' }], { gzip: true });
  assert.deepEqual(many.map(f => f.path), ['/workspace/gz/a', '/workspace/gz/b']);
  assert.equal(await sbx.files.read('/workspace/gz/a'), 'aa');
  assert.equal(await sbx.files.read('/workspace/gz/b'), '');

  // A bomb: 64 MiB of zeros is ~64 KiB of gzip (1000:1).
  await sbx.files.write('/workspace/bomb', 'old');
  await assert.rejects(sbx.files.write('/workspace/bomb', new Uint8Array(64 * MIB), { gzip: true }),
                       e => /128 times/.test(e.message));
  assert.equal(await sbx.files.read('/workspace/bomb'), 'old', 'never replaced by what a bomb gave');

  // On the wire: two members are one body (as envd's reader takes them); corrupt, cut short or another coding: 400.
  const { envdAccessToken } = await (await fetch(`${srv.base}/e2b/sandboxes/${sbx.sandboxId}`,
                                                 { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })).json();
  const post = (body, encoding = 'gzip') => fetch(`${srv.base}/e2b-sandbox/files?path=%2Fworkspace%2Fgz%2Fraw&username=user`, {
    method: 'POST', body,
    headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': envdAccessToken,
               'Content-Type': 'application/octet-stream', 'Content-Encoding': encoding },
  });
  let res = await post(Buffer.concat([gzipSync('one '), gzipSync('two')]));
  assert.equal(res.status, 200);
  assert.equal(await sbx.files.read('/workspace/gz/raw'), 'one two');
  const whole = gzipSync(randomBytes(4096));
  for (const [body, why] of [[whole.subarray(0, whole.length - 4), /ends early/], [Buffer.from('not gzip at all'), /not a valid gzip/],
                             [Buffer.concat([gzipSync('x'), Buffer.from('junk')]), /not a valid gzip/]]) {
    res = await post(body);
    assert.equal(res.status, 400);
    assert.match((await res.json()).message, why);
    assert.equal(await sbx.files.read('/workspace/gz/raw'), 'one two', 'a refused body writes nothing');
  }
  res = await post('plain', 'br');
  assert.equal(res.status, 400);
  assert.match((await res.json()).message, /Content-Encoding br/);
});

// What the streaming reader refuses, with the SDK's errors (the multipart reader's own bounds are unit.e2b's).
test('refused uploads: no file part, a bad body, a part at a path twice', async () => {
  const detail = await (await fetch(`${srv.base}/e2b/sandboxes/${sbx.sandboxId}`,
                                    { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })).json();
  const post = (body, type = 'multipart/form-data; boundary=B') =>
    fetch(`${srv.base}/e2b-sandbox/files?username=user`, {
      method: 'POST', body,
      headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': detail.envdAccessToken, 'Content-Type': type },
    });
  const part = (name, field = 'file') => `--B\r\nContent-Disposition: form-data; name="${field}"; filename="${name}"\r\n\r\n`;
  let res = await post(`${part('x', 'other')}data\r\n--B--\r\n`);
  assert.equal(res.status, 400);
  assert.match((await res.json()).message, /no part named "file"/);
  res = await post(`${part('/workspace/cut-short')}data`);
  assert.equal(res.status, 400);
  assert.match((await res.json()).message, /no closing boundary/);
  assert.equal(await sbx.files.exists('/workspace/cut-short'), false, 'a part cut short is not written');
  res = await post(`${part('/workspace/twice')}1\r\n${part('/workspace/twice')}2\r\n--B--`);
  assert.equal(res.status, 400);
  assert.match((await res.json()).message, /two parts write/);
  res = await post('x', 'text/plain');
  assert.equal(res.status, 400);
});
