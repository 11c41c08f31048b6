/*
 * The preview proxy's pure parts: which hosts are previews (and under what
 * name), which of a guest's Set-Cookie headers may reach a browser, and how
 * a guest's answer is read (its head and a chunked body).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "preview/internal.h"
#include "preview/preview.h"

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

#define OURS(s) aas_preview_cookie_ours(s, strlen(s))

/* The server's own cookies never reach a guest, with --secure-cookies' "__Host-" names too. */
static void test_own_cookies(void **state)
{
	(void)state;
	assert_true(OURS("aas_session=aas_ss_x"));
	assert_true(OURS("aas_form=00"));
	assert_true(OURS("__Host-aas_session=aas_ss_x"));
	assert_true(OURS("__host-AAS_form=00"));
	assert_true(OURS("__Secure-aas_session=x"));
	assert_false(OURS("session=1"));
	assert_false(OURS("__Host-session=1"));
	assert_false(OURS("my_aas_session=1"));
	/* Only the pair's own bytes count: a short pair does not match what follows it. */
	assert_false(aas_preview_cookie_ours("__Host-aas_session", 7));
}

/* Parse text as a whole head (it must end as one); the parser's verdict, h filled. */
static int parse(const char *text, struct aas_http_head *h, const char **why)
{
	static char buf[4096];
	size_t len = strlen(text), from = 0, end;

	assert_true(len < sizeof(buf));
	memcpy(buf, text, len + 1);
	end = aas_http_head_end(buf, len, &from);
	assert_int_equal(end, len);
	*why = "";
	return aas_http_head_parse(buf, end, h, why);
}

static const char *field(const struct aas_http_head *h, const char *name)
{
	for (size_t i = 0; i < h->nfields; i++)
		if (strcmp(h->fields[i].name, name) == 0)
			return h->fields[i].value;
	return NULL;
}

static void test_head_end(void **state)
{
	const char *t = "HTTP/1.1 200 OK\nA: b\n\nbody";
	size_t from = 0;

	(void)state;
	/* Fed a byte at a time, the end is found where it is, and only then. */
	for (size_t n = 0; n <= strlen(t); n++) {
		size_t end = aas_http_head_end(t, n, &from);
		assert_int_equal(end, n >= 22 ? 22 : 0);
		if (end)
			break;
	}
	from = 0;
	assert_int_equal(aas_http_head_end("HTTP/1.1 200 OK\r\nA: b\r\n\r\nx", 26, &from), 25);
	from = 0;
	assert_int_equal(aas_http_head_end("HTTP/1.1 200 OK\r\nA: b\n\r\n", 24, &from), 24);
	/* Empty lines before the status line are no end. */
	from = 0;
	assert_int_equal(aas_http_head_end("\r\n\nHTTP/1.0 200\n\n", 17, &from), 17);
	from = 0;
	assert_int_equal(aas_http_head_end("HTTP/1.1 200 OK\r\nA: b\r\n\r", 24, &from), 0);
}

