/*
 * JSON-RPC 2.0 and the MCP lifecycle: initialize, ping, tools/list,
 * tools/call, and the answers withheld from cancelled requests. The tools
 * themselves are in tools.c (the table) and tools_*.c by area (tools.h);
 * create_sandbox's progress in tools_sandbox.c.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aas_mcp.h"
#include "mcp_internal.h"

static const char *const versions[] = { "2025-11-25", "2025-06-18", "2025-03-26" };

static const char instructions[] =
	"libsaas gives you disposable Linux sandboxes: each is a dedicated virtual machine with its own kernel. "
	"Typical flow: create_sandbox, then run_command / write_file / read_file / list_files with its id, "
	"expose_port to share a server, destroy_sandbox when done (it returns the minutes you were not going to use). "
	"Commands run as an unprivileged user without sudo: apt-get will not work; use "
	"`pip install --user --break-system-packages <pkg>` or `npm install <pkg>`. run_command waits for the "
	"command to finish; start servers in the background with `&` (e.g. `python3 -m http.server 8000 &`): "
	"they keep running after the call returns, and what they print after it is dropped, so redirect it "
	"(`>/tmp/log 2>&1 &`) to keep it. A sandbox is destroyed when its timeout expires; extend_sandbox pushes it out. "
	"The `default` image has Python 3.13 (requests, numpy, pandas), Node.js 22 with npm, git, curl, jq and "
	"build-essential. "
	"Account tools need an API key sent with each request.";

bool aas_mcp_version_supported(const char *version)
{
	for (size_t i = 0; version && i < sizeof(versions) / sizeof(versions[0]); i++)
		if (strcmp(version, versions[i]) == 0)
			return true;
	return false;
}

bool aas_mcp_version_batches(const char *version)
{
	return version && strcmp(version, "2025-03-26") == 0;
}

static json_t *error_response(const json_t *id, int code, const char *message)
{
	return json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id ? (json_t *)id : json_null(), "error",
	                 "code", code, "message", message);
}

json_t *aas_mcp_error(const json_t *id, int code, const char *message)
{
	json_t *e = error_response(id, code, message);
	char *ascii;

	if (e || !message || !(ascii = strdup(message)))
		return e;
	/* A client's text in the message (cut mid-character by a %.Ns, or a header not UTF-8) JSON cannot carry. */
	for (char *p = ascii; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	e = error_response(id, code, ascii);
	free(ascii);
	return e;
}

static json_t *result(const json_t *id, json_t *res)
{
	return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", (json_t *)id, "result", res);
}

json_t *aas_mcp_parse(const char *text, size_t len, json_t **error)
{
	json_error_t err;
	json_t *msg;
	char buf[300], why[200];

	*error = NULL;
	/* Counted before jansson builds a tree some 20 to 40 times the size of the text. */
	if (text && !aas_json_bounds(text, len, AAS_JSON_VALUES_MAX, AAS_JSON_DEPTH_MAX, why, sizeof(why))) {
		snprintf(buf, sizeof(buf), "Invalid Request: %s", why);
		*error = aas_mcp_error(NULL, AAS_MCP_INVALID_REQUEST, buf);
		return NULL;
	}
	msg = json_loadb(text ? text : "", text ? len : 0, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
	if (!msg) {
		snprintf(buf, sizeof(buf), "Parse error: %s", aas_json_error_text(why, sizeof(why), &err));
		*error = aas_mcp_error(NULL, AAS_MCP_PARSE_ERROR, buf);
	}
	return msg;
}

bool aas_json_int64(const json_t *v, int64_t *out)
{
	double d;

	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return true;
	}
	if (!json_is_real(v))
		return false;
	d = json_real_value(v);
	/* The range before the conversion: converting a double int64_t cannot hold is
	 * undefined. Both bounds are powers of two, so exact as doubles. */
	if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != (double)(int64_t)d)
		return false;
	*out = (int64_t)d;
	return true;
}

