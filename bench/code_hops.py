# bench/code_hops.py: where a warm `1+1` goes inside the guest (code_bench's BENCH_CODE_HOPS; issue #33).
#
#   python3 code_hops.py N
#
# Run in a sandbox of an image with a code server (aas-code, docs/code.md), as the sandbox user,
# once its default Python context ran a few runs. Two ways to the same kernel, N runs each, in turn:
#   - HTTP: POST /execute `1+1` to the code server on 127.0.0.1:49999 (its whole run path but the engine
#     and the relay), timed from the request's first byte to the end_of_execution line;
#   - ZMQ: an execute_request `1+1` straight to the default context's kernel (its connection file
#     under /run/aas-code/kernels), as the code server sends it, timed to its idle status; its
#     messages' header dates (the guest's clock, one for all) split it:
#       to the kernel: the request's date -> execute_input's (ZeroMQ to the kernel, its dispatch,
#                      its busy status)
#       execution:     execute_input -> execute_result (IPython's run_cell: transform, compile,
#                      run, the displayhook's formatters)
#       after it:      execute_result -> the idle status (post-execute hooks, flushes, the reply)
#       back:          the idle's date -> this client has it (the kernel's IO thread, ZeroMQ, the
#                      client's receive and parse)
# Prints one line: "hops" and the p50 ms of http, zmq, to-kernel, execution, after, back.
import glob
import json
import os
import socket
import statistics
import sys
import time

from jupyter_client import BlockingKernelClient
from jupyter_client.jsonutil import parse_date


def http_run():
    body = json.dumps({"code": "1+1"}).encode()
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", 49999))
    s.sendall(b"POST /execute HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    got = b""
    while b"end_of_execution" not in got:
        data = s.recv(65536)
        if not data:
            raise SystemExit("the code server closed before the run's end: %r" % got[-200:])
        got += data
    t1 = time.perf_counter()
    s.close()
    if b'"text": "2"' not in got:
        raise SystemExit("no 2: %r" % got[-300:])
    return (t1 - t0) * 1000


def stamp(msg):
    d = msg["header"]["date"]
    return (parse_date(d) if isinstance(d, str) else d).timestamp()


def zmq_run(kc):
    t0 = time.perf_counter()
    msg_id = kc.execute("1+1", store_history=True, allow_stdin=False, stop_on_error=False)
    dates = {}
    while True:
        msg = kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "status" and msg["content"]["execution_state"] == "idle":
            back = time.time()
            dates["idle"] = stamp(msg)
            req = stamp({"header": msg["parent_header"]})  # the request's date, made in execute()
            break
        dates[kind] = stamp(msg)
    t1 = time.perf_counter()
    kc.get_shell_msg(timeout=30)
    return ((t1 - t0) * 1000, (dates["execute_input"] - req) * 1000,
            (dates["execute_result"] - dates["execute_input"]) * 1000,
            (dates["idle"] - dates["execute_result"]) * 1000, (back - dates["idle"]) * 1000)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    files = sorted(glob.glob("/run/aas-code/kernels/*/kernel.json"), key=os.path.getmtime)
    if not files:
        raise SystemExit("no kernel's connection file under /run/aas-code/kernels")
    kc = BlockingKernelClient()
    kc.load_connection_file(files[0])  # the oldest: the default Python context's, started first
    kc.start_channels(hb=False)
    kc.kernel_info()
    while kc.get_shell_msg(timeout=60)["msg_type"] != "kernel_info_reply":
        pass
    http, zmq = [], []
    for _ in range(2):  # this client's own first-time work, not timed
        http_run()
        zmq_run(kc)
    for _ in range(n):
        http.append(http_run())
        zmq.append(zmq_run(kc))
    kc.stop_channels()
    cols = [http] + [[z[i] for z in zmq] for i in range(5)]
    print("hops " + " ".join("%.1f" % statistics.median(c) for c in cols))


main()
