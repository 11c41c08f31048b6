# aas_chart.py: E2B's "e2b/chart" of a matplotlib figure (the SDKs' Result.chart), for aas-code's
# Python kernels (pystartup.py imports it on a figure's first display).
#
# The shape is E2B's code interpreter's (its SDKs' ChartTypes, docs/code.md):
#   {"type": "line"|"scatter"|"bar"|"pie"|"superchart"|"unknown", "title", "elements": [...], ...}
# line and scatter: x_label, y_label, x_unit, y_unit (a label's "(unit)" or "[unit]"), x_ticks,
#   x_tick_labels, x_scale ("linear", "log", ..., "datetime", "categorical"), the same for y, and
#   elements [{"label", "points": [[x, y], ...]}] (dates as ISO 8601);
# bar: the labels and units, elements [{"label", "group", "value"}] (a horizontal chart's x is its
#   category axis, as E2B's);
# pie: elements [{"label", "angle" (degrees), "radius"}];
# box_and_whisker: a box plot drawn with patch_artist=True (its boxes PathPatches: E2B's rule; without
#   it, its boxes are lines and it is a line chart, as E2B has it), the labels and units (a
#   horizontal plot's x is its category axis), elements [{"label", "min", "first_quartile",
#   "median", "third_quartile", "max", "outliers": [...]}], min and max the whiskers' ends;
# superchart: a figure of several axes, elements one chart each, its title the figure's.
# A figure with nothing drawn is {}. What is none of these (an image, a mix) is "unknown" with
# its title and no elements. A figure of more than MAX_POINTS points gets {}.
import datetime
import math
import re

import matplotlib.dates
from matplotlib.collections import PathCollection
from matplotlib.lines import Line2D
from matplotlib.patches import PathPatch, Rectangle, Wedge

try:
    from matplotlib.patches import StepPatch  # ax.stairs' (matplotlib 3.4 on): a PathPatch that is no box
except ImportError:
    StepPatch = ()

# More points than this in one figure, and it gets no chart (its PNG still comes): the chart
# would be a copy of data the user has, as big as a DataFrame's that gets no "data" either.
MAX_POINTS = 100_000

_UNIT = re.compile(r"\s\((.*?)\)|\[(.*?)\]")


class _TooBig(Exception):
    pass


def chart_of(fig):
    """The figure's chart as a dict ({} when it has none); never raises: a figure is not the user's error."""
    try:
        axes = fig.get_axes()
        if not any(ax.has_data() for ax in axes):
            return {}
        budget = [MAX_POINTS]
        if len(axes) > 1:
            title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
            return {"type": "superchart", "title": title, "elements": [_axes_chart(ax, budget) for ax in axes]}
        return _axes_chart(axes[0], budget)
    except Exception:  # noqa: BLE001 (an odd figure, or _TooBig: the PNG is the answer)
        return {}


def _value(v):
    """A point's coordinate as JSON has it: a number (not NaN), a date's ISO 8601, or a category's text."""
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    if type(v).__name__ == "datetime64":
        return str(v.astype("datetime64[s]"))
    if isinstance(v, str):
        return v
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return f if math.isfinite(f) else None


def _label(text, prefix, name):
    """matplotlib's unnamed artists ("_child3", "_container0") as E2B names them ("Line 3", "Group 0")."""
    if text.startswith(prefix) and text[len(prefix):].isdigit():
        return f"{name} {int(text[len(prefix):])}"
    return text


def _is_grid_line(line):
    """A line of two points, level or upright: a grid or a reference line, not data (E2B's rule)."""
    x, y = line.get_xdata(), line.get_ydata()
    return len(x) == 2 and len(y) == 2 and (x[0] == x[1] or y[0] == y[1])


def _kind(ax):
    drawn = list(ax.lines) + list(ax.collections) + list(ax.patches) + list(ax.images) + list(ax.tables)
    if drawn and all(isinstance(a, Line2D) for a in drawn):
        return "line"
    # Boxes and the lines about them (E2B's rule).
    if drawn and all(isinstance(a, Line2D) or (isinstance(a, PathPatch) and not isinstance(a, StepPatch)) for a in drawn):
        return "box_and_whisker"
    drawn = [a for a in drawn if not (isinstance(a, Line2D) and _is_grid_line(a))]
    if not drawn:
        return "unknown"
    for kind, cls in (("scatter", PathCollection), ("pie", Wedge), ("bar", Rectangle)):
        if all(isinstance(a, cls) for a in drawn):
            return kind
    return "unknown"