bool aas_json_bounds(const char *text, size_t len, size_t values_max, size_t depth_max, char *buf, size_t size)
{
	size_t values = 0, depth = 0;
	bool in_string = false, in_scalar = false;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];

		if (in_string) {
			if (c == '\\')
				i++; /* the escaped byte, \" or \\ alike, never ends the string */
			else if (c == '"')
				in_string = false;
			continue;
		}
		switch (c) {
		case '[':
		case '{':
			if (++depth > depth_max) {
				snprintf(buf, size, "the JSON nests arrays and objects more than %zu deep, the most one "
				         "request may", depth_max);
				return false;
			}
			values++;
			in_scalar = false;
			break;
		case ']':
		case '}':
			/* One too many is a syntax error jansson stops at, before anything past it is built. */
			if (depth)
				depth--;
			in_scalar = false;
			break;
		case '"':
			values++;
			in_string = true;
			in_scalar = false;
			break;
		case ',':
		case ':':
		case ' ':
		case '\t':
		case '\n':
		case '\r':
			in_scalar = false;
			break;
		default:
			/* The first byte of a number, true, false or null (or of something jansson refuses). */
			if (!in_scalar)
				values++;
			in_scalar = true;
			break;
		}
		if (values > values_max) {
			snprintf(buf, size, "the JSON holds more than %zu values (an object's keys count too), the most "
			         "one request may", values_max);
			return false;
		}
	}
	return true;
}

const char *aas_json_error_text(char *buf, size_t size, const json_error_t *err)
{
	if (json_error_code(err) == json_error_null_character)
		snprintf(buf, size, "a string holds \\u0000 (NUL), which is not accepted here; send bytes base64 "
		                    "(line %d, column %d)", err->line, err->column);
	else
		snprintf(buf, size, "%s (line %d, column %d)", err->text, err->line, err->column);
	return buf;
}

bool aas_error_is_internal(int rc, int klass)
{
	/* The driver's "busy" and "cannot" name the host's facts: its free memory, its QEMU uid range. */
	if ((rc == SAAS_ENOTSUP || rc == SAAS_EBUSY) && klass == SAAS_ERRCLASS_DRIVER)
		return true;
	return saas_error_http_status(rc) >= 500 && rc != SAAS_ENOTSUP && rc != SAAS_EBUSY &&
	       !(rc == SAAS_EIO && klass == SAAS_ERRCLASS_GUEST);
}

const char *aas_error_tenant_text(int rc)
{
	return rc == SAAS_EBUSY     ? "the server has no room for it right now; its log has the detail"
	       : rc == SAAS_ENOTSUP ? "this server cannot do that; its log has the detail"
	                            : "the server failed; its log has the detail";
}

static bool valid_id(const json_t *id)
{
	return id && (json_is_string(id) || json_is_integer(id));
}

static enum aas_mcp_kind kind_one(const json_t *m)
{
	const json_t *v = json_object_get(m, "jsonrpc"), *method = json_object_get(m, "method"),
		     *id = json_object_get(m, "id");

	if (!json_is_object(m) || !json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0)
		return AAS_MCP_INVALID;
	if (method) {
		if (!json_is_string(method))
			return AAS_MCP_INVALID;
		if (!id)
			return AAS_MCP_NOTIFICATION;
		if (!valid_id(id))
			return AAS_MCP_INVALID;
		return strcmp(json_string_value(method), "initialize") == 0 ? AAS_MCP_INITIALIZE : AAS_MCP_REQUEST;
	}
	if (id && (json_object_get(m, "result") || json_object_get(m, "error")))
		return AAS_MCP_RESPONSE;
	return AAS_MCP_INVALID;
}

enum aas_mcp_kind aas_mcp_kind(const json_t *msg)
{
	enum aas_mcp_kind k = AAS_MCP_NOTIFICATION;
	size_t i;
	json_t *m;

