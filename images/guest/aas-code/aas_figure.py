# aas_figure.py: a matplotlib figure's PNG (or other format) as IPython's print_figure makes it, byte
# for byte, with the layout work matplotlib repeats within that one call done once (pystartup.py
# wraps IPython's print_figure with print_figure below, so that the inline backend's formatters,
# whose bbox_inches="tight" is E2B's too, go through it).
#
# A tight save draws the figure twice, once only to lay it out, and in between measures its tight
# box: under TCG ~1 s for a line chart, most of it the same Python work done again and again.
# Two parts of it give the same answer each time within one call, so they are asked once:
#   - Axis._update_ticks (the locator, the formatter, each tick's position and label): ~35 calls
#     for one line chart (every spine's extent, the title's position, each axis' box and draw),
#     for two axes whose state does not change between them. Asked again, an axis gives the ticks
#     it gave last when nothing it reads changed: its locators, formatters, scale, view and data
#     intervals, its Axes' size in pixels, its tick counts (the tight save's real draw moves every
#     Axes, never resizes it).
#   - a text's size: matplotlib keeps it per renderer, and the real draw has a renderer of its own
#     (the tight size), so every label was measured twice with FreeType. Agg's measure reads only
#     the text, the font properties, math or not, and the dpi: kept by those for the call.
# Nothing stays from one call to the next. A figure whose canvas has draw_event callbacks (user
# code that runs within the call, after the layout draw) is printed without either.
import contextlib

import matplotlib.axis
import matplotlib.text
from matplotlib.backends.backend_agg import RendererAgg


def _tick_state(axis):
    """What Axis._update_ticks reads that can change (the key of its answer)."""
    ax = axis.axes
    return (axis.major.locator, axis.minor.locator, axis.major.formatter, axis.minor.formatter,
            getattr(axis, "_scale", None), tuple(axis.get_view_interval()), tuple(axis.get_data_interval()),
            tuple(ax.bbox.size) if ax is not None else None, len(axis.majorTicks), len(axis.minorTicks))


@contextlib.contextmanager
def one_layout():
    """Within it, each axis' ticks and each text's size are worked out once per state (see above)."""
    update_ticks = matplotlib.axis.Axis._update_ticks
    text_metrics = matplotlib.text._get_text_metrics_with_cache
    ticks, sizes = {}, {}

    def once_update_ticks(axis):
        state = _tick_state(axis)
        last = ticks.get(id(axis))
        if last is None or last[0] != state or last[1] is not axis:
            last = ticks[id(axis)] = (state, axis, update_ticks(axis))
        return list(last[2])

    def shared_text_metrics(renderer, text, fontprop, ismath, dpi):
        if type(renderer) is not RendererAgg:
            return text_metrics(renderer, text, fontprop, ismath, dpi)
        key = (text, fontprop.copy(), ismath, dpi, renderer.dpi)
        size = sizes.get(key)
        if size is None:
            size = sizes[key] = text_metrics(renderer, text, fontprop, ismath, dpi)
        return size

    matplotlib.axis.Axis._update_ticks = once_update_ticks
    matplotlib.text._get_text_metrics_with_cache = shared_text_metrics
    try:
        yield
    finally:
        matplotlib.axis.Axis._update_ticks = update_ticks
        matplotlib.text._get_text_metrics_with_cache = text_metrics


# The matplotlib this was written against has both (3.6 to 3.10 do); one that has not prints as it is.
_ONE_LAYOUT = hasattr(matplotlib.axis.Axis, "_update_ticks") and hasattr(matplotlib.text, "_get_text_metrics_with_cache")


def print_figure(ipython_print_figure, fig, *args, **kwargs):
    """IPython's print_figure(fig, ...) within one_layout()."""
    canvas = getattr(fig, "canvas", None)
    callbacks = getattr(getattr(canvas, "callbacks", None), "callbacks", {})
    if not _ONE_LAYOUT or callbacks.get("draw_event"):
        return ipython_print_figure(fig, *args, **kwargs)
    with one_layout():
        return ipython_print_figure(fig, *args, **kwargs)
