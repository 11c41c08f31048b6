// What reaches a sandbox without the SDK in between (docs/e2b.md): signed file URLs
// (sandbox.uploadUrl/downloadUrl) used by a plain fetch with no header, with E2B_SANDBOX_URL and
// in domain mode (--e2b-domain), and in domain mode the hosts PORT-ID.DOMAIN: envd's port as the
// data plane, any other as the guest's behind the trafficAccessToken; GET /envs. Against
// aas-server-fake.
//
// Domain mode's URLs are https://PORT-ID.DOMAIN (the SDK hard-codes https there) and Node's
// resolver does not resolve *.localhost: these tests dial the server on 127.0.0.1 and send the
// URL's host in the Host header (node:http), as a TLS-terminating proxy in front would.
//
// usage: node test_urls.mjs AAS_SERVER_FAKE   (run by tests/e2b/run)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Sandbox, getSignature } from 'e2b';
import { testServer, e2bKey } from './harness.mjs';

const SERVER = process.argv[2];
assert.ok(SERVER, 'usage: test_urls.mjs AAS_SERVER_FAKE');
const DOMAIN = 'e2b.localhost';
const srv = testServer(SERVER, { args: ['--e2b-domain', DOMAIN] });
let sbx, other, sandboxUrl;

// The raw create/connect answer's envdAccessToken and trafficAccessToken (what the SDK keeps).
async function tokens(id) {
  const res = await fetch(`${srv.base}/e2b/sandboxes/${id}/connect`, {
    method: 'POST', headers: { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ timeout: 300 }),
  });
  assert.ok(res.status === 200 || res.status === 201, `connect: ${res.status}`);
  return res.json();
}

// A request to the server with the Host a domain-mode URL names (node:http sends it as given).
function viaHost(method, url, { headers = {}, body } = {}) {
  const u = new URL(url);
  const port = new URL(srv.base).port;
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: u.pathname + u.search,
                               headers: { Host: u.host, ...headers } }, res => {
      const chunks = [];
      res.on('data', c => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers,
                                    text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.setTimeout(60000, () => req.destroy(new Error(`${method} ${url}: no answer in 60 s`)));
    if (body !== undefined) req.end(body); else req.end();
  });
}

before(async () => {
  await srv.start();
  sandboxUrl = process.env.E2B_SANDBOX_URL;
  sbx = await Sandbox.create();
  other = await Sandbox.create();
  await sbx.files.write('/workspace/doc one.txt', 'the first\n');
  await other.files.write('/workspace/doc one.txt', 'the other\n');
});
after(() => srv.stop());