def _converter(axis):
    return axis.get_converter() if hasattr(axis, "get_converter") else axis.converter


def _ticks(axis, seen):
    """
    The axis' tick locations and label texts, read once per chart (seen): each
    read of its labels has matplotlib work its ticks out again.
    """
    got = seen.get(axis)
    if got is None:
        got = seen[axis] = (list(axis.get_ticklocs()), [t.get_text() for t in axis.get_ticklabels()])
    return got


def _axis_info(axis, name, seen):
    """x_ticks, x_tick_labels and x_scale (or y_'s) of one axis."""
    conv = _converter(axis)
    dates = type(conv).__module__ == matplotlib.dates.__name__
    ticks, labels = _ticks(axis, seen)
    if dates:
        scale = "datetime"
        ticks = [matplotlib.dates.num2date(t).isoformat() for t in ticks]
    elif type(conv).__name__ == "StrCategoryConverter":
        scale = "categorical"
        ticks = [_value(t) for t in ticks]
    else:
        scale = axis.get_scale()
        ticks = [_value(t) for t in ticks]
    return {f"{name}_ticks": ticks, f"{name}_tick_labels": labels, f"{name}_scale": scale}


def _labels(ax, horizontal=False):
    """x_label, y_label, x_unit, y_unit; swapped for a horizontal bar chart (its categories are on y)."""
    xl, yl = ax.get_xlabel() or None, ax.get_ylabel() or None
    if horizontal:
        xl, yl = yl, xl
    out = {"x_label": xl, "y_label": yl, "x_unit": None, "y_unit": None}
    for key, label in (("x_unit", xl), ("y_unit", yl)):
        m = _UNIT.search(label) if label else None
        if m:
            out[key] = m.group(1) or m.group(2)
    return out


def _spend(budget, n):
    budget[0] -= n
    if budget[0] < 0:
        raise _TooBig()


def _points(budget, xs, ys):
    _spend(budget, min(len(xs), len(ys)))
    return [[_value(x), _value(y)] for x, y in zip(xs, ys)]


def _tick_names(axis, seen):
    """Tick position -> its label's text, for naming bars by where they stand."""
    return {float(t): text for t, text in zip(*_ticks(axis, seen))}


def _laid_out(ax, seen):
    """Tick labels are made at a draw: a figure not drawn yet (no PNG made before this) is drawn once."""
    if ax.figure is not None and not any(_ticks(ax.xaxis, seen)[1] + _ticks(ax.yaxis, seen)[1]):
        ax.figure.canvas.draw()
        seen.clear()


def _axes_chart(ax, budget):
    kind = _kind(ax)
    title = ax.get_title() or None
    seen = {}
    if kind in ("line", "scatter", "bar", "box_and_whisker"):
        _laid_out(ax, seen)
    if kind in ("line", "scatter"):
        elements = []
        if kind == "line":
            for line in ax.lines:
                if not _is_grid_line(line):
                    elements.append({"label": _label(line.get_label(), "_child", "Line"),
                                     "points": _points(budget, line.get_xdata(), line.get_ydata())})
        else:
            for c in ax.collections:
                offsets = c.get_offsets()
                elements.append({"label": c.get_label(),
                                 "points": _points(budget, [p[0] for p in offsets], [p[1] for p in offsets])})
        return {"type": kind, "title": title, "elements": elements, **_labels(ax),
                **_axis_info(ax.xaxis, "x", seen), **_axis_info(ax.yaxis, "y", seen)}
    if kind == "bar":
        elements, horizontal = [], False
        for container in ax.containers:
            bars = [r for r in container if isinstance(r, Rectangle)]
            group = _label(container.get_label() or "", "_container", "Group")
            horizontal = getattr(container, "orientation", None) == "horizontal" or (
                getattr(container, "orientation", None) is None and len({r.get_height() for r in bars}) == 1
                and len(bars) > 1)
            names = _tick_names(ax.yaxis if horizontal else ax.xaxis, seen)
            _spend(budget, len(bars))
            for r in bars:
                where = r.get_y() + r.get_height() / 2 if horizontal else r.get_x() + r.get_width() / 2
                label = next((n for t, n in names.items() if math.isclose(t, where, abs_tol=1e-9)), f"{where:g}")
                elements.append({"label": label, "group": group,
                                 "value": _value(r.get_width() if horizontal else r.get_height())})
        return {"type": "bar", "title": title, "elements": elements, **_labels(ax, horizontal)}
    if kind == "pie":
        elements = []
        _spend(budget, len(ax.patches))
        for w in ax.patches:
            angle = abs(float(w.theta2) - float(w.theta1))
            elements.append({"label": w.get_label(), "angle": float(f"{angle:.8g}"), "radius": _value(w.r)})
        return {"type": "pie", "title": title, "elements": elements}
    if kind == "box_and_whisker":
        for horizontal in (False, True):
            elements = _boxes(ax, budget, horizontal, seen)
            if elements is not None:
                return {"type": "box_and_whisker", "title": title, "elements": elements, **_labels(ax, horizontal)}
    return {"type": "unknown", "title": title, "elements": []}


