/*
 * Charts drawn by the server as SVG inside a page: seen without JavaScript,
 * read by screen readers from a table of the same numbers beside them.
 * /static/dashboard.js only adds a tooltip that follows the pointer.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_CHART_H
#define AAS_CHART_H

#include <stdint.h>

#include "web/html.h"

/* Days a spend chart may cover (the usage page's `days`). */
#define AAS_CHART_DAYS_MAX 90
#define AAS_DAY_MS 86400000LL

/*
 * The step between the value axis' ticks for values up to `max` micro-dollars,
 * so that about `ticks` steps reach it: 1, 2 or 5 times a power of ten, at
 * least one micro-dollar. A max of 0 or less gives the step of a max of $1.
 */
int64_t aas_chart_step(int64_t max, unsigned int ticks);
/* The decimals a multiple of `step` micro-dollars needs to be written exactly (0 to 6). */
unsigned int aas_chart_decimals(int64_t step);
/* "$0.25", "$12", "-$1.5": micro-dollars with `decimals` decimals (cut, not rounded), into buf. */
const char *aas_chart_usd(char buf[40], int64_t micro, unsigned int decimals);

/*
 * A figure#spend-chart: spend per day, spend[i] micro-dollars on the day that
 * starts at first_day_ms + i days (UTC), for `days` days (1 to
 * AAS_CHART_DAYS_MAX), drawn twice, svg.wide and svg.narrow (for phones;
 * the style sheet shows one): a bar per day (g.day with data-day and
 * data-usd-micro, a rect.bar and a <title> for hover), the value axis with
 * its ticks and grid, the days' axis with a label every few days; then a
 * caption saying the period, its total and its highest day.
 */
void aas_chart_spend(struct aas_html *h, const int64_t *spend, unsigned int days, int64_t first_day_ms);

#endif
