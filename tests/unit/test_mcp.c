/*
 * aas_mcp, the MCP protocol core (mcp/), without a transport: JSON-RPC parse
 * errors, the bounds on a JSON text's values and depth, and invalid requests, unknown methods, version negotiation,
 * tools/list pages, tool errors as isError results, get_usage's period,
 * create_sandbox's progress and cancellation, and the bounds on batches and
 * responses, over a local engine with the fake driver (whose VMs here take a
 * moment to create, as real ones do).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "aas_mcp.h"
#include "fake/fake_driver.h"
#include "mcp_internal.h"
#include "fixture.h"
#include "testutil.h"

/* ---- a local engine whose fake VMs take CREATE_MS to create ---- */

#define CREATE_MS 400

static saas_driver slow_driver;

/* Creates the driver refuses for room, as a real one's (the host's facts in its message), before their wait. */
static unsigned int busy_creates;

static int slow_create(void *ctx, const saas_vm_spec *spec)
{
	struct timespec ts = { 0, CREATE_MS * 1000000L };

	unsigned int busy = __atomic_load_n(&busy_creates, __ATOMIC_SEQ_CST);

	nanosleep(&ts, NULL);
	while (busy > 0 && !__atomic_compare_exchange_n(&busy_creates, &busy, busy - 1, false, __ATOMIC_SEQ_CST,
	                                                 __ATOMIC_SEQ_CST))
		;
	if (busy > 0)
		return saas_sys_error_set(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER, 0,
		                          "fake: 312 MiB of memory free, too little for a VM of %u MiB", spec->memory_mb);
	return saas_fake_driver.vm_create(ctx, spec);
}

struct fixture {
	struct saas_test_fixture *t;   /* the engine, and alice's client the tools run as */
	aas_mcp_ctx ctx;
	/* what the transport callbacks saw */
	pthread_mutex_t mu;
	json_t *notes;              /* notifications sent, in order */
	json_t *cancel_id;          /* the request id to report cancelled, or NULL */
	bool cancel_at_boot;        /* cancel cancel_id at the first "booting" notification */
	bool cancel_now;
};

static void notify(void *userdata, json_t *msg)
{
	struct fixture *f = userdata;
	const char *text = json_string_value(json_object_get(json_object_get(msg, "params"), "message"));

	pthread_mutex_lock(&f->mu);
	json_array_append_new(f->notes, msg);
	if (f->cancel_at_boot && text && strncmp(text, "booting", 7) == 0)
		f->cancel_now = true;
	pthread_mutex_unlock(&f->mu);
}

static bool cancelled(void *userdata, const json_t *id)
{
	struct fixture *f = userdata;
	bool yes;

	pthread_mutex_lock(&f->mu);
	yes = f->cancel_now && f->cancel_id && json_equal(f->cancel_id, (json_t *)id);
	pthread_mutex_unlock(&f->mu);
	return yes;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	slow_driver = saas_fake_driver;
	slow_driver.vm_create = slow_create;
	f->t = saas_test_fixture_new(&slow_driver, SAAS_TEST_REAPER);
	saas_test_fixture_open(f->t);
	pthread_mutex_init(&f->mu, NULL);
	f->notes = json_array();
	f->ctx.client = f->t->a;
	f->ctx.engine = f->t->engine;
	f->ctx.key_hint = "the TEST_KEY setting";
	f->ctx.userdata = f;
	f->ctx.progress_interval_ms = 100;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	json_decref(f->notes);
	json_decref(f->cancel_id);
	pthread_mutex_destroy(&f->mu);
	saas_test_fixture_free(f->t);
	free(f);
	return 0;
}

/* ---- helpers ---- */

/* Handle the message text; the response (NULL: none). */
static json_t *handle(const aas_mcp_ctx *ctx, const char *text)
{
	json_t *err = NULL, *msg = aas_mcp_parse(text, strlen(text), &err), *resp;

	if (!msg)
		return err;
	assert_null(err);
	resp = aas_mcp_handle(ctx, msg);
	json_decref(msg);
	return resp;
}

static void assert_error(json_t *resp, int code, const json_t *id)
{
	assert_non_null(resp);
	assert_string_equal(json_string_value(json_object_get(resp, "jsonrpc")), "2.0");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(resp, "error"), "code")), code);
	assert_true(json_string_length(json_object_get(json_object_get(resp, "error"), "message")) > 0);
	assert_true(json_equal(json_object_get(resp, "id"), id ? (json_t *)id : json_null()));
	assert_null(json_object_get(resp, "result"));
}

static const char *error_message(json_t *resp)
{
	return json_string_value(json_object_get(json_object_get(resp, "error"), "message"));
}

static json_t *result_of(json_t *resp)
{
	json_t *r = json_object_get(resp, "result");

	if (!r)
		fail_msg("no result: %s", json_dumps(resp, JSON_COMPACT));
	return r;
}

/* The text of a CallToolResult. */
static const char *text_of(json_t *res)
{
	return json_string_value(json_object_get(json_array_get(json_object_get(res, "content"), 0), "text"));
}

static json_t *call_tool(const aas_mcp_ctx *ctx, const char *name, const char *args)
{
	char buf[2048];
	json_t *resp, *res;

	snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
	         "\"arguments\":%s}}", name, args);
	resp = handle(ctx, buf);
	res = json_incref(result_of(resp));
	json_decref(resp);
	return res;
}

/* An isError result whose text contains each of the NULL-terminated words. */
static void assert_tool_error(json_t *res, ...)
{
	const char *text = text_of(res), *want;
	va_list ap;

	assert_true(json_is_true(json_object_get(res, "isError")));
	assert_non_null(text);
	va_start(ap, res);
	while ((want = va_arg(ap, const char *)))
		if (!strstr(text, want))
			fail_msg("\"%s\" is not in the error text: %s", want, text);
	va_end(ap);
}

/* ---- JSON-RPC ---- */

static void test_parse_errors(void **state)
{
	static const char *const bad[] = { "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ", "", "   ", "{", "nul",
		                           "{\"a\":1,\"a\":2}", "[1,2" };
	json_t *err, *msg;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = NULL;
		msg = aas_mcp_parse(bad[i], strlen(bad[i]), &err);
		assert_null(msg);
		assert_error(err, AAS_MCP_PARSE_ERROR, NULL);
		assert_non_null(strstr(error_message(err), "Parse error"));
		json_decref(err);
	}
	/* "\u0000" is valid JSON that is refused: said in plain words, never with jansson's flag names. */
	static const char nul[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\\u0000\"}";
	err = NULL;
	assert_null(aas_mcp_parse(nul, strlen(nul), &err));
	assert_non_null(strstr(error_message(err), "NUL"));
	assert_null(strstr(error_message(err), "JSON_"));
	json_decref(err);
	/* NULL text is an empty message, not a crash. */
	err = NULL;
	assert_null(aas_mcp_parse(NULL, 5, &err));
	assert_error(err, AAS_MCP_PARSE_ERROR, NULL);
	json_decref(err);
}

/* "[1,1,...]": an array of n - 1 ones, n values in all (the caller frees it). */
static char *ones(size_t n)
{
	char *s = malloc(2 * n + 1), *p = s;

	assert_non_null(s);
	*p++ = '[';
	for (size_t i = 1; i < n; i++) {
		*p++ = '1';
		*p++ = i + 1 < n ? ',' : ']';
	}
	if (n == 1)
		*p++ = ']';
	*p = 0;
	return s;
}

/* Does aas_json_bounds() take `text` within values_max values and depth_max levels? */
static bool bounded(const char *text, size_t values_max, size_t depth_max)
{
	char why[200] = "";
	bool ok = aas_json_bounds(text, strlen(text), values_max, depth_max, why, sizeof(why));

	assert_true(ok ? !why[0] : strstr(why, "the most one request may") != NULL);
	return ok;
}