def _close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _between(x, a, b):
    return a <= x <= b or _close(x, a) or _close(x, b)


def _boxes(ax, budget, horizontal, seen):
    """
    The boxes of a box plot standing on x (on y when horizontal), or None if
    its lines are not those of one. Each box's quartiles are where its
    whiskers start (a notched box's outline passes them), its min and max
    where they end, its median the first level line across its middle
    between them (matplotlib draws it before a mean line) that is not a cap
    (at a whisker's end: a median there has the cap's value anyway), its
    outliers the markers over it past the whiskers.
    """
    lines = []  # (category coordinates, value coordinates, markers only)
    for line in ax.lines:
        xs, ys = line.get_xdata(), line.get_ydata()
        try:
            c, v = [float(x) for x in (ys if horizontal else xs)], [float(y) for y in (xs if horizontal else ys)]
        except (TypeError, ValueError):
            return None
        dots = line.get_linestyle() in ("None", "", " ") and line.get_marker() not in ("None", "", " ", None)
        lines.append((c, v, dots))
    names = _tick_names(ax.yaxis if horizontal else ax.xaxis, seen)
    elements = []
    for box in ax.patches:
        verts = box.get_path().vertices
        c, v = (verts[:, 1], verts[:, 0]) if horizontal else (verts[:, 0], verts[:, 1])
        left, right, low, high = float(min(c)), float(max(c)), float(min(v)), float(max(v))
        mid = (left + right) / 2
        # Whiskers: upright on the box's middle, from its outline outwards.
        whiskers = [lv for lc, lv, dots in lines if not dots and len(lc) == 2 and _close(lc[0], mid)
                    and _close(lc[1], mid) and _between(lv[0], low, high)]
        q1 = min((w[0] for w in whiskers), default=low)
        q3 = max((w[0] for w in whiskers), default=high)
        lo = min((min(w) for w in whiskers), default=q1)
        hi = max((max(w) for w in whiskers), default=q3)
        across = [lv[0] for lc, lv, dots in lines if not dots and len(lc) == 2 and _close(lv[0], lv[1])
                  and not _close(lc[0], lc[1]) and _between(lc[0], left, right) and _between(lc[1], left, right)
                  and _close((lc[0] + lc[1]) / 2, mid) and _between(lv[0], q1, q3)]
        if not across:
            return None
        median = next((y for y in across if not (_close(y, lo) or _close(y, hi))), across[0])
        outliers = [y for lc, lv, dots in lines if dots and lc and all(_between(x, left, right) for x in lc)
                    for y in lv if y < lo or y > hi]
        _spend(budget, 1 + len(outliers))
        label = next((n for t, n in names.items() if _close(t, mid)), f"{mid:g}")
        elements.append({"label": label, "min": _value(lo), "first_quartile": _value(q1), "median": _value(median),
                         "third_quartile": _value(q3), "max": _value(hi), "outliers": [_value(y) for y in outliers]})
    return elements
