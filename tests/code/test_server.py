#!/usr/bin/python3
"""
The guest's code server (images/guest/aas-code) on the host, without VMs:
started on a free loopback port with small bounds, driven over its HTTP wire
(E2B's code interpreter, docs/e2b-wire.md section 4) as the engine and the
SDKs drive it. Run by Debian's /usr/bin/python3, which has the kernels'
packages (python3-ipykernel, python3-jupyter-client, python3-matplotlib,
python3-pandas); the JavaScript kernel needs `node` on PATH.
"""
import base64
import http.client
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "..", "..", "images", "guest", "aas-code", "aas-code")
MAX_OUTPUT = 200000
MAX_RESULT = 300000
MAX_ERROR = 100000
MAX_CONTEXTS = 4
# Seconds for a request's whole answer (a run streams keepalive lines while it lasts, so a read timeout
# alone never ends a hung one): a hang fails in this time, naming its request, not at ctest's 600 s.
# Generous: the longest run here takes a few seconds on a quiet machine.
REQUEST_TIMEOUT = 120


def die_with_test():
    """The server gets SIGKILL if this test ends without its tearDown (a timeout); its kernels go with it."""
    import ctypes
    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerCase(unittest.TestCase):
    """A code server of the class's own, warm (its tests share it)."""
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="aas-code-test-")
        cls.cwd = os.path.join(cls.tmp, "work")
        os.mkdir(cls.cwd)
        cls.port = free_port()
        cls.log = open(os.path.join(cls.tmp, "server.log"), "w+")
        cls.proc = subprocess.Popen(
            [sys.executable, SERVER, "--listen", f"127.0.0.1:{cls.port}", "--cwd", cls.cwd,
             "--runtime-dir", os.path.join(cls.tmp, "run"), "--max-output", str(MAX_OUTPUT),
             "--max-result", str(MAX_RESULT), "--max-error", str(MAX_ERROR), "--max-contexts", str(MAX_CONTEXTS)],
            stdout=cls.log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_test)
        deadline = time.monotonic() + 180
        while True:
            try:
                status, body = cls.request("GET", "/health")
                if status == 200:
                    assert json.loads(body) == "OK", body
                    break
                assert status == 503, (status, body)
            except OSError:
                pass
            if time.monotonic() > deadline or cls.proc.poll() is not None:
                cls.tearDownClass()
                raise RuntimeError("the code server did not get warm: " + cls.server_log())
            time.sleep(0.2)

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.terminate()
            try:
                cls.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(cls.proc.pid, 9)
                cls.proc.wait()
        cls.log.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def server_log(cls):
        cls.log.flush()
        cls.log.seek(0)
        return cls.log.read()[-3000:]

    @classmethod
    def hung(cls, what):
        """The failure of a request that got no whole answer within REQUEST_TIMEOUT: which, and the server's log."""
        return AssertionError(f"{what[:300]}: no whole answer in {REQUEST_TIMEOUT} s; the server's log:\n"
                              + cls.server_log())

    @classmethod
    def request(cls, method, path, body=None, raw=None):
        """One request, its whole answer within REQUEST_TIMEOUT (a run's keepalive lines do not extend it)."""
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        deadline = time.monotonic() + REQUEST_TIMEOUT
        conn = http.client.HTTPConnection("127.0.0.1", cls.port, timeout=REQUEST_TIMEOUT)
        try:
            conn.connect()
            sock = conn.sock  # the answer's reads go on on it after getresponse() hands it to the response
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
            r = conn.getresponse()
            got = []
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                sock.settimeout(left)
                chunk = r.read1(65536)
                if not chunk:
                    return r.status, b"".join(got).decode()
                got.append(chunk)
        except TimeoutError:
            raise cls.hung(f"{method} {path} {data or ''}") from None
        finally:
            conn.close()

    def run_then_close(self, body, marker):
        """POST /execute on a connection of its own, closed once marker shows in the answer (a client gone mid-run)."""
        deadline = time.monotonic() + REQUEST_TIMEOUT
        data = json.dumps(body)
        with socket.create_connection(("127.0.0.1", self.port), timeout=REQUEST_TIMEOUT) as s:
            s.sendall(f"POST /execute HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n{data}".encode())
            got = b""
            try:
                while marker not in got:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError
                    s.settimeout(left)
                    chunk = s.recv(4096)
                    self.assertTrue(chunk, got)
                    got += chunk
            except TimeoutError:
                raise self.hung(f"POST /execute {data} (until {marker!r})") from None

    def execute(self, code, **kw):
        """The run's lines, checked for E2B's framing: JSON lines, no blank one, end_of_execution last."""
        status, body = self.request("POST", "/execute", dict(code=code, **kw))
        self.assertEqual(status, 200, body)
        self.assertTrue(body.endswith("\n"), body[-200:])
        lines = body[:-1].split("\n")
        self.assertNotIn("", lines)
        msgs = [json.loads(line) for line in lines]
        self.assertEqual(msgs[-1], {"type": "end_of_execution"})
        return msgs[:-1]

    def main_text(self, msgs):
        results = [m for m in msgs if m["type"] == "result" and m["is_main_result"]]
        self.assertEqual(len(results), 1, msgs)
        return results[0].get("text")

    def new_context(self, **kw):
        status, body = self.request("POST", "/contexts", kw)
        self.assertEqual(status, 200, body)
        ctx = json.loads(body)
        self.assertEqual(set(ctx), {"id", "language", "cwd"})
        return ctx