/* JSON numbers as integers: integral reals are taken, anything int64_t cannot hold is refused, never converted. */
static void test_json_int64(void **state)
{
	static const struct {
		const char *text;
		bool ok;
		int64_t want;
	} cases[] = {
		{"[5]", true, 5},
		{"[5.0]", true, 5},
		{"[1e3]", true, 1000},
		{"[-4611686018427387904.0]", true, -4611686018427387904LL},
		{"[-9223372036854775808.0]", true, INT64_MIN},
		{"[9223372036854775807]", true, INT64_MAX},
		{"[9223372036854775808.0]", false, 0}, /* 2^63: one past the top */
		{"[80e81]", false, 0},                 /* the fuzzer's: undefined to convert */
		{"[-1e300]", false, 0},
		{"[1.5]", false, 0},
		{"[\"5\"]", false, 0},
		{"[true]", false, 0},
		{"[null]", false, 0},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *a = json_loads(cases[i].text, JSON_DECODE_ANY, NULL);
		int64_t x = 42;

		assert_non_null(a);
		assert_int_equal(aas_json_int64(json_array_get(a, 0), &x), cases[i].ok);
		assert_int_equal(x, cases[i].ok ? cases[i].want : 42);
		json_decref(a);
	}
}

static void test_json_bounds(void **state)
{
	char why[200], *text;
	json_t *err = NULL, *msg;

	(void)state;
	/* Exactly AAS_JSON_VALUES_MAX values are parsed; one more is refused unparsed, naming the bound. */
	text = ones(AAS_JSON_VALUES_MAX);
	assert_true(bounded(text, AAS_JSON_VALUES_MAX, AAS_JSON_DEPTH_MAX));
	msg = aas_mcp_parse(text, strlen(text), &err);
	assert_null(err);
	assert_int_equal(json_array_size(msg), AAS_JSON_VALUES_MAX - 1);
	json_decref(msg);
	free(text);
	text = ones(AAS_JSON_VALUES_MAX + 1);
	assert_false(aas_json_bounds(text, strlen(text), AAS_JSON_VALUES_MAX, AAS_JSON_DEPTH_MAX, why, sizeof(why)));
	assert_non_null(strstr(why, "more than 100000 values"));
	assert_null(aas_mcp_parse(text, strlen(text), &err));
	assert_error(err, AAS_MCP_INVALID_REQUEST, NULL);
	assert_non_null(strstr(error_message(err), "Invalid Request: the JSON holds more than 100000 values"));
	json_decref(err);
	free(text);

	/* Nesting: AAS_JSON_DEPTH_MAX levels, arrays and objects alike, are parsed; one more is refused. */
	char deep[6 * AAS_JSON_DEPTH_MAX + 8], *p = deep;
	for (size_t i = 0; i < AAS_JSON_DEPTH_MAX; i++)
		p += sprintf(p, i % 2 ? "[" : "{\"a\":");
	p += sprintf(p, "1");
	for (size_t i = AAS_JSON_DEPTH_MAX; i-- > 0;)
		*p++ = i % 2 ? ']' : '}';
	*p = 0;
	assert_true(bounded(deep, AAS_JSON_VALUES_MAX, AAS_JSON_DEPTH_MAX));
	msg = aas_mcp_parse(deep, strlen(deep), &err);
	assert_non_null(msg);
	json_decref(msg);
	char deeper[sizeof(deep) + 2];
	snprintf(deeper, sizeof(deeper), "[%s]", deep);
	assert_false(aas_json_bounds(deeper, strlen(deeper), AAS_JSON_VALUES_MAX, AAS_JSON_DEPTH_MAX, why, sizeof(why)));
	assert_non_null(strstr(why, "more than 64 deep"));
	assert_null(aas_mcp_parse(deeper, strlen(deeper), &err));
	assert_error(err, AAS_MCP_INVALID_REQUEST, NULL);
	json_decref(err);

	/* What counts: every value, an object's keys too, whatever the whitespace. */
	assert_true(bounded("{\"a\":1,\"b\":[true,false,null,-1.5e3]}", 9, 2));
	assert_false(bounded("{\"a\":1,\"b\":[true,false,null,-1.5e3]}", 8, 2));
	assert_true(bounded(" [ 1 ,\t2\r\n, 3 ] ", 4, 1));
	assert_false(bounded(" [ 1 ,\t2\r\n, 3 ] ", 3, 1));
	assert_true(bounded("", 0, 0));
	assert_true(bounded("7", 1, 0));

	/* A string is one value whatever it holds: brackets, commas, colons, escaped quotes and backslashes. */
	assert_true(bounded("\"[[[{{{,,,:::]]]}}}\"", 1, 0));
	assert_true(bounded("[\"\\\"[[[,1,2\"]", 2, 1));       /* \" does not end the string */
	assert_false(bounded("[\"\\\\\",[[1]]]", 4, 3));     /* \\ does: then 5 values... */
	assert_false(bounded("[\"\\\\\",[[1]]]", 5, 2));     /* ...3 deep */
	assert_true(bounded("[\"\\\\\",[[1]]]", 5, 3));
	assert_true(bounded("{\"k,[{\\\"\":\"v]}:,\\u0022\"}", 3, 1));
	assert_true(bounded("[\"\\\\\\\"]\"]", 2, 1));      /* \\ then \": the string goes on */
	/* A stray closing bracket (a syntax error jansson stops at) never makes the depth wrap. */
	assert_true(bounded("]]][[", 3, 2));
	assert_false(bounded("]]][[[", 3, 2));
}

static void test_invalid_requests(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *msg;
		bool id1; /* the error echoes id 1 (a valid id in an object), else null */
	} bad[] = {
		{ "42", false }, { "\"ping\"", false }, { "null", false }, { "{}", false }, { "[]", false },
		{ "{\"id\":1,\"method\":\"ping\"}", true },
		{ "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", true },
		{ "{\"jsonrpc\":2.0,\"id\":1,\"method\":\"ping\"}", true },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", true },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1}", true },
		{ "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", false },
		{ "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", false },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", false },
	};
	json_t *resp, *one = json_integer(1);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *msg = json_loads(bad[i].msg, JSON_DECODE_ANY, NULL);
		assert_non_null(msg);
		assert_int_equal(aas_mcp_kind(msg), AAS_MCP_INVALID);
		resp = aas_mcp_handle(&f->ctx, msg);
		assert_error(resp, AAS_MCP_INVALID_REQUEST, bad[i].id1 ? one : NULL);
		json_decref(resp);
		json_decref(msg);
	}
	/* A batch: each invalid member gets its error, notifications nothing, requests their answer. */
	f->ctx.batches = true;
	resp = handle(&f->ctx, "[{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\"},{\"bad\":1},"
	                       "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}]");
	assert_true(json_is_array(resp));
	assert_int_equal(json_array_size(resp), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(resp, 0), "id")), "a");
	assert_true(json_is_object(json_object_get(json_array_get(resp, 0), "result")));
	assert_error(json_array_get(resp, 1), AAS_MCP_INVALID_REQUEST, NULL);
	json_decref(resp);
	/* params that are not an object, _meta that is not one, a progressToken of the wrong type: -32602. */
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[1]}");
	assert_error(resp, AAS_MCP_INVALID_PARAMS, one);
	json_decref(resp);
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"_meta\":3}}");
	assert_error(resp, AAS_MCP_INVALID_PARAMS, one);
	json_decref(resp);
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":"
	                       "{\"progressToken\":1.5}}}");
	assert_error(resp, AAS_MCP_INVALID_PARAMS, one);
	assert_non_null(strstr(error_message(resp), "progressToken"));
	json_decref(resp);
	/* tools/call without a name, or with arguments that are not an object. */
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}");
	assert_error(resp, AAS_MCP_INVALID_PARAMS, one);
	json_decref(resp);
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"get_usage\","
	                       "\"arguments\":[]}}");
	assert_error(resp, AAS_MCP_INVALID_PARAMS, one);
	json_decref(resp);
	/* Notifications and responses get nothing back. */
	assert_null(handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
	assert_null(handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"method\":\"no/such/notification\"}"));
	assert_null(handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}"));
	json_decref(one);
}

