/*
 * The dashboard's form bodies (aas_form_decode, server/web/people.c): fields and
 * their escapes, what is refused and its bound, and that freeing a form wipes
 * all of it (it held a password).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "web/internal.h"

/* free() as the server's objects call it (linked with --wrap=free): is the block watched all zeros? */
void __real_free(void *p);
void __wrap_free(void *p);
static const char *watched;
static size_t watched_len;
static int watched_zero = -1;

void __wrap_free(void *p)
{
	if (p && p == watched) {
		watched_zero = 1;
		for (size_t i = 0; i < watched_len; i++)
			if (watched[i])
				watched_zero = 0;
		watched = NULL;
	}
	__real_free(p);
}

static void decode_ok(struct aas_form *f, const char *body)
{
	const char *why = NULL;

	assert_int_equal(aas_form_decode(f, body, strlen(body), &why), SAAS_OK);
	assert_null(why);
}

static void refused(const char *body, size_t len, const char *why_part)
{
	struct aas_form f;
	const char *why = NULL;

	assert_int_equal(aas_form_decode(&f, body, len, &why), SAAS_EINVAL);
	assert_non_null(why);
	assert_non_null(strstr(why, why_part));
	assert_int_equal(f.n, 0);
	assert_null(f.buf);
	aas_form_free(&f);
}

static void test_fields(void **state)
{
	struct aas_form f;

	(void)state;
	decode_ok(&f, "email=ann%40example.org&password=correct+horse%2Bbattery&&flag&=empty-name&x=a=b");
	assert_int_equal(f.n, 5);
	assert_string_equal(aas_form_get(&f, "email"), "ann@example.org");
	assert_string_equal(aas_form_get(&f, "password"), "correct horse+battery");
	assert_string_equal(aas_form_get(&f, "flag"), "");
	assert_string_equal(aas_form_get(&f, ""), "empty-name");
	assert_string_equal(aas_form_get(&f, "x"), "a=b");
	assert_null(aas_form_get(&f, "missing"));
	aas_form_free(&f);

	/* Nothing at all is a form without fields. */
	decode_ok(&f, "");
	assert_int_equal(f.n, 0);
	aas_form_free(&f);
	assert_int_equal(aas_form_decode(&f, NULL, 0, &(const char *){ NULL }), SAAS_OK);
	aas_form_free(&f);
}

static void test_refused(void **state)
{
	char body[512];
	size_t n = 0;

	(void)state;
	refused("a=1\0b=2", 7, "NUL");
	refused("a=%00", 5, "escape");
	refused("a=1&a=2", 7, "twice");
	/* The same name once decoded. */
	refused("a=1&%61=2", 9, "twice");
	refused("a=%zz", 5, "escape");
	refused("a=%4", 4, "escape");
	refused("a=%", 3, "escape");
	refused("%=1", 3, "escape");
	/* AAS_FORM_FIELDS_MAX fields are a form; one more is not. */
	for (int i = 0; i < AAS_FORM_FIELDS_MAX; i++)
		n += (size_t)snprintf(body + n, sizeof(body) - n, "%sf%d=%d", i ? "&" : "", i, i);
	{
		struct aas_form f;
		decode_ok(&f, body);
		assert_int_equal(f.n, AAS_FORM_FIELDS_MAX);
		aas_form_free(&f);
	}
	snprintf(body + n, sizeof(body) - n, "&one=more");
	refused(body, strlen(body), "too many");
}

/* Freeing a form wipes every byte of its copy of the body, not just its first field's. */
static void test_wiped(void **state)
{
	static const char body[] = "email=ann%40example.org&password=correct+horse+battery+staple&csrf=abc";
	struct aas_form f;

	(void)state;
	decode_ok(&f, body);
	watched = f.buf;
	watched_len = sizeof(body) - 1;
	watched_zero = -1;
	aas_form_free(&f);
	assert_int_equal(watched_zero, 1);
}

/* The REST list's metadata filter (aas_pairs_parse, server/http.c): pairs, escapes, bounds. */
static void test_query_pairs(void **state)
{
	char why[128], **l = NULL, big[AAS_PAIRS_BYTES_MAX + 2];

	(void)state;
	assert_int_equal(aas_pairs_parse("team=blue&a%20b=c%26d%3De&&empty=", 32, &l, why, sizeof(why)), 0);
	assert_string_equal(l[0], "team=blue");
	assert_string_equal(l[1], "a b=c&d=e");
	assert_string_equal(l[2], "empty=");
	assert_null(l[3]);
	aas_pairs_free(l);
	assert_int_equal(aas_pairs_parse("", 32, &l, why, sizeof(why)), 0);
	assert_null(l[0]);
	aas_pairs_free(l);
	assert_int_equal(aas_pairs_parse("a=1&b=2", 1, &l, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "more than 1"));
	assert_null(l);
	assert_int_equal(aas_pairs_parse("novalue", 32, &l, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "KEY=VALUE"));
	assert_int_equal(aas_pairs_parse("=v", 32, &l, why, sizeof(why)), -1);
	assert_int_equal(aas_pairs_parse("k=%4", 32, &l, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "escape"));
	assert_int_equal(aas_pairs_parse("k=%00", 32, &l, why, sizeof(why)), -1);
	assert_int_equal(aas_pairs_parse("k%3Dx=v", 32, &l, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "'='"));
	memset(big, 'k', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(aas_pairs_parse(big, 32, &l, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "over"));
	assert_null(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_pairs),
		cmocka_unit_test(test_fields),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_wiped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
