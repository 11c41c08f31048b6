#!/usr/bin/env python3
"""A guest's web server for the preview proxy tests (the fake driver's port N is the host's
127.0.0.1:N). usage: guest_http.py PORT

  /headers   the request's headers, one "Name: value" a line
  /cookies   Set-Cookie for the preview's own host, for no domain, and for the domains above it
  /hang      reads the request and never answers
  /stall     sends a head and part of the body, then nothing
  anything   "port PORT"
"""
import http.server
import socketserver
import sys
import time

PORT = int(sys.argv[1])


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def answer(self, body, cookies=()):
        data = body.encode()
        self.send_response(200)
        for c in cookies:
            self.send_header("Set-Cookie", c)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/hang":
            time.sleep(3600)
            return
        if self.path == "/stall":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"part")
            self.wfile.flush()
            time.sleep(3600)
            return
        if self.path == "/headers":
            self.answer("".join("%s: %s\n" % (k, v) for k, v in self.headers.items()))
            return
        if self.path == "/cookies":
            host = self.headers.get("X-Forwarded-Host", "").split(":")[0]
            self.answer("cookies\n", [
                "own=1; Path=/",
                "ownhost=1; Domain=%s; Path=/" % host,
                "parent=1; Domain=localhost; Path=/",
                "dotparent=1; Path=/; Domain=.LocalHost",
                "sibling=1; Domain=aaaaaaaaaaaaaaaaaaaaaaaaaa.localhost",
            ])
            return
        self.answer("port %d\n" % PORT)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


Server(("127.0.0.1", PORT), Handler).serve_forever()
