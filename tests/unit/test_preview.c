/*
 * The preview proxy's pure parts: which hosts are previews (and under what
 * name), and which of a guest's Set-Cookie headers may reach a browser.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server.h"

#define NAME "tq3k2m7xw4nb5c6d2e7f3g4h5j"

static void test_match(void **state)
{
	char name[SAAS_PREVIEW_NAME_LEN + 1];

	(void)state;
	_Static_assert(sizeof(NAME) - 1 == SAAS_PREVIEW_NAME_LEN, "a name's length");
	/* A name under the domain, with or without a port, in any case. */
	assert_true(aas_preview_match(NAME ".localhost:8080", "localhost", name));
	assert_string_equal(name, NAME);
	assert_true(aas_preview_match(NAME ".localhost", "localhost", name));
	assert_string_equal(name, NAME);
	assert_true(aas_preview_match("TQ3K2M7XW4NB5C6D2E7F3G4H5J.Preview.Example.COM", "preview.example.com", name));
	assert_string_equal(name, NAME);
	/* Any other single label is a preview that does not exist (the proxy's 404), never the API:
	 * the old {port}-{id}, a name one character short or long, an empty label. */
	assert_true(aas_preview_match("8000-sbx-abcdefghijklmnop.localhost:8080", "localhost", name));
	assert_string_equal(name, "");
	assert_true(aas_preview_match(NAME "a.localhost", "localhost", name));
	assert_string_equal(name, "");
	assert_true(aas_preview_match("tq3k2m7xw4nb5c6d2e7f3g4h5.localhost", "localhost", name));
	assert_string_equal(name, "");
	/* Not previews: the domain itself, other domains, deeper names, a suffix that is not a label. */
	assert_false(aas_preview_match("localhost:8080", "localhost", name));
	assert_false(aas_preview_match(".localhost", "localhost", name));
	assert_false(aas_preview_match("127.0.0.1:8080", "localhost", name));
	assert_false(aas_preview_match(NAME ".example.com", "localhost", name));
	assert_false(aas_preview_match("a." NAME ".localhost", "localhost", name));
	assert_false(aas_preview_match(NAME "-localhost", "localhost", name));
	assert_false(aas_preview_match(NAME ".notlocalhost", "localhost", name));
	assert_false(aas_preview_match(NULL, "localhost", name));
	assert_false(aas_preview_match(NAME ".localhost", "", name));
	/* A Host of 256 bytes or more is nobody's. */
	{
		char big[300];
		memset(big, 'a', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		memcpy(big + sizeof(big) - 11, ".localhost", 10);
		assert_false(aas_preview_match(big, "localhost", name));
	}
}

static void test_cookies(void **state)
{
	const char *host = NAME ".localhost";

	(void)state;
	/* Host-only cookies, and cookies for the preview's own host, pass. */
	assert_true(aas_preview_cookie_ok("a=1", host));
	assert_true(aas_preview_cookie_ok("a=1; Path=/; HttpOnly", host));
	assert_true(aas_preview_cookie_ok("a=1; Domain=" NAME ".localhost", host));
	assert_true(aas_preview_cookie_ok("a=1; domain=." NAME ".LOCALHOST ; Secure", host));
	/* The preview domain or above, or another preview: dropped. */
	assert_false(aas_preview_cookie_ok("a=1; Domain=localhost", host));
	assert_false(aas_preview_cookie_ok("a=1; Path=/; Domain=.localhost", host));
	assert_false(aas_preview_cookie_ok("a=1; DOMAIN = LocalHost", host));
	assert_false(aas_preview_cookie_ok("a=1; Domain=aaaaaaaaaaaaaaaaaaaaaaaaaa.localhost", host));
	assert_false(aas_preview_cookie_ok("a=1; Domain=" NAME ".localhost; Domain=localhost", host));
	assert_false(aas_preview_cookie_ok("a=1; Domain=com", "x.example.com"));
	assert_false(aas_preview_cookie_ok("a=1; Domain=", host));
	/* "domain" in a value or another attribute's name is not a Domain attribute. */
	assert_true(aas_preview_cookie_ok("domain=localhost", host));
	assert_true(aas_preview_cookie_ok("a=1; Path=/domain=localhost", host));
	assert_true(aas_preview_cookie_ok("a=1; Domainx=localhost", host));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_match),
		cmocka_unit_test(test_cookies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
