// A person's whole way through the dashboard, in Chromium, against
// aas-server-fake: sign up, log in, make an API key, use that key with curl
// to create a sandbox, see it on the dashboard, destroy it from the page, see
// the balance change, log out; and a forged cross-site form post is refused.
//
// The dashboard's contract (docs/dashboard.md): GET/POST /signup and /login
// (fields email, password), POST /logout (csrf), GET /dashboard (the balance
// in #balance, a row #sandbox-<id> per sandbox with an a.confirm that asks
// before its form posts to .../destroy),
// GET/POST /dashboard/keys (field name; the new key in #new-key); every form
// carries a hidden "csrf" field.
import { createServer } from 'node:http';
import {
  ARTIFACTS, BASE, axe, check, checkClean, curl, finish, keyboardReach, launch, newPage, requireOpenSignup,
  signUpAndLogIn, submit, text,
} from './harness.mjs';

await requireOpenSignup();

// The dashboard's pages meet the same accessibility bar as the service's (test_pages.mjs).
async function accessible(page, what) {
  const v = await axe(page);
  check(`${what}: axe finds no WCAG A/AA violation`, v.length === 0, v.join('; '));
  const missing = await keyboardReach(page);
  check(`${what}: Tab reaches every link and control`, missing.length === 0, missing.join('; '));
}

