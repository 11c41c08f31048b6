#!/usr/bin/env python3
"""A sandbox's dashboard page and its routes, over real HTTP (docs/dashboard.md).

Starts aas-server (the fake VM driver, whose shell echoes what it is sent)
with open sign-up, makes two people, and checks the sandbox page's sections;
the Files forms (make a directory, upload a multipart file, download it with
the same bytes, delete) with their CSRF and Origin refusals; that names and
paths are refused as the REST API refuses them; the Use fragment; the
terminal's WebSocket with the session (refused from another origin, without
an Origin, without the token or the session); and that another account's
sandbox is a 404 on every route.

usage: test_dashboard_sandbox.py AAS_SERVER_FAKE
"""
import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

SERVER = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="aas-dashboard-sandbox-test.")
FAILS = []
CHECKS = [0]


def check(what, ok, detail=""):
    CHECKS[0] += 1
    if not ok:
        FAILS.append(what)
        print(f"FAIL: {what} {detail}", flush=True)


class Server:
    def __init__(self, *args, name="server", rate="10000"):
        self.state = os.path.join(WORK, name + ".state")
        portfile = os.path.join(WORK, name + ".port")
        self.log = open(os.path.join(WORK, name + ".log"), "w")
        self.proc = subprocess.Popen([SERVER, "--listen", "127.0.0.1:0", "--port-file", portfile,
                                      "--state-dir", self.state, "--address-requests-per-second", rate, *args],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(600):
            if os.path.exists(portfile) and open(portfile).read().strip():
                break
            if self.proc.poll() is not None:
                raise SystemExit("server exited early: " + open(self.log.name).read())
            time.sleep(0.1)
        self.port = int(open(portfile).read())
        self.origin = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self.log.close()


class Browser:
    """A cookie jar and a browser's requests (no redirects followed)."""

    def __init__(self, server):
        self.s = server
        self.cookies = {}

    def req(self, method, path, body=None, headers=None, form=None):
        c = http.client.HTTPConnection("127.0.0.1", self.s.port, timeout=60)
        h = dict(headers or {})
        if form is not None:
            body = urllib.parse.urlencode(form)
            h.setdefault("Content-Type", "application/x-www-form-urlencoded")
        if self.cookies:
            h["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        r.raw_body = r.read()
        r.text = r.raw_body.decode("utf-8", "replace")
        for sc in r.headers.get_all("Set-Cookie") or []:
            name, _, rest = sc.partition("=")
            self.cookies[name] = rest.split(";", 1)[0]
        c.close()
        return r

    def csrf(self, path="/dashboard"):
        m = re.search(r'name="csrf" value="([0-9a-f]+)"', self.req("GET", path).text)
        return m.group(1) if m else ""

    def post(self, path, form, origin=True, headers=None):
        h = {"Origin": self.s.origin} if origin else {}
        h.update(headers or {})
        return self.req("POST", path, form=form, headers=h)

    def join(self, email, password="correct horse battery"):
        self.post("/signup", {"email": email, "password": password, "csrf": self.csrf("/signup")})
        r = self.post("/login", {"email": email, "password": password, "csrf": self.csrf("/login")})
        check(f"{email} logs in", r.status == 303, r.status)
        r = self.post("/dashboard/keys", {"name": "k", "csrf": self.csrf("/dashboard/keys")})
        m = re.search(r'<output id="new-key">(aas_sk_[A-Za-z0-9]+)</output>', r.text)
        return m.group(1) if m else ""


def api(server, method, path, key, body=None, raw=False):
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    h = {"Authorization": f"Bearer {key}"}
    if body is not None and not raw:
        body = json.dumps(body)
        h["Content-Type"] = "application/json"
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    r.raw_body = r.read()
    c.close()
    return r


def multipart(fields, boundary="----aasTestBoundary7MA4YWxk"):
    """fields: (name, value bytes, filename or None), in order."""
    out = b""
    for name, value, filename in fields:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        out += f"--{boundary}\r\nContent-Disposition: {disp}\r\n".encode()
        if filename is not None:
            out += b"Content-Type: application/octet-stream\r\n"
        out += b"\r\n" + value + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return out, f"multipart/form-data; boundary={boundary}"


def upload(b, sid, fields, origin=True):
    body, ct = multipart(fields)
    h = {"Content-Type": ct}
    if origin:
        h["Origin"] = b.s.origin
    return b.req("POST", f"/dashboard/sandboxes/{sid}/files/upload", body=body, headers=h)


def ws_open(b, path, origin, cookies=True):
    """A WebSocket handshake with the browser's cookie; (status, socket or None, the head's rest)."""
    sock = socket.create_connection(("127.0.0.1", b.s.port), timeout=30)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{b.s.port}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
    if origin:
        lines.append(f"Origin: {origin}")
    if cookies and b.cookies:
        lines.append("Cookie: " + "; ".join(f"{k}={v}" for k, v in b.cookies.items()))
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0
    if status != 101:
        sock.close()
        return status, None, b""
    return status, sock, head.split(b"\r\n\r\n", 1)[1]


def ws_send(sock, data, opcode=2):
    mask = os.urandom(4)
    head = bytes([0x80 | opcode])
    n = len(data)
    head += bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big")
    sock.sendall(head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(data)))


def ws_read_until(sock, buf, text, timeout=20):
    """Read frames until their payloads hold text; the payloads so far."""
    out = b""
    sock.settimeout(timeout)
    deadline = time.time() + timeout
    while text.encode() not in out and time.time() < deadline:
        while len(buf) >= 2:
            n = buf[1] & 0x7f
            off = 2
            if n == 126:
                if len(buf) < 4:
                    break
                n, off = int.from_bytes(buf[2:4], "big"), 4
            elif n == 127:
                if len(buf) < 10:
                    break
                n, off = int.from_bytes(buf[2:10], "big"), 10
            if len(buf) < off + n:
                break
            out += buf[off:off + n]
            buf = buf[off + n:]
        if text.encode() in out:
            break
        try:
            chunk = sock.recv(4096)
        except socket.timeout:
            break
        if not chunk:
            break
        buf += chunk
    return out


def main():
    s = Server("--signup", "open")
    a, z = Browser(s), Browser(s)
    akey, zkey = a.join("a@example.org"), z.join("z@example.org")
    check("keys made on the page", akey and zkey)
    r = api(s, "POST", "/v1/sandboxes", akey, {})
    sid = json.loads(r.raw_body).get("id", "")
    check("a sandbox through the API", r.status == 201 and sid, r.raw_body[:300])
    page = f"/dashboard/sandboxes/{sid}"

    # The page: its sections.
    r = a.req("GET", page)
    check("the page answers", r.status == 200, r.status)
    for marker in ('id="terminal-section"', 'id="files"', 'id="file-list"', 'id="previews"', 'id="use-live"',
                   'href="/static/sandbox.css"', 'enctype="multipart/form-data"', "Recent executions"):
        check(f"the page has {marker}", marker in r.text, r.text[:400])
    check("the terminal is there, or the page says it is unavailable",
          ('id="terminal"' in r.text and f'data-ws="{page}/pty"' in r.text) or 'id="terminal-unavailable"' in r.text)
    check("no inline script", re.search(r"<script(?![^>]*\bsrc=)", r.text) is None)
    home = a.req("GET", "/dashboard").getheader("Content-Security-Policy")
    check("the page's CSP is every page's: no inline style, even for its terminal",
          r.getheader("Content-Security-Policy") == home and "unsafe-inline" not in home and "style-src 'self';" in home,
          (r.getheader("Content-Security-Policy"), home))
    csrf = a.csrf(page)
    zcsrf = z.csrf("/dashboard")

    # Make a directory: the token and the origin, a plain name only.
    mk = f"{page}/files/mkdir"
    r = a.post(mk, {"dir": "/workspace", "name": "made"})
    check("mkdir without the token: 403", r.status == 403, r.status)
    r = a.post(mk, {"dir": "/workspace", "name": "made", "csrf": csrf}, origin=False,
               headers={"Origin": "http://evil.example"})
    check("mkdir from another origin: 403", r.status == 403, r.status)
    for bad in ("..", ".", "a/b", "", "x" * 256):
        r = a.post(mk, {"dir": "/workspace", "name": bad, "csrf": csrf})
        check(f"mkdir of the name {bad[:10]!r}: 400", r.status == 400, r.status)
    r = a.post(mk, {"dir": "/workspace", "name": "made <&\"'>", "csrf": csrf})
    check("mkdir: 303 back to the listing", r.status == 303 and
          r.getheader("Location") == f"{page}?dir=/workspace#files", (r.status, r.getheader("Location")))
    r = a.req("GET", f"{page}?dir=/workspace")
    check("the listing shows the directory, its name escaped", "made &lt;&amp;&quot;&#39;&gt;/" in r.text or
          "made &lt;&amp;&quot;&#x27;&gt;/" in r.text, re.findall(r'class="dir"[^<]*<', r.text))
    check("no name unescaped", "made <&" not in r.text)
    check("its link is percent-encoded", "?dir=/workspace/made%20%3C%26%22%27%3E#files" in r.text)
    r = a.req("GET", f"{page}?dir=/workspace/made%20%3C%26%22%27%3E")
    check("the directory lists (empty)", r.status == 200 and 'id="no-files"' in r.text, r.text[-800:])

    # Upload: multipart, the token first, a plain file name.
    data = bytes(range(256)) * 300 + b"\r\n--not-a-boundary\r\n" + os.urandom(70000)
    r = upload(a, sid, [("dir", b"/workspace", None), ("file", data, "up.bin")])
    check("upload without the token: 403", r.status == 403, r.status)
    r = upload(a, sid, [("csrf", b"0" * 64, None), ("dir", b"/workspace", None), ("file", data, "up.bin")])
    check("upload with a wrong token: 403", r.status == 403, r.status)
    r = upload(a, sid, [("dir", b"/workspace", None), ("file", data, "up.bin"), ("csrf", csrf.encode(), None)])
    check("upload with the token after the file: 403", r.status == 403, r.status)
    r = upload(a, sid, [("csrf", csrf.encode(), None), ("dir", b"/workspace", None), ("file", data, "up.bin")],
               origin=False)
    check("upload without an Origin but with the token (an old browser): taken", r.status == 303, r.status)
    body, ct = multipart([("csrf", csrf.encode(), None), ("dir", b"/workspace", None), ("file", b"x", "o.bin")])
    r = a.req("POST", f"{page}/files/upload", body=body, headers={"Content-Type": ct, "Origin": "http://evil.example"})
    check("upload from another origin: 403", r.status == 403, r.status)
    for bad in ("../evil", "..", "a/b", ""):
        r = upload(a, sid, [("csrf", csrf.encode(), None), ("dir", b"/workspace", None), ("file", b"x", bad)])
        check(f"upload of the file name {bad!r}: 400", r.status == 400, r.status)
    r = api(s, "GET", "/v1/sandboxes/%s/files?path=/evil" % sid, akey)
    check("... and nothing was written outside", r.status == 404, r.status)
    # Where the file goes and where the reply sends the browser are one directory, whatever the order.
    r = upload(a, sid, [("csrf", csrf.encode(), None), ("dir", b"/workspace", None), ("dir", b"/tmp", None),
                        ("file", b"x", "twice.bin")])
    check("upload naming its directory twice: 400", r.status == 400 and "names its directory once" in r.text,
          (r.status, r.text[-300:]))
    for where in ("/workspace/twice.bin", "/tmp/twice.bin"):
        check(f"... and nothing written ({where})", api(s, "GET", f"/v1/sandboxes/{sid}/files?path={where}",
                                                        akey).status == 404)
    r = upload(a, sid, [("csrf", csrf.encode(), None), ("dir", b"/workspace", None), ("file", b"y", "late.bin"),
                        ("dir", b"/tmp", None)])
    check("upload with a dir after its file: 400, saying where the file went",
          r.status == 400 and "came after it" in r.text and r.getheader("Location") is None, (r.status, r.text[-300:]))
    check("... the file is in the directory named before it", api(s, "GET", f"/v1/sandboxes/{sid}/files?path=/workspace/"
                                                                  "late.bin", akey).raw_body == b"y")
    api(s, "DELETE", f"/v1/sandboxes/{sid}/files?path=/workspace/late.bin", akey)
    r = a.req("POST", f"{page}/files/upload", body=b"csrf=" + csrf.encode(),
              headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": s.origin})
    check("upload of another media type: 415", r.status == 415, r.status)
    r = upload(a, sid, [("csrf", csrf.encode(), None), ("dir", b"/workspace", None), ("file", data, "up.bin")])
    check("upload: 303 back to the listing", r.status == 303 and
          r.getheader("Location") == f"{page}?dir=/workspace#files", (r.status, r.getheader("Location")))
    r = api(s, "GET", f"/v1/sandboxes/{sid}/files?path=/workspace/up.bin", akey)
    check("the uploaded bytes are the file's, through the API", r.status == 200 and r.raw_body == data,
          (r.status, len(r.raw_body), len(data)))
    r = a.req("GET", f"{page}?dir=/workspace")
    check("the listing shows the file and its size", "up.bin" in r.text and f"{len(data)} B" in r.text)

    # Download: the same bytes, as an attachment.
    r = a.req("GET", f"{page}/files/download?path=/workspace/up.bin")
    check("download: the same bytes", r.status == 200 and r.raw_body == data, (r.status, len(r.raw_body)))
    check("download: an attachment named for the file",
          r.getheader("Content-Disposition") == "attachment; filename*=UTF-8''up.bin", r.getheader("Content-Disposition"))
    check("download: nosniff", r.getheader("X-Content-Type-Options") == "nosniff")
    # Paths are the library's to refuse, as for the API: the same answer both ways.
    for path in ("/workspace/nope", "/workspace/made%20%3C%26%22%27%3E", "rel%01ative", "%2F" + "x" * 5000,
                 "/workspace/" + "y" * 300):
        d = a.req("GET", f"{page}/files/download?path={path}")
        v = api(s, "GET", f"/v1/sandboxes/{sid}/files?path={path}", akey)
        check(f"download of {path[:30]!r}: refused as the API refuses it ({v.status})",
              d.status == v.status and d.status >= 400, (d.status, v.status))
    r = a.req("GET", f"{page}/files/download")
    check("download without a path: 400", r.status == 400, r.status)

    # Delete.
    dl = f"{page}/files/delete"
    r = a.post(dl, {"dir": "/workspace", "path": "/workspace/up.bin"})
    check("delete without the token: 403", r.status == 403, r.status)
    r = a.post(dl, {"dir": "/workspace", "path": "/workspace/up.bin", "csrf": csrf}, origin=False,
               headers={"Sec-Fetch-Site": "cross-site"})
    check("delete from another site: 403", r.status == 403, r.status)
    r = a.post(dl, {"dir": "/workspace", "path": "/workspace/up.bin", "csrf": csrf})
    check("delete: 303", r.status == 303, r.status)
    r = api(s, "GET", f"/v1/sandboxes/{sid}/files?path=/workspace/up.bin", akey)
    check("the file is gone", r.status == 404, r.status)

    # The Use section alone, for use.js.
    r = a.req("GET", f"{page}/use")
    check("the Use fragment", r.status == 200 and ('id="cpu-chart"' in r.text or 'id="no-metrics"' in r.text)
          and "<html" not in r.text, r.text[:300])

    # The terminal: the session's cookie, this server's origin exactly, the token in the URL.
    pty = f"{page}/pty?csrf={csrf}"
    st, _, _ = ws_open(a, pty, "http://evil.example")
    check("terminal from another origin: 403", st == 403, st)
    st, _, _ = ws_open(a, pty, f"http://localhost:{s.port}")
    check("terminal from another origin of this host: 403", st == 403, st)
    st, _, _ = ws_open(a, pty, None)
    check("terminal without an Origin: 403", st == 403, st)
    st, _, _ = ws_open(a, f"{page}/pty?csrf={'0' * 64}", s.origin)
    check("terminal with a wrong token: 403", st == 403, st)
    st, _, _ = ws_open(a, f"{page}/pty", s.origin)
    check("terminal without a token: 403", st == 403, st)
    st, _, _ = ws_open(a, pty, s.origin, cookies=False)
    check("terminal without a session: 401", st == 401, st)
    st, sock, rest = ws_open(a, pty + "&cols=100&rows=30", s.origin)
    check("terminal with the session: 101", st == 101, st)
    if sock:
        out = ws_read_until(sock, rest, "fake-shell")
        check("the shell greets with the size asked", b"fake-shell xterm-256color 100x30 tty" in out, out)
        ws_send(sock, b"echo hi\r")
        out = ws_read_until(sock, b"", "echo hi")
        check("keystrokes reach the shell and come back", b"echo hi" in out, out)
        sock.close()

    # An execution's page: its command and output, escaped; cut at 64 KiB a stream; linked from the history.
    hostile = "echo <script>alert(1)</script> & \"q' </pre>"
    r = api(s, "POST", f"/v1/sandboxes/{sid}/exec", akey, {"command": hostile})
    ex = json.loads(r.raw_body)
    eid = ex.get("execution_id", "")
    check("a hostile command through the API", r.status == 200 and eid, r.raw_body[:300])
    epage = f"{page}/executions/{eid}"
    r = a.req("GET", page)
    check("the history links to the execution's page", f'href="{epage}"' in r.text)
    r = a.req("GET", epage)
    check("the execution's page answers", r.status == 200, r.status)
    check("its command and output are escaped", "<script>alert" not in r.text and "</pre>\n" not in r.text and
          r.text.count("echo &lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&#39; &lt;/pre&gt;") == 1 and
          '<pre id="stdout" class="output" tabindex="0">&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&#39; '
          '&lt;/pre&gt;\n</pre>' in r.text, r.text[-1500:])
    check("it says how the command ended", 'data-status="exited"' in r.text and
          '<dd class="exit-code">0</dd>' in r.text and 'id="no-stderr"' in r.text, r.text[-1500:])
    check("no inline script on it", re.search(r"<script(?![^>]*\bsrc=)", r.text) is None)
    check("an ended one neither follows nor offers to reload", "execution.js" not in r.text and
          'id="execution-reload"' not in r.text and 'id="execution-live"' in r.text)
    r = api(s, "POST", f"/v1/sandboxes/{sid}/exec", akey, {"command": "spew 70000"})
    big = json.loads(r.raw_body).get("execution_id", "")
    r = a.req("GET", f"{page}/executions/{big}")
    shown = re.search(r'<pre id="stdout"[^>]*>(x*)</pre>', r.text)
    check("a long output: its first 64 KiB, and the page says so", shown and len(shown.group(1)) == 65536 and
          'id="stdout-cut"' in r.text and "The first 65536 bytes of 70000" in r.text and 'id="stderr-cut"' in r.text,
          (len(shown.group(1)) if shown else None, r.text[-600:]))
    r = api(s, "POST", f"/v1/sandboxes/{sid}/exec", akey, {"command": "tick", "background": True})
    run = json.loads(r.raw_body).get("execution_id", "")
    check("a command left running", r.status in (200, 201, 202) and run, r.raw_body[:300])
    body = ""
    for _ in range(100):
        body = a.req("GET", f"{page}/executions/{run}").text
        if "tick\n</pre>" in body:
            break
        time.sleep(0.05)
    check("a running one shows what it has so far", 'data-status="running"' in body and "tick\n</pre>" in body and
          "Still running" in body, body[-800:])
    check("... follows it with a script, and a link reloads it without one",
          '<script src="/static/execution.js" defer></script>' in body and 'id="execution-live"' in body and
          f'<a id="execution-reload" href="{page}/executions/{run}">reload</a>' in body, body[-800:])
    r = a.req("GET", "/static/execution.js")
    check("the script is served", r.status == 200 and "execution-live" in r.text, r.status)
    r = a.req("GET", page)
    check("the running table links to it", f'href="{page}/executions/{run}"' in r.text)
    api(s, "POST", f"/v1/executions/{run}/cancel", akey)
    for _ in range(100):
        body = a.req("GET", f"{page}/executions/{run}").text
        if 'data-status="running"' not in body:
            break
        time.sleep(0.05)
    check("once it has ended, its page stops following it", 'data-status="running"' not in body and
          "execution.js" not in body, body[-800:])
    for bad in ("exe-nope", "x" * 300, "%2e%2e"):
        r = a.req("GET", f"{page}/executions/{bad}")
        check(f"the execution {bad[:10]!r}: 404", r.status == 404, r.status)
    r2 = api(s, "POST", "/v1/sandboxes", akey, {})
    other = json.loads(r2.raw_body).get("id", "")
    r = a.req("GET", f"/dashboard/sandboxes/{other}/executions/{eid}")
    check("an execution under another of one's sandboxes: 404", r.status == 404, r.status)
    r = z.req("GET", epage)
    check("another's execution: 404", r.status == 404 and "alert(1)" not in r.text, r.status)

    # Another account's sandbox: 404 everywhere.
    r = z.req("GET", page)
    check("another's sandbox: the page is a 404", r.status == 404, r.status)
    r = z.req("GET", f"{page}/use")
    check("another's sandbox: use is a 404", r.status == 404, r.status)
    r = z.req("GET", f"{page}/files/download?path=/workspace/made")
    check("another's sandbox: download is a 404", r.status == 404, r.status)
    r = z.post(mk, {"dir": "/workspace", "name": "theirs", "csrf": zcsrf})
    check("another's sandbox: mkdir is a 404", r.status == 404, r.status)
    r = z.post(dl, {"dir": "/workspace", "path": "/workspace/made", "csrf": zcsrf})
    check("another's sandbox: delete is a 404", r.status == 404, r.status)
    r = upload(z, sid, [("csrf", zcsrf.encode(), None), ("dir", b"/workspace", None), ("file", b"x", "t.bin")])
    check("another's sandbox: upload is a 404", r.status == 404, r.status)
    st, _, _ = ws_open(z, f"{page}/pty?csrf={zcsrf}", s.origin)
    check("another's sandbox: the terminal is a 404", st == 404, st)
    r = api(s, "GET", f"/v1/sandboxes/{sid}/files?list=true&path=/workspace", akey)
    names = [e["path"] for e in json.loads(r.raw_body).get("entries", [])] if r.status == 200 else []
    check("... and nothing of theirs was made", "/workspace/theirs" not in names and "/workspace/t.bin" not in names,
          names)
    s.stop()


def says_when(r):
    """A refusal for now: Retry-After, and the page says in words as many seconds (test_dashboard.py's rule)."""
    secs = int(r.headers.get("Retry-After") or "0")
    if secs <= 0:
        return False
    words = (f"Try again in {secs} second{'' if secs == 1 else 's'}." if secs < 120 else
             f"Try again in {(secs + 59) // 60} minutes.")
    return words in r.text and 'role="alert"' in r.text


def hold_transfer(s, key, sid):
    """A REST upload that sent part of its body and waits: it holds one of the account's transfer slots."""
    c = socket.create_connection(("127.0.0.1", s.port), timeout=30)
    c.sendall((f"PUT /v1/sandboxes/{sid}/files?path=/workspace/slow.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               f"Authorization: Bearer {key}\r\nContent-Type: application/octet-stream\r\n"
               f"Content-Length: 100000\r\n\r\n").encode() + b"x" * 1000)
    return c


def busy_actions():
    """The sandbox's actions refused for now (its account's one transfer slot held) say when to try again."""
    s = Server("--signup", "open", "--max-transfers", "1", name="busy")
    a = Browser(s)
    key = a.join("busy@example.org")
    r = api(s, "POST", "/v1/sandboxes", key, {})
    sid = json.loads(r.raw_body).get("id", "")
    check("busy: a sandbox", r.status == 201 and sid, r.raw_body[:300])
    page = f"/dashboard/sandboxes/{sid}"
    csrf = a.csrf(page)
    held = hold_transfer(s, key, sid)
    try:
        # The slot is taken once the upload's thread starts: wait for the first refusal, not a time.
        for _ in range(100):
            r = a.post(f"{page}/files/mkdir", {"csrf": csrf, "dir": "/workspace", "name": "later"})
            if r.status != 303:
                break
            time.sleep(0.05)
        check("busy: mkdir refused for now is 429 with Retry-After", r.status == 429 and r.headers.get("Retry-After"),
              (r.status, r.headers.get("Retry-After")))
        check("busy: ... and its page says when to try again, in words", says_when(r), r.text[-600:])
        check("busy: ... naming the limit", "max_transfers" in r.text, r.text[-600:])
        r = a.post(f"{page}/files/delete", {"csrf": csrf, "path": "/workspace/later"})
        check("busy: delete too (429, when in words)", r.status == 429 and says_when(r), (r.status, r.text[-400:]))
        r = upload(a, sid, [("csrf", csrf.encode(), None), ("dir", b"/workspace", None), ("file", b"y", "u.bin")])
        check("busy: upload too (429, when in words)", r.status == 429 and says_when(r), (r.status, r.text[-400:]))
        r = a.req("GET", f"{page}/files/download?path=/workspace/u.bin")
        check("busy: download too, as a page (429, when in words)",
              r.status == 429 and says_when(r) and r.headers.get("Content-Type", "").startswith("text/html"),
              (r.status, r.headers.get("Content-Type"), r.text[-400:]))
    finally:
        held.close()
    # The slot comes back once the held upload's connection is gone; then the same action is taken.
    for _ in range(100):
        r = a.post(f"{page}/files/mkdir", {"csrf": csrf, "dir": "/workspace", "name": "later"})
        if r.status != 429:
            break
        time.sleep(0.05)
    check("busy: after the transfer ended, mkdir is taken", r.status == 303, (r.status, r.text[-400:]))
    s.stop()

    # Past the address's rate, a page (not the API's JSON) says when to come back.
    s = Server("--signup", "open", name="rate", rate="1")
    b = Browser(s)
    codes = [b.req("GET", "/login") for _ in range(6)]
    refused = [r for r in codes if r.status == 429]
    check("rate: pages past the address's rate are refused (429)", refused, [r.status for r in codes])
    check("rate: ... as a page saying when, in words and Retry-After",
          refused and all(says_when(r) and r.headers.get("Content-Type", "").startswith("text/html") for r in refused),
          refused and (refused[0].headers.get("Content-Type"), refused[0].text[-400:]))
    s.stop()


try:
    main()
    busy_actions()
finally:
    for name in ("server", "busy", "rate"):
        log = os.path.join(WORK, name + ".log")
        if FAILS and os.path.exists(log):
            print(f"---- {name} log (tail) ----")
            print("".join(open(log).readlines()[-40:]))
    shutil.rmtree(WORK, ignore_errors=True)

print(f"{CHECKS[0]} checks, {len(FAILS)} failed")
sys.exit(1 if FAILS else 0)