static void test_unknown_methods(void **state)
{
	struct fixture *f = *state;
	json_t *resp, *id = json_string("x-7");

	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":\"x-7\",\"method\":\"no/such\"}");
	assert_error(resp, AAS_MCP_METHOD_NOT_FOUND, id);
	assert_non_null(strstr(error_message(resp), "no/such"));
	json_decref(resp);
	/* Newer clients probe server/discover first and fall back to initialize on -32601. */
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":\"x-7\",\"method\":\"server/discover\",\"params\":{}}");
	assert_error(resp, AAS_MCP_METHOD_NOT_FOUND, id);
	json_decref(resp);
	/* Methods this server does not offer are unknown too. */
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":\"x-7\",\"method\":\"resources/list\"}");
	assert_error(resp, AAS_MCP_METHOD_NOT_FOUND, id);
	json_decref(resp);
	/* A long name is cut in the message, never in the middle of a character (then no answer came). */
	{
		char text[400];
		snprintf(text, sizeof(text), "{\"jsonrpc\":\"2.0\",\"id\":\"x-7\",\"method\":\"%0119d\u00e9\u00e9\"}", 0);
		resp = handle(&f->ctx, text);
		assert_error(resp, AAS_MCP_METHOD_NOT_FOUND, id);
		json_decref(resp);
	}
	json_decref(id);
}

static void test_version_negotiation(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *asked, *answered;
	} cases[] = {
		{ "2025-11-25", "2025-11-25" }, { "2025-06-18", "2025-06-18" }, { "2025-03-26", "2025-03-26" },
		{ "2024-11-05", AAS_MCP_VERSION_LATEST }, { "2099-01-01", AAS_MCP_VERSION_LATEST }, { "", AAS_MCP_VERSION_LATEST },
	};
	char buf[512];
	json_t *resp, *res;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
		         "\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}",
		         cases[i].asked);
		resp = handle(&f->ctx, buf);
		res = result_of(resp);
		assert_string_equal(json_string_value(json_object_get(res, "protocolVersion")), cases[i].answered);
		assert_string_equal(json_string_value(json_object_get(json_object_get(res, "serverInfo"), "name")), "libsaas");
		assert_true(json_is_false(json_object_get(json_object_get(json_object_get(res, "capabilities"), "tools"),
		                                          "listChanged")));
		assert_non_null(strstr(json_string_value(json_object_get(res, "instructions")), "break-system-packages"));
		json_decref(resp);
	}
	assert_true(aas_mcp_version_supported("2025-11-25"));
	assert_true(aas_mcp_version_supported("2025-06-18"));
	assert_true(aas_mcp_version_supported("2025-03-26"));
	assert_false(aas_mcp_version_supported("2024-11-05"));
	assert_false(aas_mcp_version_supported(NULL));
	/* No version, or not a string: -32602. */
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(resp, "error"), "code")), AAS_MCP_INVALID_PARAMS);
	json_decref(resp);
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":20250618}}");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(resp, "error"), "code")), AAS_MCP_INVALID_PARAMS);
	json_decref(resp);
}

/* ---- tools/list ---- */

/*
 * A schema as strict validators (the MCP Inspector's strict mode) take it: every
 * "type" a single name, never a union such as ["string", "null"], and whole
 * (mcp/schemas/ shares shapes by $ref; tools/list inlines them).
 */
static void assert_portable_schema(const json_t *s)
{
	const char *key;
	const json_t *m;
	size_t i;

	if (json_is_array(s)) {
		json_array_foreach(s, i, m)
			assert_portable_schema(m);
		return;
	}
	if (!json_is_object(s))
		return;
	if (json_object_get(s, "type"))
		assert_true(json_is_string(json_object_get(s, "type")));
	assert_null(json_object_get(s, "$ref"));
	json_object_foreach((json_t *)s, key, m) {
		const char *name;
		const json_t *p;
		if (strcmp(key, "properties") != 0) {
			assert_portable_schema(m);
			continue;
		}
		/* A map of names to schemas: a property may be called "type". */
		json_object_foreach((json_t *)m, name, p)
			assert_portable_schema(p);
	}
}

/* Page through tools/list; returns how many pages, fills names (sorted by the table). */
static size_t list_all(const aas_mcp_ctx *ctx, json_t *names)
{
	char buf[256], cursor[64] = "";
	size_t pages = 0;

	for (;;) {
		json_t *resp, *res, *t;
		size_t i;
		if (cursor[0])
			snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"cursor\":\"%s\"}}",
			         cursor);
		else
			snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
		resp = handle(ctx, buf);
		res = result_of(resp);
		pages++;
		assert_true(json_array_size(json_object_get(res, "tools")) >= 1);
		if (ctx->page_size)
			assert_true(json_array_size(json_object_get(res, "tools")) <= ctx->page_size);
		json_array_foreach(json_object_get(res, "tools"), i, t) {
			assert_true(json_is_object(json_object_get(t, "inputSchema")));
			assert_true(json_is_object(json_object_get(t, "outputSchema")));
			assert_portable_schema(json_object_get(t, "inputSchema"));
			assert_portable_schema(json_object_get(t, "outputSchema"));
			json_array_append(names, json_object_get(t, "name"));
		}
		if (!json_object_get(res, "nextCursor")) {
			json_decref(resp);
			return pages;
		}
		snprintf(cursor, sizeof(cursor), "%s", json_string_value(json_object_get(res, "nextCursor")));
		json_decref(resp);
		assert_true(pages < 20);
	}
}

static void test_tools_list_pages(void **state)
{
	struct fixture *f = *state;
	aas_mcp_ctx ctx = f->ctx;
	json_t *all = json_array(), *paged = json_array(), *resp;
	static const char *const bad[] = { "\"bogus\"", "\"t\"", "\"t99\"", "\"t-1\"", "\"t3x\"", "\"\"", "42", "{}",
		                           /* strtoul's leniency (found by fuzz.cursor) */
		                           "\"t+1\"", "\"t 1\"", "\"t-0\"", "\"t\\n2\"" };
	char buf[256];

	/* One page with everything: 17 tools on stdio, 18 with get_service_info. */
	ctx.page_size = 0;
	assert_int_equal(list_all(&ctx, all), 1);
	assert_int_equal(json_array_size(all), 17);
	ctx.flags = AAS_MCP_SERVICE_INFO;
	json_array_clear(all);
	assert_int_equal(list_all(&ctx, all), 1);
	assert_int_equal(json_array_size(all), 18);
	/* Pages of 5: 5 + 5 + 5 + 3, the same tools in the same order, none twice. */
	ctx.page_size = 5;
	assert_int_equal(list_all(&ctx, paged), 4);
	assert_true(json_equal(all, paged));
	/* Without get_service_info (the last tool), pages of 5 end after 17. */
	ctx.flags = 0;
	json_array_clear(paged);
	assert_int_equal(list_all(&ctx, paged), 4);
	assert_int_equal(json_array_size(paged), 17);
	ctx.page_size = 17;
	json_array_clear(paged);
	assert_int_equal(list_all(&ctx, paged), 1);
	/* A null cursor is the first page; a cursor not from nextCursor is -32602. */
	resp = handle(&ctx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"cursor\":null}}");
	assert_int_equal(json_array_size(json_object_get(result_of(resp), "tools")), 17);
	json_decref(resp);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"cursor\":%s}}",
		         bad[i]);
		resp = handle(&ctx, buf);
		assert_int_equal(json_integer_value(json_object_get(json_object_get(resp, "error"), "code")),
		                 AAS_MCP_INVALID_PARAMS);
		assert_non_null(strstr(error_message(resp), "cursor"));
		json_decref(resp);
	}
	json_decref(all);
	json_decref(paged);
}

/* ---- tool errors ---- */

static char logged[1024];

static void log_capture(const char *msg)
{
	snprintf(logged, sizeof(logged), "%s", msg);
}

