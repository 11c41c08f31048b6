#!/usr/bin/env python3
"""Slow and idle HTTP clients, and a guest server that never answers, for the
connection-policy tests (test_conn.sh). Loopback only; every loop is bounded.

  slowclients.py hold SRC PORT N MODE STATE [SECONDS]
      Open N connections from address SRC to 127.0.0.1:PORT and keep each
      one busy the slow way: MODE "idle" sends nothing, "headers" trickles a
      request's headers, "body" sends whole headers and trickles the body.
      Writes "opened" to STATE once every connection was tried, then
      "closed C of N" when all are closed by the server, or after SECONDS
      (default 60) with the count closed so far. Exits 0 either way.

  slowclients.py blackhole STATE
      Listen on a free loopback port, write it to STATE, accept connections
      and never answer; each accept appends a line to STATE.accepted.
"""
import os
import select
import socket
import sys
import time

TRICKLE_EVERY = 0.3  # seconds between the bytes of a trickle


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, path)


def hold(src, port, n, mode, state, seconds):
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((src, 0))
        try:
            s.connect(("127.0.0.1", port))
            if mode == "headers":
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            elif mode == "body":
                s.sendall(b"POST /v1/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 60000\r\n\r\n{")
        except OSError:
            s.close()
            continue
        socks.append(s)
    write(state, "opened")
    open_ = set(socks)
    closed = n - len(socks)
    deadline = time.monotonic() + seconds
    while open_ and time.monotonic() < deadline:
        readable, _, _ = select.select(list(open_), [], [], TRICKLE_EVERY)
        for s in readable:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                open_.discard(s)
                closed += 1
                s.close()
        for s in list(open_):
            if mode == "idle":
                continue
            try:
                s.send(b"X" if mode == "headers" else b" ")
            except OSError:
                open_.discard(s)
                closed += 1
                s.close()
    write(state, "closed %d of %d" % (closed, n))
    for s in open_:
        s.close()


def blackhole(state):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    write(state, str(srv.getsockname()[1]))
    held = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        readable, _, _ = select.select([srv], [], [], 1.0)
        if readable:
            c, _ = srv.accept()
            held.append(c)
            with open(state + ".accepted", "a") as f:
                f.write("1\n")


def main():
    if len(sys.argv) >= 6 and sys.argv[1] == "hold":
        hold(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6],
             float(sys.argv[7]) if len(sys.argv) > 7 else 60.0)
    elif len(sys.argv) == 3 and sys.argv[1] == "blackhole":
        blackhole(sys.argv[2])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