static void test_head_lenient(void **state)
{
	struct aas_http_head h;
	const char *why;

	(void)state;
	/* Bare LF line ends, as CGI scripts and hand-written servers send them. */
	assert_int_equal(parse("HTTP/1.1 200 OK\nContent-Type: text/plain\nContent-Length: 5\n\n", &h, &why), 0);
	assert_int_equal(h.status, 200);
	assert_int_equal(h.body, AAS_HTTP_BODY_LENGTH);
	assert_int_equal(h.length, 5);
	assert_string_equal(field(&h, "Content-Type"), "text/plain");
	aas_http_head_free(&h);
	/* Mixed line ends, no reason phrase, HTTP/1.0, no length: until close. */
	assert_int_equal(parse("HTTP/1.0 404\r\nX-A:  spaced value \t\nX-B:\r\n\n", &h, &why), 0);
	assert_int_equal(h.status, 404);
	assert_int_equal(h.body, AAS_HTTP_BODY_CLOSE);
	assert_string_equal(field(&h, "X-A"), "spaced value");
	assert_string_equal(field(&h, "X-B"), "");
	aas_http_head_free(&h);
	/* An empty reason, a later minor version, empty lines before the status line. */
	assert_int_equal(parse("\r\nHTTP/1.2 201 \r\n\r\n", &h, &why), 0);
	assert_int_equal(h.status, 201);
	aas_http_head_free(&h);
	assert_int_equal(parse("\n\r\n\nHTTP/1.1 202 OK\n\n", &h, &why), 0);
	assert_int_equal(h.status, 202);
	aas_http_head_free(&h);
	/* obs-fold: one SP each; before any field it is ignored. */
	assert_int_equal(parse("HTTP/1.1 200 OK\r\n folded-first\r\nX-Long: one\r\n  two\r\n\tthree \r\nX-C: c\r\n\r\n",
	                       &h, &why), 0);
	assert_string_equal(field(&h, "X-Long"), "one two three");
	assert_string_equal(field(&h, "X-C"), "c");
	assert_int_equal(h.nfields, 2);
	aas_http_head_free(&h);
	/* Whitespace before the colon is removed; lines that are no field are dropped. */
	assert_int_equal(parse("HTTP/1.1 200 OK\nContent-Length : 3\nno colon here\nBad Name: x\n: empty\nOk: y\n\n", &h,
	                       &why), 0);
	assert_int_equal(h.length, 3);
	assert_int_equal(h.nfields, 2);
	assert_string_equal(field(&h, "Ok"), "y");
	aas_http_head_free(&h);
	/* Equal Content-Lengths, repeated or as a list, are one. */
	assert_int_equal(parse("HTTP/1.1 200 OK\nContent-Length: 7\nContent-Length: 7, 7\n\n", &h, &why), 0);
	assert_int_equal(h.length, 7);
	aas_http_head_free(&h);
	/* chunked, in any case; no body for 1xx, 204, 304 whatever the fields say. */
	assert_int_equal(parse("HTTP/1.1 200 OK\nTransfer-Encoding: Chunked\n\n", &h, &why), 0);
	assert_int_equal(h.body, AAS_HTTP_BODY_CHUNKED);
	aas_http_head_free(&h);
	assert_int_equal(parse("HTTP/1.1 304 Not Modified\nContent-Length: 10\n\n", &h, &why), 0);
	assert_int_equal(h.body, AAS_HTTP_BODY_NONE);
	aas_http_head_free(&h);
	assert_int_equal(parse("HTTP/1.1 100 Continue\n\n", &h, &why), 0);
	assert_int_equal(h.status, 100);
	assert_int_equal(h.body, AAS_HTTP_BODY_NONE);
	aas_http_head_free(&h);
}

static void test_head_refused(void **state)
{
	static const struct {
		const char *head, *why;
	} bad[] = {
		{ "HTTP/1.1 200 OK\nContent-Length: 5\nTransfer-Encoding: chunked\n\n", "both Content-Length" },
		{ "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\ncontent-length: 0\n\n", "both Content-Length" },
		{ "HTTP/1.1 200 OK\nContent-Length: 5\nContent-Length: 6\n\n", "differ" },
		{ "HTTP/1.1 200 OK\nContent-Length: 5, 6\n\n", "invalid Content-Length" },
		{ "HTTP/1.1 200 OK\nContent-Length: +5\n\n", "invalid Content-Length" },
		{ "HTTP/1.1 200 OK\nContent-Length: -1\n\n", "invalid Content-Length" },
		{ "HTTP/1.1 200 OK\nContent-Length: 0x10\n\n", "invalid Content-Length" },
		{ "HTTP/1.1 200 OK\nContent-Length:\n\n", "invalid Content-Length" },
		{ "HTTP/1.1 200 OK\nContent-Length: 99999999999999999999\n\n", "invalid Content-Length" },
		{ "HTTP/1.1 200 OK\nContent-Length: 1\n 2\n\n", "invalid Content-Length" },
		{ "HTTP/1.1 200 OK\nTransfer-Encoding: gzip\n\n", "transfer coding" },
		{ "HTTP/1.1 200 OK\nTransfer-Encoding: gzip, chunked\n\n", "transfer coding" },
		{ "HTTP/1.1 200 OK\nTransfer-Encoding: chunked, chunked\n\n", "transfer coding" },
		{ "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\nTransfer-Encoding: identity\n\n", "transfer coding" },
		{ "HTTP/1.1 200 OK\nX: a\rb\n\n", "CR without LF" },
		{ "HTTP/1.1 200 OK\rX: a\n\n", "CR without LF" },
		{ "\rHTTP/1.1 200 OK\n\n", "CR without LF" },
		{ "\r\n\rHTTP/1.1 200 OK\n\n", "CR without LF" },
		{ "\n\r\rHTTP/1.1 200 OK\n\n", "CR without LF" },
		{ "HTTP/2 200\n\n", "status line" },
		{ "HTTP/1.1 20\n\n", "status line" },
		{ "HTTP/1.1 2000\n\n", "status line" },
		{ "HTTP/1.1  200\n\n", "status line" },
		{ "HTTP/1.1 099\n\n", "status line" },
		{ "ICY 200 OK\n\n", "status line" },
		{ "hello\n\n", "status line" },
	};
	struct aas_http_head h;
	const char *why;
	char nul[] = "HTTP/1.1 200 OK\nX: a\0b\n\n";
	size_t from = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i].head, &h, &why) != -1 || !strstr(why, bad[i].why))
			fail_msg("%s: accepted or refused for another reason (%s)", bad[i].head, why);
	}
	assert_int_equal(aas_http_head_end(nul, sizeof(nul) - 1, &from), sizeof(nul) - 1);
	assert_int_equal(aas_http_head_parse(nul, sizeof(nul) - 1, &h, &why), -1);
	assert_non_null(strstr(why, "NUL"));
}

