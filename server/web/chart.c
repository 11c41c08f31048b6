/*
 * The spend chart of the usage page (chart.h): an SVG bar chart written here,
 * so that it shows without JavaScript and keeps to the pages' CSP (colours and
 * type come from the style sheet's classes, never from style attributes).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <string.h>

#include "server.h"
#include "web/chart.h"

/*
 * A drawing in its own units (the viewBox): the plot, the room for the axes'
 * labels around it, and how many days get a label. The style sheet's type is
 * in those units, so a phone gets a narrow drawing of its own (shown by the
 * style sheet instead of the wide one) rather than the wide one shrunk to
 * unreadable labels.
 */
struct shape {
	const char *cls;
	int w, h, left, right, top, bottom;
	unsigned int labels_max;
};
static const struct shape wide = { "wide", 1000, 300, 80, 16, 16, 44, 10 };
static const struct shape narrow = { "narrow", 360, 260, 62, 10, 14, 40, 4 };
/* Steps on the value axis, about. */
#define VALUE_TICKS 4

int64_t aas_chart_step(int64_t max, unsigned int ticks)
{
	static const int64_t nice[] = { 1, 2, 5 };
	int64_t want, p = 1;

	if (max <= 0)
		max = 1000000;
	if (ticks == 0)
		ticks = 1;
	want = max / (int64_t)ticks + (max % (int64_t)ticks != 0); /* rounded up, without max + ticks overflowing */
	/* The smallest 1, 2 or 5 times a power of ten that is at least want; int64 holds 5e18. */
	for (;;) {
		for (size_t i = 0; i < sizeof(nice) / sizeof(nice[0]); i++)
			if (nice[i] * p >= want)
				return nice[i] * p;
		if (p > INT64_MAX / 50)
			return want;
		p *= 10;
	}
}

unsigned int aas_chart_decimals(int64_t step)
{
	unsigned int d = 0;
	int64_t unit = 1000000;

	while (d < 6 && step % unit != 0) {
		d++;
		unit /= 10;
	}
	/* Cents are written with two digits: "$0.50", not "$0.5". */
	return d == 1 ? 2 : d;
}

const char *aas_chart_usd(char buf[40], int64_t micro, unsigned int decimals)
{
	/* The magnitude as unsigned: -INT64_MIN does not fit an int64_t. */
	uint64_t m = micro < 0 ? 0 - (uint64_t)micro : (uint64_t)micro, div = 1;
	const char *sign = micro < 0 ? "-" : "";

	if (decimals > 6)
		decimals = 6;
	for (unsigned int i = decimals; i < 6; i++)
		div *= 10;
	if (!decimals)
		snprintf(buf, 40, "%s$%llu", sign, (unsigned long long)(m / 1000000));
	else
		snprintf(buf, 40, "%s$%llu.%0*llu", sign, (unsigned long long)(m / 1000000), (int)decimals,
		         (unsigned long long)(m % 1000000 / div));
	return buf;
}

/* "$4.987500": to the micro-dollar, as billed. */
static const char *usd_exact(char buf[40], int64_t micro)
{
	return aas_chart_usd(buf, micro, 6);
}

/* The day's date, "2025-06-01", into buf (11 bytes or more). */
static const char *day_of(char buf[40], int64_t ms)
{
	saas_time_format(buf, 40, ms);
	buf[10] = '\0';
	return buf;
}

/* "Jun 1" for the days' axis, from the date "2025-06-01". */
static const char *day_label(char buf[16], const char *date)
{
	static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
	                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	int m = (date[5] - '0') * 10 + (date[6] - '0'), d = (date[8] - '0') * 10 + (date[9] - '0');

	snprintf(buf, 16, "%s %d", m >= 1 && m <= 12 ? months[m - 1] : "?", d);
	return buf;
}

