/*
 * The remote client's event stream reader (lib/remote/sse.c) on bodies the
 * server would not send: each is refused as a protocol error, whatever piece
 * of it is wrong (the regressions its fuzzer, tests/fuzz/fuzz_sse.c, found).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "remote/http.h"
#include "remote/sse.h"

static unsigned int outputs;

static int on_output(void *ud, int stream, uint64_t offset, const void *data, size_t len)
{
	(void)ud, (void)stream, (void)offset, (void)data, (void)len;
	outputs++;
	return 0;
}

/* Read body whole; the verdict (0 when it was read to its end). */
static int read_body(const char *body, saas_exec_cursor *cur)
{
	saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;
	struct saas__sse s;
	int rc;

	cb.output = on_output;
	memset(&s, 0, sizeof(s));
	memset(cur, 0, sizeof(*cur));
	s.cb = &cb;
	s.cur = cur;
	rc = saas__sse_write(&s, body, strlen(body)) ? s.fail : 0;
	saas__sse_free(&s);
	return rc;
}

static void test_chunks(void **state)
{
	saas_exec_cursor cur;

	(void)state;
	outputs = 0;
	assert_int_equal(read_body("event: stdout\ndata: {\"stream\":\"stdout\",\"offset\":3,\"data\":\"abc\"}\n\n"
	                           "event: stderr\r\ndata: {\"stream\":\"stderr\",\"offset\":0,\"data_base64\":\"/w==\"}\r\n\r\n",
	                           &cur),
	                 0);
	assert_int_equal(outputs, 2);
	assert_int_equal(cur.stdout_offset, 6);
	assert_int_equal(cur.stderr_offset, 1);
}

/* A chunk the API would not send is the server's fault (EPROTOCOL), never our memory's (ENOMEM). */
static void test_bad_chunks(void **state)
{
	static const char *const bad[] = {
		"event: stdout\ndata: {\"stream\":\"stdin\",\"offset\":0,\"data\":\"x\"}\n\n",
		"event: stdout\ndata: {\"offset\":0,\"data\":\"x\"}\n\n",
		"event: stdout\ndata: {\"stream\":\"stdout\",\"offset\":-1,\"data\":\"x\"}\n\n",
		"event: stderr\ndata: {\"stream\":\"stderr\",\"offset\":0,\"data_base64\":\"!!\"}\n\n",
		"event: stdout\ndata: [1]\n\n",
	};
	saas_exec_cursor cur;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = read_body(bad[i], &cur);
		if (rc != SAAS_EPROTOCOL)
			fail_msg("%s: %d (%s), want SAAS_EPROTOCOL", bad[i], rc, saas_error_last()->message);
		assert_non_null(strstr(saas_error_last()->message, "event stream"));
	}
}

/* What a frame told: its events as "name|data" and comments as "#", one after another (each ending ";"). */
static char told[512];

static int on_frame(void *ud, int what)
{
	struct saas__sse_frame *f = ud;
	size_t n = strlen(told);

	if (what == SAAS__SSE_COMMENT)
		snprintf(told + n, sizeof(told) - n, "#;");
	else
		snprintf(told + n, sizeof(told) - n, "%s|%.*s;", f->name, (int)f->data.len, f->data.data ? f->data.data : "");
	return 0;
}

/* Frame the stream whole, then a byte at a time: both must tell the same. */
static void frame(const char *stream, const char *want)
{
	struct saas__sse_frame f;

	for (int bytewise = 0; bytewise < 2; bytewise++) {
		memset(&f, 0, sizeof(f));
		told[0] = '\0';
		if (!bytewise)
			assert_int_equal(saas__sse_frame_write(&f, stream, strlen(stream), 1024, on_frame, &f), 0);
		for (size_t i = 0; bytewise && stream[i]; i++)
			assert_int_equal(saas__sse_frame_write(&f, stream + i, 1, 1024, on_frame, &f), 0);
		saas__sse_frame_free(&f);
		if (strcmp(told, want) != 0)
			fail_msg("%s (%s): told \"%s\", want \"%s\"", stream, bytewise ? "a byte at a time" : "whole", told, want);
	}
}

/* The standard's framing (html.spec.whatwg.org, "Server-sent events": interpreting an event stream). */
static void test_frame(void **state)
{
	struct saas__sse_frame f;
	char big[40];

	(void)state;
	/* Data lines joined with LF, the last LF removed; one space after the colon dropped, a second kept. */
	frame("event: x\ndata: a\ndata:\ndata\ndata:  b\n\n", "x|a\n\n\n b;");
	frame("data:no space\n\n", "|no space;");
	/* Line ends: CR LF, LF, a lone CR, and a CR LF cut between two writes (the byte-wise pass). */
	frame("data: 1\r\n\r\ndata: 2\r\rdata: 3\n\n", "|1;|2;|3;");
	/* A blank line after no data line is no event, and forgets the name. */
	frame("event: y\n\ndata: z\n\n", "|z;");
	frame("\n\n\r\n", "");
	/* Comments are told; other fields, and names that only begin like ours, change nothing. */
	frame(": keepalive\nid: 7\nretry: 10\ndatax: no\ndata x\neventful: no\ndata: d\n\n", "#;|d;");
	/* "event:" with no value: no name. A colon in the value is the value's. */
	frame("event: old\nevent:\ndata: a:b\n\n", "|a:b;");
	/* A stream's end without the blank line ends no event. */
	frame("event: e\ndata: never told\n", "");

	/* The bound: a line, or an event's data lines together (each with its LF). */
	memset(&f, 0, sizeof(f));
	memset(big, 'x', sizeof(big));
	assert_int_equal(saas__sse_frame_write(&f, big, sizeof(big), 32, on_frame, &f), SAAS_ETOOBIG);
	saas__sse_frame_free(&f);
	memset(&f, 0, sizeof(f));
	assert_int_equal(saas__sse_frame_write(&f, "data: 0123456789\ndata: 0123456789\n", 34, 20, on_frame, &f),
	                 SAAS_ETOOBIG);
	saas__sse_frame_free(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chunks),
		cmocka_unit_test(test_bad_chunks),
		cmocka_unit_test(test_frame),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
