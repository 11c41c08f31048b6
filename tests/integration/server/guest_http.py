#!/usr/bin/env python3
"""A guest's web server for the preview proxy tests (the fake driver's port N is the host's
127.0.0.1:N). usage: guest_http.py PORT

  /headers   the request's headers, one "Name: value" a line
  /cookies   Set-Cookie for the preview's own host, for no domain, and for the domains above it
  /hang      reads the request and never answers
  /stall     sends a head and part of the body, then nothing
  /raw/NAME  writes RAW[NAME] as is (bytes a hand-written server or a CGI script might send), then closes
  anything   "port PORT"
"""
import http.server
import socketserver
import sys
import time

PORT = int(sys.argv[1])

# Answers written byte for byte: what browsers and curl read, and what nobody should.
RAW = {
    "bare-lf": b"HTTP/1.1 200 OK\nContent-Type: text/plain\nX-Bare: lf\nContent-Length: 8\n\nbare lf\n",
    "folded": b"HTTP/1.0 200 OK\r\nX-Folded: one\r\n two\r\nX-Spaced : yes\r\nno colon line\r\n\r\nfolded\n",
    "chunked": b"HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n7;ext=1\r\nchunked\r\n1\n\n\n0\r\nTrailer: t\r\n\r\n",
    "interim": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\nLink: </a>\n\nHTTP/1.1 201 Created\nContent-Length: 7\n\ncreated",
    "no-reason": b"HTTP/1.1 202\r\nContent-Length: 3\r\n\r\nyes",
    "cl-te": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "cl-cl": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "bare-cr": b"HTTP/1.1 200 OK\r\nX-A: a\rX-B: b\r\nContent-Length: 2\r\n\r\nhi",
    "nul": b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nhi",
    "bad-chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nmore\r\n0\r\n\r\n",
    "gzip-te": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx",
}


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
        if self.path.startswith("/raw/") and self.path[5:] in RAW:
            self.wfile.write(RAW[self.path[5:]])
            self.close_connection = True
            return
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
