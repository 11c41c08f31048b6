/*
 * The remote client against answers a server may send (tests/answer_server.c
 * on loopback, through libcurl): the regressions its fuzzer
 * (tests/fuzz/fuzz_remote.c) found, and its bounds on answers without end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "answer_server.h"
#include "remote/http.h"
#include "remote/sse.h"

#define SB "sbx-test0000000000000000"
#define ACCOUNT_ANSWER \
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 30\r\n\r\n{\"id\":\"acc-test\",\"name\":\"t\"}\r\n"

/* What an endless answer offers before it gives up: twice the client's bound. */
#define ENDLESS_MAX (2 * (unsigned long long)SAAS_REMOTE_ANSWER_MAX)

/* What the server says next: a fixed answer, or an endless one. */
enum mode { FIXED, ENDLESS_EVENT, ENDLESS_JSON };

static struct {
	enum mode mode;
	const char *answer;
	unsigned long long sent; /* bytes an endless answer got out before the client hung up */
} next;

static void respond(void *ud, int fd, const char *req, size_t len)
{
	static const char *const event_head =
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: stdout\n";
	static const char *const json_head =
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
	unsigned long long sent = 0;
	char line[4096];

	(void)ud, (void)len;
	if (strncmp(req, "GET /v1/account ", 16) == 0) {
		answer_send(fd, ACCOUNT_ANSWER, strlen(ACCOUNT_ANSWER));
		return;
	}
	__atomic_store_n(&next.sent, 0, __ATOMIC_RELAXED);
	switch (next.mode) {
	case FIXED:
		answer_send(fd, next.answer, strlen(next.answer));
		break;
	case ENDLESS_EVENT:
		/* One event's data lines, without the blank line that would end it (512 MiB at most). */
		memset(line, 'x', sizeof(line));
		memcpy(line, "data: ", 6);
		line[sizeof(line) - 1] = '\n';
		if (!answer_send(fd, event_head, strlen(event_head)))
			break;
		while (sent < ENDLESS_MAX && answer_send(fd, line, sizeof(line)))
			__atomic_store_n(&next.sent, sent += sizeof(line), __ATOMIC_RELAXED);
		break;
	case ENDLESS_JSON:
		/* "[" and then chunks of spaces. */
		memset(line, ' ', sizeof(line));
		if (!answer_send(fd, json_head, strlen(json_head)) || !answer_send(fd, "1\r\n[\r\n", 6))
			break;
		while (sent < ENDLESS_MAX && answer_send(fd, "1000\r\n", 6) && answer_send(fd, line, sizeof(line)) &&
		       answer_send(fd, "\r\n", 2))
			__atomic_store_n(&next.sent, sent += sizeof(line), __ATOMIC_RELAXED);
		break;
	}
}

static int setup(void **state)
{
	static unsigned short port;
	saas_remote_options o = SAAS_REMOTE_OPTIONS_INIT;
	saas_client *c = NULL;
	char base[64];

	if (!port)
		port = answer_server_start(respond, NULL);
	snprintf(base, sizeof(base), "http://127.0.0.1:%u", port);
	o.retries = 0;
	o.timeout_ms = 60000;
	assert_int_equal(saas_client_open_remote(&c, base, "saas_test_key", &o, 0), SAAS_OK);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	saas_client_free(*state);
	return 0;
}

/* A code context's restart and delete: aas-server answers 204, no body (docs/rest.md). */
static void test_no_content(void **state)
{
	saas_client *c = *state;

	next.mode = FIXED;
	next.answer = "HTTP/1.1 204 No Content\r\nCache-Control: no-store\r\n\r\n";
	assert_int_equal(saas_code_context_restart(c, SB, "ctx-1", 0), SAAS_OK);
	assert_int_equal(saas_code_context_delete(c, SB, "ctx-1", 0), SAAS_OK);
	/* Where an answer is needed, nothing is still no answer. */
	saas_sandbox *sb = NULL;
	assert_int_equal(saas_sandbox_get(&sb, c, SB), SAAS_EPROTOCOL);
	assert_null(sb);
}

static int on_event(void *ud, const saas_code_event *ev)
{
	(void)ud, (void)ev;
	return 0;
}

/* A stream's own verdict is what the caller reads, not "the writer stopped the read". */
static void test_stream_says_why(void **state)
{
	saas_client *c = *state;
	saas_code_run_options ro = SAAS_CODE_RUN_OPTIONS_INIT;
	saas_exec_options eo = SAAS_EXEC_OPTIONS_INIT;
	saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;
	saas_code_execution *cx = NULL;
	saas_execution *x = NULL;

	next.mode = FIXED;
	next.answer = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
	              "event: stdout\ndata: {\"text\":\"x\"}\n\n"
	              "event: failed\ndata: {\"error\":{\"code\":\"timeout\",\"message\":\"the run timed out\"}}\n\n";
	ro.on_event = on_event;
	assert_int_equal(saas_code_run(&cx, c, SB, "1", &ro, 0), SAAS_ETIMEOUT);
	assert_null(cx);
	assert_int_equal(saas_error_last()->code, SAAS_ETIMEOUT);
	assert_string_equal(saas_error_last()->message, "the run timed out");

	next.answer = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: started\ndata: [1]\n\n";
	assert_int_equal(saas_exec_stream(&x, c, SB, "true", &eo, &cb, 0), SAAS_EPROTOCOL);
	assert_null(x);
	assert_int_equal(saas_error_last()->code, SAAS_EPROTOCOL);
	assert_non_null(strstr(saas_error_last()->message, "event stream"));
}