test('E2B_SANDBOX_URL: a signed download and upload by a plain fetch, no header', async () => {
  const down = await sbx.downloadUrl('/workspace/doc one.txt');
  // The SDK drops E2B_SANDBOX_URL's path: the URL names no sandbox, the server finds it by the signature.
  assert.equal(new URL(down).pathname, '/files');
  assert.match(new URL(down).searchParams.get('signature'), /^v1_[A-Za-z0-9+/]{43}$/);
  let res = await fetch(down);
  assert.equal(res.status, 200);
  assert.equal(await res.text(), 'the first\n');
  // The same path of the other sandbox: its own signature, its own file.
  res = await fetch(await other.downloadUrl('/workspace/doc one.txt'));
  assert.equal(await res.text(), 'the other\n');

  const up = await sbx.uploadUrl('/workspace/up/loaded.txt');
  const form = new FormData();
  form.append('file', new Blob(['uploaded by a browser']), 'loaded.txt');
  res = await fetch(up, { method: 'POST', body: form });
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal((await res.json())[0].path, '/workspace/up/loaded.txt');
  assert.equal(await sbx.files.read('/workspace/up/loaded.txt'), 'uploaded by a browser');
  // An octet stream to the same URL, with an expiry in the future.
  const upExp = await sbx.uploadUrl('/workspace/oct.bin', { useSignatureExpiration: 60 });
  assert.ok(new URL(upExp).searchParams.get('signature_expiration'));
  res = await fetch(upExp, { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' }, body: 'octets' });
  assert.equal(res.status, 200);
  assert.equal(await sbx.files.read('/workspace/oct.bin'), 'octets');
  assert.equal(await (await fetch(await sbx.downloadUrl('/workspace/oct.bin', { useSignatureExpiration: 60 }))).text(),
               'octets');
});

test('a signed URL opens its path, its operation, its sandbox, until its expiry: nothing else', async () => {
  const down = new URL(await sbx.downloadUrl('/workspace/doc one.txt'));
  const expect401 = async (url, init, why, word = /unauthorized|signature/) => {
    const res = await fetch(url, init);
    assert.equal(res.status, 401, why);
    const body = await res.json();
    assert.equal(body.code, 401, why);
    assert.match(body.message, word, why);
  };
  // Expired: the SDK signs an expiry in the past.
  const expired = await sbx.downloadUrl('/workspace/doc one.txt', { useSignatureExpiration: -10 });
  await expect401(expired, undefined, 'expired', /signature is already expired/);
  // Another path under the same signature.
  const path = new URL(down);
  path.searchParams.set('path', '/workspace/up/loaded.txt');
  await expect401(path, undefined, 'another path');
  // A read signature used to write.
  // (No body: the refusal comes with the headers, before any body is read.)
  await expect401(down, { method: 'POST' }, 'a read signature used to write');
  // A tampered signature (one digit changed), a missing one, one of another shape.
  const sig = down.searchParams.get('signature');
  const tampered = new URL(down);
  tampered.searchParams.set('signature', sig.slice(0, -1) + (sig.endsWith('A') ? 'B' : 'A'));
  await expect401(tampered, undefined, 'tampered');
  const short = new URL(down);
  short.searchParams.set('signature', 'v1_abc');
  await expect401(short, undefined, 'not a signature');
  // An expiry moved later under the same signature.
  const later = new URL(await sbx.downloadUrl('/workspace/doc one.txt', { useSignatureExpiration: 60 }));
  later.searchParams.set('signature_expiration', String(Number(later.searchParams.get('signature_expiration')) + 3600));
  await expect401(later, undefined, 'a later expiry');
  // The other sandbox named (its header), with this one's signature: refused.
  await expect401(down, { headers: { 'E2b-Sandbox-Id': other.sandboxId } }, "another sandbox's signature");
  // A token that is not a sandbox's: a forged one signs nothing.
  const { envdAccessToken } = await tokens(sbx.sandboxId);
  const forged = envdAccessToken.slice(0, -1) + (envdAccessToken.endsWith('0') ? '1' : '0');
  const f = await getSignature({ path: '/workspace/doc one.txt', operation: 'read', user: undefined,
                                 envdAccessToken: forged });
  const forgedUrl = new URL(down);
  forgedUrl.searchParams.set('signature', f.signature);
  await expect401(forgedUrl, undefined, 'a forged token');
  // The real token's own signature, made outside the SDK's URL builder, works: the scheme is E2B's.
  const ok = await getSignature({ path: '/workspace/doc one.txt', operation: 'read', user: undefined, envdAccessToken });
  assert.equal(ok.signature, sig);
  // A bad expiry is a 400, not a search.
  const bad = new URL(down);
  bad.searchParams.set('signature_expiration', 'soon');
  assert.equal((await fetch(bad)).status, 400);
  // Paths that do not exist: found the sandbox, then 404 as the SDK's reads get.
  const missing = await fetch(await sbx.downloadUrl('/workspace/nothing'));
  assert.equal(missing.status, 404);
});

test("another account's sandbox: a signature opens only its own sandbox, named or found", async () => {
  // A second account and its sandbox, beside this account's two.
  const apiKey = e2bKey(srv.admin('account', 'create', '--name', 'someone-else'));
  const theirs = await Sandbox.create({ apiKey });
  try {
    await theirs.files.write('/workspace/doc one.txt', 'theirs\n');
    const mine = await sbx.downloadUrl('/workspace/doc one.txt');
    const their = await theirs.downloadUrl('/workspace/doc one.txt');
    // Each URL alone (no header: found by its signature) and naming its own sandbox reads its own file.
    assert.equal(await (await fetch(their)).text(), 'theirs\n');
    let res = await fetch(their, { headers: { 'E2b-Sandbox-Id': theirs.sandboxId } });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'theirs\n');
    res = await fetch(mine, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId } });
    assert.equal(await res.text(), 'the first\n');
    // A signature named for the other account's sandbox, either way round: the same 401 as any bad signature.
    for (const [url, id, why] of [[mine, theirs.sandboxId, "this account's signature on theirs"],
                                  [their, sbx.sandboxId, "their signature on this account's"],
                                  [their, 'nosuchsandbox0000', 'a sandbox that does not exist']]) {
      res = await fetch(url, { headers: { 'E2b-Sandbox-Id': id } });
      assert.equal(res.status, 401, why);
      assert.match((await res.json()).message, /unauthorized access.*no running sandbox's/, why);
    }
    // Domain mode: their URL's signature on this account's host, and the other way round.
    const stolen = new URL(mine);
    stolen.protocol = 'https:';
    stolen.host = `49983-${theirs.sandboxId}.${DOMAIN}`;
    stolen.pathname = '/files';
    assert.equal((await viaHost('GET', stolen.toString())).status, 401, "this account's signature on their host");
    stolen.host = `49983-${sbx.sandboxId}.${DOMAIN}`;
    stolen.search = new URL(their).search;
    assert.equal((await viaHost('GET', stolen.toString())).status, 401, "their signature on this account's host");
    stolen.search = new URL(mine).search;
    res = await viaHost('GET', stolen.toString());
    assert.equal(res.status, 200, res.text);
    assert.equal(res.text, 'the first\n');
  } finally {
    await theirs.kill();
  }
});