const email = `person-${process.pid}@example.test`, password = 'a long enough passphrase 42';
const browser = await launch();
try {
  const page = await newPage(browser);

  // Sign up, then log in.
  await page.goto(`${BASE}/signup`);
  check('every form carries a csrf field', (await page.$$('form')).length === (await page.$$('form input[type=hidden][name=csrf]')).length);
  await page.screenshot({ path: `${ARTIFACTS}/signup.png`, fullPage: true });
  await accessible(page, '/signup');
  await signUpAndLogIn(page, email, password);
  await page.goto(`${BASE}/dashboard`);
  check('the dashboard is shown once logged in', new URL(page.url()).pathname === '/dashboard');
  const balanceBefore = await text(page, '#balance');
  check('the dashboard shows the balance', !!balanceBefore);
  await page.screenshot({ path: `${ARTIFACTS}/dashboard.png`, fullPage: true });
  await accessible(page, '/dashboard');

  // A key, made on the page and used with curl.
  await page.goto(`${BASE}/dashboard/keys`);
  let res = await submit(page, 'form[action="/dashboard/keys"]', { name: 'browser test' });
  const key = await text(page, '#new-key');
  check('the new key is shown once', /^aas_sk_/.test(key || ''), key);
  await page.screenshot({ path: `${ARTIFACTS}/dashboard-keys.png`, fullPage: true });
  await accessible(page, '/dashboard/keys (a new key shown)');
  const created = JSON.parse(curl('-X', 'POST', '-H', `Authorization: Bearer ${key}`,
    '-H', 'Content-Type: application/json', '-d', '{}', `${BASE}/v1/sandboxes`));
  check('the key creates a sandbox through the API', !!created.id, JSON.stringify(created));
  // The same key in E2B's shape, with the variables E2B's SDKs read: it works on the E2B face.
  const e2bEnv = (await text(page, '#new-key-e2b')) || '';
  const e2bKey = (e2bEnv.match(/^export E2B_API_KEY=(e2b_[0-9a-f]+)$/m) || [])[1];
  check('the E2B spelling is shown with the new key', !!e2bKey && /E2B_API_URL=\$AAS_BASE_URL\/e2b$/m.test(e2bEnv) &&
    /E2B_SANDBOX_URL=\$AAS_BASE_URL\/e2b-sandbox$/m.test(e2bEnv), e2bEnv);
  const e2bList = JSON.parse(curl('-H', `X-API-KEY: ${e2bKey}`, `${BASE}/e2b/v2/sandboxes`));
  check('the E2B spelling lists the sandbox on the E2B face', Array.isArray(e2bList) &&
    e2bList.some((s) => `sbx-${s.sandboxID}` === created.id), JSON.stringify(e2bList));

  // On the dashboard, and destroyed from it.
  // Billing is per whole second: reload until the row's cost so far is more than nothing.
  const row = `#sandbox-${created.id}`;
  let cost = null;
  for (let i = 0; i < 40; i++) {
    await page.goto(`${BASE}/dashboard`);
    cost = await text(page, `${row} td.cost`);
    if (cost && /[1-9]/.test(cost)) break;
    await new Promise((ok) => setTimeout(ok, 250));
  }
  check('the sandbox is on the dashboard', !!(await page.$(row)));
  check('its cost so far grows', /[1-9]/.test(cost || ''), cost);
  await page.screenshot({ path: `${ARTIFACTS}/dashboard-sandboxes.png`, fullPage: true });
  await accessible(page, '/dashboard (a live sandbox)');
  await page.goto(`${BASE}/dashboard/sandboxes/${created.id}`);
  // Its use: at least the sample taken for the page, memory within the size's.
  const use = await page.$$eval('#metrics tbody tr', (rows) => rows.map((r) => ({
    cpu: r.querySelector('td.cpu').textContent, memory: r.querySelector('td.memory').textContent })));
  check('the sandbox page shows its use', use.length >= 1, JSON.stringify(use));
  const [used, total] = (use[0] ? use[0].memory : '').split(' of ').map(Number);
  check('its memory is within the size', total > 0 && used >= 0 && used <= total, use[0] && use[0].memory);
  check('its CPU is a percentage', /^\d+\.\d\d %$/.test(use[0] ? use[0].cpu : ''), use[0] && use[0].cpu);
  await page.screenshot({ path: `${ARTIFACTS}/dashboard-sandbox.png`, fullPage: true });
  await accessible(page, "a sandbox's page");
  await page.goto(`${BASE}/dashboard/usage`);
  await page.screenshot({ path: `${ARTIFACTS}/dashboard-usage.png`, fullPage: true });
  await accessible(page, '/dashboard/usage');
  await page.goto(`${BASE}/dashboard`);
  // Destroy asks first (a dialog here, with JavaScript; test_dashboard.mjs checks both ways).
  const destroy = await page.$(`${row} a.confirm[aria-label="Destroy ${created.id}"]`);
  check('its row has a destroy button', !!destroy);
  if (destroy) {
    await destroy.click();
    const yes = await page.waitForSelector('dialog.confirm[open] button[type="submit"]', { timeout: 5000 }).catch(() => null);
    check('Destroy asks before destroying', !!yes);
    if (yes) await Promise.all([page.waitForNavigation(), yes.click()]);
  }
  const after = JSON.parse(curl('-H', `Authorization: Bearer ${key}`, `${BASE}/v1/sandboxes/${created.id}`));
  check('the page destroyed it', after.status === 'destroyed' || after.error?.code === 'not_found', JSON.stringify(after));
  await page.goto(`${BASE}/dashboard`);
  const balanceAfter = await text(page, '#balance');
  check('the balance changed', balanceAfter && balanceAfter !== balanceBefore, `${balanceBefore} -> ${balanceAfter}`);

  // A forged form post from another site (localhost is another site than
  // 127.0.0.1) while the person is logged in: no key is made.
  const evil = createServer((req, r) => {
    r.setHeader('Content-Type', 'text/html');
    r.end(`<form id="f" method="post" action="${BASE}/dashboard/keys"><input name="name" value="forged">` +
      `<input name="csrf" value="guessed"></form><script>document.getElementById('f').submit()</script>`);
  });
  await new Promise((ok) => evil.listen(0, '127.0.0.1', ok));
  const attacker = await newPage(browser);
  attacker.offOriginAllowed = (u) => u.startsWith('http://localhost:');
  let forged = null;
  attacker.on('response', (r) => {
    if (r.url() === `${BASE}/dashboard/keys` && r.request().method() === 'POST') forged = r;
  });
  await attacker.goto(`http://localhost:${evil.address().port}/`);
  for (let i = 0; i < 100 && !forged; i++) await new Promise((ok) => setTimeout(ok, 100));
  // Refused: an error, or sent to log in (the session cookie, SameSite=Strict, was not sent).
  const refused = forged && (forged.status() >= 400 ||
    (forged.status() >= 300 && /\/login/.test(forged.headers().location || '')));
  check('the forged post is refused', refused, forged ? `${forged.status()} ${forged.headers().location || ''}` : 'never sent');
  evil.close();
  await attacker.close();
  await page.goto(`${BASE}/dashboard/keys`);
  check('the forged post made no key', !(await page.content()).includes('forged'));

  // Log out: the dashboard asks for a log-in again.
  await page.goto(`${BASE}/dashboard`);
  await Promise.all([page.waitForNavigation(), page.click('form[action="/logout"] [type="submit"]')]);
  await page.goto(`${BASE}/dashboard`);
  check('after log-out the dashboard needs a log-in', new URL(page.url()).pathname === '/login' ||
    (await page.evaluate(() => document.title)).toLowerCase().includes('log in'));
  await checkClean(page);
} finally {
  await browser.close();
}
finish();