/* One drawing of the chart, in shape `g`. */
static void drawing(struct aas_html *h, const struct shape *g, const int64_t *spend, unsigned int days,
                    int64_t first_day_ms, int64_t max)
{
	const int plot_w = g->w - g->left - g->right, plot_h = g->h - g->top - g->bottom, base = g->top + plot_h;
	const int64_t step = aas_chart_step(max, VALUE_TICKS);
	int64_t top;
	unsigned int decimals = aas_chart_decimals(step), every = (days + g->labels_max - 1) / g->labels_max;
	double slot = (double)plot_w / days;
	char b1[40], b2[40], label[16];

	/* The axis ends at the step at or above max; past the last step int64 holds, at max itself. */
	if (max <= 0)
		top = step * VALUE_TICKS;
	else if (max % step == 0 || max / step >= INT64_MAX / step - 1)
		top = max;
	else
		top = (max / step + 1) * step;
	aas_html_printf(h, "<svg class=\"%s\" role=\"img\" aria-labelledby=\"spend-chart-caption\" viewBox=\"0 0 %d %d\" "
	                   "preserveAspectRatio=\"xMidYMid meet\">", g->cls, g->w, g->h);
	/* The value axis: a grid line and a label at each step, $0 at the bottom. */
	aas_html_raw(h, "<g class=\"axis y-axis\">");
	for (int64_t i = 0; i <= top / step; i++) {
		int64_t v = i * step;
		double y = base - (double)v / (double)top * plot_h;

		aas_html_printf(h, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"></line>"
		                   "<text class=\"tick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\" dominant-baseline=\"middle\">"
		                   "%s</text>",
		                g->left, g->w - g->right, y, y, g->left - 8, y, aas_chart_usd(b1, v, v ? decimals : 0));
	}
	aas_html_printf(h, "<line class=\"axis-line\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"></line></g>", g->left,
	                g->left, g->top, base);
	/* A bar per day, in a group as tall as the plot so that hovering anywhere over its day names it. */
	aas_html_raw(h, "<g class=\"bars\">");
	for (unsigned int i = 0; i < days; i++) {
		double x = g->left + i * slot, bw = slot * 0.7 > 1 ? slot * 0.7 : 1, bh;

		bh = spend[i] > 0 ? (double)spend[i] / (double)top * plot_h : 0;
		if (spend[i] > 0 && bh < 1.5)
			bh = 1.5; /* a day that cost anything shows */
		day_of(b1, first_day_ms + (int64_t)i * AAS_DAY_MS);
		aas_html_printf(h, "<g class=\"day\" data-day=\"%s\" data-usd-micro=\"%lld\"><title>%s: %s</title>"
		                   "<rect class=\"hit\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"></rect>"
		                   "<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"></rect></g>",
		                b1, (long long)spend[i], b1, usd_exact(b2, spend[i]), x, g->top, slot, plot_h,
		                x + (slot - bw) / 2, base - bh, bw, bh);
	}
	aas_html_raw(h, "</g>");
	/* The days' axis: the baseline, and a label every few days, ending with the last day. */
	aas_html_printf(h, "<g class=\"axis x-axis\"><line class=\"axis-line\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\">"
	                   "</line>",
	                g->left, g->w - g->right, base, base);
	for (unsigned int i = 0; i < days; i++) {
		double x = g->left + (i + 0.5) * slot;

		if ((days - 1 - i) % every)
			continue;
		day_of(b1, first_day_ms + (int64_t)i * AAS_DAY_MS);
		aas_html_printf(h, "<line class=\"tick-mark\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"></line>"
		                   "<text class=\"tick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>",
		                x, x, base, base + 5, x, base + 24, day_label(label, b1));
	}
	aas_html_raw(h, "</g>");
	if (!max)
		aas_html_printf(h, "<text class=\"empty-note\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">No spend in these "
		                   "days</text>",
		                g->left + plot_w / 2, g->top + plot_h / 2);
	aas_html_raw(h, "</svg>");
}

void aas_chart_spend(struct aas_html *h, const int64_t *spend, unsigned int days, int64_t first_day_ms)
{
	int64_t max = 0, total = 0;
	char b1[40], b2[40], b3[40], b4[40];

	if (days < 1 || days > AAS_CHART_DAYS_MAX) {
		h->failed = true; /* a caller's bug, shown as a 500 */
		return;
	}
	for (unsigned int i = 0; i < days; i++) {
		if (spend[i] > max)
			max = spend[i];
		/* Spend is never negative; a sum past int64 (a bug elsewhere) is shown as the largest, not wrapped. */
		if (spend[i] > 0)
			total = total > INT64_MAX - spend[i] ? INT64_MAX : total + spend[i];
	}
	aas_html_raw(h, "<figure id=\"spend-chart\" class=\"chart\">");
	drawing(h, &wide, spend, days, first_day_ms, max);
	drawing(h, &narrow, spend, days, first_day_ms, max);
	aas_html_printf(h, "<figcaption id=\"spend-chart-caption\">Spend per day (UTC), %s to %s: "
	                   "<strong>%s</strong> in all; the highest day %s.</figcaption></figure>",
	                day_of(b1, first_day_ms), day_of(b2, first_day_ms + (int64_t)(days - 1) * AAS_DAY_MS),
	                usd_exact(b3, total), usd_exact(b4, max));
}
