#!/usr/bin/env python3
"""Slow and idle HTTP clients, and a guest server that never answers, for the
connection-policy tests (test_conn.sh, test_idle.sh) and bench/server-bench --idle.
Loopback only; every loop is bounded.

  slowclients.py hold SRC PORT N MODE STATE [SECONDS]
      Open N connections from address SRC to 127.0.0.1:PORT and keep each
      one busy the slow way: MODE "idle" sends nothing, "headers" trickles a
      request's headers, "body" sends whole headers and trickles the body.
      Writes "opened" to STATE once every connection was tried, then
      "closed C of N" when all are closed by the server, or after SECONDS
      (default 60) with the count closed so far. Exits 0 either way.

  slowclients.py spread NADDR PER PORT MODE STATE [SECONDS [refill]]
      The same from many addresses: PER connections from each of NADDR
      loopback addresses 127.1.x.y (spread_address), NADDR * PER in all, so
      no one address meets the per-address cap. MODE as for hold, plus
      "partial" (a request line and a header, then nothing) and "mixed"
      (partial and headers, alternately). Writes "opened K of N" once every
      connection was tried (K held), then "closed C of N" as for hold. With
      "refill", every connection the server closes is opened again, and
      "held H of N, closed C" is written each second until SECONDS: what a
      client that wants to keep N held does (bench/server-bench --idle).
      Uses poll, not select: thousands of fds. The trickle's pace is
      SLOW_TRICKLE_EVERY seconds (default 0.3).

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


def spread_address(i):
    """The i-th client address: 127.1.0.1, ..., 127.1.0.250, 127.1.1.1, ... (all loopback)."""
    return "127.1.%d.%d" % (i // 250, i % 250 + 1)


PARTIAL = b"GET /v1/account HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def spread_open(src, port, mode):
    """One connection from src, its first bytes sent; None if the connect failed."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        if mode in ("partial", "headers"):
            s.sendall(PARTIAL)
        elif mode == "body":
            s.sendall(b"POST /v1/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 60000\r\n\r\n{")
    except OSError:
        s.close()
        return None
    s.setblocking(False)
    return s


def spread(naddr, per, port, mode, state, seconds, refill):
    # Each connection is one fd here: lift this process's own soft limit to its hard one.
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = naddr * per + 64
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard == resource.RLIM_INFINITY else min(hard, max(want, soft)), hard))
    every = float(os.environ.get("SLOW_TRICKLE_EVERY", "0.3"))
    n = naddr * per
    slots = []  # (src, mode) of each connection
    for i in range(n):
        m = mode if mode != "mixed" else ("partial" if i % 2 == 0 else "headers")
        slots.append((spread_address(i // per), m))
    socks = {}  # fd -> (socket, slot index)
    poller = select.poll()

    def open_slot(k):
        s = spread_open(slots[k][0], port, slots[k][1])
        if s is None:
            return False
        socks[s.fileno()] = (s, k)
        poller.register(s.fileno(), select.POLLIN)
        return True

    def close_fd(fd):
        s, k = socks.pop(fd)
        poller.unregister(fd)
        s.close()
        return k

    for k in range(n):
        open_slot(k)
    write(state, "opened %d of %d" % (len(socks), n))
    closed = n - len(socks)
    deadline = time.monotonic() + seconds
    next_trickle = next_report = time.monotonic()
    while (socks or refill) and time.monotonic() < deadline:
        for fd, _ in poller.poll(100):
            if fd not in socks:
                continue
            try:
                data = socks[fd][0].recv(4096)
            except OSError:
                data = b""
            if not data:
                k = close_fd(fd)
                closed += 1
                if refill:
                    open_slot(k)
        now = time.monotonic()
        if now >= next_trickle:
            next_trickle = now + every
            for fd in [fd for fd, (s, k) in socks.items() if slots[k][1] == "headers"]:
                try:
                    socks[fd][0].send(b"X")
                except OSError:
                    k = close_fd(fd)
                    closed += 1
                    if refill:
                        open_slot(k)
        if refill and now >= next_report:
            next_report = now + 1.0
            for k in set(range(n)) - {k for _, k in socks.values()}:
                open_slot(k)
            write(state, "held %d of %d, closed %d" % (len(socks), n, closed))
    if not refill:
        write(state, "closed %d of %d" % (closed, n))
    for fd in list(socks):
        close_fd(fd)


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
    elif len(sys.argv) >= 7 and sys.argv[1] == "spread":
        spread(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6],
               float(sys.argv[7]) if len(sys.argv) > 7 else 60.0, len(sys.argv) > 8 and sys.argv[8] == "refill")
    elif len(sys.argv) == 3 and sys.argv[1] == "blackhole":
        blackhole(sys.argv[2])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
