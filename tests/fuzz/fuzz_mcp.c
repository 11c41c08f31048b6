/*
 * MCP's protocol core (mcp/): parse -> classify -> handle, as both
 * transports call it, on a local engine with the fake driver (as
 * tests/unit/test_mcp.c does). The input is one message (or batch) as text;
 * "@SB@" becomes the id of a running sandbox, so tools reach a real one.
 *
 * Oracle, beyond the sanitizers: what JSON-RPC 2.0 promises. A parse error
 * is a -32700 response, a text past the JSON bounds (aas_json_bounds) a -32600
 * one, and a tree jansson built stays within those bounds; a request gets exactly one response, with its id and
 * either a result or an error; a notification or a response gets none; a
 * batch gets one response per member that needs one (or one error for the
 * whole batch); and every response serialises.
 */
#include <stdlib.h>
#include <string.h>

#include "aas_mcp.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fuzz_tenant tenant;
static saas_engine *engine;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	engine = fuzz_engine_open(fuzz_driver(NULL), &tenant);
	return 0;
}

#define CHECK(cond)               \
	do {                      \
		if (!(cond))      \
			abort();  \
	} while (0)

static bool is_error(const json_t *r, int code)
{
	const json_t *e = json_object_get(r, "error");

	return json_is_object(e) && (!code || json_integer_value(json_object_get(e, "code")) == code);
}

/* A response to the request m (an object with a valid id). */
static void check_response(const json_t *m, const json_t *r)
{
	CHECK(json_is_object(r));
	CHECK(json_is_string(json_object_get(r, "jsonrpc")) &&
	      strcmp(json_string_value(json_object_get(r, "jsonrpc")), "2.0") == 0);
	CHECK(json_equal(json_object_get(r, "id"), json_object_get(m, "id")));
	CHECK(!json_object_get(r, "result") != !json_object_get(r, "error"));
}

/* Count the values (an object's keys too) and the depth of a parsed tree, as aas_json_bounds() does of its text. */
static void measure(const json_t *v, size_t level, size_t *values, size_t *depth)
{
	const char *key;
	json_t *m;
	size_t i;

	*values += 1;
	if (!json_is_array(v) && !json_is_object(v))
		return;
	if (level + 1 > *depth)
		*depth = level + 1;
	if (json_is_array(v))
		json_array_foreach(v, i, m)
			measure(m, level + 1, values, depth);
	else
		json_object_foreach((json_t *)v, key, m) {
			*values += 1;
			measure(m, level + 1, values, depth);
		}
}

/* Does a batch member get a response? */
static bool answered(const json_t *m)
{
	enum aas_mcp_kind k = json_is_array(m) ? AAS_MCP_INVALID : aas_mcp_kind(m);

	return k == AAS_MCP_REQUEST || k == AAS_MCP_INITIALIZE || k == AAS_MCP_INVALID;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	aas_mcp_ctx ctx;
	size_t len = size;
	char *text = fuzz_substitute(data, &len, &tenant), *dump;
	json_t *msg, *err = NULL, *res;
	enum aas_mcp_kind kind;

	memset(&ctx, 0, sizeof(ctx));
	ctx.client = tenant.client;
	ctx.engine = engine;
	ctx.flags = AAS_MCP_SERVICE_INFO;
	ctx.key_hint = "a key";
	ctx.page_size = size % 3; /* every tool in one page, or pages of 1 or 2 */
	msg = aas_mcp_parse(text, len, &err);
	if (!msg) {
		char why[200];
		bool bounded = aas_json_bounds(text, len, AAS_JSON_VALUES_MAX, AAS_JSON_DEPTH_MAX, why, sizeof(why));
		CHECK(err && json_is_null(json_object_get(err, "id")));
		CHECK(is_error(err, bounded ? AAS_MCP_PARSE_ERROR : AAS_MCP_INVALID_REQUEST));
		free(text);
		json_decref(err);
		return 0;
	}
	free(text);
	CHECK(!err);
	/* The scanner may count more than jansson builds (it cannot tell what is JSON), never fewer. */
	size_t values = 0, depth = 0;
	measure(msg, 0, &values, &depth);
	CHECK(values <= AAS_JSON_VALUES_MAX && depth <= AAS_JSON_DEPTH_MAX);
	kind = aas_mcp_kind(msg);
	(void)aas_mcp_reports_progress(msg);
	(void)aas_mcp_cancelled_request(msg);
	res = aas_mcp_handle(&ctx, msg);
	if (json_is_array(msg)) {
		size_t want = 0, i;
		json_t *m;
		json_array_foreach(msg, i, m)
			want += answered(m);
		if (json_is_array(res))
			CHECK(json_array_size(res) == want && want > 0);
		else
			CHECK(res ? is_error(res, 0) : want == 0);
	} else if (kind == AAS_MCP_REQUEST || kind == AAS_MCP_INITIALIZE) {
		check_response(msg, res);
	} else if (kind == AAS_MCP_INVALID) {
		CHECK(is_error(res, AAS_MCP_INVALID_REQUEST));
	} else {
		CHECK(!res);
	}
	if (res) {
		CHECK((dump = json_dumps(res, JSON_COMPACT)) != NULL);
		free(dump);
	}
	json_decref(res);
	json_decref(msg);
	return 0;
}
