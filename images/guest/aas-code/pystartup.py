# pystartup.py: run by every Python kernel of aas-code at its start (IPKernelApp.exec_files): E2B's extra
# formats, and the bound on what a run prints.
#
# A pandas DataFrame gets E2B's "e2b/data" format beside IPython's text/plain
# and text/html: df.to_dict(orient="list") with timestamps in ISO 8601, made
# JSON-safe (NaN and infinities become null). A matplotlib figure gets E2B's
# "e2b/chart" beside its PNG (aas_chart.py), and that PNG is IPython's own
# (the inline backend's, bbox_inches="tight" as E2B's) made with its layout
# work done once (aas_figure.py). The formatters are registered by type name,
# so that no kernel imports pandas or matplotlib for them; the warm default
# context imports numpy, pandas and matplotlib itself (AAS_CODE_WARM=1), and
# then sets what it holds aside from the garbage collector (gc.freeze).
#
# What a run prints is cut here, in the kernel, at AAS_CODE_MAX_OUTPUT
# characters (the server's --max-output and one more, so that the server
# sees it passed and says so), and a result's formats over
# AAS_CODE_MAX_RESULT are left out: a print or a display of a gigabyte would
# otherwise travel whole, as one message, into the code server's memory. So
# is an error's text (AAS_CODE_MAX_ERROR_NAME, AAS_CODE_MAX_ERROR: the name,
# the value, the traceback's first and last halves), an exception's message of
# a gigabyte or a deep traceback.
import os as _aas_os


def _aas_setup():
    import json

    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    # A frame bigger than this many cells gets no "data" (its html is cut by pandas' own display options).
    max_cells = int(_aas_os.environ.get("AAS_CODE_DATA_MAX_CELLS", "100000"))

    def dataframe_data(df):
        if df.size > max_cells:
            return None
        split = json.loads(df.to_json(orient="split", date_format="iso", default_handler=str))
        columns = [str(c) for c in split["columns"]]
        out = {c: [] for c in columns}
        for row in split["data"]:
            for c, v in zip(columns, row):
                out[c].append(v)
        return out

    class DataFormatter(BaseFormatter):
        format_type = Unicode("e2b/data")
        print_method = ObjectName("_repr_e2b_data_")
        _return_type = (dict, str)

    # Where aas_chart.py and aas_figure.py are (aas-code's directory): imported on a figure's first
    # display, not before.
    home = _aas_os.environ.pop("AAS_CODE_HOME", "")
    path_join = _aas_os.path.join  # (_aas_os is gone by the first display)

    def module(name):
        import sys
        mod = sys.modules.get(name)
        if mod is None:
            import importlib.util
            spec = importlib.util.spec_from_file_location(name, path_join(home, name + ".py"))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            sys.modules[name] = mod
        return mod

    class ChartFormatter(BaseFormatter):
        """
        By class, not by a printer registered for Figure: the inline backend,
        as matplotlib is set up, takes Figure's printers out of every
        formatter (IPython's select_figure_formats) but image/png's.
        """
        format_type = Unicode("e2b/chart")
        print_method = ObjectName("_repr_e2b_chart_")
        _return_type = (dict,)

        def __call__(self, obj):
            import sys
            figure = sys.modules.get("matplotlib.figure")
            if figure is None or not isinstance(obj, figure.Figure):
                return super().__call__(obj)
            return module("aas_chart").chart_of(obj)

    ip = get_ipython()
    if ip is None:
        return
    f = DataFormatter(parent=ip.display_formatter)
    f.for_type_by_name("pandas.core.frame", "DataFrame", dataframe_data)
    ip.display_formatter.formatters["e2b/data"] = f
    # After image/png (there since IPython started): the PNG's drawing has laid the tick labels out.
    if home:
        ip.display_formatter.formatters["e2b/chart"] = ChartFormatter(parent=ip.display_formatter)
        _aas_print_figure(module)

    _aas_bound_output(ip, int(_aas_os.environ.pop("AAS_CODE_MAX_OUTPUT", "0") or 0))
    _aas_lighter_runs(ip)
    _aas_bound_results(ip, int(_aas_os.environ.pop("AAS_CODE_MAX_RESULT", "0") or 0))
    _aas_bound_errors(ip, int(_aas_os.environ.pop("AAS_CODE_MAX_ERROR_NAME", "0") or 0),
                      int(_aas_os.environ.pop("AAS_CODE_MAX_ERROR", "0") or 0))


def _aas_print_figure(module):
    """
    IPython's print_figure, which the inline backend's formatters call (it
    registers them when matplotlib is first set up, which is after this),
    through aas_figure.py: the same bytes, matplotlib's repeated layout work
    within the call done once.
    """
    import functools
    from IPython.core import pylabtools

    ipython_print_figure = pylabtools.print_figure

    @functools.wraps(ipython_print_figure)
    def print_figure(fig, *args, **kwargs):
        return module("aas_figure").print_figure(ipython_print_figure, fig, *args, **kwargs)

    pylabtools.print_figure = print_figure


