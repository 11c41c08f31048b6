/*
 * The docs' Markdown as pages (aas_markdown_html, web/markdown.c): cmark-gfm
 * parses; ours are the relative links' resolution and rewriting, the heading
 * ids and the title taken out. The repository's documents are the input the
 * server renders, but what it makes of any document must stay safe.
 *
 * Invariants beside the sanitizers: a page and a title come back (memory
 * does not run out here); no script element or script link gets through the
 * safe mode; each heading's id holds only what a slug may (ASCII letters and
 * digits, '-', '_', bytes of multi-byte characters) and ends its attribute;
 * each link the rewriting made to a page of ours stays under it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "web/html.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every Markdown file of the repository is served, as the pages do for docs/. */
static const char *url_of(const char *path)
{
	static char page[600];
	size_t n = strlen(path);

	if (n < 4 || strcmp(path + n - 3, ".md") != 0)
		return NULL;
	snprintf(page, sizeof(page), "/docs/%.*s", (int)(n - 3), path);
	return page;
}

static void check_ids(const char *html)
{
	for (const char *p = html; (p = strstr(p, " id=\"")) != NULL;) {
		p += 5;
		for (; *p != '"'; p++)
			if (!*p || !((unsigned char)*p >= 0x80 || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
			             *p == '-' || *p == '_'))
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const paths[] = { "README.md", "docs/rest.md", "docs/deep/er/x.md" };
	char *title = NULL, *html;

	html = aas_markdown_html((const char *)data, size, paths[size % 3], url_of, &title);
	if (!html || !title)
		abort();
	if (strstr(html, "<script") || strstr(html, "href=\"javascript:") || strstr(html, "src=\"javascript:"))
		abort();
	check_ids(html);
	/* A rewritten link names a page of ours: "/docs/" then a path that does not climb. */
	for (const char *p = html; (p = strstr(p, "href=\"/docs/")) != NULL; p += 12)
		if (strncmp(p + 12, "../", 3) == 0)
			abort();
	free(html);
	free(title);
	return 0;
}
