/*
 * HTML pages of aas-server: the service's pages (/, /docs, /security) and the
 * dashboard. One page shell for all of them, and a buffer whose only way to
 * take text from outside is escaped.
 *
 * Pages are plain HTML forms first; the little JavaScript that helps (live
 * countdowns, charts) and the style sheet are served by the server itself,
 * under /static/, never from another origin (the Content-Security-Policy of
 * aas_reply_html says so to the browser).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#ifndef AAS_HTML_H
#define AAS_HTML_H

#include <stdbool.h>
#include <stddef.h>

struct aas_reply;

/* A page being written. Zero it to start; a failed allocation sticks in `failed`. */
struct aas_html {
	char *buf;
	size_t len, cap;
	bool failed;
};

/* Markup of our own, written as it is. Never pass text that came from a client or the store. */
void aas_html_raw(struct aas_html *h, const char *markup);
/* The same for the first n bytes of markup. */
void aas_html_rawn(struct aas_html *h, const char *markup, size_t n);
/* Text, escaped for an element's content or a quoted attribute value (& < > " '). NULL writes nothing. */
void aas_html_text(struct aas_html *h, const char *text);
/*
 * printf into the page, as markup. Every %s is escaped as aas_html_text
 * escapes it; numbers are written as they are. Use aas_html_raw for markup.
 */
void aas_html_printf(struct aas_html *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void aas_html_free(struct aas_html *h);

/* What the shell of a page shows around its body. */
struct aas_page {
	const char *title;      /* <title> and <h1>; escaped */
	const char *nav;        /* the current section: "home", "docs", "api", "limits", "security", "dashboard",
	                           "login", "signup" */
	const char *user_email; /* signed in as (NULL: nobody; the shell shows "Log in", and "Sign up" if `signup`) */
	const char *csrf;       /* the session's CSRF token, for the shell's log-out form (NULL: none) */
	const char *tabs;       /* markup of ours between the header and <main> (the dashboard's tabs), or NULL */
	bool signup;            /* this server takes sign-ups (open or by invite): offer "Sign up" to nobody */
};

/*
 * <!doctype html> ... <main>: the head, the header (the sections, then who is
 * signed in with "Log out", or "Log in" and, if sign-up is not closed, "Sign up"),
 * the tabs, and the title.
 */
void aas_html_begin(struct aas_html *h, const struct aas_page *page);
/* </main> ... </html>: the footer and the end of the document. */
void aas_html_end(struct aas_html *h);

/*
 * Reply with the page (text/html; UTF-8), taking its buffer. The headers keep
 * the page to its own origin: Content-Security-Policy (default-src 'self',
 * no inline script, frame-ancestors 'none'), X-Frame-Options DENY,
 * Referrer-Policy same-origin, Cache-Control no-store. A failed page is a 500.
 */
void aas_reply_html(struct aas_reply *out, unsigned int status, struct aas_html *h);

/* ---- the repository's Markdown as pages (markdown.c) ---- */

/*
 * The URL of the page that serves the repository's file `path` ("docs/rest.md"
 * -> "/docs/rest"), or NULL when no page does.
 */
typedef const char *(*aas_doc_url_fn)(const char *path);

/*
 * Render the Markdown md[0..len) of the repository's file `path` as HTML with
 * cmark, in its safe mode: raw HTML in the Markdown is left out, and so are
 * javascript:, vbscript:, file: and data: link targets. Relative links to the
 * repository's files go to the page url_of names, or become plain text when
 * none serves them. Headings get GitHub's ids ("#a-full-disk"), so that the
 * docs' links between them keep working. The first level-1 heading is taken
 * out as *title (the page shell shows it). A malloc'd string, or NULL when out
 * of memory.
 */
char *aas_markdown_html(const char *md, size_t len, const char *path, aas_doc_url_fn url_of, char **title);

#endif
