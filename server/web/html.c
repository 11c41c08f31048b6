/*
 * The page buffer and the shell every page shares (html.h).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"
#include "web/html.h"

static void put(struct aas_html *h, const char *s, size_t n)
{
	size_t cap;
	char *p;

	if (h->failed)
		return;
	if (h->len + n + 1 > h->cap) {
		cap = h->cap ? h->cap : 4096;
		while (cap < h->len + n + 1)
			cap *= 2;
		if (!(p = realloc(h->buf, cap))) {
			h->failed = true;
			return;
		}
		h->buf = p;
		h->cap = cap;
	}
	memcpy(h->buf + h->len, s, n);
	h->len += n;
	h->buf[h->len] = '\0';
}

void aas_html_raw(struct aas_html *h, const char *markup)
{
	put(h, markup, strlen(markup));
}

void aas_html_rawn(struct aas_html *h, const char *markup, size_t n)
{
	put(h, markup, n);
}

void aas_html_text(struct aas_html *h, const char *text)
{
	const char *run = text;

	if (!text)
		return;
	for (; *text; text++) {
		const char *ent;

		switch (*text) {
		case '&': ent = "&amp;"; break;
		case '<': ent = "&lt;"; break;
		case '>': ent = "&gt;"; break;
		case '"': ent = "&quot;"; break;
		case '\'': ent = "&#39;"; break;
		default: continue;
		}
		put(h, run, (size_t)(text - run));
		aas_html_raw(h, ent);
		run = text + 1;
	}
	put(h, run, (size_t)(text - run));
}

/*
 * Walks the format itself so that each %s goes through aas_html_text; every
 * other conversion is formatted alone by vsnprintf from its own va_arg.
 */
void aas_html_printf(struct aas_html *h, const char *fmt, ...)
{
	va_list ap;
	const char *p = fmt;

	va_start(ap, fmt);
	while (*p) {
		const char *pct = strchr(p, '%');
		char spec[32], out[128];
		size_t n;

		if (!pct) {
			aas_html_raw(h, p);
			break;
		}
		put(h, p, (size_t)(pct - p));
		if (pct[1] == '%') {
			put(h, "%", 1);
			p = pct + 2;
			continue;
		}
		n = strcspn(pct + 1, "diouxXcseEfgGp") + 2;
		if (n >= sizeof(spec) || !pct[n - 1]) {
			h->failed = true; /* a format this function does not know: a bug of ours, shown as a 500 */
			break;
		}
		memcpy(spec, pct, n);
		spec[n] = '\0';
		switch (spec[n - 1]) {
		case 's':
			aas_html_text(h, va_arg(ap, const char *));
			break;
		case 'e': case 'E': case 'f': case 'g': case 'G':
			snprintf(out, sizeof(out), spec, va_arg(ap, double));
			aas_html_raw(h, out);
			break;
		case 'p':
			snprintf(out, sizeof(out), spec, va_arg(ap, void *));
			aas_html_raw(h, out);
			break;
		default:
			/* Integers: the length modifier says which type was passed. */
			if (strstr(spec, "ll"))
				snprintf(out, sizeof(out), spec, va_arg(ap, long long));
			else if (strchr(spec, 'j'))
				snprintf(out, sizeof(out), spec, va_arg(ap, intmax_t));
			else if (strchr(spec, 'z'))
				snprintf(out, sizeof(out), spec, va_arg(ap, size_t));
			else if (strchr(spec, 'l'))
				snprintf(out, sizeof(out), spec, va_arg(ap, long));
			else
				snprintf(out, sizeof(out), spec, va_arg(ap, int));
			aas_html_raw(h, out);
			break;
		}
		p = pct + n;
	}
	va_end(ap);
}

void aas_html_free(struct aas_html *h)
{
	free(h->buf);
	memset(h, 0, sizeof(*h));
}