	if (!json_is_array(msg))
		return kind_one(msg);
	if (json_array_size(msg) == 0)
		return AAS_MCP_INVALID;
	json_array_foreach(msg, i, m) {
		enum aas_mcp_kind one = kind_one(m);
		if (one == AAS_MCP_INITIALIZE)
			return AAS_MCP_INVALID; /* never in a batch: aas_mcp_batch_error() says so */
		if (one == AAS_MCP_REQUEST || one == AAS_MCP_INVALID)
			k = AAS_MCP_REQUEST; /* an invalid member gets an error response */
		else if (one == AAS_MCP_RESPONSE && k == AAS_MCP_NOTIFICATION)
			k = AAS_MCP_RESPONSE;
	}
	return k;
}

static json_t *do_initialize(const json_t *id, const json_t *params)
{
	const json_t *pv = json_object_get(params, "protocolVersion");
	const char *want;

	if (!json_is_string(pv))
		return aas_mcp_error(id, AAS_MCP_INVALID_PARAMS, "initialize needs params.protocolVersion (a string)");
	want = json_string_value(pv);
	/* Echo the client's version when spoken; otherwise offer the newest and let the client decide. */
	if (!aas_mcp_version_supported(want))
		want = AAS_MCP_VERSION_LATEST;
	return result(id, json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s,s:s},s:s}", "protocolVersion", want, "capabilities",
	                            "tools", "listChanged", 0, "serverInfo", "name", "libsaas", "title",
	                            "libsaas sandboxes", "version", saas_version(), "instructions", instructions));
}

static json_t *do_tools_list(const aas_mcp_ctx *ctx, const json_t *id, const json_t *params)
{
	const json_t *cursor = json_object_get(params, "cursor");
	size_t start = 0, n = aas_mcp_ntools(), page = ctx->page_size ? ctx->page_size : n;
	json_t *tools = json_array(), *res;
	size_t listed = 0, i;
	char next[32];

	if (cursor && !json_is_null(cursor)) {
		/*
		 * "t<index>" as nextCursor writes it: 1 to 18 digits only (strtoul alone
		 * takes " 1", "+1", "-0"; 18 never overflows, and leading zeros past it
		 * are no cursor we wrote), the same grammar as the sandbox list's.
		 */
		const char *s = json_is_string(cursor) ? json_string_value(cursor) : "";
		size_t digits = s[0] == 't' ? strspn(s + 1, "0123456789") : 0;
		unsigned long v = digits && digits <= 18 ? strtoul(s + 1, NULL, 10) : 0;
		if (!digits || digits > 18 || s[1 + digits] || v > n) {
			json_decref(tools);
			return aas_mcp_error(id, AAS_MCP_INVALID_PARAMS, "invalid cursor: pass a nextCursor from tools/list");
		}
		start = v;
	}
	for (i = start; i < n && listed < page; i++) {
		json_t *t = aas_mcp_tool_json(ctx, i);
		if (t) {
			json_array_append_new(tools, t);
			listed++;
		}
	}
	while (i < n && !aas_mcp_tool_offered(ctx, i))
		i++;
	res = json_pack("{s:o}", "tools", tools);
	if (i < n) {
		snprintf(next, sizeof(next), "t%zu", i);
		json_object_set_new(res, "nextCursor", json_string(next));
	}
	return result(id, res);
}

/* params._meta.progressToken (a string or an integer), or NULL; the message is checked already. */
static const json_t *progress_token(const json_t *params)
{
	const json_t *t = json_object_get(json_object_get(params, "_meta"), "progressToken");

	return json_is_string(t) || json_is_integer(t) ? t : NULL;
}

static json_t *do_tools_call(const aas_mcp_ctx *ctx, const json_t *id, const json_t *params)
{
	const json_t *name = json_object_get(params, "name"), *args = json_object_get(params, "arguments");
	json_t *res;

	if (!json_is_string(name))
		return aas_mcp_error(id, AAS_MCP_INVALID_PARAMS, "tools/call needs params.name (a string)");
	if (args && !json_is_null(args) && !json_is_object(args))
		return aas_mcp_error(id, AAS_MCP_INVALID_PARAMS, "tools/call params.arguments must be an object");
	res = aas_mcp_tool_call(ctx, json_string_value(name), json_is_object(args) ? args : NULL, id,
	                        progress_token(params));
	if (!res)
		return aas_mcp_error(id, AAS_MCP_INTERNAL_ERROR, "out of memory");
	return result(id, res);
}