class FreshContextWarm(ServerCase):
    """POST /warm, as the engine sends it to a spare: a fresh default context runs 1+1 and shows nothing of it."""

    def warm(self):
        status, body = self.request("POST", "/warm")
        self.assertEqual(status, 200, body)
        msgs = [json.loads(line) for line in body.splitlines()]
        self.assertEqual(msgs[-1], {"type": "end_of_execution"})
        self.assertEqual(self.main_text(msgs), "2")

    def test_warm_leaves_nothing(self):
        self.warm()
        self.warm()
        msgs = self.execute("(_, __, ___, dict(Out), sorted(k for k in dir() if k.startswith('_') and "
                            "k[1:].isdigit() or 'aas' in k), get_ipython().execution_count)")
        self.assertEqual(msgs[0], {"type": "number_of_executions", "execution_count": 1})
        self.assertEqual(self.main_text(msgs), "('', '', '', {}, [], 1)")
        # The context has run a client's code: a warm-up would now show, so there is none.
        status, body = self.request("POST", "/warm")
        self.assertEqual(status, 409, body)
        self.assertEqual(self.main_text(self.execute("_")), "('', '', '', {}, [], 1)")


def switches(pids):
    """Context switches (voluntary and not) of every thread of these processes and of their children, so far."""
    total = 0
    seen = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                            total += int(line.split()[1])
                try:
                    with open(f"/proc/{pid}/task/{tid}/children") as f:
                        todo += [int(c) for c in f.read().split()]
                except FileNotFoundError:
                    pass
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total, len(seen)


class IdleServer(ServerCase):
    """Nobody runs code: the server and its kernels sleep (#36: under TCG each wake-up is host CPU)."""

    def test_idle_wakes_nothing(self):
        # A context of each language, each having run once, beside the warm default Python one.
        self.assertEqual(self.main_text(self.execute("1 + 1", language="javascript")), "2")
        self.assertIn({"type": "stdout", "text": "1\n"},
                      [{k: m[k] for k in ("type", "text")} for m in self.execute("echo 1", language="bash")
                       if m["type"] == "stdout"])
        # Some quiet window of 2 s comes once what the runs left (a kernel's output flush, V8's idle
        # collections) is done: a heartbeat or a poll would wake a thread in every one. A count, not a time.
        counts = []
        for _ in range(30):
            before, procs = switches([self.proc.pid])
            time.sleep(2)
            after, _ = switches([self.proc.pid])
            counts.append(after - before)
            if after - before < 3:
                break
        self.assertGreaterEqual(procs, 4, "the server and its three kernels")
        self.assertLess(min(counts), 3, f"context switches per 2 s window: {counts}")
        self.assertEqual(self.main_text(self.execute("6 * 7")), "42")


