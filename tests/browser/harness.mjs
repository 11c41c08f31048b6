// What the browser tests share: Chromium started by puppeteer-core, kept on
// this machine (no request leaves loopback), a page that records its errors,
// its CSP violations and every request off the server's origin, and checks.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import puppeteer from 'puppeteer-core';

const require = createRequire(import.meta.url);

export const BASE = process.argv[2];
export const ARTIFACTS = process.env.AAS_ARTIFACTS;
let failures = 0, checks = 0;

export function check(what, ok, detail = '') {
  checks++;
  if (!ok) {
    failures++;
    console.log(`FAIL: ${what}${detail ? `: ${detail}` : ''}`);
  }
}

export function finish() {
  console.log(`${checks - failures} passed, ${failures} failed`);
  process.exit(failures ? 1 : 0);
}

export async function launch() {
  return puppeteer.launch({
    executablePath: process.env.AAS_CHROMIUM,
    headless: true,
    userDataDir: `${process.env.AAS_WORK}/chromium`,
    args: [
      // Tests run as root in CI, where Chromium's own sandbox cannot start.
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      // Nothing but this machine: no name resolves but the loopback ones.
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-domain-reliability',
      '--no-first-run',
    ],
  });
}

// A page that records what went wrong on it: page errors, console errors, CSP
// violations (the listener is installed before any script of the page runs),
// and requests to anywhere but the server.
export async function newPage(browser) {
  const page = await browser.newPage();
  page.problems = [];
  const origin = new URL(BASE).origin;
  await page.setViewport({ width: 1280, height: 900 });
  await page.evaluateOnNewDocument(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) =>
      window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  page.on('pageerror', (e) => page.problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') page.problems.push(`console error: ${m.text()}`);
  });
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith('data:') && !u.startsWith(origin) && !page.offOriginAllowed?.(u))
      page.problems.push(`request off this server: ${u}`);
  });
  return page;
}

export async function cspViolations(page) {
  return page.evaluate(() => window.__csp || []);
}

// The page's last document raised no CSP violation, and the page no error nor request elsewhere.
export async function checkClean(page) {
  const csp = await cspViolations(page);
  check('no CSP violation', csp.length === 0, csp.join('; '));
  check('no error, nothing fetched elsewhere', page.problems.length === 0, page.problems.join('; '));
}

export function curl(...args) {
  return execFileSync('curl', ['-sS', ...args], { encoding: 'utf8' });
}

export const text = (page, sel) => page.$eval(sel, (e) => e.textContent.trim()).catch(() => null);

// Fill the form's fields by typing, as a person does, and submit it: the navigation's response.
export async function submit(page, form, fields) {
  for (const [name, value] of Object.entries(fields)) {
    const input = await page.$(`${form} [name="${name}"]`);
    check(`${page.url()}: the form has a field "${name}"`, !!input);
    if (!input) return null;
    await input.click({ clickCount: 3 });
    await input.type(value);
  }
  const [res] = await Promise.all([page.waitForNavigation(), page.click(`${form} [type="submit"]`)]);
  return res;
}

// The tests that sign up need the server's sign-up open (the run script starts it so): fail early if not.
export async function requireOpenSignup() {
  const probe = await fetch(`${BASE}/signup`);
  if (probe.status !== 200) {
    console.log(`FAIL: /signup answered ${probe.status}: the server runs without open sign-up`);
    process.exit(1);
  }
}

// Sign up on /signup, then log in on /login (unless the sign-up already did), as a newcomer does.
export async function signUpAndLogIn(page, email, password) {
  await page.goto(`${BASE}/signup`);
  let res = await submit(page, 'form[action="/signup"]', { email, password });
  check('sign-up succeeds', res && res.status() < 400, res && String(res.status()));
  await page.goto(`${BASE}/login`);
  if (new URL(page.url()).pathname === '/login') {
    res = await submit(page, 'form[action="/login"]', { email, password });
    check('log-in succeeds', res && res.status() < 400, res && String(res.status()));
  }
}

// axe-core's WCAG 2 A and AA rules (contrast included) over the page, but for
// `exclude` (a third party's markup). Evaluated over DevTools, which the page's
// CSP does not govern: the page itself still runs no script but its own.
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
export async function axe(page, exclude = []) {
  await page.evaluate(axeSource);
  return page.evaluate(async (exclude) => {
    const r = await window.axe.run({ exclude: exclude.map((s) => [s]) },
      { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return r.violations.map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`);
  }, exclude);
}

// Press Tab until every visible link and control outside `exclude` has had
// the focus (in the order Tab gives); the ones never reached.
export async function keyboardReach(page, exclude = null, maxTabs = 1500) {
  const missing = () => page.evaluate((exclude) => {
    const sel = 'a[href], button, input:not([type=hidden]), select, textarea, [tabindex]:not([tabindex="-1"])';
    return [...document.querySelectorAll(sel)]
      .filter((el) => !(exclude && el.closest(exclude)))
      .filter((el) => !el.disabled && !el.closest('[hidden], noscript'))
      .filter((el) => el.getClientRects().length > 0 || el.classList.contains('skip'))
      .filter((el) => !el.dataset.aasFocused)
      .map((el) => el.outerHTML.slice(0, 80));
  }, exclude);
  await page.evaluate(() => {
    document.addEventListener('focusin', (e) => { e.target.dataset.aasFocused = '1'; });
    document.activeElement?.blur();
  });
  let left = await missing();
  for (let i = 0; i < maxTabs && left.length; i++) {
    await page.keyboard.press('Tab');
    if (i % 25 === 24) left = await missing();
  }
  return missing();
}
