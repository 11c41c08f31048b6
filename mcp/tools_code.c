/*
 * The MCP tool run_code: code in a sandbox's code context (docs/code.md),
 * each PNG or JPEG result an MCP image content item (tools.h).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools.h"

/* Formats shown to the agent as MCP image content, so that the client displays them. */
static bool image_mime(const char *mime)
{
	return strcmp(mime, "image/png") == 0 || strcmp(mime, "image/jpeg") == 0;
}

/*
 * A run's result: structuredContent holds the execution with each result's
 * text formats, and names its binary ones ("binary"), whose bytes travel
 * once, as image content items (png, jpeg) after the JSON text.
 */
static json_t *code_result(saas_code_execution *x)
{
	json_t *data = saas__wire_code_execution(x, false), *content = json_array(), *results;
	char *text;
	size_t i;
	json_t *r;

	if (!data || !content)
		goto oom;
	results = json_object_get(data, "results");
	json_array_foreach(results, i, r) {
		json_t *formats = json_object_get(r, "formats"), *binary = json_array();
		const saas_code_result *res = x->results[i];
		if (!binary || json_object_set_new(r, "binary", binary) < 0)
			goto oom;
		for (size_t k = 0; k < res->count; k++) {
			const char *mime = res->formats[k]->mime;
			if (!saas__wire_code_binary(mime))
				continue;
			json_array_append_new(binary, json_string(mime));
			json_object_del(formats, mime);
			if (image_mime(mime)) {
				char *b64 = saas_base64_encode(res->formats[k]->data, res->formats[k]->len);
				json_t *item = b64 ? json_pack("{s:s,s:s,s:s}", "type", "image", "data", b64, "mimeType", mime) : NULL;
				saas_free(b64);
				if (!item || json_array_append_new(content, item) < 0)
					goto oom;
			}
		}
	}
	data = saas__wire_drop_nulls(data);
	if (!(text = json_dumps(data, JSON_COMPACT)) || json_array_insert_new(content, 0, aas_mcp_text_item(text)) < 0) {
		free(text);
		goto oom;
	}
	free(text);
	return json_pack("{s:o,s:o,s:b}", "content", content, "structuredContent", data, "isError", 0);
oom:
	json_decref(data);
	json_decref(content);
	return NULL;
}

/* Each event and each silent second's tick: a call the client cancelled (or left) interrupts the run. */
static int code_event(void *userdata, const saas_code_event *ev)
{
	(void)ev;
	return aas_mcp_cancelled(userdata) ? 1 : 0; /* the interpreter is interrupted; the context stays */
}

json_t *aas_mcp_tool_code(struct call *c)
{
	saas_code_run_options o = SAAS_CODE_RUN_OPTIONS_INIT;
	const char *id, *code;
	const json_t *env = json_object_get(c->args, "env");
	char **envv = NULL;
	saas_code_execution *x = NULL;
	json_t *res = NULL;
	int64_t timeout = 0;
	int rc;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id) || !aas_mcp_arg_str(c, "code", true, &code) ||
	    !aas_mcp_arg_str(c, "language", false, &o.language) ||
	    !aas_mcp_arg_int(c, "timeout_seconds", 1, SAAS_CODE_TIMEOUT_MAX_MS / 1000, &timeout))
		return aas_mcp_arg_fail(c);
	if (env && !json_is_null(env)) {
		const char *k;
		json_t *v;
		size_t n = 0;
		if (!json_is_object(env) || json_object_size(env) > 256 ||
		    !(envv = calloc(json_object_size(env) + 1, sizeof(*envv))))
			return aas_mcp_bad_arg(c, "\"env\" must be an object of at most 256 NAME: \"value\" strings."), aas_mcp_arg_fail(c);
		json_object_foreach((json_t *)env, k, v) {
			if (!*k || strchr(k, '=') || !json_is_string(v) ||
			    strlen(json_string_value(v)) != json_string_length(v) ||
			    asprintf(&envv[n], "%s=%s", k, json_string_value(v)) < 0) {
				envv[n] = NULL;
				aas_mcp_bad_arg(c, "\"env\" maps names (not empty, no '=') to strings without NUL.");
				res = aas_mcp_arg_fail(c);
				goto out;
			}
			n++;
		}
		o.env = (const char *const *)envv;
	}
	o.timeout_ms = timeout * 1000;
	o.on_event = code_event;
	o.userdata = c;
	if ((rc = saas_code_run(&x, c->ctx->client, id, code, &o, 0)) < 0) {
		res = aas_mcp_fail_saas(c, rc);
		goto out;
	}
	if (x->status == SAAS_CODE_TIMEDOUT) {
		res = aas_mcp_failf(c, "The code ran past %lld s and was interrupted; its context and variables stay. Pass a larger "
		                    "timeout_seconds (at most %d), or run long jobs in the background with run_command. What it "
		                    "printed: %.2000s",
		                    (long long)(timeout ? timeout : SAAS_CODE_TIMEOUT_DEFAULT_MS / 1000),
		                    SAAS_CODE_TIMEOUT_MAX_MS / 1000, x->stdout_data);
		goto out;
	}
	res = code_result(x);
out:
	for (size_t i = 0; envv && envv[i]; i++)
		free(envv[i]);
	free(envv);
	saas_code_execution_free(x);
	return res;
}