class CodeServer(ServerCase):
    # ---- Python ----

    def test_state_and_main_result(self):
        msgs = self.execute("x = 20\ny = x + 1")
        self.assertEqual(msgs[0]["type"], "number_of_executions")
        self.assertIsInstance(msgs[0]["execution_count"], int)
        self.assertEqual(self.main_text(self.execute("x + y + 1")), "42")
        self.assertEqual(self.main_text(self.execute("1+1")), "2")
        self.assertEqual(self.main_text(self.execute("'a string'")), "a string")

    def test_stdout_stderr_with_timestamps(self):
        msgs = self.execute("import sys\nprint('hello')\nprint('oops', file=sys.stderr)")
        out = [m for m in msgs if m["type"] == "stdout"]
        err = [m for m in msgs if m["type"] == "stderr"]
        self.assertEqual("".join(m["text"] for m in out), "hello\n")
        self.assertEqual("".join(m["text"] for m in err), "oops\n")
        for m in out + err:
            self.assertRegex(m["timestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")

    def test_figure_png(self):
        for code in ("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()",
                     "import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 3))\nfig.gca().bar([1, 2], [3, 4])\nfig"):
            msgs = self.execute(code)
            pngs = [m["png"] for m in msgs if m["type"] == "result" and "png" in m]
            self.assertGreaterEqual(len(pngs), 1, (code, msgs))
            png = base64.b64decode(pngs[0])
            self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
            self.assertEqual(png[12:16], b"IHDR")
            w, h = struct.unpack(">II", png[16:24])
            self.assertTrue(100 <= w <= 5000 and 100 <= h <= 5000, (w, h))

    def test_figure_png_is_ipythons(self):
        # The kernel's print_figure is aas_figure.py's (pystartup.py), and its PNG is IPython's own,
        # byte for byte: the one printed here, of a twin figure, by the print_figure it wraps.
        code = ("import matplotlib.pyplot as plt\nfrom IPython.core import pylabtools\n"
                "def draw():\n    fig, ax = plt.subplots()\n    ax.bar(['alpha', 'beta'], [3, 5], label='b')\n"
                "    ax.legend(loc='center left', bbox_to_anchor=(1, 0.5))\n    plt.setp(ax.get_xticklabels(), rotation=60)\n"
                "    return fig\n"
                "twin = draw()\nprint(pylabtools.print_figure.__wrapped__(twin, 'png', base64=True), end='')\n"
                "print(hasattr(pylabtools.print_figure, '__wrapped__'))\nplt.close(twin)\ndraw()\nplt.show()")
        msgs = self.execute(code)
        out = "".join(m["text"] for m in msgs if m["type"] == "stdout").split("\n")
        pngs = [m["png"] for m in msgs if m["type"] == "result" and "png" in m]
        self.assertEqual(out[1], "True", "IPython's print_figure is not wrapped")
        self.assertEqual(len(pngs), 1, msgs)
        self.assertEqual(pngs[0].strip(), out[0].strip())

    def chart(self, code):
        """The chart (E2B's "chart") of the figure that code draws on `ax`, beside its PNG."""
        msgs = self.execute(f"import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n{code}\nplt.show()")
        results = [m for m in msgs if m["type"] == "result" and "png" in m]
        self.assertEqual(len(results), 1, msgs)
        return results[0].get("chart")

    def test_charts(self):
        c = self.chart("ax.plot([1, 2, 3], [4, 5, 6], label='a'); ax.plot([0, 1], [1, 3])\n"
                       "ax.set_title('T'); ax.set_xlabel('time (s)'); ax.set_ylabel('dist [m]'); ax.grid(True)")
        self.assertEqual((c["type"], c["title"], c["x_label"], c["x_unit"], c["y_unit"]), ("line", "T", "time (s)", "s", "m"))
        self.assertEqual(c["elements"], [{"label": "a", "points": [[1, 4], [2, 5], [3, 6]]},
                                         {"label": "Line 1", "points": [[0, 1], [1, 3]]}])
        self.assertEqual((c["x_scale"], c["y_scale"]), ("linear", "linear"))
        self.assertEqual(len(c["x_ticks"]), len(c["x_tick_labels"]))
        self.assertIn("2.0", c["x_tick_labels"])
        c = self.chart("ax.plot(['mon', 'tue'], [3, 4]); ax.set_yscale('log')")
        self.assertEqual((c["x_scale"], c["y_scale"]), ("categorical", "log"))
        self.assertEqual(c["elements"][0]["points"], [["mon", 3], ["tue", 4]])
        c = self.chart("ax.bar(['a', 'b'], [3, 5], label='g1'); ax.bar(['a', 'b'], [1, 2], bottom=[3, 5])")
        self.assertEqual(c["type"], "bar")
        self.assertEqual(c["elements"], [{"label": "a", "group": "g1", "value": 3}, {"label": "b", "group": "g1", "value": 5},
                                         {"label": "a", "group": "Group 1", "value": 1},
                                         {"label": "b", "group": "Group 1", "value": 2}])
        c = self.chart("ax.barh(['a', 'b'], [3, 5]); ax.set_ylabel('kind'); ax.set_xlabel('count')")
        self.assertEqual((c["type"], c["x_label"], c["y_label"]), ("bar", "kind", "count"), "a horizontal chart's x is its categories")
        self.assertEqual([e["value"] for e in c["elements"]], [3, 5])
        c = self.chart("ax.scatter([1, 2], [3, 4], label='p')")
        self.assertEqual((c["type"], c["elements"]), ("scatter", [{"label": "p", "points": [[1, 3], [2, 4]]}]))
        c = self.chart("ax.pie([1, 3], labels=['a', 'b']); ax.set_title('P')")
        self.assertEqual(c, {"type": "pie", "title": "P", "elements": [{"label": "a", "angle": 90, "radius": 1},
                                                                      {"label": "b", "angle": 270, "radius": 1}]})
        c = self.chart("fig.suptitle('S'); ax.plot([1, 2]); fig.add_subplot(2, 2, 4).scatter([1], [2])")
        self.assertEqual((c["type"], c["title"], [e["type"] for e in c["elements"]]), ("superchart", "S", ["line", "scatter"]))
        # A box plot of patches (E2B's rule): each box's quartiles, median, whiskers' ends and outliers.
        c = self.chart("ax.boxplot([[85, 90, 78, 92, 88, 40], [95, 89, 76, 91, 84, 87, 150, 160]], labels=['A', 'B'],"
                       " patch_artist=True); ax.set_title('Scores'); ax.set_xlabel('class'); ax.set_ylabel('score (pts)')")
        self.assertEqual(c, {"type": "box_and_whisker", "title": "Scores", "x_label": "class", "y_label": "score (pts)",
                             "x_unit": None, "y_unit": "pts", "elements": [
                                 {"label": "A", "min": 78, "first_quartile": 79.75, "median": 86.5, "third_quartile": 89.5,
                                  "max": 92, "outliers": [40]},
                                 {"label": "B", "min": 76, "first_quartile": 86.25, "median": 90, "third_quartile": 108.75,
                                  "max": 108.75, "outliers": [150, 160]}]})
        # Horizontal (x is its category axis, as a bar chart's), notched (its outline passes its quartiles),
        # with a mean line (not its median).
        c = self.chart("ax.boxplot([[85, 90, 78, 92, 88, 40], [95, 89, 76, 91, 84, 87, 150, 160]], labels=['A', 'B'],"
                       " patch_artist=True, vert=False, notch=True, showmeans=True, meanline=True); ax.set_xlabel('score')")
        self.assertEqual((c["type"], c["x_label"], c["y_label"]), ("box_and_whisker", None, "score"))
        self.assertEqual([(e["label"], e["first_quartile"], e["median"], e["third_quartile"]) for e in c["elements"]],
                         [("A", 79.75, 86.5, 89.5), ("B", 86.25, 90, 108.75)])
        self.assertEqual(self.chart("fig.suptitle('S'); ax.boxplot([[1, 2, 3]], patch_artist=True); fig.add_subplot(2, 2, 4)"
                                    ".plot([1, 2])")["elements"][0]["elements"][0]["median"], 2)
        # Without patch_artist its boxes are lines: a line chart, as E2B has it.
        self.assertEqual(self.chart("ax.boxplot([[1, 2, 3]])")["type"], "line")
        self.assertEqual(self.chart("ax.stairs([1, 2, 3])")["type"], "unknown")
        self.assertEqual(self.chart("ax.imshow([[1, 2], [3, 4]])")["type"], "unknown")
        self.assertEqual(self.chart("pass"), {}, "a blank figure")
        # Dates as ISO 8601; NaN (not JSON) as null.
        c = self.chart("import datetime\nax.plot([datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)], [1, float('nan')])")
        self.assertEqual((c["x_scale"], c["elements"][0]["points"]), ("datetime", [["2024-01-01", 1], ["2024-01-02", None]]))
        self.assertTrue(c["x_ticks"][0].startswith("20"), c["x_ticks"])
        # A figure of too many points keeps its PNG and gets no chart.
        self.assertEqual(self.chart("ax.plot(range(200_000))"), {})

    def test_dataframe_html_and_data(self):
        msgs = self.execute("import pandas as pd, numpy as np\n"
                            "pd.DataFrame({'a': [1, 2], 'b': [0.5, np.nan], "
                            "'t': pd.to_datetime(['2024-01-02', '2024-03-04'])})")
        r = [m for m in msgs if m["type"] == "result"][0]
        self.assertTrue(r["is_main_result"])
        self.assertIn("<table", r["html"])
        self.assertIn("a", r["text"])
        self.assertEqual(r["data"]["a"], [1, 2])
        self.assertEqual(r["data"]["b"], [0.5, None])
        self.assertTrue(r["data"]["t"][0].startswith("2024-01-02T00:00:00"))

    def test_display_is_not_main(self):
        msgs = self.execute("from IPython.display import display, HTML, Markdown\n"
                            "display(HTML('<b>x</b>'))\ndisplay(Markdown('*y*'))\n3")
        results = [m for m in msgs if m["type"] == "result"]
        self.assertEqual([r["is_main_result"] for r in results], [False, False, True])
        self.assertEqual(results[0]["html"], "<b>x</b>")
        self.assertEqual(results[1]["markdown"], "*y*")

    def test_error(self):
        msgs = self.execute("def f():\n    raise ValueError('bad value')\nf()")
        errs = [m for m in msgs if m["type"] == "error"]
        self.assertEqual(len(errs), 1)
        self.assertEqual(errs[0]["name"], "ValueError")
        self.assertEqual(errs[0]["value"], "bad value")
        plain = re.sub(r"\x1b\[[0-9;]*m", "", errs[0]["traceback"])  # IPython's colours are kept, as E2B's
        self.assertIn("----> 3 f()", plain)
        self.assertIsInstance(errs[0]["traceback"], str)
        self.assertNotIn("truncated", errs[0], "nothing was cut")

    def test_run_after_an_error(self):
        # A run that raised does not take the next one with it: the kernel is asked not to abort what comes
        # after an error (ipykernel's stop_on_error, on by default, aborted a run sent at once after an
        # error's idle when the machine was busy: an "aborted" reply, no result).
        self.assertEqual(self.main_text(self.execute(
            "str(get_ipython().kernel.get_parent('shell')['content'].get('stop_on_error'))")), "False")
        for i in range(5):
            errs = [m for m in self.execute("1/0") if m["type"] == "error"]
            self.assertEqual(errs[0]["name"], "ZeroDivisionError")
            self.assertEqual(self.main_text(self.execute(f"{i} + 1")), str(i + 1))

    def test_env_vars_for_one_run(self):
        msgs = self.execute("import os\nos.environ.get('AAS_T')", env_vars={"AAS_T": "v1"})
        self.assertEqual(self.main_text(msgs), "v1")
        self.assertEqual(self.main_text(self.execute("import os\nstr(os.environ.get('AAS_T'))")), "None")
        status, body = self.request("POST", "/execute", {"code": "1", "env_vars": {"A=B": "x"}})
        self.assertEqual(status, 400, body)

    # ---- contexts ----

    def test_context_env_vars(self):
        # POST /contexts env_vars (the engine's context environment): every run of the context sees
        # them, a restart keeps them, a run's own env_vars still win for that run, other contexts not.
        ctx = self.new_context(env_vars={"AAS_CTX": "c1"})
        get = "import os\nos.environ.get('AAS_CTX')"
        self.assertEqual(self.main_text(self.execute(get, context_id=ctx["id"])), "c1")
        msgs = self.execute(get, context_id=ctx["id"], env_vars={"AAS_CTX": "r"})
        self.assertEqual(self.main_text(msgs), "r")
        status, body = self.request("POST", f"/contexts/{ctx['id']}/restart")
        self.assertEqual(status, 200, body)
        self.assertEqual(self.main_text(self.execute(get, context_id=ctx["id"])), "c1")
        self.assertEqual(self.main_text(self.execute("import os\nstr(os.environ.get('AAS_CTX'))")), "None")
        sh = self.new_context(language="bash", env_vars={"AAS_CTX": "b 1"})
        msgs = self.execute("echo $AAS_CTX", context_id=sh["id"])
        self.assertEqual("".join(m["text"] for m in msgs if m["type"] == "stdout"), "b 1\n")
        for bad in ({"A=B": "x"}, {"A": 1}, ["A"]):
            status, body = self.request("POST", "/contexts", {"env_vars": bad})
            self.assertEqual(status, 400, body)
        for c in (ctx, sh):
            self.request("DELETE", f"/contexts/{c['id']}")

    def test_contexts_isolated_restart_delete(self):
        a, b = self.new_context(), self.new_context(language="python", cwd=self.tmp)
        self.assertEqual(a["language"], "python")
        self.assertEqual(a["cwd"], self.cwd)
        self.assertEqual(b["cwd"], self.tmp)
        self.execute("v = 'in a'", context_id=a["id"])
        self.assertEqual(self.main_text(self.execute("v", context_id=a["id"])), "in a")
        self.assertEqual(self.main_text(self.execute("import os\nos.getcwd()", context_id=b["id"])), self.tmp)
        err = [m for m in self.execute("v", context_id=b["id"]) if m["type"] == "error"]
        self.assertEqual(err[0]["name"], "NameError")
        status, body = self.request("GET", "/contexts")
        ids = [c["id"] for c in json.loads(body)]
        self.assertIn(a["id"], ids)
        self.assertIn(b["id"], ids)
        # Restart: same id, its state gone.
        status, body = self.request("POST", f"/contexts/{a['id']}/restart")
        self.assertEqual(status, 200, body)
        err = [m for m in self.execute("v", context_id=a["id"]) if m["type"] == "error"]
        self.assertEqual(err[0]["name"], "NameError")
        # Delete: 404 after.
        for c in (a, b):
            status, body = self.request("DELETE", f"/contexts/{c['id']}")
            self.assertEqual(status, 200, body)
        status, body = self.request("POST", "/execute", {"code": "1", "context_id": a["id"]})
        self.assertEqual((status, body), (404, f"Context {a['id']} not found"))
        status, body = self.request("DELETE", f"/contexts/{a['id']}")
        self.assertEqual(status, 404)
        status, body = self.request("POST", f"/contexts/{a['id']}/restart")
        self.assertEqual(status, 404)

    def test_request_errors(self):
        status, body = self.request("POST", "/execute", {"code": "1", "context_id": "x", "language": "python"})
        self.assertEqual((status, body), (400, "Only one of context_id or language can be provided"))
        self.assertEqual(self.request("POST", "/execute", {"code": "1", "context_id": "nope"}),
                         (404, "Context nope not found"))
        self.assertEqual(self.request("POST", "/execute", raw="{not json")[0], 400)
        self.assertEqual(self.request("POST", "/execute", {"code": 5})[0], 400)
        self.assertEqual(self.request("POST", "/execute", {"code": "1", "language": "cobol"})[0], 400)
        self.assertEqual(self.request("POST", "/contexts", {"cwd": "/nonexistent/dir"})[0], 400)
        self.assertEqual(self.request("GET", "/nowhere")[0], 404)
        self.assertEqual(self.request("PUT", "/execute")[0], 405)
        # Language normalisation: "JS " is javascript, "" is python.
        self.assertEqual(self.main_text(self.execute("40 + 2", language=" JS ")), "42")
        self.assertEqual(self.main_text(self.execute("6 * 7", language="")), "42")

    def test_interrupt_on_close(self):
        ctx = self.new_context()
        self.execute("kept = 'still here'", context_id=ctx["id"])
        # The run is interrupted once its connection closes; the context lives on with its state.
        self.run_then_close({"code": "print('spinning', flush=True)\nwhile True: pass", "context_id": ctx["id"]},
                            b"spinning")
        self.assertEqual(self.main_text(self.execute("kept", context_id=ctx["id"])), "still here")
        self.request("DELETE", f"/contexts/{ctx['id']}")

    def test_kernel_died_then_restart(self):
        ctx = self.new_context()
        errs = [m for m in self.execute("import os\nos._exit(3)", context_id=ctx["id"]) if m["type"] == "error"]
        self.assertEqual(errs[0]["name"], "KernelDied")
        errs = [m for m in self.execute("1", context_id=ctx["id"]) if m["type"] == "error"]
        self.assertEqual(errs[0]["name"], "KernelDied")
        self.assertEqual(self.request("POST", f"/contexts/{ctx['id']}/restart")[0], 200)
        self.assertEqual(self.main_text(self.execute("1", context_id=ctx["id"])), "1")
        self.request("DELETE", f"/contexts/{ctx['id']}")

    # ---- bounds ----

    def test_output_cap(self):
        msgs = self.execute(f"print('x' * {MAX_OUTPUT * 3})")
        text = "".join(m["text"] for m in msgs if m["type"] == "stdout")
        self.assertLessEqual(len(text), MAX_OUTPUT)
        notices = [m for m in msgs if m["type"] == "stderr" and "output cut" in m["text"]]
        self.assertEqual(len(notices), 1, msgs[-1])
        self.assertEqual(notices[0]["cut"], "output", "the engine's flag")
        self.assertEqual(self.main_text(self.execute("'after'")), "after")

    def peak_rss(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1)) << 10

    def test_huge_print_and_display_cut_in_the_kernel(self):
        # 100 MB printed, 50 MB displayed, 20 MB from JavaScript: each is cut before it leaves its
        # kernel, so the server never holds it (its peak memory grows by far less than any of them).
        before = self.peak_rss()
        msgs = self.execute("print('x' * 100_000_000)")
        self.assertLessEqual(len("".join(m["text"] for m in msgs if m["type"] == "stdout")), MAX_OUTPUT)
        self.assertTrue([m for m in msgs if m.get("cut") == "output"], msgs[-1])
        msgs = self.execute("from IPython.display import display\n"
                            "display({'text/plain': 'y' * 50_000_000, 'text/html': '<b>kept</b>'}, raw=True)")
        r = [m for m in msgs if m["type"] == "result"][0]
        self.assertEqual((r.get("html"), r.get("truncated")), ("<b>kept</b>", ["text"]))
        msgs = self.execute("console.log('q'.repeat(20_000_000))", language="javascript")
        self.assertLessEqual(len("".join(m["text"] for m in msgs if m["type"] == "stdout")), MAX_OUTPUT)
        self.assertTrue([m for m in msgs if m.get("cut") == "output"], msgs[-1])
        self.assertLess(self.peak_rss() - before, 20 << 20)
        self.assertEqual(self.main_text(self.execute("'after'")), "after")

    def error_of(self, code, **kw):
        errs = [m for m in self.execute(code, **kw) if m["type"] == "error"]
        self.assertEqual(len(errs), 1, errs)
        return errs[0]

    def test_huge_error_cut_in_the_kernel(self):
        # A message of 30 MB (Python) and 20 MB (JavaScript), a class name of 5,000 characters, a
        # traceback of 800 frames of long names: each is cut before it leaves its kernel, so that the
        # server never holds it (its peak memory grows by far less); what comes is within the bounds,
        # the value's start, the traceback's first and last lines (where the run began, where it
        # raised), and "truncated" names the fields cut.
        before = self.peak_rss()
        err = self.error_of("raise ValueError('x' * 30_000_000)")
        self.assertEqual((err["name"], err["value"]), ("ValueError", "x" * MAX_ERROR))
        self.assertEqual(err["truncated"], ["value", "traceback"])
        self.assertLessEqual(len(err["traceback"].encode()), MAX_ERROR)
        head, cut, tail = re.sub(r"\x1b\[[0-9;]*m", "", err["traceback"]).partition(
            "\n[... aas-code: the middle of this traceback is cut ...]\n")
        self.assertTrue(cut, err["traceback"][:300])
        self.assertIn("----> 1 raise ValueError('x' * 30_000_000)", head)
        self.assertTrue(tail.endswith("x" * 1000), tail[-200:])
        err = self.error_of("raise type('E' * 5000, (Exception,), {})('v')")
        self.assertEqual((err["name"], err["value"], err["truncated"]), ("E" * 1024, "v", ["name"]))
        err = self.error_of("ns = {}\n"
                            "exec(''.join(f'def f{i}_{\"a\" * 300}():\\n    f{i + 1}_{\"a\" * 300}()\\n' for i in range(800))"
                            " + f'def f800_{\"a\" * 300}():\\n    raise RuntimeError(\"deep\")\\n', ns)\n"
                            "ns['f0_' + 'a' * 300]()")
        self.assertEqual((err["name"], err["value"], err["truncated"]), ("RuntimeError", "deep", ["traceback"]))
        head, cut, tail = re.sub(r"\x1b\[[0-9;]*m", "", err["traceback"]).partition("[... aas-code: the middle")
        self.assertTrue(cut and "ns['f0_'" in head and "f1_" in head, head[-300:])
        self.assertTrue(tail.rstrip().endswith("RuntimeError: deep"), tail[-300:])
        self.assertLessEqual(len(err["traceback"].encode()), MAX_ERROR)
        err = self.error_of("throw new Error('z'.repeat(20_000_000))", language="javascript")
        self.assertEqual((err["name"], err["value"], err["truncated"]), ("Error", "z" * MAX_ERROR, ["value", "traceback"]))
        self.assertRegex(err["traceback"], r"^Error: zzz")
        self.assertRegex(err["traceback"], r"\n    at <cell \d+>:1:7$")
        self.assertLessEqual(len(err["traceback"].encode()), MAX_ERROR)
        self.assertLess(self.peak_rss() - before, 20 << 20)
        self.assertEqual(self.main_text(self.execute("'after'")), "after")

    def test_result_cap(self):
        msgs = self.execute("from IPython.display import HTML\n"
                            f"HTML('<p>' + 'y' * {MAX_RESULT * 2} + '</p>')")
        r = [m for m in msgs if m["type"] == "result"][0]
        self.assertNotIn("html", r)
        self.assertIn("html", r["truncated"])
        self.assertIn("text", r)

    def test_context_cap(self):
        made = []
        try:
            while True:
                status, body = self.request("POST", "/contexts", {"language": "bash"})
                if status != 200:
                    break
                made.append(json.loads(body)["id"])
                self.assertLessEqual(len(made), MAX_CONTEXTS)
            self.assertEqual(status, 409, body)
            self.assertIn("too many contexts", body)
        finally:
            for cid in made:
                self.request("DELETE", f"/contexts/{cid}")

    def test_body_cap(self):
        # Refused from its Content-Length, before any of it is read.
        with socket.create_connection(("127.0.0.1", self.port), timeout=REQUEST_TIMEOUT) as s:
            s.sendall(f"POST /execute HTTP/1.1\r\nHost: x\r\nContent-Length: {9 << 20}\r\n\r\n".encode())
            self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 413 "))

    # ---- JavaScript and bash ----

    def test_javascript(self):
        ctx = self.new_context(language="javascript")
        self.assertEqual(ctx["language"], "javascript")
        msgs = self.execute("let n = 40; console.log('log', n); n + 2", context_id=ctx["id"])
        self.assertEqual("".join(m["text"] for m in msgs if m["type"] == "stdout"), "log 40\n")
        self.assertEqual(self.main_text(msgs), "42")
        self.assertEqual(self.main_text(self.execute("n * 2", context_id=ctx["id"])), "80")
        self.assertEqual(self.main_text(self.execute("Promise.resolve(5)", context_id=ctx["id"])), "5")
        # A top-level await, as Node's REPL runs it: its declarations live on, its last value is the result.
        msgs = self.execute("const t = await Promise.resolve(20); let u = t + 1; u * 2", context_id=ctx["id"])
        self.assertEqual(self.main_text(msgs), "42")
        self.assertEqual(self.main_text(self.execute("t + u", context_id=ctx["id"])), "41")
        msgs = self.execute("await new Promise(r => setTimeout(r, 10)); console.log('waited')", context_id=ctx["id"])
        self.assertEqual("".join(m["text"] for m in msgs if m["type"] == "stdout"), "waited\n")
        self.assertFalse([m for m in msgs if m["type"] == "result"], "no value")
        errs = [m for m in self.execute("await Promise.reject(new RangeError('no'))", context_id=ctx["id"])
                if m["type"] == "error"]
        self.assertEqual((errs[0]["name"], errs[0]["value"]), ("RangeError", "no"))
        errs = [m for m in self.execute("null.x", context_id=ctx["id"]) if m["type"] == "error"]
        self.assertEqual(errs[0]["name"], "TypeError")
        self.assertIn("<cell", errs[0]["traceback"])
        # Interrupted by a closed connection; the context lives on.
        self.run_then_close({"code": "console.log('spin'); while (true) {}", "context_id": ctx["id"]}, b"spin")
        self.assertEqual(self.main_text(self.execute("n", context_id=ctx["id"])), "40")
        # What it printed leaves even while an earlier line is still on its way (more than the pipe holds)
        # and the code then holds the event loop: replies are not queued behind a write's callback.
        self.run_then_close({"code": "console.log('x'.repeat(150000)); console.log('spun'); while (true) {}",
                             "context_id": ctx["id"]}, b"spun")
        self.assertEqual(self.main_text(self.execute("n", context_id=ctx["id"])), "40")
        self.request("DELETE", f"/contexts/{ctx['id']}")

    def test_bash(self):
        ctx = self.new_context(language="bash")
        msgs = self.execute("X=5; echo out $X; echo err >&2", context_id=ctx["id"])
        self.assertEqual("".join(m["text"] for m in msgs if m["type"] == "stdout"), "out 5\n")
        self.assertEqual("".join(m["text"] for m in msgs if m["type"] == "stderr"), "err\n")
        self.assertFalse([m for m in msgs if m["type"] == "error"])
        msgs = self.execute("echo $X $E; false", context_id=ctx["id"], env_vars={"E": "e v"})
        self.assertEqual("".join(m["text"] for m in msgs if m["type"] == "stdout"), "5 e v\n")
        errs = [m for m in msgs if m["type"] == "error"]
        self.assertEqual((errs[0]["name"], errs[0]["value"]), ("CommandExitError", "exit status 1"))
        msgs = self.execute("echo ${E-unset}", context_id=ctx["id"])
        self.assertEqual("".join(m["text"] for m in msgs if m["type"] == "stdout"), "unset\n")
        # A closed connection interrupts a foreground command; the shell and its variables live on.
        self.run_then_close({"code": "echo go; sleep 600", "context_id": ctx["id"]}, b"go")
        msgs = self.execute("echo $X", context_id=ctx["id"])
        self.assertEqual("".join(m["text"] for m in msgs if m["type"] == "stdout"), "5\n")
        self.request("DELETE", f"/contexts/{ctx['id']}")

    def test_list_hides_defaults(self):
        before = self.request("GET", "/contexts")
        self.execute("1", language="bash")
        self.execute("1", language="javascript")
        self.assertEqual(self.request("GET", "/contexts"), before)


if __name__ == "__main__":
    unittest.main(verbosity=2)
