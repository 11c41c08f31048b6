/*
 * What the benchmark programs (vm_bench.c, code_bench.c) share: a clock, the
 * environment's counts, percentiles, the load average and a fatal error.
 * Header-only, so that `bench/run --adapt REV` can build this tree's
 * vm_bench.c inside REV's tree by copying it and this file, nothing else.
 */
#ifndef SAAS_BENCH_H
#define SAAS_BENCH_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <saas.h>

/* Milliseconds on the monotonic clock. */
static inline double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A positive count from the environment, else def. */
static inline int env_int(const char *name, int def)
{
	const char *v = getenv(name);

	return v && atoi(v) > 0 ? atoi(v) : def;
}

/* A call that failed: what, the status and the library's message, then exit 1 (a bench has no way around). */
static inline void die(const char *what, int rc)
{
	fprintf(stderr, "%s: %s: %s (%s)\n", program_invocation_short_name, what, saas_strerror(rc),
	        saas_error_last()->message);
	exit(1);
}

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The p-th quantile (0..1) of n > 0 figures, nearest rank; v is sorted in place. */
static inline double pct(double *v, int n, double p)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[(int)(p * (n - 1) + 0.5)];
}

/* The 1, 5 and 15 minute load averages as "a, b, c" (-1 each when unreadable): how shared the machine was. */
static inline void load_now(char *out, size_t size)
{
	FILE *f = fopen("/proc/loadavg", "r");
	double a = 0, b = 0, c = 0;

	if (!f || fscanf(f, "%lf %lf %lf", &a, &b, &c) != 3)
		a = b = c = -1;
	if (f)
		fclose(f);
	snprintf(out, size, "%.2f, %.2f, %.2f", a, b, c);
}

/* A sandbox of image for an hour (a bench destroys what it makes), or die. */
static inline saas_sandbox *bench_create(saas_client *c, const char *image)
{
	saas_create_options o = SAAS_CREATE_OPTIONS_INIT;
	saas_sandbox *sb = NULL;
	int rc;

	o.image = image;
	o.timeout_s = 3600;
	if ((rc = saas_sandbox_create(&sb, c, &o, 0)) < 0)
		die("create", rc);
	return sb;
}

/* The driver's lines about templates and clones a bench counts: a template ready, one failed, a clone made. */
static inline void bench_count_templates(const char *msg, int *ready, int *failed, int *clones)
{
	if (strncmp(msg, "template ", 9) == 0 && strstr(msg, " ready in "))
		(*ready)++;
	if (strncmp(msg, "template ", 9) == 0 && strstr(msg, " failed"))
		(*failed)++;
	if (strstr(msg, " up in ") && strstr(msg, "(clone,"))
		(*clones)++;
}

#endif
