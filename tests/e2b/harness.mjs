// What the E2B SDK tests share: an aas-server-fake started for the run on a
// free loopback port with a fresh state directory and one account, the
// environment the SDK reads (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY in the
// key's e2b_ spelling), and the teardown: every sandbox destroyed, the server
// stopped and checked (exit 0: sanitizers report non-zero; the key never in
// its log), the work directory removed. Modelled on tests/mcp/harness.mjs.
//
// Real-VM mode (test_vm.mjs): with AAS_TEST_IMAGES set (a directory holding
// the tiny image) the binary is the REAL aas-server, started with --images DIR
// --image tiny and templates on (the default: creates are clones once the
// template is built), and tests/integration/vm-cleanup runs on its state
// directory at the end, pass or fail.
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync, rmSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const IMAGES = process.env.AAS_TEST_IMAGES || '';
// tests/integration/vm-cleanup: from the source tree (run copies these files into the build tree).
const VM_CLEANUP = process.env.AAS_VM_CLEANUP ||
  join(dirname(fileURLToPath(import.meta.url)), '..', 'integration', 'vm-cleanup');

export const sleep = ms => new Promise(r => setTimeout(r, ms));

// The e2b_ spelling of an aas_sk_ key (docs/e2b.md): the hex of its 43 characters.
export const e2bKey = key => 'e2b_' + Buffer.from(key.slice('aas_sk_'.length), 'latin1').toString('hex');

export function testServer(bin, { args = [] } = {}) {
  const work = mkdtempSync(join(tmpdir(), 'aas-e2b-test.'));
  // Real VMs: the work directory stays 0700 (mkdtemp's), which QEMU's per-VM uids cannot traverse, so the
  // driver runs QEMU unconfined and clones load their template's memory, as in the other server VM tests.
  // Confined, clones map it, and pausing such a clone saves slowly under TCG (70-85 s against 3-4 s
  // loaded, for the same 174 MiB): more than this test's whole budget.
  const srv = { bin, work, state: join(work, 'state'), base: null, key: null, proc: null };
  srv.start = () => startServer(srv, args);
  srv.stop = () => stopServer(srv);
  srv.log = () => existsSync(join(work, 'server.log')) ? readFileSync(join(work, 'server.log'), 'utf8') : '';
  srv.admin = (...a) => execFileSync(bin, [...a, '--state-dir', srv.state],
                                     { stdio: ['ignore', 'pipe', 'pipe'] }).toString().trim();
  srv.rest = async (method, path, body) => {
    const res = await fetch(`${srv.base}${path}`, {
      method, headers: { Authorization: `Bearer ${srv.key}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
  };
  return srv;
}

async function startServer(srv, extra) {
  const log = openSync(join(srv.work, 'server.log'), 'a');
  const args = ['--listen', '127.0.0.1:0', '--port-file', join(srv.work, 'port'), '--state-dir', srv.state, ...extra];
  if (IMAGES) args.push('--images', IMAGES, '--image', 'tiny');
  srv.proc = spawn(srv.bin, args, { stdio: ['ignore', log, log] });
  let exited = false;
  srv.proc.once('exit', () => { exited = true; });
  for (let i = 0; i < 300 && !existsSync(join(srv.work, 'port')) && !exited; i++) await sleep(100);
  assert.ok(existsSync(join(srv.work, 'port')), `the server is listening: ${readFileSync(join(srv.work, 'server.log'), 'utf8')}`);
  srv.base = `http://127.0.0.1:${readFileSync(join(srv.work, 'port'), 'utf8').trim()}`;
  srv.key = srv.admin('account', 'create', '--name', 'e2b-agent');
  assert.match(srv.key, /^aas_sk_[A-Za-z0-9]{43}$/);
  process.env.E2B_API_URL = `${srv.base}/e2b`;
  process.env.E2B_SANDBOX_URL = `${srv.base}/e2b-sandbox`;
  process.env.E2B_API_KEY = e2bKey(srv.key);
  delete process.env.E2B_DOMAIN;
  delete process.env.E2B_DEBUG;
}

async function stopServer(srv) {
  try {
    if (srv.base && srv.key) {
      const { body } = await srv.rest('GET', '/v1/sandboxes?limit=1000&status=active');
      for (const s of body.sandboxes) await srv.rest('DELETE', `/v1/sandboxes/${s.id}`);
    }
  } catch (e) {
    console.error('destroying the sandboxes:', e);
  }
  try {
    const log = join(srv.work, 'server.log');
    const readLog = () => existsSync(log) ? readFileSync(log, 'utf8') : '';
    if (srv.proc && srv.proc.exitCode === null && srv.proc.signalCode === null) {
      const exited = new Promise(r => srv.proc.once('exit', (code, signal) => r({ code, signal })));
      srv.proc.kill('SIGTERM');
      const { code, signal } = await exited;
      if (code !== 0) console.error(`aas-server exited ${code} (signal ${signal}); its log ends:\n${readLog().slice(-20000)}`);
      assert.equal(code, 0, `aas-server exits cleanly (signal ${signal}; sanitizers report non-zero)`);
    }
    if (srv.key) {
      assert.ok(!readLog().includes(srv.key), 'the API key never appears in the log');
      assert.ok(!readLog().includes(e2bKey(srv.key)), 'nor its e2b_ spelling');
    }
  } finally {
    if (IMAGES) {
      try {
        execFileSync(VM_CLEANUP, [srv.state], { stdio: 'inherit' });
      } catch (e) {
        console.error('vm-cleanup:', e);
      }
    }
    if (!process.env.KEEP_WORK) rmSync(srv.work, { recursive: true, force: true });
  }
}