static void test_tool_errors(void **state)
{
	struct fixture *f = *state;
	aas_mcp_ctx ctx = f->ctx;
	json_t *res, *sb;

	res = call_tool(&ctx, "no_such_tool", "{}");
	assert_tool_error(res, "Unknown tool", "tools/list", NULL);
	json_decref(res);
	/* get_service_info is offered on HTTP only. */
	res = call_tool(&ctx, "get_service_info", "{}");
	assert_tool_error(res, "Unknown tool", NULL);
	json_decref(res);
	res = call_tool(&ctx, "get_sandbox", "{\"sandbox_id\":\"sbx-nosuchsandbox\"}");
	assert_tool_error(res, "get_sandbox failed", "not_found", "list_sandboxes", NULL);
	json_decref(res);
	res = call_tool(&ctx, "run_command", "{\"command\":\"echo hi\"}");
	assert_tool_error(res, "Invalid arguments to run_command", "\"sandbox_id\" is required", NULL);
	json_decref(res);
	res = call_tool(&ctx, "run_command", "{\"sandbox_id\":7,\"command\":\"echo hi\"}");
	assert_tool_error(res, "\"sandbox_id\" must be a string", NULL);
	json_decref(res);
	res = call_tool(&ctx, "extend_sandbox", "{\"sandbox_id\":\"sbx-x\",\"seconds\":-5}");
	assert_tool_error(res, "\"seconds\" must be between 1 and", NULL);
	json_decref(res);
	res = call_tool(&ctx, "write_file", "{\"sandbox_id\":\"sbx-x\",\"path\":\"a\",\"content\":\"%%%\",\"encoding\":\"base64\"}");
	assert_tool_error(res, "not valid base64", NULL);
	json_decref(res);
	res = call_tool(&ctx, "write_file", "{\"sandbox_id\":\"sbx-x\",\"path\":\"a\",\"content\":\"x\",\"mode\":\"+755\"}");
	assert_tool_error(res, "\"mode\" must be octal", NULL);
	json_decref(res);
	/* Every status code has a hint: a code without one does not build; this checks the text. */
	for (int code = SAAS_ERROR; strcmp(saas_error_name(code), "unknown") != 0; code--)
		assert_true(aas_mcp_error_hint(code)[0] != '\0');
	assert_non_null(strstr(aas_mcp_error_hint(SAAS_EPERM), "unprivileged user"));
	/* A destroyed sandbox: what to do next. */
	res = call_tool(&ctx, "create_sandbox", "{}");
	assert_false(json_is_true(json_object_get(res, "isError")));
	sb = json_incref(json_object_get(json_object_get(res, "structuredContent"), "id"));
	json_decref(res);
	char args[1024], name[301];
	/* The guest's unprivileged user: permission denied says so (and what to do), not "io_error". */
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"path\":\"/etc/x\",\"content\":\"x\"}", json_string_value(sb));
	res = call_tool(&ctx, "write_file", args);
	assert_tool_error(res, "write_file failed", "permission denied", "permission_denied", "/workspace", NULL);
	json_decref(res);
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"path\":\"/etc/shadow\"}", json_string_value(sb));
	res = call_tool(&ctx, "read_file", args);
	assert_tool_error(res, "read_file failed", "permission_denied", NULL);
	json_decref(res);
	/* A 300-byte name: the guest's NAME_MAX, refused before the guest is asked. */
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"path\":\"%s\",\"content\":\"x\"}", json_string_value(sb), name);
	res = call_tool(&ctx, "write_file", args);
	assert_tool_error(res, "write_file failed", "invalid_argument", "at most 255", NULL);
	json_decref(res);
	/* An env value with a NUL (the tools take parsed JSON) is refused, not cut short. */
	json_t *targs = json_pack("{s:O,s:s,s:{s:s%}}", "sandbox_id", sb, "command", "env", "env", "A", "x\0y", (size_t)3);
	json_t *id = json_integer(1);
	res = aas_mcp_tool_call(&ctx, "run_command", targs, id, NULL);
	assert_tool_error(res, "Invalid arguments to run_command", "without NUL", NULL);
	json_decref(res);
	json_decref(targs);
	json_decref(id);
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"command\":\"env\",\"env\":{\"A=B\":\"x\"}}",
	         json_string_value(sb));
	res = call_tool(&ctx, "run_command", args);
	assert_tool_error(res, "Invalid arguments to run_command", "may not be empty or contain '='", NULL);
	json_decref(res);
	/*
	 * A server-side failure (here the driver's, whose messages name host things):
	 * a tenant of a shared server reads the fixed text, the operator's log the
	 * detail; aas-mcp's user, the operator, reads the detail.
	 */
	saas_fake_vm_stop(json_string_value(sb));
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"path\":\"x\",\"content\":\"x\"}", json_string_value(sb));
	res = call_tool(&ctx, "write_file", args);
	assert_tool_error(res, "backend_error", "fake: VM", NULL);
	json_decref(res);
	ctx.flags |= AAS_MCP_TENANT;
	ctx.log = log_capture;
	res = call_tool(&ctx, "write_file", args);
	assert_tool_error(res, "write_file failed", "backend_error", "its log has the detail", NULL);
	assert_null(strstr(text_of(res), "fake: VM"));
	assert_non_null(strstr(logged, "fake: VM"));
	json_decref(res);
	/* A 4xx is the caller's to read, tenant or not. */
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"path\":\"%s\",\"content\":\"x\"}", json_string_value(sb), name);
	res = call_tool(&ctx, "write_file", args);
	assert_tool_error(res, "at most 255", NULL);
	json_decref(res);
	ctx.flags &= ~AAS_MCP_TENANT;
	/* A number no integer type holds is a bad argument, not a conversion. */
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"seconds\":80e81}", json_string_value(sb));
	res = call_tool(&ctx, "extend_sandbox", args);
	assert_tool_error(res, "Invalid arguments to extend_sandbox", "\"seconds\" must be an integer", NULL);
	json_decref(res);
	/* Past the maximum lifetime: a bad argument, which no retry fixes. */
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"seconds\":31536000}", json_string_value(sb));
	res = call_tool(&ctx, "extend_sandbox", args);
	assert_tool_error(res, "extend_sandbox failed", "invalid_argument", NULL);
	json_decref(res);
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\"}", json_string_value(sb));
	json_decref(call_tool(&ctx, "destroy_sandbox", args));
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"command\":\"echo hi\"}", json_string_value(sb));
	res = call_tool(&ctx, "run_command", args);
	assert_tool_error(res, "run_command failed", "create_sandbox", NULL);
	json_decref(res);
	json_decref(sb);
	/* No key, or a bad one: isError results that say how to send one, never a protocol error. */
	ctx.client = NULL;
	ctx.client_status = 0;
	res = call_tool(&ctx, "list_sandboxes", "{}");
	assert_tool_error(res, "needs an API key", "the TEST_KEY setting", NULL);
	json_decref(res);
	ctx.client_status = SAAS_EAUTH;
	res = call_tool(&ctx, "list_sandboxes", "{}");
	assert_tool_error(res, "unknown or revoked", "the TEST_KEY setting", NULL);
	json_decref(res);
	/* tools/list needs no key. */
	json_t *names = json_array();
	list_all(&ctx, names);
	assert_int_equal(json_array_size(names), 17);
	json_decref(names);
}

/* fork_sandbox, pause_sandbox, resume_sandbox over the fake driver's snapshots. */
static void test_fork_pause_resume(void **state)
{
	struct fixture *f = *state;
	aas_mcp_ctx ctx = f->ctx;
	const json_t *st, *kids;
	json_t *res, *sb;
	char args[512];

	res = call_tool(&ctx, "create_sandbox", "{}");
	assert_false(json_is_true(json_object_get(res, "isError")));
	sb = json_incref(json_object_get(json_object_get(res, "structuredContent"), "id"));
	json_decref(res);

	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"count\":2,\"timeout_seconds\":300}",
	         json_string_value(sb));
	res = call_tool(&ctx, "fork_sandbox", args);
	assert_false(json_is_true(json_object_get(res, "isError")));
	kids = json_object_get(json_object_get(res, "structuredContent"), "sandboxes");
	assert_int_equal(json_array_size(kids), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(kids, 0), "parent_id")),
	                    json_string_value(sb));
	json_decref(res);
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"count\":11}", json_string_value(sb));
	res = call_tool(&ctx, "fork_sandbox", args);
	assert_tool_error(res, "count", NULL);
	json_decref(res);

	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\"}", json_string_value(sb));
	res = call_tool(&ctx, "pause_sandbox", args);
	st = json_object_get(json_object_get(res, "structuredContent"), "status");
	assert_string_equal(json_string_value(st), "paused");
	json_decref(res);
	/* A paused sandbox runs nothing; the hint says how to bring it back. */
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"command\":\"echo hi\"}", json_string_value(sb));
	res = call_tool(&ctx, "run_command", args);
	assert_tool_error(res, "paused", "resume_sandbox", NULL);
	json_decref(res);
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\"}", json_string_value(sb));
	res = call_tool(&ctx, "pause_sandbox", args);
	assert_tool_error(res, "pause_sandbox failed", NULL);
	json_decref(res);
	res = call_tool(&ctx, "resume_sandbox", args);
	st = json_object_get(json_object_get(res, "structuredContent"), "status");
	assert_string_equal(json_string_value(st), "ready");
	json_decref(res);
	res = call_tool(&ctx, "resume_sandbox", "{}");
	assert_tool_error(res, "sandbox_id", NULL);
	json_decref(res);
	json_decref(sb);
}

