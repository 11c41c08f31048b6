/*
 * The repository's Markdown as pages (html.h): cmark-gfm renders it, in its
 * safe mode, with GitHub's tables and autolinks (the docs are written for
 * GitHub); this file only rewrites links and names headings.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include "web/html.h"

/* The longest path a relative link may resolve to; a longer one is left as text. */
#define LINK_MAX 512
/* How many headings one document may name (more are left without an id). */
#define HEADINGS_MAX 1024

/* The text of a node's descendants (text and code spans), appended to h. */
static void node_text(struct aas_html *h, cmark_node *node)
{
	cmark_iter *it = cmark_iter_new(node);
	cmark_event_type ev;

	while ((ev = cmark_iter_next(it)) != CMARK_EVENT_DONE) {
		cmark_node *n = cmark_iter_get_node(it);
		cmark_node_type t = cmark_node_get_type(n);

		if (ev == CMARK_EVENT_ENTER && (t == CMARK_NODE_TEXT || t == CMARK_NODE_CODE))
			aas_html_raw(h, cmark_node_get_literal(n));
	}
	cmark_iter_free(it);
}

/*
 * GitHub's id for a heading, so that the docs' links to "#a-full-disk" work
 * here as they do on GitHub: lowercase, spaces to hyphens, punctuation
 * dropped. Characters U+2000 to U+2FFF (punctuation, arrows, symbols: an em
 * dash) are punctuation too; other non-ASCII letters are kept as they are.
 */
static char *slug(const char *text)
{
	char *s = malloc(strlen(text) + 1), *o = s;
	const unsigned char *p = (const unsigned char *)text;

	if (!s)
		return NULL;
	while (*p) {
		if (*p == 0xe2 && p[1] && p[2]) {
			p += 3;
		} else if (*p >= 0x80 || isalnum(*p) || *p == '-' || *p == '_') {
			*o++ = (char)tolower(*p++);
		} else if (*p == ' ') {
			*o++ = '-';
			p++;
		} else {
			p++;
		}
	}
	*o = '\0';
	return s;
}

/*
 * Resolve a relative link of the document at `from` ("docs/rest.md") against
 * its directory: "security.md#x" -> "docs/security.md" (fragment in *frag).
 * false for a link that is not a relative path (a scheme, "/...", "#..."), or
 * one that climbs out of the repository.
 */
static bool resolve(const char *from, const char *url, char out[LINK_MAX], const char **frag)
{
	size_t n = strcspn(url, ":/?#");
	const char *slash = strrchr(from, '/');
	char *seg, *save, tmp[LINK_MAX];
	size_t len = 0;

	if (!*url || url[0] == '/' || url[0] == '#' || url[n] == ':')
		return false;
	*frag = strchr(url, '#');
	n = *frag ? (size_t)(*frag - url) : strlen(url);
	if ((slash ? (size_t)(slash - from + 1) : 0) + n >= sizeof(tmp))
		return false;
	snprintf(tmp, sizeof(tmp), "%.*s%.*s", slash ? (int)(slash - from + 1) : 0, from, (int)n, url);
	out[0] = '\0';
	for (seg = strtok_r(tmp, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
		if (strcmp(seg, ".") == 0)
			continue;
		if (strcmp(seg, "..") == 0) {
			char *up = strrchr(out, '/');
			if (len == 0)
				return false;
			len = up ? (size_t)(up - out) : 0;
			out[len] = '\0';
			continue;
		}
		/* out holds at most tmp's segments and slashes: it never outgrows tmp, shorter than LINK_MAX. */
		len += (size_t)snprintf(out + len, LINK_MAX - len, "%s%s", len ? "/" : "", seg);
	}
	/* A directory ("examples/") stays one: no page serves it. */
	if (url[n - (n > 0)] == '/' && len + 1 < LINK_MAX) {
		out[len++] = '/';
		out[len] = '\0';
	}
	return len > 0;
}

/* Replace a link by its content: a document the server does not serve reads as text. */
static void unlink_node(cmark_node *link)
{
	cmark_node *child;

	while ((child = cmark_node_first_child(link)))
		cmark_node_insert_before(link, child);
	cmark_node_free(link);
}

/* Point each relative link at the page that serves its document, or make it text. */
static int rewrite_links(cmark_node *doc, const char *path, aas_doc_url_fn url_of)
{
	cmark_iter *it = cmark_iter_new(doc);
	cmark_node **links = NULL, **grown;
	size_t n = 0, cap = 0;
	cmark_event_type ev;
	int rc = -1;

	/* Collected first: the tree may not change under the iterator. */
	while ((ev = cmark_iter_next(it)) != CMARK_EVENT_DONE) {
		cmark_node *node = cmark_iter_get_node(it);

		if (ev != CMARK_EVENT_ENTER || cmark_node_get_type(node) != CMARK_NODE_LINK)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			if (!(grown = realloc(links, cap * sizeof(*links))))
				goto out;
			links = grown;
		}
		links[n++] = node;
	}
	for (size_t i = 0; i < n; i++) {
		char target[LINK_MAX], url[LINK_MAX + 256];
		const char *frag, *page;

		if (!resolve(path, cmark_node_get_url(links[i]), target, &frag))
			continue;
		if (!(page = url_of(target))) {
			unlink_node(links[i]);
			continue;
		}
		snprintf(url, sizeof(url), "%s%.255s", page, frag ? frag : "");
		if (!cmark_node_set_url(links[i], url))
			goto out;
	}
	rc = 0;
out:
	free(links);
	cmark_iter_free(it);
	return rc;
}

