// axe-core on every page of the service, in Chromium against aas-server-fake:
// the pages anyone sees (/, every guide under /docs, /docs/api, /docs/limits,
// /security, a page that is not there), /signup and /login with and without an
// error, and, signed in as an operator whose account has a key and a sandbox,
// every dashboard page reached by its links: the overview, keys (with a new key
// shown), usage, the operator's page (with a VM host the run script registers)
// and the host's page, and the sandbox's own page.
//
// Pages are found by following links, not listed here, so that a page added to
// the dashboard or the guides is checked without editing this file. Each page
// is checked with axe's WCAG 2.0-2.2 A/AA rules and its best practices, and its
// contrast again in the dark colour scheme (a guide's contrast is /docs's: see
// audit()); a violation of impact "serious" or "critical" fails the test, the
// others are printed as notes. Third-party markup (Swagger UI, a terminal's
// xterm.js) is left out: not ours to fix.
//
// The run script makes the operator (`aas-server user create --operator`) and
// passes AAS_A11Y_EMAIL and AAS_A11Y_PASSWORD.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { BASE, check, finish, launch, newPage } from './harness.mjs';

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const THIRD_PARTY = ['#swagger-ui', '.xterm'];
const TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'];
const FAILS = new Set(['serious', 'critical']);

const email = process.env.AAS_A11Y_EMAIL, password = process.env.AAS_A11Y_PASSWORD;
if (!email || !password) {
  console.log('FAIL: AAS_A11Y_EMAIL and AAS_A11Y_PASSWORD are not set (tests/browser/run sets them)');
  process.exit(1);
}

let pagesChecked = 0;

// A guide: the shell of /docs around Markdown rendered as /docs's is (markdown.c).
const isGuide = (path) => /^\/docs\/[^/]+$/.test(path) && !['/docs/api', '/docs/limits'].includes(path);

// axe over the page as it is now: every rule in the light scheme, and again
// what depends on the colours (contrast) in the dark one. A guide is checked
// with every rule but contrast: its colours are /docs's (the same shell, the
// same elements from the same Markdown, the same style sheet), whose contrast
// is checked in both schemes, and contrast is most of axe's time (tens of
// seconds a long guide on a loaded machine, where every other rule together
// takes a few).
async function audit(page, what, guide = false) {
  const t0 = Date.now();
  await page.evaluate(axeSource);
  const passes = [['light', { runOnly: { type: 'tag', values: TAGS }, rules: { 'color-contrast': { enabled: !guide } } }]];
  if (!guide) passes.push(['dark', { runOnly: { type: 'rule', values: ['color-contrast'] } }]);
  for (const [scheme, options] of passes) {
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: scheme }]);
    const found = await page.evaluate(async (exclude, options) => {
      const present = exclude.filter((s) => document.querySelector(s)).map((s) => [s]);
      const r = await window.axe.run({ include: [['html']], exclude: present }, { ...options, resultTypes: ['violations'] });
      return r.violations.map((v) => ({
        impact: v.impact,
        text: `${v.id} (${v.impact}): ${v.help} at ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`,
      }));
    }, THIRD_PARTY, options);
    const bad = found.filter((v) => FAILS.has(v.impact));
    check(`${what} (${scheme}): no serious or critical accessibility violation`, bad.length === 0,
      bad.map((v) => v.text).join('; '));
    for (const v of found.filter((v) => !FAILS.has(v.impact)))
      console.log(`note: ${what} (${scheme}): ${v.text}`);
  }
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
  pagesChecked++;
  console.log(`${what}: checked (${Date.now() - t0} ms)`);
}

// Open a page, wait for its scripts (the API viewer renders late), and audit it.
async function visit(page, path, expectStatus = 200) {
  const res = await page.goto(BASE + path, { waitUntil: 'load' });
  check(`${path}: answers ${expectStatus}`, res && res.status() === expectStatus, res && String(res.status()));
  if (path === '/docs/api')
    await page.waitForSelector('#swagger-ui .opblock', { timeout: 30000 }).catch(() => {});
  await audit(page, path, expectStatus === 200 && isGuide(path));
}