/* aria-current tells screen readers which section this page is; the style sheet marks it too. */
static void nav_link(struct aas_html *h, const struct aas_page *page, const char *id, const char *href,
                     const char *label, const char *cls)
{
	bool here = page->nav && strcmp(page->nav, id) == 0;

	aas_html_printf(h, "<a href=\"%s\"", href);
	if (cls)
		aas_html_printf(h, " class=\"%s\"", cls);
	if (here)
		aas_html_raw(h, " aria-current=\"page\"");
	aas_html_printf(h, ">%s</a>", label);
}

void aas_html_begin(struct aas_html *h, const struct aas_page *page)
{
	static const struct {
		const char *id, *href, *label;
	} sections[] = {
		{ "docs", "/docs", "Docs" },
		{ "api", "/docs/api", "API" },
		{ "limits", "/docs/limits", "Limits" },
		{ "security", "/security", "Security" },
	};

	aas_html_raw(h, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>");
	aas_html_text(h, page->title);
	aas_html_raw(h, " · libsaas</title><link rel=\"stylesheet\" href=\"/static/style.css\">"
	                /* No icon: without this line every browser asks /favicon.ico, a 404 in the log. */
	                "<link rel=\"icon\" href=\"data:,\"></head><body>"
	                "<a class=\"skip\" href=\"#main\">Skip to content</a><header class=\"site\">");
	nav_link(h, page, "home", "/", "libsaas", "brand");
	aas_html_raw(h, "<nav aria-label=\"Main\" class=\"sections\"><ul>");
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		aas_html_raw(h, "<li>");
		nav_link(h, page, sections[i].id, sections[i].href, sections[i].label, NULL);
		aas_html_raw(h, "</li>");
	}
	if (page->user_email) {
		aas_html_raw(h, "<li>");
		nav_link(h, page, "dashboard", "/dashboard", "Dashboard", NULL);
		aas_html_raw(h, "</li>");
	}
	aas_html_raw(h, "</ul></nav><div class=\"account\">");
	/* The account and the way out, or the ways in: the same place on every page. */
	if (page->user_email && page->csrf) {
		aas_html_printf(h, "<form class=\"logout\" method=\"post\" action=\"/logout\">"
		                   "<span class=\"who\" title=\"%s\"><span class=\"vh\">Signed in as </span>%s</span>"
		                   "<input type=\"hidden\" name=\"csrf\" value=\"%s\">"
		                   "<button type=\"submit\" class=\"secondary small\">Log out</button></form>",
		                page->user_email, page->user_email, page->csrf);
	} else if (!page->user_email) {
		nav_link(h, page, "login", "/login", "Log in", "login");
		if (page->signup)
			nav_link(h, page, "signup", "/signup", "Sign up", "button small");
	}
	aas_html_raw(h, "</div></header>");
	if (page->tabs)
		aas_html_raw(h, page->tabs);
	aas_html_printf(h, "<main id=\"main\"><h1>%s</h1>", page->title);
}

void aas_html_end(struct aas_html *h)
{
	aas_html_printf(h, "</main><footer><p>libsaas %s</p></footer></body></html>\n", saas_version());
}

void aas_reply_html(struct aas_reply *out, unsigned int status, struct aas_html *h)
{
	if (h->failed || !h->buf) {
		aas_html_free(h);
		aas_reply_error(out, 500, "out_of_memory", "the page could not be written");
		return;
	}
	out->status = status;
	out->response = MHD_create_response_from_buffer(h->len, h->buf, MHD_RESPMEM_MUST_FREE);
	if (!out->response) {
		aas_html_free(h);
		aas_reply_error(out, 500, "out_of_memory", "out of memory");
		return;
	}
	memset(h, 0, sizeof(*h));
	MHD_add_response_header(out->response, "Content-Type", "text/html; charset=utf-8");
	/* Every page the same, the sandbox's terminal included (terminal.js says how xterm.js keeps to it). */
	MHD_add_response_header(out->response, "Content-Security-Policy",
	                        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
	                        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
	MHD_add_response_header(out->response, "X-Frame-Options", "DENY");
	MHD_add_response_header(out->response, "Referrer-Policy", "same-origin");
	aas_reply_common_headers(out->response);
}
