/*
 * A metadata filter as the REST API takes it (aas_pairs_parse, server/http.c):
 * the input is the query parameter's value after the HTTP layer's decoding,
 * "KEY=VALUE" pairs joined by '&', each key and value %-escaped.
 *
 * Invariants beside the sanitizers: an input over AAS_PAIRS_BYTES_MAX is
 * refused; a list taken has at most `max` entries, each "KEY=VALUE" with a
 * non-empty key free of '='; a refusal says why and gives nothing; and the
 * entries escaped again (every byte but the unreserved ones as %XX) and
 * joined parse to the same entries.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX 32

static int plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c) != NULL;
}

static size_t encode(char *out, const char *s, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		if (plain((unsigned char)s[i]))
			out[n++] = s[i];
		else
			n += (size_t)sprintf(out + n, "%%%02X", (unsigned char)s[i]);
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1), *again = NULL, why[128] = "";
	char **list = NULL, **list2 = NULL;
	size_t n = 0, at = 0, total = 0;

	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	if (aas_pairs_parse(in, MAX, &list, why, sizeof(why)) < 0) {
		if (!why[0] || list)
			abort();
		free(in);
		return 0;
	}
	if (strlen(in) > AAS_PAIRS_BYTES_MAX)
		abort();
	for (; list[n]; n++) {
		const char *eq = strchr(list[n], '=');
		if (n >= MAX || !eq || eq == list[n])
			abort();
		total += 3 * strlen(list[n]) + 1;
	}
	if (n == 0 || total > AAS_PAIRS_BYTES_MAX) {
		/* Nothing to round-trip, or too long once escaped again. */
		aas_pairs_free(list);
		free(in);
		return 0;
	}
	if (!(again = malloc(total + 1)))
		abort();
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(list[i], '=');
		if (i)
			again[at++] = '&';
		at += encode(again + at, list[i], (size_t)(eq - list[i]));
		again[at++] = '=';
		at += encode(again + at, eq + 1, strlen(eq + 1));
	}
	again[at] = '\0';
	if (aas_pairs_parse(again, MAX, &list2, why, sizeof(why)) < 0)
		abort();
	for (size_t i = 0; i <= n; i++)
		if ((list[i] == NULL) != (list2[i] == NULL) || (list[i] && strcmp(list[i], list2[i]) != 0))
			abort();
	aas_pairs_free(list2);
	aas_pairs_free(list);
	free(again);
	free(in);
	return 0;
}