/* A tool call over a tenant limit is an isError result naming the limit and when to retry. */
static void test_tool_limit(void **state)
{
	struct fixture *f = *state;
	saas_limit_overrides own = SAAS_LIMIT_OVERRIDES_INIT;
	saas_execution *x = NULL;
	json_t *res, *sb;
	char args[256];

	res = call_tool(&f->ctx, "create_sandbox", "{}");
	assert_false(json_is_true(json_object_get(res, "isError")));
	sb = json_incref(json_object_get(json_object_get(res, "structuredContent"), "id"));
	json_decref(res);
	own.max_executions = 1;
	assert_int_equal(saas_account_limits_set(f->t->engine, saas_client_account_id(f->t->a), &own), SAAS_OK);
	assert_int_equal(saas_exec(&x, f->t->a, json_string_value(sb), "block", NULL, SAAS_EXEC_BACKGROUND), SAAS_OK);
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"command\":\"echo hi\"}", json_string_value(sb));
	res = call_tool(&f->ctx, "run_command", args);
	assert_tool_error(res, "run_command failed", "limit_exceeded", "limit max_executions", "retry after 1 s",
	                  "Wait for one to finish", NULL);
	json_decref(res);
	/* Destroying the sandbox ends the blocked command (the engine waits for it at close). */
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\"}", json_string_value(sb));
	json_decref(call_tool(&f->ctx, "destroy_sandbox", args));
	saas_execution_free(x);
	json_decref(sb);
}

/* ---- get_usage's period ---- */

static void usage_ok(const aas_mcp_ctx *ctx, const char *args, const char *from, const char *to)
{
	json_t *res = call_tool(ctx, "get_usage", args), *u;

	if (json_is_true(json_object_get(res, "isError")))
		fail_msg("get_usage %s: %s", args, text_of(res));
	u = json_object_get(json_object_get(res, "structuredContent"), "usage");
	if (from)
		assert_string_equal(json_string_value(json_object_get(u, "from")), from);
	if (to)
		assert_string_equal(json_string_value(json_object_get(u, "to")), to);
	json_decref(res);
}

/* ---- ports: expose, un-expose, and the transport told what to close ---- */

static char ended_id[SAAS_ID_MAX + 1];
static unsigned int ended_port, ended_calls;

static void record_ended(const char *sandbox_id, unsigned int port)
{
	snprintf(ended_id, sizeof(ended_id), "%s", sandbox_id);
	ended_port = port;
	ended_calls++;
}

static void test_unexpose_port(void **state)
{
	struct fixture *f = *state;
	aas_mcp_ctx ctx = f->ctx;
	json_t *res, *sc;
	char args[256], id[SAAS_ID_MAX + 1], url[256];

	ctx.ended = record_ended;
	ended_calls = 0;
	res = call_tool(&ctx, "create_sandbox", "{}");
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(json_object_get(res, "structuredContent"), "id")));
	json_decref(res);
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"port\":8000}", id);
	res = call_tool(&ctx, "expose_port", args);
	assert_false(json_is_true(json_object_get(res, "isError")));
	snprintf(url, sizeof(url), "%s", json_string_value(json_object_get(json_object_get(res, "structuredContent"), "url")));
	assert_null(strstr(url, id));
	json_decref(res);

	res = call_tool(&ctx, "unexpose_port", args);
	assert_false(json_is_true(json_object_get(res, "isError")));
	sc = json_object_get(res, "structuredContent");
	assert_true(json_is_false(json_object_get(sc, "exposed")));
	assert_int_equal(json_integer_value(json_object_get(sc, "port")), 8000);
	json_decref(res);
	assert_int_equal(ended_calls, 1);
	assert_string_equal(ended_id, id);
	assert_int_equal(ended_port, 8000);
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\"}", id);
	res = call_tool(&ctx, "get_sandbox", args);
	assert_int_equal(json_array_size(json_object_get(json_object_get(res, "structuredContent"), "ports")), 0);
	json_decref(res);
	/* Exposed again: a new URL. */
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"port\":8000}", id);
	res = call_tool(&ctx, "expose_port", args);
	assert_string_not_equal(json_string_value(json_object_get(json_object_get(res, "structuredContent"), "url")), url);
	json_decref(res);

	res = call_tool(&ctx, "unexpose_port", "{\"sandbox_id\":\"sbx-nosuchsandbox\",\"port\":8000}");
	assert_tool_error(res, "unexpose_port failed", "not_found", NULL);
	json_decref(res);
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\"}", id);
	res = call_tool(&ctx, "unexpose_port", args);
	assert_tool_error(res, "\"port\" is required", NULL);
	json_decref(res);
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\",\"port\":0}", id);
	res = call_tool(&ctx, "unexpose_port", args);
	assert_tool_error(res, "\"port\" must be between 1 and 65535", NULL);
	json_decref(res);
	assert_int_equal(ended_calls, 1);

	/* Destroying tells the transport too: every port of it. */
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\"}", id);
	json_decref(call_tool(&ctx, "destroy_sandbox", args));
	assert_int_equal(ended_calls, 2);
	assert_int_equal(ended_port, 0);
}

static void test_usage_period(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *args, *error;
	} bad[] = {
		{ "{\"from\":\"yesterday\"}", "\"from\" must be an RFC 3339 time" },
		{ "{\"from\":\"2025-02-29\"}", "\"from\" must be" },           /* not a leap year */
		{ "{\"from\":\"2025-13-01\"}", "\"from\" must be" },
		{ "{\"from\":\"2025-06-00\"}", "\"from\" must be" },
		{ "{\"from\":\"2025-06-01T25:00:00Z\"}", "\"from\" must be" },
		{ "{\"from\":\"2025-06-01T12:00:00.Z\"}", "\"from\" must be" },
		{ "{\"to\":\"2025-6-1\"}", "\"to\" must be an RFC 3339 time" },
		{ "{\"to\":\"2025-06-01T00:00:00+2:00\"}", "\"to\" must be" },
		{ "{\"to\":17}", "\"to\" must be a string" },
		{ "{\"from\":\"2025-06-01\",\"days\":3}", "not both" },
		{ "{\"from\":\"2025-06-02\",\"to\":\"2025-06-01\"}", "\"from\" must be before \"to\"" },
		{ "{\"from\":\"2025-06-01T10:00:00Z\",\"to\":\"2025-06-01T12:00:00+02:00\"}", "before" },
		{ "{\"days\":0}", "\"days\" must be between 1 and 366" },
		{ "{\"days\":400}", "\"days\" must be between 1 and 366" },
		{ "{\"since\":\"2025-06-01\"}", NULL }, /* unknown arguments are ignored, as before */
	};
	json_t *res;

	usage_ok(&f->ctx, "{\"from\":\"2025-06-01\",\"to\":\"2025-06-30\"}", "2025-06-01T00:00:00.000Z",
	         "2025-07-01T00:00:00.000Z");
	usage_ok(&f->ctx, "{\"from\":\"2024-02-29\",\"to\":\"2024-12-31\"}", "2024-02-29T00:00:00.000Z",
	         "2025-01-01T00:00:00.000Z");
	usage_ok(&f->ctx, "{\"from\":\"2025-06-01T12:30:00.250+02:00\",\"to\":\"2025-06-01T23:59:59z\"}",
	         "2025-06-01T10:30:00.250Z", "2025-06-01T23:59:59.000Z");
	usage_ok(&f->ctx, "{\"days\":7,\"to\":\"2025-06-10T00:00:00Z\"}", "2025-06-03T00:00:00.000Z",
	         "2025-06-10T00:00:00.000Z");
	usage_ok(&f->ctx, "{\"to\":\"2025-06-30\"}", "2025-06-01T00:00:00.000Z", "2025-07-01T00:00:00.000Z");
	/* Lenient like the REST API and the CLI (saas_time_parse): no offset is UTC; ' ' for 'T'; unix seconds. */
	usage_ok(&f->ctx, "{\"from\":\"2025-06-01T12:00:00\",\"to\":\"2025-06-01 13:00Z\"}", "2025-06-01T12:00:00.000Z",
	         "2025-06-01T13:00:00.000Z");
	usage_ok(&f->ctx, "{\"from\":\"1748779200\",\"to\":\"2025-06-02\"}", "2025-06-01T12:00:00.000Z",
	         "2025-06-03T00:00:00.000Z");
	usage_ok(&f->ctx, "{}", NULL, NULL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		res = call_tool(&f->ctx, "get_usage", bad[i].args);
		if (bad[i].error)
			assert_tool_error(res, bad[i].error, NULL);
		else
			assert_false(json_is_true(json_object_get(res, "isError")));
		json_decref(res);
	}
}