/* Decode `in` in pieces of `step` bytes; the payload, or NULL at bad framing. *done: the end came. */
static char *dechunk(const char *in, size_t step, bool *done)
{
	struct aas_http_chunked c = { 0 };
	static char out[4096];
	char piece[4096];
	size_t len = strlen(in), n = 0;

	for (size_t at = 0; at < len; at += step) {
		size_t k = len - at < step ? len - at : step;
		ssize_t got;
		memcpy(piece, in + at, k);
		if ((got = aas_http_chunked(&c, piece, k)) < 0)
			return NULL;
		/* Bad framing after some payload: that payload, then -1 on the next call. */
		if (aas_http_chunked(&c, piece, 0) < 0)
			return NULL;
		memcpy(out + n, piece, (size_t)got);
		n += (size_t)got;
	}
	out[n] = '\0';
	*done = aas_http_chunked_done(&c);
	return out;
}

static void test_chunked(void **state)
{
	static const char *const bad[] = {
		"\r\n", "x\r\n", "-5\r\n", "0x5\r\nhello\r\n0\r\n\r\n", "5\r\nhelloX0\r\n\r\n",
		"5\r\nhello\r\r0\r\n\r\n", "11111111111111111\r\n", "5\rx\n", "5 6\r\n",
		"0\r\n\rX",
	};
	bool done;
	char *out;

	(void)state;
	for (size_t step = 1; step <= 64; step += 7) {
		out = dechunk("5\r\nhello\r\n6;name=value\r\n world\r\n0\r\n\r\nignored", step, &done);
		assert_non_null(out);
		assert_string_equal(out, "hello world");
		assert_true(done);
		/* Bare LF line ends, upper-case hex, leading zeros, whitespace before an extension, trailers. */
		out = dechunk("A\nabcdefghij\n000001 ;x\n!\n0\nTrailer: t\nMore: m\n\n", step, &done);
		assert_non_null(out);
		assert_string_equal(out, "abcdefghij!");
		assert_true(done);
		/* Cut short: what came, and no end. */
		out = dechunk("5\r\nhel", step, &done);
		assert_non_null(out);
		assert_string_equal(out, "hel");
		assert_false(done);
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			if (dechunk(bad[i], step, &done))
				fail_msg("bad chunked body accepted: %s (pieces of %zu)", bad[i], step);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_match),
		cmocka_unit_test(test_cookies),
		cmocka_unit_test(test_own_cookies),
		cmocka_unit_test(test_head_end),
		cmocka_unit_test(test_head_lenient),
		cmocka_unit_test(test_head_refused),
		cmocka_unit_test(test_chunked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
