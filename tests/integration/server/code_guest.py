#!/usr/bin/env python3
"""A TEST DOUBLE of a sandbox's code server, not the real one (that is the
guest's, images/guest/aas-code): it speaks E2B's code-interpreter wire
(docs/e2b-wire.md section 4) with canned answers chosen by the code sent, so
that the server tests reach every path without a VM or a kernel. Some of its
answers are hostile on purpose (bad JSON, a hang, no end_of_execution).

usage: code_guest.py PORTFILE    (listens on 127.0.0.1, a free port, written to PORTFILE)

The code names the answer:
  "x = N"   remembers N in the context;  "x"  gives it back as the main result
  "print S" stdout S                    "chart"  a PNG result (a real 1x1 PNG)
  "boom"    an error with a traceback  "table"  HTML, text and data results
  "hang"    stdout "tick", then silence until the client hangs up (an interrupt)
  "ticking" stdout "tick" every 0.1 s until the client hangs up (an interrupt)
  "garbage" a line that is not JSON     "noend"  no end_of_execution
  "interrupts"  stdout: how many "hang" runs were hung up on so far
  "cut"     stdout, then the notices of a guest that cut the run's output and results
  "toomany" a 409, the real server's answer past its --max-contexts
Anything else: its text as the main result.
GET /interrupts: how many runs a client hung up on, {"all": N, "ticking": N}.
"""
import base64
import json
import sys
import threading
import time
import uuid
import zlib
import struct
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def png_1x1():
    def chunk(kind, data):
        c = kind + data
        return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xFFFFFFFF)
    raw = b"\x00\xff\x00\x00"
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


CONTEXTS = {}       # id -> {"id","language","cwd","vars"}
DEFAULTS = {}       # language -> context
LOCK = threading.Lock()
COUNT = [0]
INTERRUPTS = [0, 0]  # all, "ticking"


def context_for(body):
    with LOCK:
        if body.get("context_id"):
            return CONTEXTS.get(body["context_id"])
        lang = body.get("language") or "python"
        if lang not in DEFAULTS:
            DEFAULTS[lang] = {"id": "default-" + lang, "language": lang, "cwd": "/workspace", "vars": {}}
        return DEFAULTS[lang]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw) if raw else {}

    def reply(self, status, obj=None, text=None):
        data = text.encode() if text is not None else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if text is not None else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.split("?")[0] == "/health":
            return self.reply(200, "OK")
        if self.path.split("?")[0] == "/interrupts":
            with LOCK:
                return self.reply(200, {"all": INTERRUPTS[0], "ticking": INTERRUPTS[1]})
        if self.path.split("?")[0] == "/contexts":
            with LOCK:
                return self.reply(200, [{k: c[k] for k in ("id", "language", "cwd")} for c in CONTEXTS.values()])
        self.reply(404, text="Not Found")

    def do_POST(self):
        path = self.path.split("?")[0]
        body = self.body()
        if path == "/contexts":
            cid = uuid.uuid4().hex[:12]
            c = {"id": cid, "language": body.get("language") or "python", "cwd": body.get("cwd") or "/home/user",
                 "vars": {}}
            with LOCK:
                CONTEXTS[cid] = c
            return self.reply(200, {k: c[k] for k in ("id", "language", "cwd")})
        if path.startswith("/contexts/") and path.endswith("/restart"):
            cid = path[len("/contexts/"):-len("/restart")]
            with LOCK:
                if cid not in CONTEXTS:
                    return self.reply(404, text="Context %s not found" % cid)
                CONTEXTS[cid]["vars"] = {}
            return self.reply(200, None)
        if path == "/execute":
            return self.execute(body)
        self.reply(404, text="Not Found")

    def do_DELETE(self):
        path = self.path.split("?")[0]
        cid = path[len("/contexts/"):] if path.startswith("/contexts/") else ""
        with LOCK:
            if cid not in CONTEXTS:
                return self.reply(404, text="Context %s not found" % cid)
            del CONTEXTS[cid]
        self.send_response(204)
        self.end_headers()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def line(self, obj):
        self.chunk(json.dumps(obj).encode() + b"\n")

    def execute(self, body):
        if body.get("context_id") and body.get("language"):
            return self.reply(400, text="Only one of context_id or language can be provided")
        ctx = context_for(body)
        if ctx is None:
            return self.reply(404, text="Context %s not found" % body.get("context_id"))
        code = body.get("code", "")
        if code == "toomany":
            return self.reply(409, text="too many contexts: at most 16 per sandbox; delete one first")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with LOCK:
            COUNT[0] += 1
            n = COUNT[0]
        ts = "2026-01-01T00:00:00Z"
        self.line({"type": "number_of_executions", "execution_count": n})
        if code == "garbage":
            self.chunk(b"this is not json\n")
        elif code == "hang":
            self.line({"type": "stdout", "text": "tick\n", "timestamp": ts})
            try:
                while self.rfile.read(1):
                    pass
            except OSError:
                pass
            with LOCK:
                INTERRUPTS[0] += 1
            return
        elif code == "interrupts":
            with LOCK:
                n = INTERRUPTS[0]
            self.line({"type": "stdout", "text": str(n), "timestamp": ts})
        elif code == "cut":
            self.line({"type": "stdout", "text": "a", "timestamp": ts})
            self.line({"type": "stderr", "text": "[aas-code: output cut]\n", "cut": "output", "timestamp": ts})
            self.line({"type": "stderr", "text": "[aas-code: results cut]\n", "cut": "results", "timestamp": ts})
        elif code == "ticking":
            try:
                while True:
                    self.line({"type": "stdout", "text": "tick\n", "timestamp": ts})
                    time.sleep(0.1)
            except OSError:
                pass
            with LOCK:
                INTERRUPTS[0] += 1
                INTERRUPTS[1] += 1
            return
        elif code.startswith("x = "):
            ctx["vars"]["x"] = code[4:]
        elif code == "x":
            if "x" in ctx["vars"]:
                self.line({"type": "result", "text": ctx["vars"]["x"], "is_main_result": True})
            else:
                self.line({"type": "error", "name": "NameError", "value": "name 'x' is not defined",
                           "traceback": "Traceback (most recent call last):\nNameError: name 'x' is not defined"})
        elif code.startswith("print "):
            self.line({"type": "stdout", "text": code[6:] + "\n", "timestamp": ts})
        elif code == "env":
            self.line({"type": "stdout", "text": json.dumps(body.get("env_vars") or {}), "timestamp": ts})
        elif code == "chart":
            self.line({"type": "result", "png": base64.b64encode(png_1x1()).decode(), "text": "<Figure>",
                       "is_main_result": False})
        elif code == "table":
            self.line({"type": "result", "text": "   a\n0  1", "html": "<table><tr><td>1</td></tr></table>",
                       "data": {"a": [1]}, "is_main_result": True})
        elif code == "boom":
            self.line({"type": "stderr", "text": "about to fail\n", "timestamp": ts})
            self.line({"type": "error", "name": "ValueError", "value": "boom",
                       "traceback": "Traceback (most recent call last):\n  File \"<cell>\", line 1\nValueError: boom"})
        elif code != "noend":
            self.line({"type": "result", "text": code, "is_main_result": True})
        self.line({"type": "keepalive"})
        if code != "noend":
            self.line({"type": "end_of_execution"})
        self.chunk(b"")


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    srv.serve_forever()


if __name__ == "__main__":
    main()