/* ---- progress and cancellation ---- */

static const char create_with_token[] =
	"{\"jsonrpc\":\"2.0\",\"id\":\"req-1\",\"method\":\"tools/call\",\"params\":{\"name\":\"create_sandbox\","
	"\"arguments\":{},\"_meta\":{\"progressToken\":\"tok\"}}}";

static unsigned int active_sandboxes(struct fixture *f)
{
	saas_sandbox_list *l = NULL;
	unsigned int n;

	assert_int_equal(saas_sandbox_list_get(&l, f->t->a, NULL, 0, SAAS_LIST_ACTIVE), SAAS_OK);
	n = (unsigned int)l->count;
	saas_sandbox_list_free(l);
	return n;
}

static void test_progress(void **state)
{
	struct fixture *f = *state;
	json_t *resp, *n, *msg;
	json_int_t last = 0;
	size_t i;

	f->ctx.notify = notify;
	f->ctx.cancelled = cancelled;
	resp = handle(&f->ctx, create_with_token);
	assert_false(json_is_true(json_object_get(result_of(resp), "isError")));
	assert_string_equal(json_string_value(json_object_get(json_object_get(result_of(resp), "structuredContent"),
	                                                      "status")), "ready");
	/* CREATE_MS at one heartbeat per 100 ms: "creating sandbox", some "booting the VM", "ready". */
	assert_true(json_array_size(f->notes) >= 4);
	json_array_foreach(f->notes, i, n) {
		json_t *p = json_object_get(n, "params");
		assert_string_equal(json_string_value(json_object_get(n, "method")), "notifications/progress");
		assert_null(json_object_get(n, "id"));
		assert_string_equal(json_string_value(json_object_get(p, "progressToken")), "tok");
		assert_true(json_integer_value(json_object_get(p, "progress")) > last);
		last = json_integer_value(json_object_get(p, "progress"));
		msg = json_object_get(p, "message");
		if (i == 0)
			assert_string_equal(json_string_value(msg), "creating sandbox");
		else if (i == json_array_size(f->notes) - 1)
			assert_string_equal(json_string_value(msg), "ready");
		else
			assert_non_null(strstr(json_string_value(msg), "booting the VM ("));
	}
	json_decref(resp);
	assert_int_equal(active_sandboxes(f), 1);
	/* An integer token is echoed as one. */
	json_array_clear(f->notes);
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
	                       "\"create_sandbox\",\"arguments\":{},\"_meta\":{\"progressToken\":77}}}");
	assert_false(json_is_true(json_object_get(result_of(resp), "isError")));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(json_array_get(f->notes, 0), "params"),
	                                                    "progressToken")), 77);
	json_decref(resp);
	/* No token, or a tool that does not report progress: no notifications. */
	json_array_clear(f->notes);
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
	                       "\"create_sandbox\",\"arguments\":{}}}");
	assert_false(json_is_true(json_object_get(result_of(resp), "isError")));
	json_decref(resp);
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
	                       "\"list_sandboxes\",\"arguments\":{},\"_meta\":{\"progressToken\":\"t\"}}}");
	assert_false(json_is_true(json_object_get(result_of(resp), "isError")));
	json_decref(resp);
	assert_int_equal(json_array_size(f->notes), 0);
	/* A transport that cannot notify: the same result, without notifications. */
	f->ctx.notify = NULL;
	resp = handle(&f->ctx, create_with_token);
	assert_false(json_is_true(json_object_get(result_of(resp), "isError")));
	json_decref(resp);
	assert_int_equal(json_array_size(f->notes), 0);
	assert_int_equal(active_sandboxes(f), 4);
	/* A failed create reports no "ready" and says why. */
	f->ctx.notify = notify;
	saas_fake_fail_creates(1);
	resp = handle(&f->ctx, create_with_token);
	assert_tool_error(result_of(resp), "create_sandbox failed", NULL);
	json_decref(resp);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(f->notes, 0), "params"),
	                                                      "message")), "creating sandbox");
	json_array_foreach(f->notes, i, n)
		assert_string_not_equal(json_string_value(json_object_get(json_object_get(n, "params"), "message")), "ready");
}

/*
 * A call refused for want of room (a resume, a fork's child, a create: the
 * REST API's 503 busy with Retry-After) says when to call again, and that
 * nothing changed; a tenant's, without the host's facts.
 */
static void test_tool_busy(void **state)
{
	struct fixture *f = *state;
	aas_mcp_ctx ctx = f->ctx;
	json_t *res, *sb;
	char args[256];

	ctx.flags |= AAS_MCP_TENANT;
	res = call_tool(&ctx, "create_sandbox", "{}");
	assert_false(json_is_true(json_object_get(res, "isError")));
	sb = json_incref(json_object_get(json_object_get(res, "structuredContent"), "id"));
	json_decref(res);
	snprintf(args, sizeof(args), "{\"sandbox_id\":\"%s\"}", json_string_value(sb));

	saas_fake_busy_restores(1);
	res = call_tool(&ctx, "fork_sandbox", args);
	assert_tool_error(res, "fork_sandbox failed", "no room for it right now", "busy: try again in 10 s",
	                  "Wait, then make the same call again", NULL);
	assert_null(strstr(text_of(res), "MiB"));
	json_decref(res);

	json_decref(call_tool(&ctx, "pause_sandbox", args));
	saas_fake_busy_restores(1);
	res = call_tool(&ctx, "resume_sandbox", args);
	assert_tool_error(res, "resume_sandbox failed", "busy: try again in 10 s", "stays paused", NULL);
	assert_null(strstr(text_of(res), "fake:"));
	/* The text is the whole of it: an error result carries no structuredContent (the SDK checks it against outputSchema). */
	assert_null(json_object_get(res, "structuredContent"));
	json_decref(res);
	res = call_tool(&ctx, "get_sandbox", args);
	assert_string_equal(json_string_value(json_object_get(json_object_get(res, "structuredContent"), "status")),
	                    "paused");
	json_decref(res);
	res = call_tool(&ctx, "resume_sandbox", args);
	assert_false(json_is_true(json_object_get(res, "isError")));
	json_decref(res);

	/* A create, on the thread that reports its progress too: the wait read there is said here. */
	__atomic_store_n(&busy_creates, 1, __ATOMIC_SEQ_CST);
	res = call_tool(&ctx, "create_sandbox", "{}");
	assert_tool_error(res, "create_sandbox failed", "busy: try again in 10 s", NULL);
	assert_null(strstr(text_of(res), "MiB"));
	json_decref(res);
	ctx.notify = notify;
	__atomic_store_n(&busy_creates, 1, __ATOMIC_SEQ_CST);
	res = handle(&ctx, create_with_token);
	assert_tool_error(result_of(res), "create_sandbox failed", "no room for it right now", "busy: try again in 10 s",
	                  NULL);
	assert_null(strstr(text_of(result_of(res)), "MiB"));
	json_decref(res);

	json_decref(call_tool(&ctx, "destroy_sandbox", args));
	json_decref(sb);
}

