/*
 * The page buffer of aas-server (server/web/html.c): text from outside is always
 * escaped, markup of our own is not, and the shell marks the current section.
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
#include "web/html.h"

static void test_escape(void **state)
{
	struct aas_html h = { 0 };

	(void)state;
	aas_html_raw(&h, "<p>");
	aas_html_text(&h, "a<b>&\"c'd");
	aas_html_text(&h, NULL);
	aas_html_raw(&h, "</p>");
	assert_false(h.failed);
	assert_string_equal(h.buf, "<p>a&lt;b&gt;&amp;&quot;c&#39;d</p>");
	assert_int_equal(h.len, strlen(h.buf));
	aas_html_free(&h);
}

static void test_printf(void **state)
{
	struct aas_html h = { 0 };

	(void)state;
	aas_html_printf(&h, "<a href=\"%s\">%s</a> %d%% %lld %zu %u %.2f %5s|", "/x?a=1&b=2", "<script>", -3,
	                (long long)1 << 40, (size_t)7, 4000000000u, 1.5, "ab");
	assert_false(h.failed);
	assert_string_equal(h.buf, "<a href=\"/x?a=1&amp;b=2\">&lt;script&gt;</a> -3% 1099511627776 7 4000000000 1.50 ab|");
	aas_html_free(&h);
}

static void test_grows(void **state)
{
	struct aas_html h = { 0 };
	size_t i;

	(void)state;
	for (i = 0; i < 10000; i++)
		aas_html_text(&h, "<>");
	assert_false(h.failed);
	assert_int_equal(h.len, 10000 * 8);
	aas_html_free(&h);
	assert_null(h.buf);
}

static void test_shell(void **state)
{
	struct aas_html h = { 0 };
	struct aas_page page = { .title = "Keys & <more>", .nav = "docs", .user_email = "a\"@b", .csrf = "tok" };

	(void)state;
	aas_html_begin(&h, &page);
	aas_html_end(&h);
	assert_false(h.failed);
	assert_non_null(strstr(h.buf, "<title>Keys &amp; &lt;more&gt; · libsaas</title>"));
	assert_non_null(strstr(h.buf, "<a href=\"/docs\" aria-current=\"page\">Docs</a>"));
	assert_non_null(strstr(h.buf, "<a href=\"/security\">Security</a>"));
	assert_non_null(strstr(h.buf, "a&quot;@b"));
	assert_non_null(strstr(h.buf, "name=\"csrf\" value=\"tok\""));
	assert_null(strstr(h.buf, "/login"));
	assert_non_null(strstr(h.buf, "</html>"));
	aas_html_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_printf),
		cmocka_unit_test(test_grows),
		cmocka_unit_test(test_shell),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
