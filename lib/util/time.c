/*
 * Points in time as text, once for the whole project: the REST API's query
 * parameters, MCP's get_usage and the CLI's --from/--to all read them with
 * saas_time_parse(), and the REST API and MCP write them with
 * saas_time_format().
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/error.h"
#include "util/util.h"

/* The last second of year 9999: what four-digit years can say. */
#define TIME_MAX_S 253402300799LL

/* Exactly n decimal digits; -1 when they are not there. */
static int digits(const char **p, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++, (*p)++) {
		if (**p < '0' || **p > '9')
			return -1;
		v = v * 10 + (**p - '0');
	}
	return v;
}

static int days_in_month(int y, int mo)
{
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	return mdays[mo - 1] + (mo == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0));
}

int saas__time_parse(int64_t *ms, const char *text, unsigned int flags)
{
	const char *p = text;
	int y, mo, d, h = 0, mi = 0, sec = 0, off = 0, frac = 0;
	struct tm tm;
	time_t t;

	if (!ms || !text)
		return -1;
	if (*text && strspn(text, "0123456789") == strlen(text)) {
		char *end;
		long long v;
		errno = 0;
		v = strtoll(text, &end, 10);
		if (errno || v > TIME_MAX_S)
			return -1;
		*ms = (int64_t)v * 1000;
		return 0;
	}
	if ((y = digits(&p, 4)) < 0 || *p++ != '-' || (mo = digits(&p, 2)) < 0 || *p++ != '-' ||
	    (d = digits(&p, 2)) < 0 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
		return -1;
	if (*p) {
		if (*p != 'T' && *p != 't' && *p != ' ')
			return -1;
		p++;
		if ((h = digits(&p, 2)) < 0 || *p++ != ':' || (mi = digits(&p, 2)) < 0)
			return -1;
		if (*p == ':' && (p++, (sec = digits(&p, 2)) < 0))
			return -1;
		if (*p == '.') {
			int scale = 100;
			if (p[1] < '0' || p[1] > '9')
				return -1;
			for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
				frac += (*p - '0') * scale;
		}
		if (*p == 'Z' || *p == 'z') {
			p++;
		} else if (*p == '+' || *p == '-') {
			int sign = *p++ == '-' ? -1 : 1, oh, om;
			if ((oh = digits(&p, 2)) < 0 || *p++ != ':' || (om = digits(&p, 2)) < 0 || oh > 23 || om > 59)
				return -1;
			off = sign * (oh * 60 + om);
		} /* no offset: UTC */
		if (*p || h > 23 || mi > 59 || sec > 60)
			return -1;
	} else if (flags & SAAS_TIME_DAY_END) {
		d++; /* timegm() carries it into the next month or year */
	}
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	/* -1 is also 1969-12-31T23:59:59Z: only errno tells the error apart. */
	errno = 0;
	if ((t = timegm(&tm)) == (time_t)-1 && errno)
		return -1;
	*ms = ((int64_t)t - (int64_t)off * 60) * 1000 + frac;
	return 0;
}

SAAS_EXTERN(int) saas_time_parse(int64_t *ms, const char *text, unsigned int flags)
{
	saas__error_clear();
	if (!ms || !text)
		return saas__inval("saas_time_parse: ms and text may not be NULL");
	if (saas__time_parse(ms, text, flags) < 0)
		return saas__error(SAAS_EINVAL, SAAS_ERRCLASS_ARGS, 0,
		                   "'%.64s' is not a time: give RFC 3339 (2025-06-01T12:00:00Z), a date (2025-06-01) "
		                   "or unix seconds", text);
	return SAAS_OK;
}

SAAS_EXTERN(char *) saas_time_format(char *buf, size_t bufsize, int64_t ms)
{
	int64_t sec = ms / 1000, frac = ms % 1000;
	struct tm tm;
	time_t t;

	if (!buf || !bufsize)
		return buf;
	if (frac < 0) { /* before 1970: round down to the second */
		frac += 1000;
		sec--;
	}
	t = (time_t)sec;
	if (sec > TIME_MAX_S || !gmtime_r(&t, &tm) || tm.tm_year + 1900 < 0) {
		buf[0] = '\0';
		return buf;
	}
	snprintf(buf, bufsize, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
	         tm.tm_hour, tm.tm_min, tm.tm_sec, (int)frac);
	return buf;
}
