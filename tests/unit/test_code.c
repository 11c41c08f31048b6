/*
 * Code contexts through the local engine, against a test double of a
 * HOSTILE code server (tests/code_guest.c: canned answers, not the real
 * server): the requests the engine sends, the events and execution it
 * makes of good answers (chunked, length-delimited, to the close, cut in
 * pieces), and a clear error or flag for every bad one: bad JSON, missing
 * fields, a line over its bound, output past the caps, a slow drip past the
 * timeout, an early close, no end_of_execution.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "code_guest.h"
#include "fake/fake_driver.h"
#include "fixture.h"

static char sb_id[SAAS_ID_MAX + 1];

static int setup(void **state)
{
	struct saas_test_fixture *f = saas_test_fixture_new(&saas_fake_driver, 0);
	saas_sandbox *sb = NULL;

	code_guest_start();
	saas_test_fixture_open(f);
	assert_int_equal(saas_sandbox_create(&sb, f->a, NULL, 0), SAAS_OK);
	snprintf(sb_id, sizeof(sb_id), "%s", sb->id);
	saas_sandbox_free(sb);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	saas_test_fixture_free(*state);
	code_guest_stop();
	return 0;
}

/* What the callback saw, in order, as one string: "c1 o[hi] e[..] r[text/plain,image/png] x[ValueError] ". */
static char seen[4096];
static int cancel_at; /* cancel at the n-th event (0: never) */
static int events;
static int ticks;
static bool cancel_on_tick;

static int on_event(void *ud, const saas_code_event *ev)
{
	size_t n = strlen(seen);

	(void)ud;
	switch (ev->type) {
	case SAAS_CODE_EVENT_COUNT:
		snprintf(seen + n, sizeof(seen) - n, "c%lld ", (long long)ev->execution_count);
		break;
	case SAAS_CODE_EVENT_STDOUT:
	case SAAS_CODE_EVENT_STDERR:
		assert_int_equal(strlen(ev->text), ev->len);
		snprintf(seen + n, sizeof(seen) - n, "%c[%s] ", ev->type == SAAS_CODE_EVENT_STDOUT ? 'o' : 'e', ev->text);
		break;
	case SAAS_CODE_EVENT_RESULT:
		snprintf(seen + n, sizeof(seen) - n, "r[");
		for (size_t i = 0; i < ev->result->count; i++) {
			n = strlen(seen);
			snprintf(seen + n, sizeof(seen) - n, "%s%s", i ? "," : "", ev->result->formats[i]->mime);
		}
		n = strlen(seen);
		snprintf(seen + n, sizeof(seen) - n, "] ");
		break;
	case SAAS_CODE_EVENT_ERROR:
		snprintf(seen + n, sizeof(seen) - n, "x[%s] ", ev->error->name);
		break;
	case SAAS_CODE_EVENT_TICK:
		/* Not in `seen`: how many come depends on the machine's speed. */
		ticks++;
		return cancel_on_tick;
	default:
		fail_msg("unknown event %d", ev->type);
	}
	return cancel_at && ++events >= cancel_at;
}

static int run(saas_client *c, const char *code, saas_code_run_options *o, saas_code_execution **x)
{
	saas_code_run_options def = SAAS_CODE_RUN_OPTIONS_INIT;

	if (!o)
		o = &def;
	o->on_event = on_event;
	seen[0] = '\0';
	events = ticks = 0;
	return saas_code_run(x, c, sb_id, code, o, 0);
}

#define GOOD                                                                                                       \
	"{\"type\":\"number_of_executions\",\"execution_count\":3}\n"                                                  \
	"{\"type\":\"stdout\",\"text\":\"hi\\n\",\"timestamp\":\"2026-01-01T00:00:00Z\"}\n"                          \
	"{\"type\":\"keepalive\"}\n"                                                                                 \
	"{\"type\":\"stderr\",\"text\":\"warn\",\"timestamp\":\"2026-01-01T00:00:00Z\"}\n"                           \
	"{\"type\":\"result\",\"text\":\"2\",\"png\":\"iVBORw0KGgo=\",\"json\":{\"a\":[1,2]},\"html\":null,"          \
	"\"extra\":{\"application/x-thing\":\"t\"},\"is_main_result\":true}\n"                                       \
	"{\"type\":\"error\",\"name\":\"ValueError\",\"value\":\"bad\",\"traceback\":\"Traceback...\"}\n"            \
	"{\"type\":\"end_of_execution\"}\n"

