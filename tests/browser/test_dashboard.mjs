// The dashboard's look and behaviour in Chromium, against aas-server-fake:
// the header (the account and "Log out" signed in; "Log in" and "Sign up",
// the current one marked, signed out), the home page's way to the dashboard,
// the tabs (aria-current on the current one), the empty states, the spend
// chart (server-made SVG with its axes' ticks, a bar per day, today's bar
// grown by the spend this test makes, a tooltip on hover), and Destroy and
// Revoke asking first: without JavaScript on a page of their own, with it in
// a dialog; Cancel keeps the sandbox or key, confirming ends it. Every page
// passes axe-core's WCAG A/AA rules at desktop and phone widths (and in the
// dark scheme at desktop width), fits a
// phone's width (375 px) without sideways scrolling, and is kept as a
// screenshot at both widths (dashboard-look-*-desktop.png, -phone.png).
import {
  ARTIFACTS, BASE, axe, check, checkClean, curl, finish, launch, newPage, requireOpenSignup, text,
} from './harness.mjs';

await requireOpenSignup();

const api = (key, method, path, body) => JSON.parse(curl('-X', method, '-H', `Authorization: Bearer ${key}`,
  '-H', 'Content-Type: application/json', ...(body ? ['-d', body] : []), `${BASE}${path}`));
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
const path = (page) => new URL(page.url()).pathname;

// The phone is its width only: a change of isMobile or hasTouch makes Puppeteer reload the page (and close a dialog).
const DESKTOP = { width: 1280, height: 900 }, PHONE = { width: 375, height: 812 };

// Both widths: a screenshot of each, axe at each, and no sideways scrolling on the phone.
async function look(page, name, what) {
  for (const [width, viewport] of [['desktop', DESKTOP], ['phone', PHONE]]) {
    await page.setViewport(viewport);
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-look-${name}-${width}.png`, fullPage: true });
    // axe runs over DevTools, which needs script execution on: the page's own scripts did not run.
    const off = !page.isJavaScriptEnabled();
    if (off) await page.setJavaScriptEnabled(true);
    const v = await axe(page);
    check(`${what} (${width}): axe finds no WCAG A/AA violation`, v.length === 0, v.join('; '));
    if (width === 'desktop') {
      await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
      const dark = await axe(page);
      check(`${what} (dark): axe finds no WCAG A/AA violation`, dark.length === 0, dark.join('; '));
      await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
    }
    if (off) await page.setJavaScriptEnabled(false);
    if (width === 'phone') {
      const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      check(`${what}: fits a phone's width`, over <= 0, `${over} px too wide`);
    }
  }
  await page.setViewport(DESKTOP);
}

async function fill(page, sel, value) {
  await page.click(sel, { clickCount: 3 });
  await page.type(sel, value);
}

const tabs = (page) => page.$$eval('nav.tabs a', (as) => as.map((a) => ({
  label: a.textContent.trim(), href: a.getAttribute('href'), current: a.getAttribute('aria-current') })));