/* Take the first level-1 heading out of the document: its text is the page's title. */
static char *take_title(cmark_node *doc)
{
	struct aas_html t = { 0 };

	for (cmark_node *n = cmark_node_first_child(doc); n; n = cmark_node_next(n)) {
		if (cmark_node_get_type(n) == CMARK_NODE_HEADING && cmark_node_get_heading_level(n) == 1) {
			node_text(&t, n);
			cmark_node_free(n);
			break;
		}
	}
	if (t.failed) {
		aas_html_free(&t);
		return NULL;
	}
	return t.buf ? t.buf : strdup("");
}

/*
 * The ids of the headings, in document order: GitHub's, whose second "foo" is
 * "foo-1". bases[] gets each heading's slug before that suffix. NULL entries
 * where memory ran out.
 */
static size_t heading_ids(cmark_node *doc, char **ids, char **bases)
{
	cmark_iter *it = cmark_iter_new(doc);
	cmark_event_type ev;
	size_t n = 0;

	while ((ev = cmark_iter_next(it)) != CMARK_EVENT_DONE && n < HEADINGS_MAX) {
		cmark_node *node = cmark_iter_get_node(it);
		struct aas_html t = { 0 }, d = { 0 };
		unsigned int dup = 0;

		if (ev != CMARK_EVENT_ENTER || cmark_node_get_type(node) != CMARK_NODE_HEADING)
			continue;
		node_text(&t, node);
		bases[n] = slug(t.buf ? t.buf : "");
		aas_html_free(&t);
		for (size_t i = 0; bases[n] && i < n; i++)
			dup += bases[i] && strcmp(bases[i], bases[n]) == 0;
		if (bases[n] && dup)
			aas_html_printf(&d, "%s-%u", bases[n], dup);
		else if (bases[n])
			aas_html_raw(&d, bases[n]);
		if (d.failed)
			aas_html_free(&d);
		ids[n++] = d.buf;
	}
	cmark_iter_free(it);
	return n;
}

/*
 * cmark's HTML, with two additions. Its "<hN>" tags get their ids. And each
 * "<table>" is focusable (tabindex="0"): the style sheet lets a table wider
 * than the page scroll sideways, and a region that scrolls must be reachable
 * from the keyboard to be scrolled without a mouse (WCAG 2.1.1; axe's
 * scrollable-region-focusable, browser.a11y). In safe mode every "<" cmark
 * writes opens a tag of its own: the Markdown's text and raw HTML never reach
 * the output unescaped.
 */
static void add_ids_and_focus(struct aas_html *h, const char *html, char **ids, size_t nids)
{
	const char *p = html, *tag;
	size_t k = 0;

	while ((tag = strchr(p, '<')) != NULL) {
		aas_html_rawn(h, p, (size_t)(tag - p));
		if (strncmp(tag, "<table>", 7) == 0) {
			aas_html_raw(h, "<table tabindex=\"0\">");
			p = tag + 7;
			continue;
		}
		if (tag[1] != 'h' || tag[2] < '1' || tag[2] > '6' || tag[3] != '>') { /* another tag, "<hr />" too */
			aas_html_rawn(h, tag, 1);
			p = tag + 1;
			continue;
		}
		if (k < nids && ids[k] && *ids[k])
			aas_html_printf(h, "<h%c id=\"%s\">", tag[2], ids[k]);
		else
			aas_html_printf(h, "<h%c>", tag[2]);
		k++;
		p = tag + 4;
	}
	aas_html_raw(h, p);
}

/* A parser with the extensions the docs use, or NULL. */
static cmark_parser *parser_new(void)
{
	static const char *const extensions[] = { "table", "autolink", "strikethrough" };
	cmark_parser *p;

	cmark_gfm_core_extensions_ensure_registered();
	if (!(p = cmark_parser_new(CMARK_OPT_VALIDATE_UTF8)))
		return NULL;
	for (size_t i = 0; i < sizeof(extensions) / sizeof(extensions[0]); i++) {
		cmark_syntax_extension *ext = cmark_find_syntax_extension(extensions[i]);
		if (!ext || !cmark_parser_attach_syntax_extension(p, ext)) {
			cmark_parser_free(p);
			return NULL;
		}
	}
	return p;
}

char *aas_markdown_html(const char *md, size_t len, const char *path, aas_doc_url_fn url_of, char **title)
{
	cmark_parser *parser = parser_new();
	cmark_node *doc = NULL;
	char *ids[HEADINGS_MAX], *bases[HEADINGS_MAX], *html = NULL, *t = NULL;
	struct aas_html h = { 0 };
	size_t nids = 0;

	if (title)
		*title = NULL;
	if (!parser)
		goto out;
	cmark_parser_feed(parser, md, len);
	if (!(doc = cmark_parser_finish(parser)) || rewrite_links(doc, path, url_of) < 0 || !(t = take_title(doc)))
		goto out;
	nids = heading_ids(doc, ids, bases);
	/* No CMARK_OPT_UNSAFE: raw HTML and javascript:/vbscript:/file:/data: links are dropped. */
	if (!(html = cmark_render_html(doc, CMARK_OPT_DEFAULT, cmark_parser_get_syntax_extensions(parser))))
		goto out;
	add_ids_and_focus(&h, html, ids, nids);
	if (h.failed)
		aas_html_free(&h);
out:
	for (size_t i = 0; i < nids; i++) {
		free(ids[i]);
		free(bases[i]);
	}
	free(html);
	if (doc)
		cmark_node_free(doc);
	if (parser)
		cmark_parser_free(parser);
	if (!h.buf) {
		free(t);
		return NULL;
	}
	if (title)
		*title = t;
	else
		free(t);
	return h.buf;
}