/* run_command with a progress token: each chunk of output as a notification while it runs; the result whole. */
static void test_run_progress(void **state)
{
	struct fixture *f = *state;
	json_t *res = call_tool(&f->ctx, "create_sandbox", "{}"), *resp, *n;
	char msg[512], out[256] = "";
	size_t i;

	snprintf(msg, sizeof(msg),
	         "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"run_command\","
	         "\"arguments\":{\"sandbox_id\":\"%s\",\"command\":\"lines 3\"},\"_meta\":{\"progressToken\":\"run\"}}}",
	         json_string_value(json_object_get(json_object_get(res, "structuredContent"), "id")));
	json_decref(res);
	f->ctx.notify = notify;
	json_array_clear(f->notes);
	resp = handle(&f->ctx, msg);
	res = result_of(resp);
	assert_false(json_is_true(json_object_get(res, "isError")));
	/* The result is the complete one. */
	assert_string_equal(json_string_value(json_object_get(json_object_get(res, "structuredContent"), "stdout")),
	                    "line 1\nline 2\nline 3\n");
	/* The notifications carry the output in order, with increasing progress, stream and offset in _meta. */
	assert_true(json_array_size(f->notes) >= 2);
	json_array_foreach(f->notes, i, n) {
		json_t *p = json_object_get(n, "params"), *meta = json_object_get(p, "_meta");
		assert_string_equal(json_string_value(json_object_get(n, "method")), "notifications/progress");
		assert_string_equal(json_string_value(json_object_get(p, "progressToken")), "run");
		assert_int_equal(json_integer_value(json_object_get(p, "progress")), (json_int_t)i + 1);
		if (!strcmp(json_string_value(json_object_get(meta, "stream")), "stdout"))
			snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s",
			         json_string_value(json_object_get(p, "message")));
		else
			assert_string_equal(json_string_value(json_object_get(p, "message")), "done\n");
	}
	assert_string_equal(out, "line 1\nline 2\nline 3\n");
	json_decref(resp);
}

static void test_reports_progress(void **state)
{
	static const struct {
		const char *msg;
		bool yes;
	} cases[] = {
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"create_sandbox\",\"_meta\":{\"progressToken\":1}}}", true },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"create_sandbox\",\"_meta\":{\"progressToken\":\"a\"}}}", true },
		{ "[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"create_sandbox\",\"_meta\":{\"progressToken\":1}}}]", true },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"create_sandbox\"}}", false },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"create_sandbox\",\"_meta\":{\"progressToken\":[]}}}", false },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run_command\",\"_meta\":{\"progressToken\":1}}}", true },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{\"name\":\"create_sandbox\",\"_meta\":{\"progressToken\":1}}}", false },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{\"progressToken\":1}}}", false },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *m = json_loads(cases[i].msg, 0, NULL);
		assert_non_null(m);
		if (aas_mcp_reports_progress(m) != cases[i].yes)
			fail_msg("aas_mcp_reports_progress(%s) should be %d", cases[i].msg, cases[i].yes);
		json_decref(m);
	}
}

static void test_cancelled_request(void **state)
{
	static const struct {
		const char *msg, *id; /* id: its JSON, or NULL when none is named */
	} cases[] = {
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7,\"reason\":\"x\"}}", "7" },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"r-1\"}}", "\"r-1\"" },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{}}", NULL },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\"}", NULL },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":{}}}", NULL },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1.5}}", NULL },
		{ "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7}}", NULL },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"requestId\":7}}", NULL },
		{ "{\"jsonrpc\":\"1.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7}}", NULL },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *m = json_loads(cases[i].msg, 0, NULL), *want = cases[i].id ? json_loads(cases[i].id, JSON_DECODE_ANY, NULL) : NULL;
		const json_t *got = aas_mcp_cancelled_request(m);
		if (want ? !got || !json_equal((json_t *)got, want) : got != NULL)
			fail_msg("aas_mcp_cancelled_request(%s)", cases[i].msg);
		json_decref(want);
		json_decref(m);
	}
}

static void test_cancel(void **state)
{
	struct fixture *f = *state;
	unsigned int calls = saas_fake_create_calls();
	json_t *resp, *n;
	size_t i;

	f->ctx.notify = notify;
	f->ctx.cancelled = cancelled;
	/* Cancelled while the VM boots: no response, and the sandbox is destroyed once it exists. */
	f->cancel_id = json_string("req-1");
	f->cancel_at_boot = true;
	assert_null(handle(&f->ctx, create_with_token));
	assert_int_equal(saas_fake_create_calls(), calls + 1);
	assert_int_equal(active_sandboxes(f), 0);
	assert_int_equal(saas_fake_vm_count(), 0);
	/* No progress after the cancellation, and never "ready". */
	json_array_foreach(f->notes, i, n)
		assert_string_not_equal(json_string_value(json_object_get(json_object_get(n, "params"), "message")), "ready");
	/* Cancelled before it started: nothing is made. */
	f->cancel_at_boot = false;
	f->cancel_now = true;
	assert_null(handle(&f->ctx, create_with_token));
	assert_int_equal(saas_fake_create_calls(), calls + 1);
	/* The same without a progress token. */
	assert_null(handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":\"req-1\",\"method\":\"tools/call\",\"params\":{\"name\":"
	                            "\"create_sandbox\",\"arguments\":{}}}"));
	assert_int_equal(active_sandboxes(f), 0);
	/* Any cancelled request goes unanswered, but initialize cannot be cancelled. */
	assert_null(handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":\"req-1\",\"method\":\"ping\"}"));
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":\"req-1\",\"method\":\"initialize\",\"params\":{"
	                       "\"protocolVersion\":\"2025-06-18\"}}");
	assert_non_null(result_of(resp));
	json_decref(resp);
	/* Another request (another id; the same number is not the same id as a string) is answered. */
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
	assert_non_null(result_of(resp));
	json_decref(resp);
	resp = handle(&f->ctx, "{\"jsonrpc\":\"2.0\",\"id\":\"req-2\",\"method\":\"tools/call\",\"params\":{\"name\":"
	                       "\"create_sandbox\",\"arguments\":{}}}");
	assert_false(json_is_true(json_object_get(result_of(resp), "isError")));
	json_decref(resp);
	assert_int_equal(active_sandboxes(f), 1);
	/* In a batch, only the cancelled member goes unanswered. */
	f->ctx.batches = true;
	resp = handle(&f->ctx, "[{\"jsonrpc\":\"2.0\",\"id\":\"req-1\",\"method\":\"ping\"},"
	                       "{\"jsonrpc\":\"2.0\",\"id\":\"req-3\",\"method\":\"ping\"}]");
	assert_int_equal(json_array_size(resp), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(resp, 0), "id")), "req-3");
	json_decref(resp);
}

/* ---- bounds: batches and response sizes ---- */

/* "[m,m,...]" of n copies of the JSON text m, each with its own id; free(). */
static char *batch_of(const char *fmt, size_t n)
{
	size_t cap = n * (strlen(fmt) + 24) + 3, len = 0;
	char *buf = malloc(cap);

	assert_non_null(buf);
	buf[len++] = '[';
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf[len++] = ',';
		len += (size_t)snprintf(buf + len, cap - len, fmt, (int)i + 1);
	}
	buf[len++] = ']';
	buf[len] = '\0';
	return buf;
}

static void test_batches(void **state)
{
	static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}";
	static const char list[] = "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/list\"}";
	static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
	                           "\"protocolVersion\":\"2025-03-26\"}}";
	struct fixture *f = *state;
	unsigned int calls = saas_fake_create_calls();
	json_t *resp, *msg;
	char *text, *rest, buf[1024];

	/* Only 2025-03-26 has batches. */
	assert_true(aas_mcp_version_batches("2025-03-26"));
	assert_false(aas_mcp_version_batches("2025-06-18"));
	assert_false(aas_mcp_version_batches("2025-11-25"));
	assert_false(aas_mcp_version_batches(NULL));
	/* Without them (the default, and before initialize): refused whole, nothing in it run. */
	assert_false(f->ctx.batches);
	resp = handle(&f->ctx, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"id\":2,"
	                       "\"method\":\"tools/call\",\"params\":{\"name\":\"create_sandbox\",\"arguments\":{}}}]");
	assert_error(resp, AAS_MCP_INVALID_REQUEST, NULL);
	assert_non_null(strstr(error_message(resp), "2025-03-26"));
	json_decref(resp);
	assert_int_equal(saas_fake_create_calls(), calls);
	/* A message that is not a batch is never refused as one. */
	msg = json_loads("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", 0, NULL);
	assert_null(aas_mcp_batch_error(&f->ctx, msg));
	json_decref(msg);

	/* initialize never comes in a batch, whatever the version; the rest of the batch is not answered either. */
	f->ctx.batches = true;
	rest = batch_of(list, 20);
	assert_true(asprintf(&text, "[%s,%s", init, rest + 1) > 0); /* rest + 1: its members and "]" */
	free(rest);
	msg = json_loads(text, 0, NULL);
	assert_non_null(msg);
	assert_int_equal(aas_mcp_kind(msg), AAS_MCP_INVALID);
	json_decref(msg);
	resp = handle(&f->ctx, text);
	assert_error(resp, AAS_MCP_INVALID_REQUEST, NULL);
	assert_non_null(strstr(error_message(resp), "initialize"));
	json_decref(resp);
	free(text);
	snprintf(buf, sizeof(buf), "[%s]", init);
	resp = handle(&f->ctx, buf);
	assert_error(resp, AAS_MCP_INVALID_REQUEST, NULL);
	json_decref(resp);

	/* At the bound: AAS_MCP_BATCH_MAX messages are answered, one more is refused whole. */
	text = batch_of(ping, AAS_MCP_BATCH_MAX);
	resp = handle(&f->ctx, text);
	assert_true(json_is_array(resp));
	assert_int_equal(json_array_size(resp), AAS_MCP_BATCH_MAX);
	json_decref(resp);
	free(text);
	text = batch_of(ping, AAS_MCP_BATCH_MAX + 1);
	resp = handle(&f->ctx, text);
	assert_error(resp, AAS_MCP_INVALID_REQUEST, NULL);
	snprintf(buf, sizeof(buf), "limit of %d", AAS_MCP_BATCH_MAX);
	assert_non_null(strstr(error_message(resp), buf));
	json_decref(resp);
	free(text);
	/* An empty batch is invalid, as JSON-RPC says. */
	resp = handle(&f->ctx, "[]");
	assert_error(resp, AAS_MCP_INVALID_REQUEST, NULL);
	json_decref(resp);
}

