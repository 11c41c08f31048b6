/*
 * The repository's Markdown as pages (server/web/markdown.c): cmark-gfm's safe
 * mode keeps raw HTML and script links out, relative links go to the pages
 * that serve their documents (or become text), headings get GitHub's ids.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "web/html.h"

static const char *url_of(const char *path)
{
	if (strcmp(path, "docs/rest.md") == 0)
		return "/docs/rest";
	if (strcmp(path, "README.md") == 0)
		return "/docs";
	return NULL;
}

static char *render(const char *md, const char *path, char **title)
{
	char *html = aas_markdown_html(md, strlen(md), path, url_of, title);

	assert_non_null(html);
	return html;
}

static void test_safe(void **state)
{
	char *title, *html;

	(void)state;
	html = render("# T\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n"
	              "text <b onclick=\"x()\">bold</b> [a](javascript:alert(3)) [b](data:text/html,x) "
	              "![i](vbscript:y)\n\n<h2>raw</h2>\n",
	              "docs/x.md", &title);
	assert_null(strstr(html, "<script"));
	assert_null(strstr(html, "<img src=\"x\""));
	assert_null(strstr(html, "onerror"));
	assert_null(strstr(html, "onclick"));
	assert_null(strstr(html, "<b"));
	assert_null(strstr(html, "javascript:"));
	assert_null(strstr(html, "data:text/html"));
	assert_null(strstr(html, "vbscript:"));
	/* Raw HTML that looks like a heading stays out too: only cmark's own headings get ids. */
	assert_null(strstr(html, "<h2>raw"));
	assert_null(strstr(html, "id=\"raw\""));
	assert_string_equal(title, "T");
	free(title);
	free(html);
}

static void test_links(void **state)
{
	char *title, *html;

	(void)state;
	html = render("# Guide\n\n[rest](rest.md#errors) [up](../README.md) [ex](../examples/backend/) "
	              "[same](#here) [out](https://example.com/x) [up2](../../etc/passwd)\n",
	              "docs/guide.md", &title);
	assert_non_null(strstr(html, "<a href=\"/docs/rest#errors\">rest</a>"));
	assert_non_null(strstr(html, "<a href=\"/docs\">up</a>"));
	/* A directory no page serves: its text, no link. */
	assert_null(strstr(html, "examples"));
	assert_non_null(strstr(html, " ex "));
	assert_non_null(strstr(html, "<a href=\"#here\">same</a>"));
	assert_non_null(strstr(html, "<a href=\"https://example.com/x\">out</a>"));
	/* Out of the repository: left as written, never resolved to a file. */
	assert_non_null(strstr(html, "href=\"../../etc/passwd\""));
	free(title);
	free(html);
}

static void test_headings(void **state)
{
	char *title, *html;

	(void)state;
	html = render("intro\n\n# Title\n\n## A full disk\n\n## `aas` — the tool!\n\n## A full disk\n\n"
	              "| a | b |\n|---|---|\n| 1 | 2 |\n\n---\n",
	              "docs/g.md", &title);
	assert_string_equal(title, "Title");
	assert_null(strstr(html, "<h1"));
	assert_non_null(strstr(html, "<h2 id=\"a-full-disk\">A full disk</h2>"));
	assert_non_null(strstr(html, "<h2 id=\"aas--the-tool\">"));
	assert_non_null(strstr(html, "<h2 id=\"a-full-disk-1\">"));
	/* GitHub's tables, and a rule, are not headings. A table may scroll sideways: the keyboard reaches it. */
	assert_non_null(strstr(html, "<table tabindex=\"0\">"));
	assert_non_null(strstr(html, "<th>a</th>"));
	assert_non_null(strstr(html, "<hr />"));
	free(title);
	free(html);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_safe),
		cmocka_unit_test(test_links),
		cmocka_unit_test(test_headings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