test('domain mode: the create says the domain; getHost and the signed URLs name PORT-ID.DOMAIN', async () => {
  const t = await tokens(sbx.sandboxId);
  assert.equal(t.domain, DOMAIN);
  assert.match(t.trafficAccessToken, /^[a-z0-9-]+\.[0-9a-f]{64}$/);
  assert.notEqual(t.trafficAccessToken, t.envdAccessToken);
  assert.equal(sbx.getHost(3000), `3000-${sbx.sandboxId}.${DOMAIN}`);
  // A handle made without E2B_SANDBOX_URL dials the domain: https://49983-ID.DOMAIN.
  delete process.env.E2B_SANDBOX_URL;
  let d;
  try {
    d = await Sandbox.connect(sbx.sandboxId);
  } finally {
    process.env.E2B_SANDBOX_URL = sandboxUrl;
  }
  const down = await d.downloadUrl('/workspace/doc one.txt');
  assert.equal(new URL(down).host, `49983-${sbx.sandboxId}.${DOMAIN}`);
  let res = await viaHost('GET', down);
  assert.equal(res.status, 200, res.text);
  assert.equal(res.text, 'the first\n');
  // The same signature on the other sandbox's host: refused.
  const stolen = new URL(down);
  stolen.host = `49983-${other.sandboxId}.${DOMAIN}`;
  res = await viaHost('GET', stolen.toString());
  assert.equal(res.status, 401);
  // The data plane at the root of its host: /health, /files and RPCs with the token, as the SDK sends them.
  const envd = `https://49983-${sbx.sandboxId}.${DOMAIN}`;
  assert.equal((await viaHost('GET', `${envd}/health`, { headers: { 'X-Access-Token': t.envdAccessToken } })).status,
               204);
  res = await viaHost('GET', `${envd}/files?path=${encodeURIComponent('/workspace/doc one.txt')}`,
                      { headers: { 'X-Access-Token': t.envdAccessToken } });
  assert.equal(res.text, 'the first\n');
  res = await viaHost('GET', `${envd}/files?path=%2Fworkspace%2Fx`, { headers: { 'X-Access-Token': 'acc-x.00' } });
  assert.equal(res.status, 401);
  // The other sandbox's token on this host: refused.
  const o = await tokens(other.sandboxId);
  res = await viaHost('GET', `${envd}/files?path=%2Fworkspace%2Fx`, { headers: { 'X-Access-Token': o.envdAccessToken } });
  assert.equal(res.status, 401);
  // api.DOMAIN is the control plane at its root (E2B's default API URL).
  res = await viaHost('GET', `https://api.${DOMAIN}/sandboxes/${sbx.sandboxId}`,
                      { headers: { 'X-API-KEY': process.env.E2B_API_KEY } });
  assert.equal(res.status, 200, res.text);
  assert.equal(JSON.parse(res.text).sandboxID, sbx.sandboxId);
  // A host that is no sandbox's: no sandbox there.
  res = await viaHost('GET', `https://49983-NOT_AN_ID.${DOMAIN}/health`);
  assert.notEqual(res.status, 204);
});

