# pystartup.py: run by every Python kernel of aas-code at its start (IPKernelApp.exec_files): E2B's extra formats.
#
# A pandas DataFrame gets E2B's "e2b/data" format beside IPython's text/plain
# and text/html: df.to_dict(orient="list") with timestamps in ISO 8601, made
# JSON-safe (NaN and infinities become null). The formatter is registered by
# type name, so that no kernel imports pandas for it; the warm default
# context imports numpy, pandas and matplotlib itself (AAS_CODE_WARM=1).
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

    ip = get_ipython()
    if ip is None:
        return
    f = DataFormatter(parent=ip.display_formatter)
    f.for_type_by_name("pandas.core.frame", "DataFrame", dataframe_data)
    ip.display_formatter.formatters["e2b/data"] = f


_aas_setup()
del _aas_setup

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
del _aas_os