def _aas_bound_results(ip, limit):
    """
    Leave out of every display and result the formats over limit characters
    (the server's --max-result: it would drop them), naming them under
    application/x-aas-truncated, which the server makes the result's
    "truncated": a display of a gigabyte would otherwise travel whole, as one
    message, into the code server's memory.
    """
    if limit <= 0:
        return

    def trimmed(data):
        if not isinstance(data, dict):
            return data
        big = [m for m, v in data.items() if isinstance(v, (str, bytes)) and len(v) > limit]
        if not big:
            return data
        data = {m: v for m, v in data.items() if m not in big}
        data["application/x-aas-truncated"] = big
        return data

    pub = ip.display_pub
    publish = pub.publish

    def bounded_publish(data, *args, **kwargs):
        return publish(trimmed(data), *args, **kwargs)

    pub.publish = bounded_publish
    hook = ip.displayhook
    write_format_data = hook.write_format_data

    def bounded_write_format_data(format_dict, md_dict=None):
        return write_format_data(trimmed(format_dict), md_dict)

    hook.write_format_data = bounded_write_format_data


def _aas_bound_errors(ip, name_limit, limit):
    """
    Cut an error's name at name_limit characters, its value at limit and its
    traceback (IPython's lines, as the server joins them) to its first and last
    limit/2, in both messages that carry them: the "error" IPython publishes
    (_showtraceback, which every traceback it shows goes through) and the
    execute_reply. The server cuts them again to its bounds in bytes, one
    under these, and says so.
    """
    if name_limit <= 0 or limit <= 0:
        return
    import functools
    import inspect

    def traceback(stb):
        if not isinstance(stb, list) or sum(len(s) + 1 for s in stb if isinstance(s, str)) <= limit:
            return stb
        text = "\n".join(s for s in stb if isinstance(s, str))
        if len(text) <= limit:
            return stb
        return [text[:limit // 2] + text[len(text) - (limit - limit // 2):]]

    show = ip._showtraceback

    def bounded_showtraceback(etype, evalue, stb):
        try:
            name = etype.__name__
            if isinstance(name, str) and len(name) > name_limit:
                etype = type("_aas_cut", (), {})  # ipykernel reads etype.__name__ only
                etype.__name__ = name[:name_limit]
            value = str(evalue)
            if len(value) > limit:
                evalue = value[:limit]  # str() of it is itself
        except Exception:  # noqa: BLE001 (an odd exception: shown as it is, the server still bounds it)
            pass
        return show(etype, evalue, traceback(stb))

    ip._showtraceback = bounded_showtraceback
    kernel = getattr(ip, "kernel", None)
    execute = getattr(kernel, "do_execute", None)
    if execute is None:
        return

    @functools.wraps(execute)  # its signature: the kernel passes cell_id only if it takes it
    async def bounded_do_execute(*args, **kwargs):
        reply = execute(*args, **kwargs)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, dict) and reply.get("status") == "error":
            for key, n in (("ename", name_limit), ("evalue", limit)):
                if isinstance(reply.get(key), str) and len(reply[key]) > n:
                    reply[key] = reply[key][:n]
            reply["traceback"] = traceback(reply.get("traceback"))
        return reply

    kernel.do_execute = bounded_do_execute


def _aas_bound_output(ip, limit):
    """Cut what a run writes to sys.stdout and sys.stderr (fd 1 and 2 too: ipykernel reads them into these) at limit."""
    if limit <= 0:
        return
    import threading
    from ipykernel.iostream import OutStream

    state = {"left": limit}
    lock = threading.Lock()
    write = OutStream.write

    def bounded_write(self, string):
        if not isinstance(string, str):
            return write(self, string)  # its TypeError
        with lock:
            room = state["left"]
            state["left"] = max(0, room - len(string))
        if room > 0:
            write(self, string if len(string) <= room else string[:room])
        return len(string)  # the rest is dropped, as if written: code that checks the count goes on

    def reset(*_):
        state["left"] = limit

    OutStream.write = bounded_write
    ip.events.register("pre_run_cell", reset)


def _aas_lighter_runs(ip):
    """
    Two of ipykernel's costs of every run that buy nothing here (a `1+1` is
    ~130 ms of the guest's CPU under TCG, the thread hops below a good part
    of it):

    - sys.stdout.flush() and sys.stderr.flush(), six a run (the displayhook's
      start and end, the execute request's end, ...), each hand a flush to
      the kernel's IO thread and wait for it there, two thread wake-ups, even
      when nothing was written. With nothing in its buffer a flush has nothing
      to send: it returns at once. (What was written before is still sent
      before what the kernel publishes after: both go through the IO thread
      in the order they were handed to it.)
    - The 0.5 ms sleep after every execution before its reply ("the flush
      doesn't seem to make it", ipykernel's FIXME): the code server reads a
      run's output up to its idle, which comes on the same socket after it,
      whatever the reply does.
    """
    from ipykernel.iostream import OutStream

    flush = OutStream.flush

    def empty(stream):
        lock = getattr(stream, "_buffer_lock", None)
        if lock is None or getattr(stream, "echo", None) is not None:
            return False
        with lock:
            buffers = getattr(stream, "_buffers", None)   # ipykernel 6.29: one buffer per parent
            if buffers is not None:
                return not buffers
            buffer = getattr(stream, "_buffer", None)     # older: one buffer
            try:
                return buffer is not None and buffer.tell() == 0
            except ValueError:                           # closed while rotated
                return False

    def quick_flush(self):
        if empty(self):
            return None
        return flush(self)

    OutStream.flush = quick_flush
    kernel = getattr(ip, "kernel", None)
    if kernel is not None and hasattr(kernel, "_execute_sleep"):
        kernel._execute_sleep = 0
    _aas_plain_format_calls()
    _aas_direct_iopub(kernel)


def _aas_direct_iopub(kernel):
    """
    ipykernel hands every message it publishes (a run's busy, execute_input,
    result, idle) to its IO thread, which sends it: a wake-up of that thread
    and a trip of the GIL each, the most of what a `1+1` costs between the
    kernel's messages. Here a message is sent at once, by the thread that
    publishes it, when nothing handed to the IO thread is still waiting there
    (so the order on the socket is the order of publishing), under a lock that
    every use of the socket takes (so that no two threads use it at once: a
    ZeroMQ socket may change threads, with a memory barrier, not be shared).
    Otherwise, and in a forked child, as before.
    """
    import threading

    io = getattr(getattr(kernel, "iopub_socket", None), "io_thread", None)
    if io is None or not all(hasattr(io, a) for a in ("schedule", "send_multipart", "socket", "_check_mp_mode")):
        return
    lock = threading.Lock()
    waiting = [0]   # handed to the IO thread, not yet run
    schedule = io.schedule
    master = io._check_mp_mode()

    def counted_schedule(f):
        with lock:
            waiting[0] += 1

        def run():
            try:
                f()
            finally:
                with lock:
                    waiting[0] -= 1
        schedule(run)

    def send_multipart(msg, *args, **kwargs):
        thread = getattr(io, "thread", None)
        if thread is not None and thread.is_alive() and io._check_mp_mode() == master:
            with lock:
                if waiting[0] == 0 and not io.closed:
                    io.socket.send_multipart(msg, *args, **kwargs)
                    return None
        counted_schedule(lambda: io._really_send(msg, *args, **kwargs))
        return None

    io.schedule = counted_schedule
    io.send_multipart = send_multipart


def _aas_plain_format_calls():
    """
    A result or a display calls each of IPython's formatters (14 of them), each
    through catch_format_error, a `decorator` wrapper that binds its arguments
    to the method's signature at every call (inspect's Signature.bind: ~10% of
    a `1+1`'s kernel CPU). The same caller, IPython's own, called directly for
    the formatters whose __call__ takes one object (a mimebundle formatter's
    takes more, and keeps its wrapper).
    """
    import functools
    import inspect
    from IPython.core import formatters

    caller = getattr(formatters.catch_format_error, "__wrapped__", None)
    if caller is None:
        return

    def direct(method):
        @functools.wraps(method)
        def __call__(self, obj):
            return caller(method, self, obj)
        return __call__

    for cls in list(vars(formatters).values()):
        call = vars(cls).get("__call__") if isinstance(cls, type) else None
        method = getattr(call, "__wrapped__", None)
        if method is None or getattr(call, "__module__", None) != formatters.__name__:
            continue
        try:
            if list(inspect.signature(method).parameters) != ["self", "obj"]:
                continue
        except (TypeError, ValueError):
            continue
        cls.__call__ = direct(method)


_aas_setup()
del _aas_setup, _aas_print_figure, _aas_bound_output, _aas_bound_results, _aas_bound_errors, _aas_lighter_runs
del _aas_plain_format_calls, _aas_direct_iopub

if _aas_os.environ.pop("AAS_CODE_WARM", "") == "1":
    # The warm kernel: what most first runs need, in sys.modules before the template
    # is saved (the user's namespace stays clean: "import pandas as pd" is then instant).
    for _aas_m in ("numpy", "pandas", "matplotlib", "matplotlib.pyplot"):
        try:
            __import__(_aas_m)
        except Exception:
            pass
    del _aas_m
    try:  # one figure drawn: the fonts and the Agg renderer in memory too
        import io as _aas_io
        import matplotlib.pyplot as _aas_plt
        _aas_fig = _aas_plt.figure(figsize=(1, 1))
        _aas_fig.gca().plot([0, 1], [0, 1])
        _aas_fig.savefig(_aas_io.BytesIO(), format="png")
        _aas_plt.close(_aas_fig)
        del _aas_io, _aas_plt, _aas_fig
    except Exception:
        pass
    # What the kernel holds now (~250,000 objects: the modules above) lives as long as it does: out of
    # the garbage collector's sight (gc.freeze), a full collection no longer walks it (~0.4 s under TCG
    # each time one comes, against ~1 ms). The cycles left are collected first.
    import gc as _aas_gc
    _aas_gc.collect()
    _aas_gc.freeze()
    del _aas_gc
del _aas_os