static void check_good(const saas_code_execution *x)
{
	const saas_code_result *r;

	assert_int_equal(x->status, SAAS_CODE_DONE);
	assert_int_equal(x->execution_count, 3);
	assert_string_equal(x->stdout_data, "hi\n");
	assert_string_equal(x->stderr_data, "warn");
	assert_int_equal(x->result_count, 1);
	r = x->results[0];
	assert_true(r->is_main);
	assert_int_equal(r->count, 4);
	assert_string_equal(r->formats[0]->mime, "text/plain");
	assert_string_equal((char *)r->formats[0]->data, "2");
	/* The PNG comes decoded: its 8-byte signature. */
	assert_string_equal(r->formats[1]->mime, "image/png");
	assert_int_equal(r->formats[1]->len, 8);
	assert_memory_equal(r->formats[1]->data, "\x89PNG\r\n\x1a\n", 8);
	assert_string_equal(r->formats[2]->mime, "application/json");
	assert_string_equal((char *)r->formats[2]->data, "{\"a\":[1,2]}");
	assert_string_equal(r->formats[3]->mime, "application/x-thing");
	assert_non_null(x->error);
	assert_string_equal(x->error->name, "ValueError");
	assert_string_equal(x->error->value, "bad");
	assert_string_equal(x->error->traceback, "Traceback...");
	assert_false(x->error->truncated);
	assert_false(x->stdout_truncated || x->stderr_truncated || x->results_truncated);
	assert_string_equal(seen, "c3 o[hi\n] e[warn] r[text/plain,image/png,application/json,application/x-thing] "
	                          "x[ValueError] ");
}

static void test_run_good(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_code_run_options o = SAAS_CODE_RUN_OPTIONS_INIT;
	const char *env[] = { "A=1", NULL };
	saas_code_execution *x = NULL;
	size_t chunks[] = { 0, 1, 7, 100 };
	const char *req;

	for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
		code_guest_answer_ndjson(GOOD, chunks[i]);
		o.language = " Python ";
		o.env = env;
		assert_int_equal(run(f->a, "1+1", &o, &x), SAAS_OK);
		check_good(x);
		saas_code_execution_free(x);
		x = NULL;
	}
	req = code_guest_request();
	assert_non_null(strstr(req, "POST /execute HTTP/1.1\r\n"));
	assert_non_null(strstr(req, "\"code\":\"1+1\""));
	assert_non_null(strstr(req, "\"language\":\"python\""));
	assert_non_null(strstr(req, "\"env_vars\":{\"A\":\"1\"}"));
	assert_null(strstr(req, "context_id"));

	/* Length-delimited, and to the close. */
	{
		char buf[4096];
		int n = snprintf(buf, sizeof(buf), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s", strlen(GOOD), GOOD);
		code_guest_answer(buf, (size_t)n, 5, 0, false);
		assert_int_equal(run(f->a, "1+1", NULL, &x), SAAS_OK);
		check_good(x);
		saas_code_execution_free(x);
		n = snprintf(buf, sizeof(buf), "HTTP/1.0 200 OK\r\n\r\n%s", GOOD);
		code_guest_answer(buf, (size_t)n, 0, 0, false);
		assert_int_equal(run(f->a, "1+1", NULL, &x), SAAS_OK);
		check_good(x);
		saas_code_execution_free(x);
	}
}

