/*
 * The dashboard's form bodies (aas_form_decode, web/people.c): the input is an
 * application/x-www-form-urlencoded body as a browser, or anyone, posts it.
 *
 * Invariants beside the sanitizers: a body that holds a NUL is refused; a
 * body taken has at most AAS_FORM_FIELDS_MAX fields, no two of one name,
 * each found again by aas_form_get, and exactly as many as the body has
 * non-empty '&'-separated parts; and the fields encoded again (every byte
 * but the unreserved ones as %XX) decode to the same fields.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "web/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The unreserved characters of a form, which need no escape. */
static int plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c) != NULL;
}

static size_t encode(char *out, const char *s)
{
	size_t n = 0;

	for (; *s; s++) {
		if (plain((unsigned char)*s))
			out[n++] = *s;
		else
			n += (size_t)sprintf(out + n, "%%%02X", (unsigned char)*s);
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct aas_form f, g;
	const char *why = NULL;
	char *again, *p;
	size_t parts = 0, n = 0;
	int rc = aas_form_decode(&f, (const char *)data, size, &why);

	if (memchr(data, '\0', size) && rc != SAAS_EINVAL)
		abort();
	if (rc < 0) {
		if (!why || f.n || f.buf)
			abort();
		aas_form_free(&f);
		return 0;
	}
	for (size_t i = 0; i < size;) {
		size_t k = 0;
		while (i + k < size && data[i + k] != '&')
			k++;
		parts += k > 0;
		i += k + 1;
	}
	if (f.n > AAS_FORM_FIELDS_MAX || f.n != parts)
		abort();
	/* Each field escaped whole: at most three bytes for one, plus '=' and '&'. */
	if (!(again = malloc(3 * size + 2 * f.n + 1)))
		abort();
	for (size_t i = 0; i < f.n; i++) {
		if (aas_form_get(&f, f.name[i]) != f.value[i])
			abort();
		p = again + n;
		if (i)
			*p++ = '&';
		p += encode(p, f.name[i]);
		*p++ = '=';
		p += encode(p, f.value[i]);
		n = (size_t)(p - again);
	}
	again[n] = '\0';
	/* An empty name encodes to "=value", which is a field too: the same fields either way. */
	if (aas_form_decode(&g, again, n, &why) != SAAS_OK || g.n != f.n)
		abort();
	for (size_t i = 0; i < f.n; i++)
		if (strcmp(f.name[i], g.name[i]) != 0 || strcmp(f.value[i], g.value[i]) != 0)
			abort();
	aas_form_free(&g);
	aas_form_free(&f);
	free(again);
	return 0;
}
