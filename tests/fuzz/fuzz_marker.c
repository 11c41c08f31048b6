/*
 * The exec exit-marker filter (lib/transport/marker.c), against a reference
 * that sees the whole stream at once. The input's first byte says how many
 * cut points follow (its low 3 bits), each one byte scaled to the stream's
 * length; the rest is the command's stderr, fed to the filter in the pieces
 * the cuts make, as SSH would deliver it.
 *
 * Oracle: the output is the input minus its well-formed frames of our token,
 * "\036aas-TOKEN:" + [a-z0-9=]* + "\036" of at most SAAS_MARKER_FRAME_MAX
 * bytes; the PID and exit status are the last well-formed "pid=N" (N > 1)
 * and "exit=N" (0 to 255) among them, and "held" if any frame was exactly that.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "saas/errors.h"
#include "transport/marker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TOKEN "0123456789abcdef"

static bool payload_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '=';
}

/* s[0..n) is a decimal number of at most max (digits only, at least one). */
static bool number(const char *s, size_t n, long max, long *v)
{
	*v = 0;
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		if (*v <= max)
			*v = *v * 10 + (s[i] - '0');
	}
	return *v <= max;
}

struct reference {
	char *out;
	size_t len;
	long pid;
	int held, exit_seen, exit_code;
};

static void reference(struct reference *r, const char *s, size_t n)
{
	static const char prefix[] = "\036aas-" TOKEN ":";
	const size_t plen = sizeof(prefix) - 1;
	size_t i = 0;

	memset(r, 0, sizeof(*r));
	r->out = malloc(n + 1);
	while (i < n) {
		if (n - i > plen && memcmp(s + i, prefix, plen) == 0) {
			size_t j = i + plen;
			while (j < n && j - i < SAAS_MARKER_FRAME_MAX - 1 && payload_char(s[j]))
				j++;
			if (j < n && s[j] == '\036') {
				const char *p = s + i + plen;
				size_t pl = j - i - plen;
				long v;
				if (pl > 4 && !memcmp(p, "pid=", 4) && number(p + 4, pl - 4, INT_MAX, &v) && v > 1)
					r->pid = v;
				else if (pl == 4 && !memcmp(p, "held", 4))
					r->held = 1;
				else if (pl > 5 && !memcmp(p, "exit=", 5) && number(p + 5, pl - 5, 255, &v)) {
					r->exit_seen = 1;
					r->exit_code = (int)v;
				}
				i = j + 1;
				continue;
			}
		}
		r->out[r->len++] = s[i++];
	}
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	saas__marker_filter f;
	saas__buf out = SAAS__BUF_INIT;
	struct reference ref;
	size_t cuts[9], ncuts, at = 0;
	const char *stream;
	size_t len;

	if (size == 0)
		return 0;
	ncuts = data[0] & 7;
	if (size < 1 + ncuts)
		return 0;
	stream = (const char *)data + 1 + ncuts;
	len = size - 1 - ncuts;
	for (size_t i = 0; i < ncuts; i++)
		cuts[i] = len ? data[1 + i] * len / 255 : 0;
	cuts[ncuts++] = len;
	qsort(cuts, ncuts, sizeof(cuts[0]), cmp_size);

	if (saas__marker_init(&f, TOKEN) != SAAS_OK)
		abort();
	for (size_t i = 0; i < ncuts; i++) {
		saas__marker_feed(&f, stream + at, cuts[i] - at, &out);
		at = cuts[i];
	}
	saas__marker_flush(&f, &out);

	reference(&ref, stream, len);
	if (out.len != ref.len || (ref.len && memcmp(out.data, ref.out, ref.len) != 0))
		abort();
	if (f.pid != ref.pid || f.held != ref.held || f.exit_seen != ref.exit_seen || (ref.exit_seen && f.exit_code != ref.exit_code))
		abort();
	free(ref.out);
	saas__buf_free(&out);
	return 0;
}
