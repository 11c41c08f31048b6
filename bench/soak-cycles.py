#!/usr/bin/env python3
"""The sandbox side of bench/soak: CYCLES create/exec/write/read/expose/destroy
cycles against aas-server at PARALLEL at once, over loopback, each worker on
one kept-alive connection. Prints one JSON object: cycle times, errors by
step, and the server's RSS once half of the cycles were done and at the end.

  soak-cycles.py BASE_URL KEY SERVER_PID CYCLES PARALLEL DEADLINE_S
"""
import http.client
import json
import sys
import threading
import time
import urllib.parse

STEPS = ("create", "exec", "write", "read", "expose", "destroy")
PAYLOAD = bytes(range(256)) * 16  # 4 KiB, every byte value


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Worker:
    def __init__(self, base, key):
        u = urllib.parse.urlsplit(base)
        self.host, self.port = u.hostname, u.port
        self.key = key
        self.conn = None

    def call(self, method, path, body=None, timeout=600):
        hdrs = {"Authorization": "Bearer " + self.key}
        if isinstance(body, dict):
            body = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
                self.conn.request(method, path, body=body, headers=hdrs)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (OSError, http.client.HTTPException):
                # A kept-alive connection the server closed: one fresh try.
                if self.conn:
                    self.conn.close()
                self.conn = None
                if attempt:
                    return 0, b""
        return 0, b""

    def cycle(self):
        """One cycle; returns the step that failed, or None."""
        st, body = self.call("POST", "/v1/sandboxes", {"size": "small", "timeout": 900})
        if st != 201:
            return "create", st, body
        sb = json.loads(body)["id"]
        failed = None
        try:
            st, body = self.call("POST", "/v1/sandboxes/%s/exec" % sb, {"command": "echo soak", "timeout": 60})
            if st != 200 or json.loads(body).get("stdout") != "soak\n":
                failed = failed or ("exec", st, body)
            st, body = self.call("PUT", "/v1/sandboxes/%s/files?path=soak.bin" % sb, PAYLOAD)
            if st != 200:
                failed = failed or ("write", st, body)
            st, body = self.call("GET", "/v1/sandboxes/%s/files?path=soak.bin" % sb)
            if st != 200 or body != PAYLOAD:
                failed = failed or ("read", st, body[:200])
            st, body = self.call("POST", "/v1/sandboxes/%s/ports" % sb, {"port": 8000})
            if st != 200:
                failed = failed or ("expose", st, body)
        finally:
            st, body = self.call("DELETE", "/v1/sandboxes/%s" % sb)
            if st not in (200, 204):
                failed = failed or ("destroy", st, body)
        return failed


def main():
    base, key, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cycles, parallel, deadline = int(sys.argv[4]), int(sys.argv[5]), time.monotonic() + float(sys.argv[6])
    lock = threading.Lock()
    state = {"next": 0, "done": 0, "times": [], "errors": {}, "samples": [], "rss_half_kib": None}

    def run():
        w = Worker(base, key)
        while time.monotonic() < deadline:
            with lock:
                if state["next"] >= cycles:
                    return
                state["next"] += 1
            t0 = time.monotonic()
            failed = w.cycle()
            dt = time.monotonic() - t0
            with lock:
                state["done"] += 1
                state["times"].append(dt)
                if failed:
                    step, st, body = failed
                    state["errors"][step] = state["errors"].get(step, 0) + 1
                    if len(state["samples"]) < 5:
                        state["samples"].append("%s: %s %s" % (step, st, body[:200].decode("utf-8", "replace")))
                if state["done"] == cycles // 2:
                    state["rss_half_kib"] = rss_kib(pid)

    t0 = time.monotonic()
    threads = [threading.Thread(target=run) for _ in range(parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    times = sorted(state["times"])

    def pct(p):
        return round(times[min(len(times) - 1, int(len(times) * p))] * 1000) if times else None

    print(json.dumps({
        "cycles": state["done"], "wanted": cycles, "parallel": parallel,
        "seconds": round(time.monotonic() - t0, 1),
        "cycle_p50_ms": pct(0.50), "cycle_p99_ms": pct(0.99),
        "errors": state["errors"], "error_samples": state["samples"],
        "rss_half_kib": state["rss_half_kib"], "rss_end_kib": rss_kib(pid),
    }))


if __name__ == "__main__":
    main()