/* Each answer a hostile guest might give, and the error it must come to. */
static void test_run_hostile(void **state)
{
	static const struct {
		const char *ndjson;
		int rc;
		const char *says;
	} cases[] = {
		{ "not json\n", SAAS_EPROTOCOL, "not JSON" },
		{ "[1]\n", SAAS_EPROTOCOL, "not an event" },
		{ "{\"type\":1}\n", SAAS_EPROTOCOL, "not an event" },
		{ "{\"type\":\"stdout\"}\n", SAAS_EPROTOCOL, "without its text" },
		{ "{\"type\":\"stdout\",\"text\":5}\n", SAAS_EPROTOCOL, "without its text" },
		{ "{\"type\":\"number_of_executions\",\"execution_count\":\"x\"}\n", SAAS_EPROTOCOL, "without a count" },
		{ "{\"type\":\"result\",\"png\":\"!!!\"}\n", SAAS_EPROTOCOL, "not base64" },
		{ "{\"type\":\"result\",\"text\":[1]}\n", SAAS_EPROTOCOL, "not a string" },
		{ "{\"type\":\"result\",\"is_main_result\":\"yes\"}\n", SAAS_EPROTOCOL, "not a boolean" },
		{ "{\"type\":\"error\",\"value\":\"x\"}\n", SAAS_EPROTOCOL, "without its name" },
		{ "{\"type\":\"stdout\",\"text\":\"a\",\"text\":\"b\"}\n", SAAS_EPROTOCOL, "not JSON" },
		{ "{\"type\":\"stdout\",\"text\":\"a\"}\n", SAAS_EBACKEND, "no end_of_execution" },
		{ "", SAAS_EBACKEND, "no end_of_execution" },
	};
	struct saas_test_fixture *f = *state;
	saas_code_execution *x = NULL;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		code_guest_answer_ndjson(cases[i].ndjson, 3);
		int rc = run(f->a, "x", NULL, &x);
		if (rc != cases[i].rc || !strstr(saas_error_last()->message, cases[i].says))
			fail_msg("%s: %d (%s), want %d saying \"%s\"", cases[i].ndjson, rc, saas_error_last()->message,
			         cases[i].rc, cases[i].says);
		assert_null(x);
	}
}

/* Bad HTTP: each is a clear error, never a crash or a hang. */
static void test_run_bad_http(void **state)
{
	static const struct {
		const char *answer;
		int rc;
		const char *says;
	} cases[] = {
		{ "", SAAS_EPROTOCOL, "without an answer" },
		{ "SSH-2.0-OpenSSH\r\n\r\n", SAAS_EPROTOCOL, "not HTTP" },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", SAAS_EPROTOCOL, "transfer coding" },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", SAAS_EPROTOCOL, "Content-Length" },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", SAAS_EPROTOCOL, "chunk size" },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"ty", SAAS_EPROTOCOL, "middle" },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}", SAAS_EPROTOCOL, "middle" },
		{ "HTTP/1.1 404 Not Found\r\nContent-Length: 22\r\n\r\nContext abc not found\x01", SAAS_ENOTFOUND,
		  "Context abc not found" },
		{ "HTTP/1.1 400 Bad\r\n\r\nOnly one of context_id or language", SAAS_EINVAL, "Only one" },
		/* The code server's refusals are the caller's to read: none is EBACKEND (a server hides those). */
		{ "HTTP/1.1 500 Oops\r\n\r\ncannot start a python kernel: boom", SAAS_EIO,
		  "failed (500): cannot start a python kernel: boom" },
		{ "HTTP/1.1 409 Conflict\r\n\r\ntoo many contexts: at most 16", SAAS_ELIMIT, "too many contexts" },
		{ "HTTP/1.1 413 Payload Too Large\r\n\r\nthe body exceeds 8 bytes", SAAS_ETOOBIG, "the body exceeds" },
		{ "HTTP/1.1 503 Service Unavailable\r\n\r\ntoo many connections", SAAS_EBUSY,
		  "busy: too many connections" },
	};
	struct saas_test_fixture *f = *state;
	saas_code_execution *x = NULL;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		code_guest_answer(cases[i].answer, strlen(cases[i].answer), 0, 0, false);
		int rc = run(f->a, "x", NULL, &x);
		if (rc != cases[i].rc || !strstr(saas_error_last()->message, cases[i].says))
			fail_msg("%s: %d (%s), want %d saying \"%s\"", cases[i].answer, rc, saas_error_last()->message,
			         cases[i].rc, cases[i].says);
		if (rc == SAAS_ELIMIT)
			assert_string_equal(saas_error_last()->limit, "code_contexts");
		assert_null(x);
	}
	/* A head without end is cut at its bound. */
	{
		size_t n = 70000;
		char *big = malloc(n);
		assert_non_null(big);
		memcpy(big, "HTTP/1.1 200 OK\r\n", 17);
		for (size_t i = 17; i < n; i++)
			big[i] = (i % 100 == 99) ? '\n' : (i % 100 == 50) ? ':' : 'a';
		code_guest_answer(big, n, 0, 0, false);
		assert_int_equal(run(f->a, "x", NULL, &x), SAAS_EPROTOCOL);
		assert_non_null(strstr(saas_error_last()->message, "head over its bound"));
		free(big);
	}
}