test("domain mode: a guest's port needs the sandbox's trafficAccessToken, then is proxied", async () => {
  const t = await tokens(sbx.sandboxId);
  const o = await tokens(other.sandboxId);
  const url = `https://${sbx.getHost(3000)}/index.html`;
  let res = await viaHost('GET', url);
  assert.equal(res.status, 403);
  assert.match(JSON.parse(res.text).message, /e2b-traffic-access-token/);
  res = await viaHost('GET', url, { headers: { 'e2b-traffic-access-token': o.trafficAccessToken } });
  assert.equal(res.status, 403, "another sandbox's traffic token");
  res = await viaHost('GET', url, { headers: { 'e2b-traffic-access-token': t.envdAccessToken } });
  assert.equal(res.status, 403, 'the envd token is not the traffic token');
  // With the token the request reaches the guest's port through the preview proxy. aas-server-fake's
  // sandbox port N is the host's 127.0.0.1:N: a server of this test answers there, and echoes what it
  // was sent, so that the test sees the sandbox's tokens never reach the guest. It also takes an
  // upgrade (a WebSocket's handshake, any protocol) and echoes the bytes that follow.
  const guest = http.createServer((req, res) => {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ url: req.url, headers: req.headers }));
  });
  guest.on('upgrade', (req, socket) => {
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
    socket.pipe(socket);
  });
  await new Promise(r => guest.listen(0, '127.0.0.1', r));
  const port = guest.address().port;
  try {
    const host = sbx.getHost(port);
    res = await viaHost('GET', `https://${host}/app?q=1`,
                        { headers: { 'e2b-traffic-access-token': t.trafficAccessToken, 'X-Access-Token': t.envdAccessToken } });
    assert.equal(res.status, 200, res.text);
    const seen = JSON.parse(res.text);
    assert.equal(seen.url, '/app?q=1');
    assert.equal(seen.headers['e2b-traffic-access-token'], undefined, 'the traffic token stays out of the guest');
    assert.equal(seen.headers['x-access-token'], undefined, 'and the envd token');
    assert.equal(seen.headers['x-forwarded-host'], host);
    // An upgrade is bridged both ways.
    const echoed = await new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: new URL(srv.base).port, path: '/ws',
                                 headers: { Host: host, Connection: 'Upgrade', Upgrade: 'echo',
                                            'e2b-traffic-access-token': t.trafficAccessToken } });
      let bridged = null;
      const late = setTimeout(() => {
        reject(new Error('the upgrade to /ws or its echo: nothing in 60 s'));
        req.destroy();
        bridged?.destroy();
      }, 60000);
      req.on('upgrade', (r, socket) => {
        bridged = socket;
        socket.once('data', d => { clearTimeout(late); resolve(d.toString()); socket.destroy(); });
        socket.write('ping over the bridge');
      });
      req.on('response', r => { clearTimeout(late); reject(new Error(`no upgrade: ${r.statusCode}`)); });
      req.on('error', e => { clearTimeout(late); reject(e); });
      req.end();
    });
    assert.equal(echoed, 'ping over the bridge');
  } finally {
    guest.close();
    guest.closeAllConnections();
  }
  // A port where nothing listens: the proxy says so.
  res = await viaHost('GET', `https://${sbx.getHost(9)}/`, { headers: { 'e2b-traffic-access-token': t.trafficAccessToken } });
  assert.equal(res.status, 502);
  assert.match(res.text, /nothing answers on port 9/);
});

test('allowPublicTraffic: false is what every sandbox gets: a trafficAccessToken (test_control had it refused)', async () => {
  const s = await Sandbox.create({ network: { allowPublicTraffic: false } });
  assert.match(s.trafficAccessToken, /^[a-z0-9-]+\.[0-9a-f]{64}$/);
  await s.kill();
});

test('GET /envs: the envs the sandbox was created with', async () => {
  const s = await Sandbox.create({ envs: { GREETING: 'hello', EMPTY: '' } });
  const t = await tokens(s.sandboxId);
  const res = await fetch(`${sandboxUrl}/envs`, { headers: { 'E2b-Sandbox-Id': s.sandboxId,
                                                             'X-Access-Token': t.envdAccessToken } });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { GREETING: 'hello', EMPTY: '' });
  const none = await fetch(`${sandboxUrl}/envs`, { headers: { 'E2b-Sandbox-Id': s.sandboxId } });
  assert.equal(none.status, 401);
  await s.kill();
});
