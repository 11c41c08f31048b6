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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chunks),
		cmocka_unit_test(test_bad_chunks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