/* Output past max_output, a line past its bound, results past their count: cut and flagged, the run goes on. */
static void test_run_bounds(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_code_run_options o = SAAS_CODE_RUN_OPTIONS_INIT;
	saas_code_execution *x = NULL;
	size_t big = 200000, n = 0, cap = big + 300 * 64 + 4096;
	char *body = malloc(cap);

	assert_non_null(body);
	n += (size_t)snprintf(body + n, cap - n, "{\"type\":\"stdout\",\"text\":\"0123456789\"}\n");
	n += (size_t)snprintf(body + n, cap - n, "{\"type\":\"stdout\",\"text\":\"\xc3\xa9\xc3\xa9\"}\n");
	/* A line over the bound (max_result 1024: about 65 KiB) is dropped. */
	n += (size_t)snprintf(body + n, cap - n, "{\"type\":\"result\",\"text\":\"");
	memset(body + n, 'x', big);
	n += big;
	n += (size_t)snprintf(body + n, cap - n, "\"}\n");
	/* A result with one format too large for max_result keeps the others. */
	n += (size_t)snprintf(body + n, cap - n, "{\"type\":\"result\",\"text\":\"t\",\"html\":\"%01100d\"}\n", 0);
	for (int i = 0; i < SAAS_CODE_RESULTS_MAX + 3; i++)
		n += (size_t)snprintf(body + n, cap - n, "{\"type\":\"result\",\"text\":\"%d\"}\n", i);
	n += (size_t)snprintf(body + n, cap - n, "{\"type\":\"end_of_execution\"}\n");
	body[n] = '\0';
	code_guest_answer_ndjson(body, 4096);
	o.max_output = 13; /* "0123456789" and one "é" (2 bytes): the second é would cut in two */
	o.max_result = 1024;
	assert_int_equal(run(f->a, "x", &o, &x), SAAS_OK);
	assert_int_equal(x->status, SAAS_CODE_DONE);
	assert_string_equal(x->stdout_data, "0123456789\xc3\xa9");
	assert_true(x->stdout_truncated);
	assert_true(x->results_truncated);
	assert_int_equal(x->result_count, SAAS_CODE_RESULTS_MAX);
	assert_int_equal(x->results[0]->count, 1);
	assert_true(x->results[0]->truncated);
	assert_string_equal((char *)x->results[1]->formats[0]->data, "0");
	saas_code_execution_free(x);
	x = NULL;
	free(body);

	/* What the code server cut for its own bounds is flagged as ours is; its notice is kept. */
	code_guest_answer_ndjson("{\"type\":\"stdout\",\"text\":\"a\"}\n"
	                         "{\"type\":\"result\",\"text\":\"t\",\"truncated\":[\"png\"]}\n"
	                         "{\"type\":\"stderr\",\"text\":\"[cut]\",\"cut\":\"output\"}\n"
	                         "{\"type\":\"stderr\",\"text\":\"[no more]\",\"cut\":\"results\"}\n"
	                         "{\"type\":\"end_of_execution\"}\n",
	                         0);
	assert_int_equal(run(f->a, "x", NULL, &x), SAAS_OK);
	assert_true(x->stdout_truncated && x->stderr_truncated && x->results_truncated);
	assert_true(x->results[0]->truncated);
	assert_string_equal(x->stderr_data, "[cut][no more]");
	saas_code_execution_free(x);
	x = NULL;
	code_guest_answer_ndjson("{\"type\":\"stderr\",\"text\":\"x\",\"cut\":5}\n", 0);
	assert_int_equal(run(f->a, "x", NULL, &x), SAAS_EPROTOCOL);
	code_guest_answer_ndjson("{\"type\":\"result\",\"text\":\"t\",\"truncated\":\"png\"}\n", 0);
	assert_int_equal(run(f->a, "x", NULL, &x), SAAS_EPROTOCOL);
	assert_null(x);
}