const email = `look-${process.pid}@example.test`, password = 'a long enough passphrase 42';
const browser = await launch();
try {
  const page = await newPage(browser);

  // Signed out: the header offers both ways in, and marks the page's own.
  await page.goto(`${BASE}/signup`);
  const ways = await page.$$eval('header .account a', (as) => as.map((a) => [a.textContent.trim(), a.getAttribute('aria-current')]));
  check('signed out, the header offers "Log in" and "Sign up"', JSON.stringify(ways.map((w) => w[0])) === '["Log in","Sign up"]', JSON.stringify(ways));
  check('/signup marks "Sign up", not "Log in"', JSON.stringify(ways) === '[["Log in",null],["Sign up","page"]]', JSON.stringify(ways));
  await look(page, 'signup', '/signup');
  await fill(page, '#email', email);
  await fill(page, '#password', password);
  await Promise.all([page.waitForNavigation(), page.click('#signup-submit')]);
  check('/login marks "Log in"', (await page.$eval('header .account a[aria-current="page"]', (a) => a.textContent).catch(() => '')) === 'Log in');
  await look(page, 'login', '/login');
  await fill(page, '#email', email);
  await fill(page, '#password', password);
  await Promise.all([page.waitForNavigation(), page.click('#login-submit')]);
  check('logged in, on the dashboard', path(page) === '/dashboard', page.url());

  // Signed in: the header names the account; the home page shows the way to the dashboard.
  check('the header names the account', (await text(page, 'header .who')) === `Signed in as ${email}`, await text(page, 'header .who'));
  check('the header has "Log out"', !!(await page.$('header form.logout button[type="submit"]')));
  await page.goto(`${BASE}/`);
  check('the home page, signed in, leads to the dashboard', (await page.$eval('#to-dashboard', (a) => a.getAttribute('href')).catch(() => null)) === '/dashboard');
  check('the home page, signed in, offers no sign-up or log-in', !(await page.$('main a[href="/signup"], main a[href="/login"], header a[href="/signup"]')));
  await look(page, 'home', '/ (signed in)');
  await page.goto(`${BASE}/docs`);
  check('the docs, signed in, keep the account in the header', !!(await page.$('header form.logout')));

  // The tabs, and the empty states.
  await page.goto(`${BASE}/dashboard`);
  let t = await tabs(page);
  check('the tabs: Sandboxes, API keys, Usage and billing', JSON.stringify(t.map((x) => x.label)) ===
    '["Sandboxes","API keys","Usage and billing"]', JSON.stringify(t));
  check('/dashboard marks the Sandboxes tab', t[0]?.current === 'page' && t.filter((x) => x.current).length === 1, JSON.stringify(t));
  check('the Dashboard section is marked in the header', (await page.$eval('header nav a[aria-current="page"]', (a) => a.getAttribute('href')).catch(() => null)) === '/dashboard');
  check('no sandboxes: words, not an empty table', !!(await page.$('#no-sandboxes')) && !(await page.$('table#sandboxes')) &&
    /No sandboxes yet/.test(await text(page, '#no-sandboxes')));
  await look(page, 'sandboxes-empty', '/dashboard (no sandboxes)');
  await page.goto(`${BASE}/dashboard/keys`);
  t = await tabs(page);
  check('/dashboard/keys marks the API keys tab', t[1]?.current === 'page' && t.filter((x) => x.current).length === 1, JSON.stringify(t));
  check('no keys: words, not an empty table', !!(await page.$('#no-keys')) && !(await page.$('table#keys')));
  await look(page, 'keys-empty', '/dashboard/keys (no keys)');
  await page.goto(`${BASE}/dashboard/usage`);
  t = await tabs(page);
  check('/dashboard/usage marks the usage tab', t[2]?.current === 'page' && t.filter((x) => x.current).length === 1, JSON.stringify(t));
  check('nothing ran: words, not an empty table', !!(await page.$('#no-usage')) && !(await page.$('table#usage-lines')));
  check('no spend: the chart says so', (await text(page, '#spend-chart svg.wide .empty-note')) === 'No spend in these days');
  await look(page, 'usage-empty', '/dashboard/usage (no spend)');

  // A key, and two sandboxes made with it that run long enough to cost something.
  await page.goto(`${BASE}/dashboard/keys`);
  await fill(page, '#key-name', 'dashboard look');
  await Promise.all([page.waitForNavigation(), page.click('#key-submit')]);
  const key = await text(page, '#new-key');
  check('a key is made', /^aas_sk_/.test(key || ''), key);
  await look(page, 'keys-new', '/dashboard/keys (a new key)');
  const a = api(key, 'POST', '/v1/sandboxes', '{}'), b = api(key, 'POST', '/v1/sandboxes', '{}');
  check('two sandboxes made with the key', !!a.id && !!b.id, JSON.stringify([a, b]));
  let cost = null;
  for (let i = 0; i < 40; i++) {
    await page.goto(`${BASE}/dashboard`);
    cost = await text(page, `#sandbox-${a.id} td.cost`);
    if (/[1-9]/.test(cost || '')) break;
    await sleep(250);
  }
  check('the list shows each sandbox with status, size, age, expiry and cost', await page.$$eval('#sandboxes tbody tr', (rows) =>
    rows.length === 2 && rows.every((r) => r.querySelector('td.status .badge') && r.querySelector('td.cost') &&
      r.querySelector('time[data-expires]') && r.querySelectorAll('td[data-label]').length >= 6)));
  check('the live count', (await text(page, '#live-count')) === '2', await text(page, '#live-count'));
  await look(page, 'sandboxes', '/dashboard (two sandboxes)');

  // The chart: axes with labelled ticks, a bar per day, today's grown by the spend.
  await page.goto(`${BASE}/dashboard/usage`);
  const chart = await page.$eval('#spend-chart svg.wide', (svg) => ({
    yTicks: [...svg.querySelectorAll('.y-axis text.tick')].map((e) => e.textContent),
    xTicks: [...svg.querySelectorAll('.x-axis text.tick')].map((e) => e.textContent),
    days: svg.querySelectorAll('g.day').length,
    last: (() => {
      const g = [...svg.querySelectorAll('g.day')].pop();
      return { micro: Number(g.dataset.usdMicro), height: Number(g.querySelector('rect.bar').getAttribute('height')) };
    })(),
    visible: svg.getBoundingClientRect().width > 0,
  })).catch((e) => ({ error: String(e) }));
  check('the chart shows', chart.visible === true, JSON.stringify(chart));
  check('its value axis has labelled ticks from $0', chart.yTicks?.length >= 3 && /^\$0(\.0+)?$/.test(chart.yTicks[0]) &&
    chart.yTicks.every((x) => /^\$\d+(\.\d+)?$/.test(x)), JSON.stringify(chart.yTicks));
  check('its days axis has labelled ticks', chart.xTicks?.length >= 4 && chart.xTicks.every((x) => /^[A-Z][a-z]{2} \d{1,2}$/.test(x)),
    JSON.stringify(chart.xTicks));
  check('a bar per day of the 14', chart.days === 14, String(chart.days));
  check("today's bar holds the spend", chart.last?.micro > 0 && chart.last?.height > 0, JSON.stringify(chart.last));
  const bars = await page.$$eval('#spend-chart svg.wide g.day', (gs) => gs.length);
  const sum = await page.$$eval('#spend-per-day tbody tr td.num', (tds) => tds.length);
  check('the same days in the table', sum === bars, `${sum} rows, ${bars} bars`);
  const today = (await page.$$('#spend-chart svg.wide g.day')).pop();
  await today.hover();
  const tip = await page.$eval('.chart-tip', (e) => (e.hidden ? '' : e.textContent)).catch(() => '');
  check('hovering a day shows its spend', /^\d{4}-\d\d-\d\d: \$\d+\.\d{6}$/.test(tip), tip);
  await page.goto(`${BASE}/dashboard/usage?days=30`);
  const asked = [(await page.$$('#spend-chart svg.wide g.day')).length,
    await page.$eval('.segmented a[aria-current="page"]', (x) => x.textContent).catch((e) => String(e))];
  check('the chart covers the days asked', asked[0] === 30 && asked[1] === '30 days', JSON.stringify(asked));
  await page.goto(`${BASE}/dashboard/usage`);
  check('the sandboxes that ran are listed', (await page.$$('#usage-lines tbody tr')).length === 2);
  await look(page, 'usage', '/dashboard/usage (spend)');
  await page.setViewport(PHONE);
  check('a phone gets the narrow chart', await page.$eval('#spend-chart svg.narrow', (s) => s.getBoundingClientRect().width > 0) &&
    await page.$eval('#spend-chart svg.wide', (s) => s.getBoundingClientRect().width === 0));
  await page.setViewport(DESKTOP);

  const status = (id) => api(key, 'GET', `/v1/sandboxes/${id}`).status;

  // Destroy without JavaScript: a page asks; Cancel keeps the sandbox, confirming destroys it.
  await page.setJavaScriptEnabled(false);
  await page.goto(`${BASE}/dashboard`);
  await Promise.all([page.waitForNavigation(), page.click(`#sandbox-${a.id} a.confirm`)]);
  check('without JavaScript, Destroy asks on a page', path(page) === `/dashboard/sandboxes/${a.id}/destroy` &&
    (await text(page, 'main h1')) === 'Destroy this sandbox?', page.url());
  t = await tabs(page);
  check('the question is inside the Sandboxes tab', t[0]?.current === 'true', JSON.stringify(t));
  await look(page, 'destroy-confirm', 'the destroy confirmation page');
  await Promise.all([page.waitForNavigation(), page.click('#cancel')]);
  check('Cancel goes back to the list', path(page) === '/dashboard');
  check('Cancel keeps the sandbox', status(a.id) === 'ready', status(a.id));
  await Promise.all([page.waitForNavigation(), page.click(`#sandbox-${a.id} a.confirm`)]);
  await Promise.all([page.waitForNavigation(), page.click('#confirm-destroy')]);
  check('confirming destroys it', status(a.id) === 'destroyed' && path(page) === '/dashboard', `${status(a.id)} ${page.url()}`);
  check('the list shows it destroyed', !!(await page.$(`#sandbox-${a.id}[data-status="destroyed"]`)));
  await page.goto(`${BASE}/dashboard/sandboxes/${a.id}/destroy`);
  check('asking again about an ended sandbox says so', !!(await page.$('#already-destroyed')));

  // Destroy with JavaScript: a dialog asks; Cancel keeps the sandbox, confirming destroys it.
  await page.setJavaScriptEnabled(true);
  await page.goto(`${BASE}/dashboard`);
  await page.click(`#sandbox-${b.id} a.confirm`);
  const dialog = await page.waitForSelector('dialog.confirm[open]', { timeout: 5000 }).catch(() => null);
  check('with JavaScript, Destroy asks in a dialog', !!dialog && path(page) === '/dashboard');
  check('the dialog names the sandbox', ((await text(page, 'dialog.confirm p')) || '').includes(b.id));
  await page.screenshot({ path: `${ARTIFACTS}/dashboard-look-destroy-dialog-desktop.png` });
  const dv = await axe(page);
  check('the dialog: axe finds no WCAG A/AA violation', dv.length === 0, dv.join('; '));
  await page.setViewport(PHONE);
  await page.screenshot({ path: `${ARTIFACTS}/dashboard-look-destroy-dialog-phone.png` });
  await page.setViewport(DESKTOP);
  await page.click('dialog.confirm button[type="button"]');
  await sleep(200);
  check('Cancel closes the dialog', !(await page.$('dialog.confirm[open]')));
  check('Cancel keeps the sandbox (dialog)', status(b.id) === 'ready', status(b.id));
  await page.click(`#sandbox-${b.id} a.confirm`);
  await page.waitForSelector('dialog.confirm[open]', { timeout: 5000 }).catch(() => null);
  await Promise.all([page.waitForNavigation(), page.click('dialog.confirm button[type="submit"]')]);
  check('confirming in the dialog destroys it', status(b.id) === 'destroyed' && path(page) === '/dashboard', status(b.id));

  // Revoke asks the same way: a dialog with JavaScript, a page without.
  await page.goto(`${BASE}/dashboard/keys`);
  const kid = await page.$eval('#keys tbody tr', (r) => r.id.replace(/^key-/, ''));
  await page.click(`#key-${kid} a.confirm`);
  await page.waitForSelector('dialog.confirm[open]', { timeout: 5000 }).catch(() => null);
  await page.click('dialog.confirm button[type="button"]');
  check('Cancel keeps the key', api(key, 'GET', '/v1/account').id !== undefined);
  await page.setJavaScriptEnabled(false);
  await page.goto(`${BASE}/dashboard/keys`);
  await Promise.all([page.waitForNavigation(), page.click(`#key-${kid} a.confirm`)]);
  check('without JavaScript, Revoke asks on a page', (await text(page, 'main h1')) === 'Revoke this key?');
  await look(page, 'revoke-confirm', 'the revoke confirmation page');
  await Promise.all([page.waitForNavigation(), page.click('#confirm-revoke')]);
  // At once, though the Cancel check above had this server check the key and cache it (server/auth.c).
  check('confirming revokes the key, at once', api(key, 'GET', '/v1/account').error !== undefined);
  check('the key reads revoked', (await text(page, `#key-${kid} td.status`)) === 'revoked');
  await page.setJavaScriptEnabled(true);

  // The pages after all that: the sandboxes that ended, the revoked key.
  await page.goto(`${BASE}/dashboard`);
  await look(page, 'sandboxes-ended', '/dashboard (ended sandboxes)');
  await page.goto(`${BASE}/dashboard/keys`);
  await look(page, 'keys', '/dashboard/keys (a revoked key)');

  await checkClean(page);
} finally {
  await browser.close();
}
finish();