/* _meta, when present, is an object, and its progressToken a string or an integer. */
static json_t *check_meta(const json_t *id, const json_t *params)
{
	const json_t *meta = json_object_get(params, "_meta"), *t = json_object_get(meta, "progressToken");

	if (meta && !json_is_object(meta))
		return aas_mcp_error(id, AAS_MCP_INVALID_PARAMS, "params._meta must be an object");
	if (t && !json_is_string(t) && !json_is_integer(t))
		return aas_mcp_error(id, AAS_MCP_INVALID_PARAMS,
		                     "params._meta.progressToken must be a string or an integer");
	return NULL;
}

static json_t *dispatch(const aas_mcp_ctx *ctx, const json_t *m)
{
	enum aas_mcp_kind k = kind_one(m);
	const json_t *id = json_object_get(m, "id"), *params = json_object_get(m, "params");
	const char *method;
	json_t *bad;

	if (k == AAS_MCP_INVALID)
		return aas_mcp_error(json_is_object(m) && valid_id(id) ? id : NULL, AAS_MCP_INVALID_REQUEST,
		                     "Invalid Request: expected a JSON-RPC 2.0 request, notification or response");
	if (k == AAS_MCP_RESPONSE || k == AAS_MCP_NOTIFICATION)
		return NULL; /* notifications/initialized, notifications/cancelled, ...: nothing to answer */
	method = json_string_value(json_object_get(m, "method"));
	if (params && !json_is_object(params))
		return aas_mcp_error(id, AAS_MCP_INVALID_PARAMS, "params must be an object");
	if ((bad = check_meta(id, params)))
		return bad;
	if (strcmp(method, "initialize") == 0)
		return do_initialize(id, params);
	if (strcmp(method, "ping") == 0)
		return result(id, json_object());
	if (strcmp(method, "tools/list") == 0)
		return do_tools_list(ctx, id, params);
	if (strcmp(method, "tools/call") == 0)
		return do_tools_call(ctx, id, params);
	{
		char buf[200];
		snprintf(buf, sizeof(buf), "Method not found: %.120s", method);
		return aas_mcp_error(id, AAS_MCP_METHOD_NOT_FOUND, buf);
	}
}

static json_t *handle_one(const aas_mcp_ctx *ctx, const json_t *m)
{
	json_t *res = dispatch(ctx, m);
	const json_t *id = json_object_get(m, "id");

	/* The client gave up on it: per the specification, no response at all. */
	if (res && ctx->cancelled && kind_one(m) == AAS_MCP_REQUEST && ctx->cancelled(ctx->userdata, id)) {
		json_decref(res);
		return NULL;
	}
	return res;
}

json_t *aas_mcp_batch_error(const aas_mcp_ctx *ctx, const json_t *msg)
{
	size_t n = json_array_size(msg), i;
	const json_t *m;
	char buf[200];

	if (!json_is_array(msg))
		return NULL;
	if (n == 0)
		return aas_mcp_error(NULL, AAS_MCP_INVALID_REQUEST, "Invalid Request: empty batch");
	json_array_foreach(msg, i, m)
		if (kind_one(m) == AAS_MCP_INITIALIZE)
			return aas_mcp_error(NULL, AAS_MCP_INVALID_REQUEST,
			                     "Invalid Request: initialize must be sent on its own, never in a batch");
	if (!ctx->batches)
		return aas_mcp_error(NULL, AAS_MCP_INVALID_REQUEST,
		                     "Invalid Request: JSON-RPC batches are not part of the protocol version in use "
		                     "(only 2025-03-26 has them, once initialized); send one message at a time");
	if (n > AAS_MCP_BATCH_MAX) {
		snprintf(buf, sizeof(buf), "Invalid Request: a batch of %zu messages is over the limit of %d; "
		         "send at most %d at a time", n, AAS_MCP_BATCH_MAX, AAS_MCP_BATCH_MAX);
		return aas_mcp_error(NULL, AAS_MCP_INVALID_REQUEST, buf);
	}
	return NULL;
}

