/*
 * The exec wrapper's markers, taken out of a command's stderr (marker.h).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "transport/marker.h"
#include "util/error.h"

static bool payload_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '=';
}

int saas__marker_init(saas__marker_filter *f, const char *token)
{
	size_t n = strlen(token);

	memset(f, 0, sizeof(*f));
	if (n == 0 || n > SAAS_MARKER_TOKEN_MAX || strspn(token, "0123456789abcdefghijklmnopqrstuvwxyz") != n)
		return saas__inval("invalid marker token");
	f->plen = (size_t)snprintf(f->prefix, sizeof(f->prefix), "%caas-%s:", SAAS_MARKER_SEP, token);
	return SAAS_OK;
}

/* n decimal digits (at least one) of at most `max`; false for anything else. */
static bool decimal(const char *s, size_t n, long max, long *v)
{
	*v = 0;
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || *v > (max - (s[i] - '0')) / 10)
			return false;
		*v = *v * 10 + (s[i] - '0');
	}
	return true;
}

static void marker_payload(saas__marker_filter *f, const char *p, size_t n)
{
	long v;

	if (n > 4 && !memcmp(p, "pid=", 4)) {
		if (decimal(p + 4, n - 4, 0x7fffffffL, &v) && v > 1)
			f->pid = v;
	} else if (n == 4 && !memcmp(p, "held", 4)) {
		f->held = 1;
	} else if (n > 5 && !memcmp(p, "exit=", 5)) {
		if (decimal(p + 5, n - 5, 255, &v)) {
			f->exit_seen = 1;
			f->exit_code = (int)v;
		}
	}
}

void saas__marker_feed(saas__marker_filter *f, const char *d, size_t n, saas__buf *out)
{
	while (n) {
		if (f->hlen == 0) {
			const char *p = memchr(d, SAAS_MARKER_SEP, n);
			size_t k = p ? (size_t)(p - d) : n;
			saas__buf_put(out, d, k);
			d += k;
			n -= k;
			if (p) {
				f->hold[f->hlen++] = SAAS_MARKER_SEP;
				d++;
				n--;
			}
			continue;
		}
		if (f->hlen < f->plen) {
			if (*d == f->prefix[f->hlen]) {
				f->hold[f->hlen++] = *d++;
				n--;
			} else {
				/* Not ours; the held bytes hold no other separator to restart from. */
				saas__buf_put(out, f->hold, f->hlen);
				f->hlen = 0;
			}
			continue;
		}
		if (*d == SAAS_MARKER_SEP) {
			marker_payload(f, f->hold + f->plen, f->hlen - f->plen);
			f->hlen = 0;
			d++;
			n--;
		} else if (f->hlen + 1 < sizeof(f->hold) && payload_char(*d)) {
			f->hold[f->hlen++] = *d++;
			n--;
		} else {
			saas__buf_put(out, f->hold, f->hlen);
			f->hlen = 0;
		}
	}
}

void saas__marker_flush(saas__marker_filter *f, saas__buf *out)
{
	saas__buf_put(out, f->hold, f->hlen);
	f->hlen = 0;
}
