// A sandbox's page in the dashboard, in Chromium, against aas-server-fake
// (whose terminal's shell echoes what it is sent): sign up, make a key,
// create a sandbox with it, then on the sandbox's page type `echo hi` in the
// terminal and read it back, upload a file with the form and see it listed,
// download it and compare the bytes, make a directory, delete the file, see
// the use charts redrawn; a WebSocket from another origin of this same site
// (which the browser sends the session's cookie from) is refused. Screenshots
// at desktop (1280) and phone (375) widths go to the artifacts.
//
// The page's contract (docs/dashboard.md): #terminal-connect opens the
// terminal in #terminal (its xterm.js Terminal as the element's `xterm`),
// #terminal-status says how it is; #file-list lists the directory, with
// form.file-upload, form.file-mkdir and a form.file-delete per entry;
// #use-live holds the charts (#cpu-chart, #memory-chart) and gets
// data-refreshed each time use.js redraws them.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import {
  ARTIFACTS, BASE, axe, check, checkClean, cspViolations, curl, finish, launch, newPage, signUpAndLogIn, submit,
  text,
} from './harness.mjs';

const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
// What the terminal shows (its whole buffer), through xterm.js's own selection.
const screen = (page) => page.evaluate(() => {
  const t = document.getElementById('terminal').xterm;
  if (!t) return '';
  t.selectAll();
  const s = t.getSelection();
  t.clearSelection();
  return s;
});
async function waitFor(what, fn, tries = 100) {
  let v;
  for (let i = 0; i < tries; i++) {
    if ((v = await fn())) return v;
    await sleep(100);
  }
  check(what, false, 'timed out');
  return v;
}

