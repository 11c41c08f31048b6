#!/usr/bin/env python3
"""Accounts for people and the dashboard, over real HTTP through real sockets.

Starts aas-server (the fake VM driver) in each sign-up mode on a free loopback
port with a state directory of its own, and checks: sign-up modes and invite
codes, log-in and log-out, bad passwords, the log-in rate, CSRF refusals
(missing and wrong token, cross-site Origin and Sec-Fetch-Site), that a
session is no API key and a key no session, that a key made on a page works
on the API, the cookies' attributes, destroy and revoke (each asking first on a page of
its own) and extend from the page, tenant strings escaped in them, the
operator's pages, and the admin commands for users, invites and accounts.
Sign-up answers the same whether the e-mail had an account or not; a stranger
cannot spend an owner's log-in budget; sign-ups are bounded for everyone
together and may wait for the operator's approval for their credit; and a
flood of log-ins from many loopback addresses keeps the server's peak memory
within --max-password-hashes hashes while /healthz answers throughout.

usage: test_dashboard.py AAS_SERVER_FAKE
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

SERVER = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="aas-dashboard-test.")
FAILS = []
CHECKS = [0]
PROCS = []


def check(what, ok, detail=""):
    CHECKS[0] += 1
    if not ok:
        FAILS.append(what)
        print(f"FAIL: {what} {detail}", flush=True)


class Server:
    """One aas-server with its own state directory; stopped by stop() or at exit."""

    def __init__(self, name, *args, env=None):
        self.state = os.path.join(WORK, name)
        portfile = os.path.join(WORK, name + ".port")
        self.log = open(os.path.join(WORK, name + ".log"), "w")
        # Every request of this test comes from one address, many of them without a key, as fast
        # as the machine answers: the per-address rate (test_limits.sh's) would refuse some of them
        # on a quiet machine and not on a busy one. The log-in attempts' own limit stays.
        self.proc = subprocess.Popen([SERVER, "--listen", "127.0.0.1:0", "--port-file", portfile,
                                      "--state-dir", self.state, "--key-cache-ttl", "0",
                                      "--address-requests-per-second", "10000", *args],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        PROCS.append(self.proc)
        for _ in range(600):
            if os.path.exists(portfile) and open(portfile).read().strip():
                break
            if self.proc.poll() is not None:
                raise SystemExit(f"server {name} exited early: " + open(self.log.name).read())
            time.sleep(0.1)
        self.port = int(open(portfile).read())
        self.origin = f"http://127.0.0.1:{self.port}"

    def admin(self, *args, stdin=None):
        return subprocess.run([SERVER, *args, "--state-dir", self.state], input=stdin, capture_output=True, text=True)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self.log.close()


class Browser:
    """A cookie jar and the requests of a browser on this server's pages (no redirects followed)."""

    def __init__(self, server, source=None):
        self.s = server
        self.cookies = {}
        # Another loopback address (127.0.0.x) to come from: another client, as the server counts them.
        self.source = (source, 0) if source else None

    def req(self, method, path, form=None, headers=None, cookies=True):
        c = http.client.HTTPConnection("127.0.0.1", self.s.port, timeout=60, source_address=self.source)
        h = dict(headers or {})
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            h.setdefault("Content-Type", "application/x-www-form-urlencoded")
        if cookies and self.cookies:
            h["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        r.text = r.read().decode("utf-8", "replace")
        r.set_cookies = r.headers.get_all("Set-Cookie") or []
        for sc in r.set_cookies:
            name, _, rest = sc.partition("=")
            value = rest.split(";", 1)[0]
            if "Max-Age=0" in sc:
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = value
        c.close()
        return r

    def csrf(self, path):
        r = self.req("GET", path)
        m = re.search(r'name="csrf" value="([0-9a-f]+)"', r.text)
        return m.group(1) if m else ""

    def post(self, path, form, token_from=None, origin=True, **kw):
        form = dict(form)
        if "csrf" not in form:
            form["csrf"] = self.csrf(token_from or path)
        h = {"Origin": self.s.origin} if origin else {}
        h.update(kw.pop("headers", {}))
        return self.req("POST", path, form=form, headers=h, **kw)

    def signup(self, email, password="correct horse battery", **extra):
        return self.post("/signup", {"email": email, "password": password, **extra})

    def join(self, email, password="correct horse battery", **extra):
        """Sign up, then log in as a new user does: the (log-in's) answer, with the session."""
        r = self.signup(email, password, **extra)
        if r.status != 303 or r.headers["Location"] != SIGNED_UP:
            return r
        return self.login(email, password)

    def login(self, email, password="correct horse battery"):
        return self.post("/login", {"email": email, "password": password})


def api(server, method, path, key, body=None):
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    h = {"Authorization": f"Bearer {key}"}
    if body is not None:
        h["Content-Type"] = "application/json"
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    r.text = r.read().decode()
    c.close()
    return r


# Where every sign-up goes, made or not (the e-mail had an account): the log-in page, saying both.
SIGNED_UP = "/login?signed-up=1"


def session_cookie(b):
    return b.cookies.get("aas_session") or b.cookies.get("__Host-aas_session")


def test_closed():
    s = Server("closed")
    b = Browser(s)
    r = b.req("GET", "/signup")
    check("closed: the sign-up page says so", r.status == 200 and 'id="signup-closed"' in r.text, r.text[:300])
    for path in ("/", "/login", "/signup", "/docs", "/security"):
        r = b.req("GET", path)
        header = "".join(re.findall(r"<header.*?</header>", r.text, re.S))
        check(f"closed: {path} offers no Sign up", r.status == 200 and 'href="/signup"' not in r.text and
              "Sign up" not in header and 'href="/login"' in header, header)
    check("closed: the home page says who makes accounts", "Sign-up is closed on this server" in
          b.req("GET", "/").text)
    r = b.signup("a@example.org")
    check("closed: sign-up refused", r.status == 403, r.status)
    r = b.req("GET", "/dashboard")
    check("no session: /dashboard goes to /login", r.status == 303 and r.headers["Location"] == "/login")
    r = b.req("GET", "/login")
    check("log-in page", r.status == 200 and 'id="login-form"' in r.text and 'id="email"' in r.text
          and 'id="password"' in r.text)

    # The admin commands make people: the password on stdin, never in argv.
    out = s.admin("user", "create", "--email", "Op@Example.org", "--operator", stdin="operator password 1\n")
    check("admin: user create", out.returncode == 0 and out.stdout.startswith("usr-"), out.stderr)
    out = s.admin("user", "create", "--email", "op@example.org", stdin="operator password 1\n")
    check("admin: the e-mail is unique whatever its case", out.returncode != 0 and "exists" in out.stderr,
          out.stderr)
    out = s.admin("user", "create", "--email", "short@example.org", stdin="short\n")
    check("admin: a short password is refused", out.returncode == 2 and "at least" in out.stderr, out.stderr)
    out = s.admin("user", "list")
    check("admin: user list", out.returncode == 0 and "op@example.org" in out.stdout and " yes " in out.stdout,
          out.stdout)
    r = b.login("op@example.org", "operator password 1")
    check("operator logs in", r.status == 303 and r.headers["Location"] == "/dashboard", r.status)
    r = b.req("GET", "/dashboard/operator")
    check("operator page", r.status == 200 and 'id="accounts"' in r.text and 'id="host-load"' in r.text,
          r.text[:500])
    # A reset ends the sessions that knew the old password.
    out = s.admin("user", "password", "--email", "op@example.org", stdin="a new password 2\n")
    check("admin: user password", out.returncode == 0, out.stderr)
    r = b.req("GET", "/dashboard")
    check("a password reset ends the sessions", r.status == 303 and r.headers["Location"] == "/login")
    r = b.login("op@example.org", "operator password 1")
    check("the old password no longer works", r.status == 401, r.status)
    r = b.login("op@example.org", "a new password 2")
    check("the new password works", r.status == 303, r.status)
    out = s.admin("user", "operator", "--email", "op@example.org", "--off")
    check("admin: user operator --off", out.returncode == 0, out.stderr)
    r = b.req("GET", "/dashboard/operator")
    check("no longer an operator: the page is refused", r.status == 403, r.status)
    acc = re.search(r"(acc-[a-z0-9]+)", s.admin("user", "list").stdout)
    acc = acc.group(1) if acc else "acc-none"
    out = s.admin("account", "disable", "--id", acc)
    check("admin: account disable", out.returncode == 0, out.stderr)
    r = b.req("GET", "/dashboard")
    check("a disabled account's session ended", r.status == 303 and r.headers["Location"] == "/login")
    r = b.login("op@example.org", "a new password 2")
    check("a disabled account cannot log in", r.status == 403 and "disabled" in r.text, r.status)
    out = s.admin("account", "disable", "--id", "acc-none")
    check("admin: disabling no account fails", out.returncode == 1 and out.stdout == "", out.stderr)
    out = s.admin("user", "password", "--email", "nobody@example.org", stdin="a long enough one\n")
    check("admin: no such user", out.returncode == 1, out.stderr)
    s.stop()


def test_invite():
    s = Server("invite", "--signup", "invite")
    b = Browser(s)
    r = b.req("GET", "/signup")
    check("invite: the form asks for a code", 'id="invite"' in r.text)
    for path in ("/", "/login", "/docs"):
        r = b.req("GET", path)
        check(f"invite: {path}'s header offers Sign up", re.search(
            r'<header.*<a href="/signup" class="button small">Sign up</a>.*</header>', r.text, re.S) is not None,
            re.findall(r"<header.*?</header>", r.text, re.S))
    r = b.signup("b@example.org")
    check("invite: no code refused", r.status == 403, r.status)
    r = b.signup("b@example.org", invite="aas_inv_madeup")
    check("invite: an unknown code refused", r.status == 403 and 'id="error"' in r.text, r.status)
    out = s.admin("invite", "create", "--count", "2")
    codes = out.stdout.split()
    check("admin: invite create prints the codes", out.returncode == 0 and len(codes) == 2
          and all(c.startswith("aas_inv_") for c in codes), out.stdout + out.stderr)
    r = b.join("b@example.org", invite=codes[0])
    check("invite: a code signs up", r.status == 303 and r.headers["Location"] == "/dashboard", r.status)
    b2 = Browser(s)
    r = b2.signup("c@example.org", invite=codes[0])
    check("invite: a code works once", r.status == 403, r.status)
    r = b2.signup("c@example.org", invite=codes[1])
    check("invite: the other code works", r.status == 303 and r.headers["Location"] == SIGNED_UP, r.status)
    s.stop()


def test_open():
    s = Server("open", "--signup", "open", "--login-attempts", "4")
    b = Browser(s)
    r = b.req("GET", "/")
    check("open: the header and the home page offer Sign up", re.search(
        r'<header.*<a href="/signup" class="button small">Sign up</a>.*</header>', r.text, re.S) is not None and
        r.text.count('href="/signup"') == 2 and "Sign-up is closed" not in r.text, r.text[:2000])
    r = b.signup("d@example.org", password="short")
    check("a short password is refused", r.status == 400 and 'id="error"' in r.text, r.status)
    r = b.signup("d@example.org")
    check("open: sign-up goes to the log-in page", r.status == 303 and r.headers["Location"] == SIGNED_UP, r.status)
    check("open: sign-up starts no session", not any("session" in c for c in r.set_cookies), r.set_cookies)
    made = r
    r = b.req("GET", SIGNED_UP)
    check("the log-in page after a sign-up says what happened either way", r.status == 200 and
          'id="notice"' in r.text and "had one already" in r.text, r.text[:600])
    r = b.login("d@example.org")
    check("a new account logs in", r.status == 303 and r.headers["Location"] == "/dashboard", r.status)
    sc = [c for c in r.set_cookies if c.startswith("aas_session=")]
    check("a session cookie is set", len(sc) == 1, r.set_cookies)
    attrs = [a.strip() for a in sc[0].split(";")[1:]] if sc else []
    check("cookie: HttpOnly, SameSite=Strict, Path=/, not Secure without TLS",
          "HttpOnly" in attrs and "SameSite=Strict" in attrs and "Path=/" in attrs and "Secure" not in attrs, attrs)
    token = session_cookie(b)
    check("the session is a session token", token and token.startswith("aas_ss_"), token)

    r = b.req("GET", "/dashboard")
    check("dashboard: the balance of a new account", r.status == 200 and
          re.search(r'id="balance">\$?5\.00', r.text) is not None, r.text[:800])
    # An e-mail that has an account: the very same answer (status, headers, cookies, body), and nothing changed.
    other = Browser(s, "127.0.0.5")
    r = other.signup("D@example.org", password="another password 9")
    same = (r.status, r.headers.get("Location"), r.set_cookies, r.text)
    check("open: sign-up of an e-mail with an account answers as one without",
          same == (made.status, made.headers.get("Location"), made.set_cookies, made.text), (same, made.status))
    check("... and its headers are the same ones", sorted(k for k, _ in r.getheaders() if k != "Date") ==
          sorted(k for k, _ in made.getheaders() if k != "Date"), r.getheaders())
    check("... and changed nothing: the owner's password still works, the other not",
          other.login("d@example.org", "another password 9").status == 401 and
          Browser(s, "127.0.0.6").login("d@example.org").status == 303)

    # CSRF: the token and the origin.
    good = b.csrf("/dashboard/keys")
    r = b.post("/dashboard/keys", {"name": "x", "csrf": ""})
    check("csrf: a missing token is refused", r.status == 403, r.status)
    r = b.req("POST", "/dashboard/keys", form={"name": "x"}, headers={"Origin": s.origin})
    check("csrf: no token field is refused", r.status == 403, r.status)
    r = b.post("/dashboard/keys", {"name": "x", "csrf": "0" * 64})
    check("csrf: a wrong token is refused", r.status == 403, r.status)
    r = b.post("/dashboard/keys", {"name": "x", "csrf": good}, origin=False,
               headers={"Origin": "http://evil.example"})
    check("csrf: a cross-site Origin is refused", r.status == 403, r.status)
    r = b.post("/dashboard/keys", {"name": "x", "csrf": good}, origin=False, headers={"Sec-Fetch-Site": "cross-site"})
    check("csrf: Sec-Fetch-Site cross-site is refused", r.status == 403, r.status)
    r = b.post("/dashboard/keys", {"name": "x", "csrf": good}, origin=False, headers={"Origin": "null"})
    check("csrf: Origin null is refused", r.status == 403, r.status)
    r = b.post("/dashboard/keys", {"name": "x", "csrf": good},
               headers={"Content-Type": "application/x-www-form-urlencodedx"})
    check("a form of another media type that begins like one is refused", r.status == 415, r.status)
    r = b.post("/dashboard/keys", {"name": "form-charset", "csrf": good},
               headers={"Content-Type": "application/x-www-form-urlencoded; charset=UTF-8"})
    check("a form with a charset parameter is taken", r.status == 201, r.status)
    r = Browser(s).post("/dashboard/keys", {"name": "x", "csrf": good}, cookies=False)
    check("no session: a form post goes to /login", r.status == 303 and r.headers["Location"] == "/login")

    # A key made on the page works on the API.
    r = b.post("/dashboard/keys", {"name": "laptop"}, headers={"Sec-Fetch-Site": "same-origin"})
    m = re.search(r'<output id="new-key">(aas_sk_[A-Za-z0-9]+)</output>', r.text)
    check("keys: a new key is shown once", r.status == 201 and m is not None and 'data-copy="new-key"' in r.text,
          r.text[:600])
    key = m.group(1) if m else "none"
    r = b.req("GET", "/dashboard/keys")
    check("keys: listed by name and prefix, never whole", "laptop" in r.text and key[:11] in r.text
          and key not in r.text, r.text[:600])
    r = api(s, "GET", "/v1/account", key)
    check("the page's key works on the API", r.status == 200, r.status)
    r = b.req("GET", "/dashboard/keys")
    row = re.search(r"<tr id=\"key-[^\"]+\"><td[^>]*>laptop</td>.*?</tr>", r.text)
    check("keys: last used is recorded", row is not None and
          re.search(r'<td data-label="Last used">[^<]*</td>', row.group(0)) is not None and
          '<td data-label="Last used">never</td>' not in row.group(0), r.text[:900])

    # A session is no API key, and a key no session.
    r = api(s, "GET", "/v1/account", token)
    check("a session token is refused by the API", r.status == 401, r.status)
    other = Browser(s)
    other.cookies["aas_session"] = key
    r = other.req("GET", "/dashboard")
    check("an API key is refused as a session", r.status == 303 and r.headers["Location"] == "/login")

    # Sandboxes: made with the key, seen, extended and destroyed on the page.
    r = api(s, "POST", "/v1/sandboxes", key, '{"timeout_s": 600}')
    check("create with the page's key", r.status == 201, r.text)
    sid = re.search(r'"id":"(sbx-[a-z0-9-]+)"', r.text)
    sid = sid.group(1) if sid else "sbx-none"
    r = b.req("GET", "/dashboard")
    check("the sandbox is on the dashboard", f'id="sandbox-{sid}"' in r.text and 'data-expires="' in r.text,
          r.text[:1200])
    r = b.req("GET", f"/dashboard/sandboxes/{sid}")
    check("the sandbox's page", r.status == 200 and 'id="sandbox"' in r.text, r.status)
    check("the sandbox's page: no running execution", 'id="no-executions"' in r.text, r.text[:1500])
    # A command left running in the background (the fake's "wait" runs until a signal) is listed.
    r = api(s, "POST", f"/v1/sandboxes/{sid}/exec", key, '{"command": "wait", "background": true}')
    eid = re.search(r'"execution_id":"(exe-[a-z0-9-]+)"', r.text)
    eid = eid.group(1) if eid else "exe-none"
    check("a background execution starts", r.status in (200, 201, 202) and eid != "exe-none", r.text)
    r = b.req("GET", f"/dashboard/sandboxes/{sid}")
    check("the sandbox's page lists the running execution", f'id="execution-{eid}"' in r.text, r.text[:2000])
    # The history below: ended ones too, newest first, each command escaped and a long one cut.
    check("the history holds the running one", f'id="ran-{eid}" data-status="running"' in r.text, r.text[:3000])
    time.sleep(0.005)  # newest first means a later start
    r = api(s, "POST", f"/v1/sandboxes/{sid}/exec", key, '{"command": "exit 3"}')
    check("an execution that ends", r.status == 200 and '"exit_code":3' in r.text, r.text)
    xid = re.search(r'"execution_id":"(exe-[a-z0-9-]+)"', r.text)
    xid = xid.group(1) if xid else "exe-none"
    long_cmd = "echo <b>&amp;\"" + "x" * 300
    time.sleep(0.005)
    r = api(s, "POST", f"/v1/sandboxes/{sid}/exec", key, json.dumps({"command": long_cmd}))
    lid = re.search(r'"execution_id":"(exe-[a-z0-9-]+)"', r.text)
    lid = lid.group(1) if lid else "exe-none"
    r = b.req("GET", f"/dashboard/sandboxes/{sid}")
    row = re.search(f'<tr id="ran-{xid}" data-status="exited">(.*?)</tr>', r.text)
    check("the history shows an ended one: command and exit code", row is not None and
          "<code>exit 3</code>" in row.group(1) and "exited 3" in row.group(1), r.text[:3000])
    row = re.search(f'<tr id="ran-{lid}"[^>]*>(.*?)</tr>', r.text)
    check("the history escapes a command", row is not None and
          "<code>echo &lt;b&gt;&amp;amp;&quot;xxx" in row.group(1) and "<b>" not in row.group(1), r.text[:3000])
    check("the history cuts a long command", row is not None and "x" * 301 not in row.group(1) and
          "x" * 150 + "\u2026" in row.group(1), row.group(1) if row else "")
    order = [m.group(1) for m in re.finditer(r'<tr id="ran-(exe-[a-z0-9-]+)"', r.text)]
    check("the history is newest first", order == [lid, xid, eid], order)
    r = b.post(f"/dashboard/sandboxes/{sid}/extend", {"minutes": "5"}, token_from="/dashboard")
    check("extend from the page", r.status == 303, r.text[:300])
    r = b.post(f"/dashboard/sandboxes/{sid}/extend", {"minutes": "0"}, token_from="/dashboard")
    check("extend by 0 minutes is refused", r.status == 400, r.status)
    # Destroy asks first: GET of its path is a page whose form posts there, and destroys nothing.
    r = b.req("GET", f"/dashboard/sandboxes/{sid}/destroy")
    check("destroy asks first", r.status == 200 and f'action="/dashboard/sandboxes/{sid}/destroy"' in r.text and
          'id="confirm-destroy"' in r.text and 'href="/dashboard">Cancel' in r.text.replace(' id="cancel"', ''),
          r.text[:1500])
    check("asking destroys nothing", '"status":"ready"' in api(s, "GET", f"/v1/sandboxes/{sid}", key).text)
    r = b.req("GET", f"/dashboard/sandboxes/{sid}/destroy?back=sandbox")
    check("asked from the sandbox's page, it goes back there", 'name="back" value="sandbox"' in r.text and
          f'href="/dashboard/sandboxes/{sid}">Cancel' in r.text.replace(' id="cancel"', ''), r.text[:1500])
    r = b.req("GET", "/dashboard")
    check("the list's Destroy is a link to the question, with what the dialog needs", re.search(
        f'<a class="button danger small confirm" href="/dashboard/sandboxes/{sid}/destroy" '
        f'aria-label="Destroy {sid}" data-confirm="Destroy sandbox {sid}\\?[^"]*" data-confirm-verb="Destroy sandbox" '
        f'data-post="/dashboard/sandboxes/{sid}/destroy" data-csrf="[0-9a-f]{{64}}">Destroy</a>', r.text), r.text[:3000])
    r = b.post(f"/dashboard/sandboxes/{sid}/destroy", {}, token_from="/dashboard")
    check("destroy from the page", r.status == 303 and r.headers["Location"] == "/dashboard", r.status)
    r = api(s, "GET", f"/v1/sandboxes/{sid}", key)
    check("destroyed for the API too", '"status":"destroyed"' in r.text, r.text)
    r = b.req("GET", "/dashboard")
    check("the page shows it destroyed", re.search(f'id="sandbox-{sid}" data-status="destroyed"', r.text), r.text[:900])
    r = b.req("GET", "/dashboard/usage")
    check("usage: chart, lines, prices and limits", r.status == 200 and all(
        f'id="{i}"' in r.text for i in ("balance", "spend-chart", "usage-lines", "prices", "limits")), r.text[:500])
    r = b.req("GET", "/dashboard/usage?from=yesterday")
    check("usage: a bad period is refused", r.status == 400, r.status)
    # Another account's sandbox is not found from this session.
    b2 = Browser(s)
    b2.join("e@example.org")
    r = b2.req("GET", f"/dashboard/sandboxes/{sid}")
    check("tenancy: another account's sandbox is not found", r.status == 404, r.status)
    r = b2.post(f"/dashboard/sandboxes/{sid}/destroy", {}, token_from="/dashboard")
    check("tenancy: nor destroyed", r.status == 404, r.status)
    r = b2.req("GET", f"/dashboard/sandboxes/{sid}/destroy")
    check("tenancy: nor asked about", r.status == 404, r.status)
    r = b2.req("GET", "/dashboard/operator")
    check("operator pages: refused to others", r.status == 403, r.status)

    # Revoking on the page stops the key.
    kid = re.search(r'id="key-(key-[a-z0-9]+)"', b.req("GET", "/dashboard/keys").text)
    kid = kid.group(1) if kid else "key-none"
    r = b2.post(f"/dashboard/keys/{kid}/revoke", {}, token_from="/dashboard/keys")
    check("tenancy: another account cannot revoke the key", r.status == 404, r.status)
    r = b2.req("GET", f"/dashboard/keys/{kid}/revoke")
    check("tenancy: nor asked about", r.status == 404, r.status)
    r = b.req("GET", f"/dashboard/keys/{kid}/revoke")
    check("revoke asks first", r.status == 200 and f'action="/dashboard/keys/{kid}/revoke"' in r.text and
          'id="confirm-revoke"' in r.text, r.text[:1500])
    check("asking revokes nothing", api(s, "GET", "/v1/account", key).status == 200)
    # A key's name is the tenant's: escaped in the row and in the question the dialog asks.
    b.post("/dashboard/keys", {"name": '<img src=x onerror=alert(1)>"'}, headers={"Sec-Fetch-Site": "same-origin"})
    r = b.req("GET", "/dashboard/keys")
    check("a key's name is escaped everywhere", "<img" not in r.text and
          'data-confirm="Revoke the key &quot;&lt;img src=x onerror=alert(1)&gt;&quot;&quot;?' in r.text, r.text[:3000])
    r = b.post(f"/dashboard/keys/{kid}/revoke", {}, token_from="/dashboard/keys")
    check("revoke on the page", r.status == 303, r.status)
    r = api(s, "GET", "/v1/account", key)
    check("a revoked key is refused", r.status == 401, r.status)

    # Log-in: bad passwords, unknown e-mails, the rate.
    anon = Browser(s)
    r = anon.login("d@example.org", "wrong password!")
    check("a wrong password: 401", r.status == 401 and "Wrong e-mail or password" in r.text, r.status)
    r = anon.login("nobody@example.org", "wrong password!")
    check("an unknown e-mail says the same", r.status == 401 and "Wrong e-mail or password" in r.text, r.status)
    r = anon.req("POST", "/login", form={"email": "d@example.org", "password": "x", "csrf": "f" * 64},
                 headers={"Origin": s.origin})
    check("log-in: the form's token must match its cookie", r.status == 403, r.status)
    statuses = [anon.login("d@example.org", "wrong password!").status for _ in range(3)]
    check("log-in: attempts for one e-mail are limited", statuses[-1] == 429, statuses)
    r = Browser(s).login("d@example.org")
    check("log-in: even with the right password while limited", r.status == 429, r.status)
    check("log-in: the limited page says when to try again, as its Retry-After",
          says_when(r.headers.get("Retry-After"), r.text), (r.headers.get("Retry-After"), r.text[-600:]))
    # A stranger spending an e-mail's attempts from their address does not lock its owner out from theirs.
    stranger = Browser(s, "127.0.0.7")
    statuses = [stranger.login("d@example.org", "wrong password!").status for _ in range(5)]
    check("log-in: a stranger's attempts are limited", statuses[-1] == 429, statuses)
    r = Browser(s, "127.0.0.8").login("d@example.org")
    check("log-in: the owner, from another address, still logs in", r.status == 303, r.status)

    # Log out: the session ends on the server, not only in the browser.
    old = dict(b.cookies)
    r = b.post("/logout", {}, token_from="/dashboard")
    check("log out", r.status == 303 and r.headers["Location"] == "/" and session_cookie(b) is None, r.status)
    replay = Browser(s)
    replay.cookies = old
    r = replay.req("GET", "/dashboard")
    check("a logged-out session is gone", r.status == 303 and r.headers["Location"] == "/login")

    # The operator disables an account: its keys and its sessions stop.
    out = s.admin("user", "create", "--email", "root@example.org", "--operator", stdin="operator password 1\n")
    check("admin: an operator on an open server", out.returncode == 0, out.stderr)
    op = Browser(s)
    op.cookies.clear()
    r = op.post("/login", {"email": "root@example.org", "password": "operator password 1"})
    k2 = b2.post("/dashboard/keys", {"name": "ci"})
    k2 = re.search(r'<output id="new-key">(aas_sk_[A-Za-z0-9]+)</output>', k2.text)
    k2 = k2.group(1) if k2 else "none"
    acc = re.search(r'"id":"(acc-[a-z0-9]+)"', api(s, "GET", "/v1/account", k2).text)
    acc = acc.group(1) if acc else "acc-none"
    r = op.post(f"/dashboard/operator/accounts/{acc}/credit", {"usd": "2.5"}, token_from="/dashboard/operator")
    check("operator: add credit", r.status == 303, r.status)
    r = b2.req("GET", "/dashboard")
    check("the credit shows on the account's balance", re.search(r'id="balance">\$?7\.50', r.text), r.text[:600])
    live = re.search(r'"id":"(sbx-[a-z0-9-]+)"', api(s, "POST", "/v1/sandboxes", k2, '{"timeout_s": 600}').text)
    live = live.group(1) if live else "sbx-none"
    r = op.post(f"/dashboard/operator/accounts/{acc}/disable", {"disabled": "1"}, token_from="/dashboard/operator")
    check("operator: disable", r.status == 303, r.status)
    r = op.req("GET", "/dashboard/operator")
    check("operator: the account reads disabled", re.search(f'id="account-{acc}">.*?<td>disabled</td>', r.text),
          r.text[:1500])
    # The fake driver keeps a template, ready, for each image and shape it made a VM of.
    check("operator: host load lists the templates", re.search(
        r'<table id="templates">.*?<tr data-state="ready"><td>default</td><td>small \(2 vCPU, 4096 MiB, 40 GiB\)</td>'
        r'<td class="status">ready</td><td>4096 MiB</td>', r.text), r.text[:3000])
    r = api(s, "GET", "/v1/account", k2)
    check("a disabled account's key is refused", r.status == 401, r.status)
    r = b2.req("GET", "/dashboard")
    check("a disabled account's session ended", r.status == 303, r.status)
    out = s.admin("account", "enable", "--id", acc)
    check("admin: account enable", out.returncode == 0, out.stderr)
    r = api(s, "GET", "/v1/account", k2)
    check("an enabled account's key works again", r.status == 200, r.status)
    r = api(s, "GET", f"/v1/sandboxes/{live}", k2)
    check("disabling destroyed the account's sandbox", '"status":"destroyed"' in r.text and
          '"end_reason":"disabled"' in r.text, r.text)
    # The admin command opens the store only: the running server's next sweep destroys them.
    live = re.search(r'"id":"(sbx-[a-z0-9-]+)"', api(s, "POST", "/v1/sandboxes", k2, '{"timeout_s": 600}').text)
    live = live.group(1) if live else "sbx-none"
    out = s.admin("account", "disable", "--id", acc)
    check("admin: account disable", out.returncode == 0 and "sandboxes" in out.stderr, out.stderr)
    for _ in range(300):
        if f"is disabled; destroying {live}" in open(s.log.name).read():
            break
        time.sleep(0.1)
    s.admin("account", "enable", "--id", acc)
    r = api(s, "GET", f"/v1/sandboxes/{live}", k2)
    check("admin disable: the server's sweep destroys the sandbox", '"end_reason":"disabled"' in r.text, r.text)
    s.stop()


def test_revoked_at_once():
    """This server's key cache trusts a checked key for --key-cache-ttl; the page's Revoke and Disable end that now."""
    s = Server("cache", "--signup", "open", "--key-cache-ttl", "3600")
    b = Browser(s)
    b.join("k@example.org")
    keys = {}
    for name in ("kept", "gone"):
        r = b.post("/dashboard/keys", {"name": name})
        m = re.search(r'<output id="new-key">(aas_sk_[A-Za-z0-9]+)</output>', r.text)
        keys[name] = m.group(1) if m else "none"
    for name, key in keys.items():
        check(f"cache: the key {name} works (and is cached for an hour)", api(s, "GET", "/v1/account", key).status == 200)
    kid = re.search(r'<tr id="key-(key-[a-z0-9]+)"><td data-label="Name">gone</td>', b.req("GET", "/dashboard/keys").text)
    r = b.post(f"/dashboard/keys/{kid.group(1) if kid else 'key-none'}/revoke", {}, token_from="/dashboard/keys")
    check("cache: revoke on the page", r.status == 303, r.status)
    r = api(s, "GET", "/v1/account", keys["gone"])
    check("cache: the revoked key is refused at once, not after the cache's hour", r.status == 401, r.status)
    r = api(s, "GET", "/v1/account", keys["kept"])
    check("cache: the account's other key still works", r.status == 200, r.status)
    acc = re.search(r'"id":"(acc-[a-z0-9]+)"', r.text)
    out = s.admin("user", "create", "--email", "root@example.org", "--operator", stdin="operator password 1\n")
    check("cache: an operator", out.returncode == 0, out.stderr)
    op = Browser(s)
    op.login("root@example.org", "operator password 1")
    r = op.post(f"/dashboard/operator/accounts/{acc.group(1) if acc else 'acc-none'}/disable", {"disabled": "1"},
                token_from="/dashboard/operator")
    check("cache: the operator disables the account", r.status == 303, r.status)
    r = api(s, "GET", "/v1/account", keys["kept"])
    check("cache: a disabled account's key is refused at once", r.status == 401, r.status)
    s.stop()


def test_secure():
    s = Server("secure", "--signup", "open", "--secure-cookies", "on")
    b = Browser(s)
    form = b.csrf("/signup")
    check("secure: the form cookie is __Host- and Secure",
          any(c.startswith("__Host-aas_form=") and "; Secure" in c for c in
              b.req("GET", "/signup").set_cookies))
    r = b.post("/signup", {"email": "f@example.org", "password": "correct horse battery", "csrf": form})
    check("secure: an http:// Origin is refused behind TLS", r.status == 403, r.status)
    r = b.post("/signup", {"email": "f@example.org", "password": "correct horse battery", "csrf": form},
               origin=False, headers={"Origin": "https://127.0.0.1:%d" % s.port})
    check("secure: sign-up with an https Origin", r.status == 303 and r.headers["Location"] == SIGNED_UP, r.status)
    r = b.post("/login", {"email": "f@example.org", "password": "correct horse battery"}, origin=False,
               headers={"Origin": "https://127.0.0.1:%d" % s.port})
    sc = [c for c in r.set_cookies if c.startswith("__Host-aas_session=")]
    check("secure: the session cookie is __Host- and Secure", r.status == 303 and sc and "; Secure" in sc[0],
          r.set_cookies)
    s.stop()


def test_approval():
    """Sign-ups bounded for everyone together, and their credit only once the operator approves."""
    s = Server("approval", "--signup", "open", "--signup-credit", "approval", "--signups-per-hour", "2")
    r = Browser(s).req("GET", "/signup")
    check("approval: the sign-up page says the credit waits", "once this server's operator approves" in r.text,
          r.text[:800])
    b = Browser(s, "127.0.0.11")
    r = b.join("g@example.org")
    check("approval: sign-up and log-in", r.status == 303, r.status)
    r = b.req("GET", "/dashboard")
    check("approval: no credit before approval", re.search(r'id="balance">\$?0\.00', r.text), r.text[:800])
    out = s.admin("user", "approve", "--email", "G@example.org")
    check("admin: user approve", out.returncode == 0 and "approved" in out.stderr and "5.00" in out.stdout,
          out.stdout + out.stderr)
    r = b.req("GET", "/dashboard")
    check("approval: the credit after approval", re.search(r'id="balance">\$?5\.00', r.text), r.text[:800])
    out = s.admin("user", "approve", "--email", "nobody@example.org")
    check("admin: approving nobody fails", out.returncode == 1 and out.stdout == "", out.stderr)
    out = s.admin("user", "approve")
    check("admin: approve needs --email", out.returncode == 2, out.stderr)
    # Two an hour: the second passes (from anywhere), the third is refused for everyone, with when to come back.
    r = Browser(s, "127.0.0.12").signup("h@example.org")
    check("signups-per-hour: the second sign-up", r.status == 303, r.status)
    r = Browser(s, "127.0.0.13").signup("i@example.org")
    check("signups-per-hour: the third is refused (503, Retry-After)", r.status == 503 and
          int(r.headers.get("Retry-After", "0")) > 0, (r.status, r.headers.get("Retry-After")))
    check("signups-per-hour: the page says in words when to try again (minutes: half an hour for the next)",
          says_when(r.headers.get("Retry-After"), r.text) and "minutes." in r.text,
          (r.headers.get("Retry-After"), r.text[-600:]))
    r = Browser(s, "127.0.0.13").login("i@example.org")
    check("signups-per-hour: and made no account", r.status == 401, r.status)
    s.stop()


def says_when(retry_after, text):
    """The page says in words when to come back, as many seconds as its Retry-After (minutes past two)."""
    secs = int(retry_after or "0")
    if secs <= 0:
        return False
    words = (f"Try again in {secs} second{'' if secs == 1 else 's'}." if secs < 120 else
             f"Try again in {(secs + 59) // 60} minutes.")
    return words in text


def vm_kib(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def test_hash_flood():
    """Wrong-password log-ins from 16 loopback addresses at once: the hashes at once are bounded, so is memory."""
    hashes = 2
    # Under AddressSanitizer freed memory waits in a quarantine (256 MiB) before it is unmapped: that is
    # the sanitizer's memory, not the server's, and would count against the bound. Without it, it is not.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(x for x in (env.get("ASAN_OPTIONS", ""), "quarantine_size_mb=0") if x)
    s = Server("flood", "--signup", "open", "--max-password-hashes", str(hashes), "--login-attempts", "100000",
               env=env)
    b = Browser(s)
    r = b.join("flood@example.org")
    check("flood: an account", r.status == 303, r.status)
    anon = Browser(s)
    token = anon.csrf("/login")
    form_cookie = anon.cookies.get("aas_form", "")
    time.sleep(0.5)
    base = vm_kib(s.proc.pid, "VmRSS")
    until = time.monotonic() + 6
    statuses, health, lock = {}, [], threading.Lock()
    retry_after = []

    def flood(addr):
        body = urllib.parse.urlencode({"email": "flood@example.org", "password": "wrong password!", "csrf": token})
        while time.monotonic() < until:
            try:
                c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30, source_address=(addr, 0))
                c.request("POST", "/login", body=body, headers={
                    "Content-Type": "application/x-www-form-urlencoded", "Origin": s.origin,
                    "Cookie": f"aas_form={form_cookie}"})
                r = c.getresponse()
                text = r.read().decode("utf-8", "replace")
                c.close()
                st = r.status
                if st == 503:
                    with lock:
                        retry_after.append((r.headers.get("Retry-After"), text))
            except OSError as e:
                st = type(e).__name__
            with lock:
                statuses[st] = statuses.get(st, 0) + 1

    def healthz():
        while time.monotonic() < until:
            try:
                c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5, source_address=("127.0.0.250", 0))
                c.request("GET", "/healthz")
                st = c.getresponse().status
                c.close()
            except OSError as e:
                st = type(e).__name__
            health.append(st)
            time.sleep(0.1)

    threads = [threading.Thread(target=flood, args=(f"127.0.0.{100 + i}",)) for i in range(16) for _ in range(8)]
    threads.append(threading.Thread(target=healthz))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    peak = vm_kib(s.proc.pid, "VmHWM")
    # The hashes at once (64 MiB each) and two more of margin for everything else a flood brings.
    bound = base + (hashes + 2) * 64 * 1024
    print(f"flood: {sum(v for v in statuses.values())} log-ins {statuses}; RSS before {base // 1024} MiB, "
          f"peak {peak // 1024} MiB, bound {bound // 1024} MiB; /healthz {len(health)} polls", flush=True)
    check("flood: the server's peak memory stays within its hashes", peak <= bound, (base, peak, bound))
    check("flood: past the bound, 503 with Retry-After", statuses.get(503, 0) > 0 and
          all(x and int(x) > 0 for x, _ in retry_after), statuses)
    check("flood: and each 503 page says in words when to try again (in 1 second)",
          all(says_when(x, text) and "Try again in 1 second." in text for x, text in retry_after),
          [x for x in retry_after if not says_when(*x)][:1])
    check("flood: the hashes still ran (401)", statuses.get(401, 0) > 0, statuses)
    check("flood: /healthz answered throughout", health and all(h == 200 for h in health), health)
    r = Browser(s, "127.0.0.251").login("flood@example.org")
    check("flood: afterwards the owner logs in", r.status == 303, r.status)
    s.stop()


try:
    test_closed()
    test_invite()
    test_open()
    test_revoked_at_once()
    test_secure()
    test_approval()
    test_hash_flood()
finally:
    for p in PROCS:
        if p.poll() is None:
            p.kill()
            p.wait()
    if FAILS:
        for name in os.listdir(WORK):
            if name.endswith(".log"):
                print(f"---- {name} (tail) ----")
                print("".join(open(os.path.join(WORK, name)).readlines()[-40:]))
    shutil.rmtree(WORK, ignore_errors=True)

print(f"{CHECKS[0]} checks, {len(FAILS)} failed")
sys.exit(1 if FAILS else 0)
