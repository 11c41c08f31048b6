/*
 * The spend chart (server/web/chart.c): the value axis' steps (1, 2 or 5
 * times a power of ten, enough to reach the highest day in about four), the
 * decimals a tick needs, dollars written from micro-dollars, and the drawing:
 * a bar per day, today's the tallest, ticks on both axes, the empty note when
 * nothing was spent, and no style attribute (the pages' CSP forbids them).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "web/chart.h"

static void test_step(void **state)
{
	(void)state;
	assert_int_equal(aas_chart_step(0, 4), 500000);        /* nothing spent: as for $1, in 50-cent steps */
	assert_int_equal(aas_chart_step(-5, 4), 500000);
	assert_int_equal(aas_chart_step(1, 4), 1);             /* never below a micro-dollar */
	assert_int_equal(aas_chart_step(4, 4), 1);
	assert_int_equal(aas_chart_step(5, 4), 2);
	assert_int_equal(aas_chart_step(550, 4), 200);         /* 138 per step: 200 */
	assert_int_equal(aas_chart_step(800, 4), 200);
	assert_int_equal(aas_chart_step(801, 4), 500);
	assert_int_equal(aas_chart_step(4000000, 4), 1000000); /* $4: $1 steps */
	assert_int_equal(aas_chart_step(4000001, 4), 2000000);
	assert_int_equal(aas_chart_step(100, 0), 100);          /* no ticks asked: one step */
	assert_true(aas_chart_step(INT64_MAX, 4) >= INT64_MAX / 4);
}

static void test_decimals(void **state)
{
	(void)state;
	assert_int_equal(aas_chart_decimals(1000000), 0);
	assert_int_equal(aas_chart_decimals(5000000), 0);
	assert_int_equal(aas_chart_decimals(500000), 2); /* $0.50, not $0.5 */
	assert_int_equal(aas_chart_decimals(250000), 2);
	assert_int_equal(aas_chart_decimals(20000), 2);
	assert_int_equal(aas_chart_decimals(2000), 3);
	assert_int_equal(aas_chart_decimals(200), 4);
	assert_int_equal(aas_chart_decimals(1), 6);
}

static void test_usd(void **state)
{
	char b[40];

	(void)state;
	assert_string_equal(aas_chart_usd(b, 0, 0), "$0");
	assert_string_equal(aas_chart_usd(b, 1500000, 2), "$1.50");
	assert_string_equal(aas_chart_usd(b, 1234567, 6), "$1.234567");
	assert_string_equal(aas_chart_usd(b, 1239999, 2), "$1.23"); /* cut, not rounded: ticks are exact */
	assert_string_equal(aas_chart_usd(b, -2500000, 1), "-$2.5");
	assert_string_equal(aas_chart_usd(b, 7, 9), "$0.000007");  /* at most six decimals */
	assert_string_equal(aas_chart_usd(b, INT64_MIN, 6), "-$9223372036854.775808");
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;

	for (const char *p = s; (p = strstr(p, what)); p++)
		n++;
	return n;
}

static void test_drawing(void **state)
{
	struct aas_html h = { 0 };
	int64_t spend[14] = { 0 };
	/* 2025-06-01T00:00:00Z */
	const int64_t first = 1748736000000LL;

	(void)state;
	spend[13] = 550;
	spend[3] = 1;
	aas_chart_spend(&h, spend, 14, first);
	assert_false(h.failed);
	assert_non_null(strstr(h.buf, "<figure id=\"spend-chart\""));
	/* Two drawings (wide, narrow), each a day per bar with its value for hover. */
	assert_int_equal(count(h.buf, "<g class=\"day\""), 28);
	assert_non_null(strstr(h.buf, "data-day=\"2025-06-14\" data-usd-micro=\"550\"><title>2025-06-14: $0.000550</title>"));
	assert_non_null(strstr(h.buf, "data-day=\"2025-06-01\" data-usd-micro=\"0\""));
	/* The value axis of $0 to $0.0006 in $0.0002 steps, on each drawing. */
	assert_int_equal(count(h.buf, ">$0</text>"), 2);
	assert_int_equal(count(h.buf, ">$0.0006</text>"), 2);
	assert_int_equal(count(h.buf, ">$0.0008</text>"), 0);
	/* The days' axis ends with the last day. */
	assert_int_equal(count(h.buf, ">Jun 14</text>"), 2);
	assert_non_null(strstr(h.buf, "2025-06-01 to 2025-06-14: <strong>$0.000551</strong> in all; the highest day "
	                              "$0.000550."));
	assert_null(strstr(h.buf, "No spend"));
	/* A day of a micro-dollar still shows. */
	assert_null(strstr(h.buf, "height=\"0.0\"></rect></g><g class=\"day\" data-day=\"2025-06-05\""));
	assert_null(strstr(h.buf, "style="));
	aas_html_free(&h);

	memset(spend, 0, sizeof(spend));
	aas_chart_spend(&h, spend, 14, first);
	assert_false(h.failed);
	assert_int_equal(count(h.buf, "No spend in these days"), 2);
	assert_int_equal(count(h.buf, ">$1.00</text>"), 2);
	aas_html_free(&h);

	/* The extremes int64 holds: drawn without overflowing (UBSan watches), a negative day as none. */
	spend[0] = INT64_MAX;
	spend[1] = INT64_MAX;
	spend[2] = -5;
	aas_chart_spend(&h, spend, 14, first);
	assert_false(h.failed);
	assert_non_null(strstr(h.buf, "<strong>$9223372036854.775807</strong> in all"));
	assert_null(strstr(h.buf, "height=\"-"));
	aas_html_free(&h);

	/* Outside 1 to AAS_CHART_DAYS_MAX days: a caller's bug, a failed page. */
	aas_chart_spend(&h, spend, 0, first);
	assert_true(h.failed);
	aas_html_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_step),
		cmocka_unit_test(test_decimals),
		cmocka_unit_test(test_usd),
		cmocka_unit_test(test_drawing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