/* Bytes `msg` takes as sent: compact, and ASCII only, the longer of the transports' encodings. */
static size_t wire_size(const json_t *msg)
{
	return json_dumpb(msg, NULL, 0, JSON_COMPACT | JSON_ENSURE_ASCII);
}

/*
 * Handle m within `*left` bytes of response and take what its answer uses,
 * `extra` bytes more (a batch's comma), from *left. An answer that does not
 * fit is replaced by an error saying so; once nothing is left, m is not run.
 */
static json_t *handle_within(const aas_mcp_ctx *ctx, const json_t *m, size_t max, size_t *left, size_t extra)
{
	enum aas_mcp_kind k = kind_one(m);
	const json_t *id = json_object_get(m, "id");
	json_t *res;
	size_t size;
	char buf[300];

	if (*left > extra) {
		if (!(res = handle_one(ctx, m)))
			return NULL;
		if ((size = wire_size(res) + extra) <= *left) {
			*left -= size;
			return res;
		}
		json_decref(res);
		snprintf(buf, sizeof(buf), "Response too large: the answer is %zu bytes, over the limit of %zu per "
		         "response; ask for less (read_file max_bytes, list_files max_entries, a command that prints "
		         "less) or split the work", size - extra, max);
	} else if (k == AAS_MCP_NOTIFICATION || k == AAS_MCP_RESPONSE) {
		return NULL; /* nothing to run or to answer */
	} else {
		snprintf(buf, sizeof(buf), "Not run: the batch's response reached the limit of %zu bytes; send this "
		         "request again on its own", max);
	}
	/* The short error goes out anyway: past the limit by its own size at most. */
	res = aas_mcp_error(json_is_object(m) && valid_id(id) ? id : NULL, AAS_MCP_INTERNAL_ERROR, buf);
	size = res ? wire_size(res) + extra : 0;
	*left = size < *left ? *left - size : 0;
	return res;
}

json_t *aas_mcp_handle(const aas_mcp_ctx *ctx, const json_t *msg)
{
	size_t max = ctx->response_max ? ctx->response_max : AAS_MCP_RESPONSE_MAX, left = max;
	json_t *out, *m;
	size_t i;

	if (!json_is_array(msg))
		return handle_within(ctx, msg, max, &left, 0);
	if ((out = aas_mcp_batch_error(ctx, msg)))
		return out;
	/* "[" and "]" and a comma before every answer but the first: one byte per answer and one more. */
	left = max - 1;
	out = json_array();
	json_array_foreach(msg, i, m) {
		json_t *r = handle_within(ctx, m, max, &left, 1);
		if (r)
			json_array_append_new(out, r);
	}
	if (json_array_size(out) == 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}

bool aas_mcp_reports_progress(const json_t *msg)
{
	const json_t *m, *params;
	size_t i;

	if (json_is_array(msg)) {
		json_array_foreach(msg, i, m)
			if (aas_mcp_reports_progress(m))
				return true;
		return false;
	}
	params = json_object_get(msg, "params");
	return kind_one(msg) == AAS_MCP_REQUEST && json_is_object(params) &&
	       strcmp(json_string_value(json_object_get(msg, "method")), "tools/call") == 0 &&
	       json_is_string(json_object_get(params, "name")) &&
	       aas_mcp_tool_reports_progress(json_string_value(json_object_get(params, "name"))) &&
	       progress_token(params) != NULL;
}

const json_t *aas_mcp_cancelled_request(const json_t *msg)
{
	const json_t *id;

	if (kind_one(msg) != AAS_MCP_NOTIFICATION ||
	    strcmp(json_string_value(json_object_get(msg, "method")), "notifications/cancelled") != 0)
		return NULL;
	id = json_object_get(json_object_get(msg, "params"), "requestId");
	return valid_id(id) ? id : NULL;
}