// The pages a page links to on this server, as paths: HTML pages only (not the
// API, the static files, the package), and no link that would change anything.
async function pageLinks(page) {
  const hrefs = await page.$$eval('a[href]', (as) => as.map((a) => a.href));
  const out = [];
  for (const h of hrefs) {
    const u = new URL(h);
    if (u.origin !== new URL(BASE).origin) continue;
    if (/^\/(v1|e2b|e2b-sandbox|static|openapi\.json|mcp\.tgz|healthz|metrics|logout)(\/|$)/.test(u.pathname)) continue;
    out.push(u.pathname + u.search);
  }
  return out;
}

// Every page reached from `start` by links, each audited once; `within` keeps the walk to one part of the site.
async function crawl(page, start, within, seen) {
  const queue = [...start];
  while (queue.length) {
    const path = queue.shift();
    if (seen.has(path)) continue;
    seen.add(path);
    await visit(page, path);
    for (const l of await pageLinks(page))
      if (!seen.has(l) && within(l)) queue.push(l);
  }
}

// Fill a form's fields and send it; `raw` sends it past the browser's own checks (type="email", minlength), as a
// script or an old browser would, so that the server's error page is what is shown.
async function submit(page, form, fields, raw = false) {
  if (raw) await page.$eval(form, (f) => { f.noValidate = true; });
  for (const [name, value] of Object.entries(fields)) {
    const input = await page.$(`${form} [name="${name}"]`);
    if (!input) {
      check(`${page.url()}: the form has a field "${name}"`, false);
      return null;
    }
    await input.click({ clickCount: 3 });
    await input.type(value);
  }
  const [res] = await Promise.all([page.waitForNavigation(), page.click(`${form} [type="submit"]`)]);
  return res;
}

const browser = await launch();
try {
  const page = await newPage(browser);
  const seen = new Set();

  // Signed out: the service's pages and every guide, a missing page, the forms and their errors.
  await crawl(page, ['/', '/docs', '/docs/limits', '/docs/api', '/security', '/signup', '/login'],
    (p) => !p.startsWith('/dashboard'), seen);
  check('every guide was reached', [...seen].filter((p) => p.startsWith('/docs/')).length >= 10,
    [...seen].join(' '));
  await visit(page, '/docs/no-such-page', 404);
  await page.goto(`${BASE}/login`);
  await submit(page, 'form[action="/login"]', { email, password: 'not the password' });
  await audit(page, '/login (a wrong password)');
  await page.goto(`${BASE}/signup`);
  await submit(page, 'form[action="/signup"]', { email: 'not an address', password: 'short' }, true);
  await audit(page, '/signup (a bad address and password)');
  page.problems.length = 0; // the browser logs those answers' 4xx statuses as errors: they were asked for

  // Signed in: a key (shown once, on its page), a sandbox made with it, then every dashboard page.
  await page.goto(`${BASE}/login`);
  const res = await submit(page, 'form[action="/login"]', { email, password });
  check('the operator logs in', res && res.status() < 400, res && String(res.status()));
  await page.goto(`${BASE}/dashboard/keys`);
  await submit(page, 'form[action="/dashboard/keys"]', { name: 'a11y' });
  const key = await page.$eval('#new-key', (e) => e.textContent.trim()).catch(() => null);
  check('a key is made', /^aas_sk_/.test(key || ''), key);
  await audit(page, '/dashboard/keys (a new key shown)');
  const created = await fetch(`${BASE}/v1/sandboxes`, {
    method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: '{}',
  }).then((r) => r.json());
  check('the key makes a sandbox', !!created.id, JSON.stringify(created));
  const dash = new Set();
  await crawl(page, ['/dashboard', `/dashboard/sandboxes/${created.id}`], (p) => p.startsWith('/dashboard'), dash);
  for (const p of ['/dashboard', '/dashboard/keys', '/dashboard/usage', '/dashboard/operator',
    '/dashboard/operator/hosts/vm1', `/dashboard/sandboxes/${created.id}`])
    check(`${p} was reached`, dash.has(p), [...dash].join(' '));
  // The service's pages signed in: the header differs (the dashboard's link, the log-out form).
  for (const p of ['/', '/docs/limits']) await visit(page, p);
  check('no error, nothing fetched elsewhere', page.problems.length === 0, page.problems.join('; '));
  console.log(`${pagesChecked} pages checked`);
} finally {
  await browser.close();
}
finish();