const email = `sandbox-${process.pid}@example.test`, password = 'a long enough passphrase 42';
const browser = await launch();
try {
  const page = await newPage(browser);
  page.on('dialog', (d) => d.accept());
  await signUpAndLogIn(page, email, password);
  await page.goto(`${BASE}/dashboard/keys`);
  await submit(page, 'form[action="/dashboard/keys"]', { name: 'sandbox test' });
  const key = await text(page, '#new-key');
  const sb = JSON.parse(curl('-X', 'POST', '-H', `Authorization: Bearer ${key}`,
    '-H', 'Content-Type: application/json', '-d', '{}', `${BASE}/v1/sandboxes`));
  check('a sandbox through the API', !!sb.id, JSON.stringify(sb));
  const url = `${BASE}/dashboard/sandboxes/${sb.id}`;
  const first = await page.goto(url);
  // Every page's policy, this one too: xterm.js's styles are adopted sheets (terminal.js).
  const policy = first.headers()['content-security-policy'] || '';
  check('the sandbox page sends a CSP with style-src \'self\'', /(^|; )style-src 'self'(;|$)/.test(policy), policy);
  check('... and nothing unsafe-inline in it', !policy.includes('unsafe-inline') && !policy.includes('style-src-elem'),
    policy);

  // The terminal: connect, type, read back.
  const available = !!(await page.$('#terminal'));
  check('the terminal is installed (xterm.js in the viewer directory)', available);
  if (available) {
    await page.click('#terminal-connect');
    await waitFor('the terminal connects', async () => (await text(page, '#terminal-status')) === 'Connected.');
    await waitFor('the shell greets', async () => (await screen(page)).includes('fake-shell'));
    check('the terminal asked for the size it shows', /fake-shell xterm-256color \d+x\d+ tty/.test(await screen(page)),
      await screen(page));
    await page.keyboard.type('echo hi');
    await page.keyboard.press('Enter');
    await waitFor('typed `echo hi` comes back on the screen', async () => (await screen(page)).includes('echo hi'));
    // The command's output, on its own line under the typed one (not the echo of what was typed).
    await waitFor('`echo hi` prints hi on a line of its own', async () => /^hi[ ]*$/m.test(await screen(page)));
    // xterm.js's theme and sizes apply (its rules are there: the rows' spans are inline blocks),
    // and a 24-bit colour (a style on the cell's span) shows, all without a CSP violation.
    const looks = await page.evaluate(() => new Promise((done) => {
      const t = document.getElementById('terminal').xterm;
      t.write('\x1b[38;2;255;0;0mRED\x1b[0m\r\n', () => requestAnimationFrame(() => requestAnimationFrame(() => {
        const spans = [...document.querySelectorAll('#terminal .xterm-rows span')];
        const red = spans.find((s) => s.textContent === 'RED');
        done({
          styles: document.querySelectorAll('#terminal style').length,
          sheets: document.adoptedStyleSheets.length,
          display: spans.length ? getComputedStyle(spans[0]).display : null,
          red: red ? getComputedStyle(red).color : null,
        });
      })));
    }));
    check('xterm.js makes no <style> element', looks.styles === 0, JSON.stringify(looks));
    check('... its rules are adopted sheets that apply', looks.sheets >= 2 && looks.display === 'inline-block',
      JSON.stringify(looks));
    check('a 24-bit colour shows', looks.red === 'rgb(255, 0, 0)', JSON.stringify(looks));
    const violations = await cspViolations(page);
    check('the terminal raises no CSP violation', violations.length === 0, violations.join('; '));
    check('... and no error', page.problems.length === 0, page.problems.join('; '));
  }

  // Upload with the form, then see it listed.
  const bytes = randomBytes(100000);
  const local = `${process.env.AAS_WORK}/up-${process.pid}.bin`;
  writeFileSync(local, bytes);
  const input = await page.$('form.file-upload input[type=file]');
  await input.uploadFile(local);
  let [res] = await Promise.all([page.waitForNavigation(), page.click('form.file-upload [type=submit]')]);
  check('the upload goes back to the listing', res && res.status() === 200 && /#files$/.test(page.url()),
    res && `${res.status()} ${page.url()}`);
  const name = local.split('/').pop();
  const row = await page.$$eval('#file-list tbody tr', (rows, name) =>
    rows.map((r) => r.querySelector('td.name').textContent).filter((n) => n === name), name);
  check('the uploaded file is listed', row.length === 1, row.join(','));
  check('its size is listed', (await page.content()).includes(`${bytes.length} B`));

  // Download it (the link's URL, with the session) and compare the bytes.
  const href = await page.$eval(`#file-list a.download[aria-label="Download ${name}"]`, (a) => a.href).catch(() => null);
  check('the file has a download link', !!href);
  if (href) {
    const got = await page.evaluate(async (href) => {
      const r = await fetch(href);
      const b = new Uint8Array(await r.arrayBuffer());
      let s = '';
      for (const c of b) s += String.fromCharCode(c);
      return { status: r.status, disposition: r.headers.get('Content-Disposition'), b64: btoa(s) };
    }, href);
    check('the download is the uploaded bytes', got.status === 200 && got.b64 === bytes.toString('base64'),
      `${got.status} ${got.b64.length}`);
    check('the download is an attachment', /^attachment; filename\*=UTF-8''/.test(got.disposition || ''), got.disposition);
  }

  // Make a directory.
  res = await submit(page, 'form.file-mkdir', { name: 'made-here' });
  check('the directory is made', res && res.status() === 200 && !!(await page.$('#file-list a.dir')) &&
    (await page.$$eval('#file-list a.dir', (as) => as.map((a) => a.textContent))).includes('made-here/'));
  const v = await axe(page, ['#terminal']);
  check('the sandbox page: axe finds no WCAG A/AA violation', v.length === 0, v.join('; '));

  // Delete the file (files.js asks first: the dialog is accepted).
  [res] = await Promise.all([page.waitForNavigation(),
    page.click(`#file-list form.file-delete button[aria-label="Delete ${name}"]`)]);
  const left = await page.$$eval('#file-list td.name', (tds) => tds.map((t) => t.textContent));
  check('the file is deleted', !left.includes(name), left.join(','));

  // The use charts, redrawn by use.js (every 5 s).
  check('the use charts are there', !!(await page.$('#use-live #cpu-chart')) || !!(await page.$('#use-live #no-metrics')));
  await waitFor('use.js redraws the charts', () => page.$eval('#use-live', (e) => e.hasAttribute('data-refreshed')), 150);

  if (available) {
    await page.click('#terminal-connect');
    await waitFor('the terminal connects again', async () => (await screen(page)).includes('fake-shell'));
    await page.keyboard.type('echo hi');
    await page.keyboard.press('Enter');
    await waitFor('... and echoes again', async () => (await screen(page)).includes('echo hi'));
  }
  await sleep(500); /* xterm.js paints on the next animation frame */
  await page.screenshot({ path: `${ARTIFACTS}/sandbox-desktop.png`, fullPage: true });

  // The phone's width.
  await page.setViewport({ width: 375, height: 800 });
  await page.goto(url);
  if (available) {
    await page.click('#terminal-connect');
    await waitFor('the terminal connects on a phone', async () => (await screen(page)).includes('fake-shell'));
    await page.keyboard.type('echo hi');
    await page.keyboard.press('Enter');
    await waitFor('typed on a phone, it comes back', async () => (await screen(page)).includes('echo hi'));
    await sleep(500);
  }
  const wide = await page.evaluate(() => [document.documentElement.scrollWidth,
    ...[...document.querySelectorAll('body, header, main, footer, main > *')].filter((e) => e.scrollWidth > 375)
      .map((e) => `${e.tagName}#${e.id} ${e.scrollWidth}`)]);
  check('nothing is wider than a phone', wide[0] <= 375, wide.join(' '));
  await page.screenshot({ path: `${ARTIFACTS}/sandbox-phone.png`, fullPage: true });

  // Another origin of the same site (another port of 127.0.0.1: the browser sends the
  // SameSite=Strict cookie there) opens the terminal's WebSocket, even with the token: refused.
  const csrf = await page.$eval('#terminal', (e) => e.dataset.csrf).catch(() => '');
  const wsUrl = `${BASE.replace('http:', 'ws:')}/dashboard/sandboxes/${sb.id}/pty?csrf=${csrf}`;
  const evil = createServer((req, r) => {
    r.setHeader('Content-Type', 'text/html');
    r.end(`<title>evil</title><script>const w = new WebSocket(${JSON.stringify(wsUrl)});
      w.onopen = () => { document.title = 'opened'; };
      w.onclose = () => { if (document.title !== 'opened') document.title = 'refused'; };</script>`);
  });
  await new Promise((ok) => evil.listen(0, '127.0.0.1', ok));
  const attacker = await newPage(browser);
  const evilOrigin = `http://127.0.0.1:${evil.address().port}`;
  attacker.offOriginAllowed = (u) => u.startsWith(evilOrigin) || u.startsWith('ws:');
  await attacker.goto(`${evilOrigin}/`);
  const verdict = await waitFor('the cross-origin WebSocket ends', async () => {
    const t = await attacker.title();
    return t === 'evil' ? null : t;
  });
  check('a WebSocket from another origin is refused', verdict === 'refused', verdict);
  evil.close();
  await attacker.close();

  // An execution's page, from its link in the history: the command, how it ended, its output.
  const ran = JSON.parse(curl('-X', 'POST', '-H', `Authorization: Bearer ${key}`, '-H',
    'Content-Type: application/json', '-d', '{"command":"lines 2"}', `${BASE}/v1/sandboxes/${sb.id}/exec`));
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(url);
  const link = await page.$(`#ran-${ran.execution_id} a.execution`);
  check('the history links to the execution', !!link);
  if (link) {
    await Promise.all([page.waitForNavigation(), link.click()]);
    check('the execution\'s page shows its output', (await text(page, '#stdout')) === 'line 1\nline 2' &&
      (await text(page, '#stderr')) === 'done', await text(page, 'main'));
    check('... and how it ended', (await text(page, '.exit-code')) === '0');
    const found = await axe(page);
    check('the execution\'s page: axe finds no WCAG A/AA violation', found.length === 0, found.join('; '));
    await page.screenshot({ path: `${ARTIFACTS}/sandbox-execution.png`, fullPage: true });
  }

  // A running execution's page follows it (execution.js) without a reload, and stops when it ends.
  const tick = JSON.parse(curl('-X', 'POST', '-H', `Authorization: Bearer ${key}`, '-H',
    'Content-Type: application/json', '-d', '{"command":"tick","background":true}', `${BASE}/v1/sandboxes/${sb.id}/exec`));
  await page.goto(`${url}/executions/${tick.execution_id}`);
  await waitFor('the running execution\'s page shows its output so far', async () => (await text(page, '#stdout')) === 'tick');
  check('... says it runs', (await page.$eval('#execution', (e) => e.dataset.status).catch(() => null)) === 'running');
  check('... and that it follows it', /updates every 2 s/.test(await text(page, '#execution-follow') || ''));
  await page.evaluate(() => { window.__notReloaded = true; });
  curl('-X', 'POST', '-H', `Authorization: Bearer ${key}`, `${BASE}/v1/executions/${tick.execution_id}/cancel`);
  const ended = await waitFor('the page sees the command end by itself', () =>
    page.$eval('#execution', (e) => e.dataset.status).then((s) => (s !== 'running' ? s : null)).catch(() => null));
  check('... without a reload', await page.evaluate(() => window.__notReloaded === true));
  check('... and says so', /has ended/.test(await text(page, '#execution-follow') || ''), ended);
  check('... its output is still there', (await text(page, '#stdout')) === 'tick');

  await checkClean(page);
} finally {
  await browser.close();
}
finish();