/*
 * An error's text past its bounds: its name at SAAS_CODE_ERROR_NAME_MAX, its
 * value at max_output (its start), its traceback at max_output (its first and
 * last bytes around a cut line), each at a UTF-8 boundary, and flagged; an
 * error the code server cut for its own bounds is flagged the same.
 */
static void test_run_error_bounds(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_code_run_options o = SAAS_CODE_RUN_OPTIONS_INIT;
	saas_code_execution *x = NULL;
	char body[8192], name[1501], value[201];
	size_t n;

	memset(name, 'N', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	for (size_t i = 0; i + 1 < sizeof(value); i += 2)
		memcpy(value + i, "\xc3\xa9", 2);
	value[sizeof(value) - 1] = '\0';
	n = (size_t)snprintf(body, sizeof(body),
	                     "{\"type\":\"error\",\"name\":\"%s\",\"value\":\"%s\",\"traceback\":\"HEAD%0200d%s\"}\n"
	                     "{\"type\":\"end_of_execution\"}\n",
	                     name, value, 0, value + 200 - 14);
	assert_true(n < sizeof(body));
	code_guest_answer_ndjson(body, 100);
	o.max_output = 40;
	assert_int_equal(run(f->a, "x", &o, &x), SAAS_OK);
	assert_int_equal(strlen(x->error->name), SAAS_CODE_ERROR_NAME_MAX);
	assert_int_equal(strspn(x->error->name, "N"), SAAS_CODE_ERROR_NAME_MAX);
	assert_int_equal(strlen(x->error->value), 40); /* 20 characters of 2 bytes */
	assert_memory_equal(x->error->value, value, 40);
	/* 39 bytes: 12 of its start, the 15 of the cut line, 12 of its end (its last 13 would cut an é in two). */
	assert_string_equal(x->error->traceback, "HEAD00000000\n[... cut ...]\n\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
	assert_true(x->error->truncated);
	assert_false(x->stdout_truncated || x->stderr_truncated || x->results_truncated);
	saas_code_execution_free(x);
	x = NULL;

	/* Cut by the code server (its "truncated", the fields it cut): flagged, the text as it came. */
	code_guest_answer_ndjson("{\"type\":\"error\",\"name\":\"E\",\"value\":\"v\",\"traceback\":\"t\",\"truncated\":[\"value\"]}\n"
	                         "{\"type\":\"end_of_execution\"}\n",
	                         0);
	assert_int_equal(run(f->a, "x", NULL, &x), SAAS_OK);
	assert_string_equal(x->error->value, "v");
	assert_true(x->error->truncated);
	saas_code_execution_free(x);
	x = NULL;
	code_guest_answer_ndjson("{\"type\":\"error\",\"name\":\"E\",\"value\":\"v\",\"truncated\":\"value\"}\n", 0);
	assert_int_equal(run(f->a, "x", NULL, &x), SAAS_EPROTOCOL);
	assert_non_null(strstr(saas_error_last()->message, "truncated"));
	assert_null(x);
}

/*
 * A run that prints "tick" and is then silent, its connection held open,
 * with timeout_ms: it ends with `status`, what it printed kept, and the
 * double sees the connection closed (what interrupts the run in the real
 * server).
 */
static void silent_run(saas_client *c, saas_code_run_options *o, int64_t timeout_ms, int status)
{
	const char *head = "HTTP/1.1 200 OK\r\n\r\n{\"type\":\"stdout\",\"text\":\"tick\"}\n";
	unsigned int before = code_guest_hangups();
	saas_code_execution *x = NULL;

	code_guest_answer(head, strlen(head), 0, 0, true);
	o->timeout_ms = timeout_ms;
	assert_int_equal(run(c, "import time; time.sleep(60)", o, &x), SAAS_OK);
	assert_int_equal(x->status, status);
	assert_string_equal(x->stdout_data, "tick");
	assert_string_equal(seen, "o[tick] ");
	saas_code_execution_free(x);
	for (int i = 0; i < 500 && code_guest_hangups() == before; i++)
		usleep(10000);
	assert_true(code_guest_hangups() > before);
}

/* A guest that drips past the timeout: the run is cut there, the connection closed (the interrupt). */
static void test_run_timeout_and_cancel(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_code_run_options o = SAAS_CODE_RUN_OPTIONS_INIT;
	saas_code_execution *x = NULL;

	silent_run(f->a, &o, 300, SAAS_CODE_TIMEDOUT);

	/* A slow drip is bounded by the same deadline. */
	o.timeout_ms = 200;
	{
		/* The whole answer, a byte every 50 ms: far past 200 ms. */
		char buf[4096];
		int n = snprintf(buf, sizeof(buf), "HTTP/1.1 200 OK\r\n\r\n%s", GOOD);
		code_guest_answer(buf, (size_t)n, 1, 50, false);
	}
	assert_int_equal(run(f->a, "x", &o, &x), SAAS_OK);
	assert_int_equal(x->status, SAAS_CODE_TIMEDOUT);
	saas_code_execution_free(x);
	x = NULL;

	/*
	 * A silent run is told ticks: a callback that cancels at one ends it
	 * long before its timeout (which would make it TIMEDOUT), and the
	 * connection is closed (the interrupt).
	 */
	cancel_on_tick = true;
	silent_run(f->a, &o, 600000, SAAS_CODE_CANCELLED);
	cancel_on_tick = false;
	assert_int_equal(ticks, 1);
	/* Ticks go on as long as the silence does, and stop the other events none. */
	silent_run(f->a, &o, 3000, SAAS_CODE_TIMEDOUT);
	assert_true(ticks >= 1);

	/* Cancelled by the callback at the second event. */
	code_guest_answer_ndjson(GOOD, 0);
	cancel_at = 2;
	o.timeout_ms = 0;
	assert_int_equal(run(f->a, "x", &o, &x), SAAS_OK);
	cancel_at = 0;
	assert_int_equal(x->status, SAAS_CODE_CANCELLED);
	assert_string_equal(seen, "c3 o[hi\n] ");
	saas_code_execution_free(x);
}

static void answer(const char *text)
{
	code_guest_answer(text, strlen(text), 0, 0, false);
}

static void test_contexts(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_code_context_options o = SAAS_CODE_CONTEXT_OPTIONS_INIT;
	saas_code_context *ctx = NULL;
	saas_code_context_list *l = NULL;
	const char *env[] = { "X=y", NULL };
	const char *list = "HTTP/1.1 200 OK\r\nContent-Length: 41\r\n\r\n[{\"id\":\"c1\",\"language\":\"bash\",\"cwd\":\"/\"}]";
	const char *made = "HTTP/1.1 200 OK\r\n\r\n{\"id\":\"c2\",\"language\":\"javascript\",\"cwd\":\"/workspace/sub\"}";
	const char *req;

	/* A create lists first (the engine's bound), then posts. */
	code_guest_answer(list, strlen(list), 0, 0, false);
	code_guest_answer_post(made);
	o.language = "JS";
	o.cwd = "sub";
	o.env = env;
	assert_int_equal(saas_code_context_create(&ctx, f->a, sb_id, &o, 0), SAAS_OK);
	assert_string_equal(ctx->id, "c2");
	assert_string_equal(ctx->language, "javascript");
	saas_code_context_free(ctx);
	req = code_guest_request();
	assert_non_null(strstr(req, "POST /contexts HTTP/1.1\r\n"));
	assert_non_null(strstr(req, "\"language\":\"javascript\""));
	assert_non_null(strstr(req, "\"cwd\":\"/workspace/sub\""));
	assert_non_null(strstr(req, "\"env_vars\":{\"X\":\"y\"}"));
	/* A post answered with something else than a context is refused. */
	code_guest_answer_post(list);
	assert_int_equal(saas_code_context_create(&ctx, f->a, sb_id, &o, 0), SAAS_EPROTOCOL);
	code_guest_answer_post(NULL);

	code_guest_answer(list, strlen(list), 0, 0, false);
	assert_int_equal(saas_code_context_list_get(&l, f->a, sb_id, 0), SAAS_OK);
	assert_int_equal(l->count, 1);
	assert_string_equal(l->items[0]->id, "c1");
	assert_string_equal(l->items[0]->language, "bash");
	saas_code_context_list_free(l);
	req = code_guest_request();
	assert_non_null(strstr(req, "GET /contexts HTTP/1.1\r\n"));

	answer("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnull");
	assert_int_equal(saas_code_context_restart(f->a, sb_id, "c1", 0), SAAS_OK);
	assert_non_null(strstr(code_guest_request(), "POST /contexts/c1/restart HTTP/1.1\r\n"));
	answer("HTTP/1.1 204 No Content\r\n\r\n");
	assert_int_equal(saas_code_context_delete(f->a, sb_id, "c1", 0), SAAS_OK);
	assert_non_null(strstr(code_guest_request(), "DELETE /contexts/c1 HTTP/1.1\r\n"));
	answer("HTTP/1.1 404 Not Found\r\n\r\nContext c9 not found");
	assert_int_equal(saas_code_context_delete(f->a, sb_id, "c9", 0), SAAS_ENOTFOUND);

	/* A list over the bound is refused, not believed. */
	{
		char *big = malloc(1 << 16);
		size_t n = 0;
		assert_non_null(big);
		n += (size_t)snprintf(big, 1 << 16, "HTTP/1.1 200 OK\r\n\r\n[");
		for (int i = 0; i < 4 * SAAS_CODE_CONTEXTS_MAX + 1; i++)
			n += (size_t)snprintf(big + n, (1 << 16) - n, "%s{\"id\":\"c%d\"}", i ? "," : "", i);
		n += (size_t)snprintf(big + n, (1 << 16) - n, "]");
		code_guest_answer(big, n, 0, 0, false);
		assert_int_equal(saas_code_context_list_get(&l, f->a, sb_id, 0), SAAS_EPROTOCOL);
		free(big);
	}
}

static void test_args(void **state)
{
	struct saas_test_fixture *f = *state;
	saas_code_run_options o = SAAS_CODE_RUN_OPTIONS_INIT;
	saas_code_context_options co = SAAS_CODE_CONTEXT_OPTIONS_INIT;
	saas_code_execution *x = NULL;
	saas_code_context *c = NULL;

	o.language = "python";
	o.context_id = "c1";
	assert_int_equal(saas_code_run(&x, f->a, sb_id, "1", &o, 0), SAAS_EINVAL);
	o.context_id = "../x";
	o.language = NULL;
	assert_int_equal(saas_code_run(&x, f->a, sb_id, "1", &o, 0), SAAS_EINVAL);
	o.context_id = NULL;
	o.language = "cobol";
	assert_int_equal(saas_code_run(&x, f->a, sb_id, "1", &o, 0), SAAS_EINVAL);
	assert_non_null(strstr(saas_error_last()->message, "cobol"));
	o.language = NULL;
	o.timeout_ms = -1;
	assert_int_equal(saas_code_run(&x, f->a, sb_id, "1", &o, 0), SAAS_EINVAL);
	o.timeout_ms = 0;
	assert_int_equal(saas_code_run(&x, f->a, sb_id, "", &o, 0), SAAS_EINVAL);
	assert_int_equal(saas_code_run(&x, f->a, sb_id, "\xff", &o, 0), SAAS_EINVAL);
	assert_int_equal(saas_code_run(&x, f->a, sb_id, "1", &o, 1), SAAS_EINVAL);
	assert_int_equal(saas_code_run(&x, f->a, "sbx-nope", "1", &o, 0), SAAS_ENOTFOUND);
	co.language = "ruby";
	assert_int_equal(saas_code_context_create(&c, f->a, sb_id, &co, 0), SAAS_EINVAL);
	assert_int_equal(saas_code_context_restart(f->a, sb_id, "a/b", 0), SAAS_EINVAL);
	assert_int_equal(saas_code_context_delete(f->a, sb_id, "", 0), SAAS_EINVAL);
	assert_string_equal(saas_code_status_name(SAAS_CODE_TIMEDOUT), "timeout");
	assert_string_equal(saas_code_status_name(99), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_run_good, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_hostile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_bad_http, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_error_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_timeout_and_cancel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_contexts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_args, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