/* Bytes a response takes as sent (compact, ASCII only): what AAS_MCP_RESPONSE_MAX counts. */
static size_t wire(const json_t *resp)
{
	return json_dumpb(resp, NULL, 0, JSON_COMPACT | JSON_ENSURE_ASCII);
}

static void test_response_max(void **state)
{
	static const char list1[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}";
	static const char ping2[] = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";
	static const char batch[] = "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"},"
	                            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"},"
	                            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"},"
	                            "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
	                            "\"create_sandbox\",\"arguments\":{}}}]";
	struct fixture *f = *state;
	unsigned int calls = saas_fake_create_calls();
	json_t *resp, *one = json_integer(1), *three = json_integer(3);
	size_t list_size, ping_size;

	/* The default bound lets every answer of this size through. */
	resp = handle(&f->ctx, list1);
	list_size = wire(resp);
	assert_true(list_size < AAS_MCP_RESPONSE_MAX);
	json_decref(resp);
	resp = handle(&f->ctx, ping2);
	ping_size = wire(resp);
	json_decref(resp);

	/* One message: an answer of exactly the bound goes out; one byte over, an error that says so instead. */
	f->ctx.response_max = list_size;
	resp = handle(&f->ctx, list1);
	assert_non_null(result_of(resp));
	assert_int_equal(wire(resp), list_size);
	json_decref(resp);
	f->ctx.response_max = list_size - 1;
	resp = handle(&f->ctx, list1);
	assert_error(resp, AAS_MCP_INTERNAL_ERROR, one);
	assert_non_null(strstr(error_message(resp), "Response too large"));
	json_decref(resp);

	/*
	 * A batch counts its brackets and commas: "[" list "," ping "]" fits exactly; what comes after is not
	 * run (the create is never called) and answered with an error.
	 */
	f->ctx.batches = true;
	f->ctx.response_max = 1 + (list_size + 1) + (ping_size + 1);
	resp = handle(&f->ctx, batch);
	assert_true(json_is_array(resp));
	assert_int_equal(json_array_size(resp), 3);
	assert_non_null(result_of(json_array_get(resp, 0)));
	assert_non_null(result_of(json_array_get(resp, 1)));
	assert_error(json_array_get(resp, 2), AAS_MCP_INTERNAL_ERROR, three);
	assert_non_null(strstr(error_message(json_array_get(resp, 2)), "Not run"));
	json_decref(resp);
	assert_int_equal(saas_fake_create_calls(), calls);
	/* One byte less: the ping no longer fits, and gets the error instead of its answer. */
	f->ctx.response_max--;
	resp = handle(&f->ctx, batch);
	assert_non_null(result_of(json_array_get(resp, 0)));
	assert_non_null(strstr(error_message(json_array_get(resp, 1)), "Response too large"));
	assert_null(json_object_get(json_array_get(resp, 2), "result"));
	json_decref(resp);
	assert_int_equal(saas_fake_create_calls(), calls);
	json_decref(one);
	json_decref(three);
}

/* get_service_info says the engine's default size, not a fixed "small" its size table may lack. */
static void test_service_default_size(void **state)
{
	struct fixture *f = *state;
	saas_size tiny = { "tiny", 1, 512, 5, 1000 }, huge = { "huge", 8, 16384, 100, 9000 };
	const saas_size *sizes[] = { &tiny, &huge };
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;
	aas_mcp_ctx ctx = f->ctx;
	char *dir = saas_test_tmpdir(), *url = saas_test_store_url(dir);
	saas_engine *e = NULL;
	json_t *res, *sc;

	o.state_dir = dir;
	o.store_url = url;
	o.driver = &saas_fake_driver;
	o.flags = SAAS_ENGINE_NO_REAPER;
	o.sizes = sizes;
	o.nsizes = 2;
	o.default_size = "huge";
	assert_int_equal(saas_engine_open(&e, &o), SAAS_OK);
	ctx.engine = e;
	ctx.flags = AAS_MCP_SERVICE_INFO;
	res = call_tool(&ctx, "get_service_info", "{}");
	sc = json_object_get(res, "structuredContent");
	assert_non_null(sc);
	assert_string_equal(json_string_value(json_object_get(sc, "default_size")), "huge");
	json_decref(res);
	ctx.engine = f->t->engine;
	res = call_tool(&ctx, "get_service_info", "{}");
	assert_string_equal(json_string_value(json_object_get(json_object_get(res, "structuredContent"), "default_size")),
	                    "small");
	json_decref(res);
	saas_engine_free(e);
	saas_test_rmdir(dir);
	free(url);
}

/* Whose words a failure's detail is: the VM driver's "busy" and "cannot" name the host, the server's own do not. */
static void test_error_is_internal(void **state)
{
	(void)state;
	assert_true(aas_error_is_internal(SAAS_EBUSY, SAAS_ERRCLASS_DRIVER));
	assert_true(aas_error_is_internal(SAAS_ENOTSUP, SAAS_ERRCLASS_DRIVER));
	assert_true(aas_error_is_internal(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER));
	/* The server's own "full, try again later" (disk space, the disk budget) is written for the caller. */
	assert_false(aas_error_is_internal(SAAS_EBUSY, SAAS_ERRCLASS_OS));
	assert_false(aas_error_is_internal(SAAS_EBUSY, SAAS_ERRCLASS_ARGS));
	assert_false(aas_error_is_internal(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS));
	assert_false(aas_error_is_internal(SAAS_EIO, SAAS_ERRCLASS_GUEST));
	assert_false(aas_error_is_internal(SAAS_EINVAL, SAAS_ERRCLASS_DRIVER));
	assert_non_null(strstr(aas_error_tenant_text(SAAS_EBUSY), "no room"));
	assert_non_null(strstr(aas_error_tenant_text(SAAS_ENOTSUP), "cannot do that"));
	assert_non_null(strstr(aas_error_tenant_text(SAAS_EBACKEND), "failed"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_error_is_internal),
		cmocka_unit_test(test_json_bounds),
		cmocka_unit_test(test_json_int64),
		cmocka_unit_test_setup_teardown(test_invalid_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_methods, setup, teardown),
		cmocka_unit_test_setup_teardown(test_version_negotiation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tools_list_pages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tool_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tool_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tool_busy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_pause_resume, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unexpose_port, setup, teardown),
		cmocka_unit_test_setup_teardown(test_usage_period, setup, teardown),
		cmocka_unit_test(test_reports_progress),
		cmocka_unit_test_setup_teardown(test_run_progress, setup, teardown),
		cmocka_unit_test(test_cancelled_request),
		cmocka_unit_test_setup_teardown(test_progress, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_response_max, setup, teardown),
		cmocka_unit_test_setup_teardown(test_service_default_size, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