/*
 * A code run's events framed as the SSE standard frames them: lines ended by
 * CR LF, LF or a lone CR; one space after "data:" dropped (a second kept), none
 * needed; "data" alone an empty data line; an event's data lines joined with
 * LF; an unnamed event forgotten, data and all; a comment between events.
 */
static void test_code_event_lines(void **state)
{
	saas_client *c = *state;
	saas_code_run_options ro = SAAS_CODE_RUN_OPTIONS_INIT;
	saas_code_execution *cx = NULL;

	next.mode = FIXED;
	next.answer = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
	              "event: stdout\rdata:{\"text\":\"a\"}\r\r"
	              "data: {\"never\"\n\n"
	              "event: stdout\r\ndata: {\"text\":\r\ndata:  \"b\"}\r\n\r\n"
	              ": keepalive\n"
	              "event: stderr\ndata\ndata: {\"text\":\"c\"}\n\n"
	              "event: end\ndata: {\"status\":\"done\"}\n\n";
	ro.on_event = on_event;
	assert_int_equal(saas_code_run(&cx, c, SB, "1", &ro, 0), SAAS_OK);
	assert_non_null(cx);
	assert_string_equal(cx->stdout_data, "ab");
	assert_string_equal(cx->stderr_data, "c");
	assert_int_equal(cx->status, SAAS_CODE_DONE);
	saas_code_execution_free(cx);
	cx = NULL;

	/* Two data lines are two lines (joined with LF), not one glued: "1" and "2" are not the number 12. */
	next.answer = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
	              "event: execution_count\ndata: {\"execution_count\":1\ndata: 2}\n\n"
	              "event: end\ndata: {\"status\":\"done\"}\n\n";
	assert_int_equal(saas_code_run(&cx, c, SB, "1", &ro, 0), SAAS_EPROTOCOL);
	assert_null(cx);
	assert_non_null(strstr(saas_error_last()->message, "not JSON"));
}

static int count(void *ud, const void *data, size_t len)
{
	(void)data;
	*(size_t *)ud += len;
	return 0;
}

/* A file's answer without a Content-Length (chunked, as a proxy may send it): its size is what came. */
static void test_read_without_length(void **state)
{
	saas_client *c = *state;
	size_t got = 0;
	int64_t size = -7;

	next.mode = FIXED;
	next.answer = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	              "5\r\nhello\r\n3\r\n!!\n\r\n0\r\n\r\n";
	assert_int_equal(saas_file_read_stream(&size, c, SB, "f", count, &got), SAAS_OK);
	assert_int_equal(got, 8);
	assert_int_equal(size, 8);
}

/*
 * A folded header first in an answer on a connection used before: libcurl
 * before 8.1.0 unfolds it into the previous transfer's freed header
 * (curl/curl#11101) when the easy handle is reused; each request has its own.
 */
static void test_folded_header_after_reuse(void **state)
{
	saas_client *c = *state;
	saas_execution *x = NULL;
	int rc;

	next.mode = FIXED;
	next.answer = "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nX-A: 1\r\nContent-Length: 0\r\n\r\n";
	assert_int_equal(saas_execution_get(&x, c, "exe-test"), SAAS_ENOTFOUND);
	next.answer = "HTTP/1.1 100 Continue\r\n folded: on nothing\r\n\r\n"
	              "HTTP/1.1 200 OK\r\n\tstill folded\r\nContent-Length: 2\r\n\r\n{}";
	rc = saas_execution_get(&x, c, "exe-test");
	/* libcurl may take the fold or refuse the head: either way an error, said. */
	assert_true(rc == SAAS_ENETWORK || rc == SAAS_EPROTOCOL);
	assert_int_equal(saas_error_last()->code, rc);
	assert_null(x);
}

/* An event that never ends (data lines without the blank line) is refused at its bound, not held. */
static void test_endless_event(void **state)
{
	saas_client *c = *state;
	saas_code_run_options ro = SAAS_CODE_RUN_OPTIONS_INIT;
	saas_code_execution *cx = NULL;

	next.mode = ENDLESS_EVENT;
	ro.on_event = on_event;
	ro.max_output = 4096;
	ro.max_result = 4096;
	assert_int_equal(saas_code_run(&cx, c, SB, "1", &ro, 0), SAAS_EPROTOCOL);
	assert_null(cx);
	assert_non_null(strstr(saas_error_last()->message, "over its bound"));
	/* What the client took before it stopped: its bound and what was on the way, far from all that was offered. */
	assert_true(__atomic_load_n(&next.sent, __ATOMIC_RELAXED) < ENDLESS_MAX / 4);
}

/* A JSON answer that never ends is refused at SAAS_REMOTE_ANSWER_MAX. */
static void test_endless_json(void **state)
{
	saas_client *c = *state;
	saas_sandbox *sb = NULL;

	next.mode = ENDLESS_JSON;
	assert_int_equal(saas_sandbox_get(&sb, c, SB), SAAS_EPROTOCOL);
	assert_null(sb);
	assert_non_null(strstr(saas_error_last()->message, "over 256 MiB"));
	assert_true(__atomic_load_n(&next.sent, __ATOMIC_RELAXED) < ENDLESS_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_no_content, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stream_says_why, setup, teardown),
		cmocka_unit_test_setup_teardown(test_code_event_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_without_length, setup, teardown),
		cmocka_unit_test_setup_teardown(test_folded_header_after_reuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_endless_event, setup, teardown),
		cmocka_unit_test_setup_teardown(test_endless_json, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
