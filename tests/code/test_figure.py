#!/usr/bin/python3
"""
aas_figure.py (images/guest/aas-code) on the host, without a kernel: a figure printed through it
is byte for byte the PNG IPython's own print_figure makes of the same figure, as the inline
backend asks for it (bbox_inches="tight", the figure's dpi and colours), for figures whose tight
box and layout each take another path: a line chart, rotated tick labels past the figure, a legend
outside the axes, shared subplots with offset tick labels and a suptitle, constrained layouts (one
resizing its Axes within the print, so that their ticks change in it), a colorbar and a log axis,
dates, an annotation, twin axes, polar and 3D axes. And it does less:
an axis' ticks are worked out fewer times. Run by Debian's /usr/bin/python3 (python3-matplotlib,
python3-ipython).
"""
import datetime
import os
import sys
import unittest

import matplotlib

matplotlib.use("agg")

import matplotlib.axis  # noqa: E402
import numpy as np  # noqa: E402
from IPython.core.pylabtools import print_figure  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "images", "guest", "aas-code"))
import aas_figure  # noqa: E402


def line(fig):
    ax = fig.subplots()
    ax.plot(range(100), [i * i for i in range(100)])
    ax.set_title("line")


def bar_rotated(fig):
    ax = fig.subplots()
    ax.bar(["alpha", "beta", "a much longer name"], [3, 5, 2])
    for t in ax.get_xticklabels():
        t.set_rotation(60)


def legend_outside(fig):
    ax = fig.subplots()
    ax.plot([1, 2, 3], label="a long legend label")
    ax.plot([3, 1, 2], label="b")
    ax.legend(loc="center left", bbox_to_anchor=(1, 0.5))


def subplots_suptitle(fig):
    for i, ax in enumerate(fig.subplots(2, 2, sharex=True).flat):
        ax.plot(np.arange(10) * (i + 1) * 1e5 + 1e7)
    fig.suptitle("a suptitle")


def constrained_pie(fig):
    fig.set_layout_engine("constrained")
    ax = fig.subplots()
    ax.pie([1, 2, 3], labels=["x", "y", "z"])
    ax.set_title("pie")


def constrained_resized(fig):
    # The layout engine measures the Axes, then resizes them: their ticks within one print differ.
    fig.set_layout_engine("constrained")
    fig.set_size_inches(3, 2.5)
    axs = fig.subplots(1, 2)
    axs[0].plot(np.arange(10) * 1234567.0)
    axs[0].set_ylabel("a long label\nin two lines")
    im = axs[1].imshow(np.arange(100).reshape(10, 10))
    fig.colorbar(im, ax=axs[1])
    axs[1].set_aspect("equal", adjustable="datalim")


def colorbar_log(fig):
    ax = fig.subplots()
    im = ax.imshow(np.arange(1, 101).reshape(10, 10))
    fig.colorbar(im)
    ax.set_yscale("log")


def dates(fig):
    ax = fig.subplots()
    ax.plot([datetime.date(2024, 1, d) for d in range(1, 30)], range(29))
    fig.autofmt_xdate()


def annotated_log(fig):
    ax = fig.subplots()
    ax.scatter([1, 10, 100], [3, 4, 5])
    ax.set_xscale("log")
    ax.set_xlabel("x [m]")
    ax.annotate("here", (10, 4), xytext=(30, 4.5), arrowprops={})


def twin_polar_3d(fig):
    ax = fig.add_subplot(1, 3, 1)
    ax.plot([1, 2, 3])
    ax.twinx().plot([300, 100, 200], color="r")
    fig.add_subplot(1, 3, 2, projection="polar").plot(np.linspace(0, 6, 50), np.linspace(0, 1, 50))
    fig.add_subplot(1, 3, 3, projection="3d").plot([0, 1, 2], [0, 1, 0], [0, 2, 1])


FIGURES = [line, bar_rotated, legend_outside, subplots_suptitle, constrained_pie, constrained_resized, colorbar_log,
           dates, annotated_log, twin_polar_3d]


def made(draw):
    fig = Figure()
    draw(fig)
    return fig


class OneLayout(unittest.TestCase):
    def setUp(self):
        self.calls = 0
        update_ticks = matplotlib.axis.Axis._update_ticks

        def counted(axis):
            self.calls += 1
            return update_ticks(axis)

        matplotlib.axis.Axis._update_ticks = counted
        self.addCleanup(setattr, matplotlib.axis.Axis, "_update_ticks", update_ticks)

    def plain_and_ours(self, draw, **kw):
        """The same figure made twice: IPython's PNG of one, ours of the other, and how many tick updates each took."""
        self.calls = 0
        plain = print_figure(made(draw), "png", base64=True, **kw)
        plain_calls, self.calls = self.calls, 0
        ours = aas_figure.print_figure(print_figure, made(draw), "png", base64=True, **kw)
        return plain, plain_calls, ours, self.calls

    def test_same_png_fewer_tick_updates(self):
        for draw in FIGURES:
            with self.subTest(figure=draw.__name__):
                plain, plain_calls, ours, calls = self.plain_and_ours(draw)
                self.assertTrue(plain.startswith("iVBORw0KGgo"), "a PNG")
                self.assertEqual(ours, plain, "not the bytes of IPython's own tight PNG")
                self.assertLess(calls, plain_calls, "the ticks were not worked out fewer times")

    def test_other_formats_and_a_plain_box(self):
        # The same wrapper serves every format IPython prints (an SVG or PDF has its date in it: a JPEG), tight or not.
        self.assertEqual(aas_figure.print_figure(print_figure, made(bar_rotated), "jpg", base64=True),
                         print_figure(made(bar_rotated), "jpg", base64=True))
        plain, _, ours, _ = self.plain_and_ours(legend_outside, bbox_inches=None)
        self.assertEqual(ours, plain)

    def test_a_figure_with_draw_callbacks_is_printed_as_it_is(self):
        # Its callbacks run within the print, after the layout draw: nothing is kept for them.
        def with_callback(fig):
            line(fig)
            fig.canvas.mpl_connect("draw_event", lambda event: None)
        plain, plain_calls, ours, calls = self.plain_and_ours(with_callback)
        self.assertEqual(ours, plain)
        self.assertEqual(calls, plain_calls)

    def test_matplotlib_is_as_it_was_after(self):
        update_ticks = matplotlib.axis.Axis._update_ticks
        metrics = matplotlib.text._get_text_metrics_with_cache
        with self.assertRaises(ZeroDivisionError):
            with aas_figure.one_layout():
                self.assertIsNot(matplotlib.axis.Axis._update_ticks, update_ticks)
                1 / 0
        self.assertIs(matplotlib.axis.Axis._update_ticks, update_ticks)
        self.assertIs(matplotlib.text._get_text_metrics_with_cache, metrics)


if __name__ == "__main__":
    unittest.main(verbosity=2)
