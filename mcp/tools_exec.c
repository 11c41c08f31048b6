/*
 * The MCP tools of a sandbox's commands, files and ports: run_command (its
 * output as progress while it runs), write_file, read_file, list_files,
 * expose_port and unexpose_port (tools.h).
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools.h"

/* read_file returns at most this much unless asked for more (a whole file is context an agent pays for). */
#define READ_DEFAULT ((int64_t)1 << 20)
#define READ_MAX ((int64_t)16 << 20)

/*
 * run_command's output as progress, while it runs: one notification per
 * chunk, its text the message (base64 when not UTF-8, said in _meta). At most
 * the output the result keeps (max_output) per stream goes out this way, so
 * a transport that buffers notifications holds no more than the result will.
 */
struct run_progress {
	struct call *c;
	size_t sent[2];
	bool said_cut;
};

static int run_chunk(void *userdata, int stream, uint64_t offset, const void *data, size_t len)
{
	struct run_progress *p = userdata;
	struct call *c = p->c;
	int s = stream == SAAS_EXEC_STDERR;
	json_t *chunk, *n;

	if (aas_mcp_cancelled(c))
		return 1; /* notifications/cancelled: the command dies with all it started */
	if (p->sent[s] >= SAAS_EXEC_OUTPUT_DEFAULT) {
		if (!p->said_cut) {
			p->said_cut = true;
			aas_mcp_progress(c, "(more output: the result holds what was kept)");
		}
		return 0;
	}
	if (len > SAAS_EXEC_OUTPUT_DEFAULT - p->sent[s])
		len = SAAS_EXEC_OUTPUT_DEFAULT - p->sent[s];
	p->sent[s] += len;
	if (!(chunk = saas__wire_exec_chunk(stream, offset, data, len)))
		return 0;
	n = json_pack("{s:s,s:s,s:{s:O,s:I,s:O,s:{s:O,s:O,s:O}}}", "jsonrpc", "2.0", "method", "notifications/progress",
	              "params", "progressToken", (json_t *)c->progress, "progress", ++c->progress_n, "message",
	              json_object_get(chunk, json_is_string(json_object_get(chunk, "data")) ? "data" : "data_base64"),
	              "_meta", "stream", json_object_get(chunk, "stream"), "offset", json_object_get(chunk, "offset"),
	              "encoding", json_object_get(chunk, "data_encoding"));
	json_decref(chunk);
	if (n)
		c->ctx->notify(c->ctx->userdata, n);
	return 0;
}

json_t *aas_mcp_tool_run(struct call *c)
{
	saas_exec_options o = SAAS_EXEC_OPTIONS_INIT;
	const char *id, *cmd, *in = NULL;
	const json_t *env = json_object_get(c->args, "env");
	const char **envv = NULL;
	saas_execution *x = NULL;
	json_t *res = NULL, *data;
	int64_t timeout = 0;
	int rc;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id) || !aas_mcp_arg_str(c, "command", true, &cmd) ||
	    !aas_mcp_arg_str(c, "cwd", false, &o.cwd) || !aas_mcp_arg_str(c, "stdin", false, &in) ||
	    !aas_mcp_arg_int(c, "timeout_seconds", 1, SAAS_EXEC_TIMEOUT_MAX, &timeout))
		return aas_mcp_arg_fail(c);
	if (env && !json_is_null(env)) {
		const char *k;
		json_t *v;
		size_t n = 0;
		if (!json_is_object(env) || !(envv = calloc(json_object_size(env) + 1, sizeof(*envv))))
			return aas_mcp_bad_arg(c, "\"env\" must be an object of NAME: \"value\" strings."), aas_mcp_arg_fail(c);
		json_object_foreach((json_t *)env, k, v) {
			char *kv;
			if (!*k || strchr(k, '=')) {
				aas_mcp_bad_arg(c, "\"env\" names may not be empty or contain '='.");
				res = aas_mcp_arg_fail(c);
				goto out;
			}
			/* A NUL would cut the value short without a word. */
			if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
			    asprintf(&kv, "%s=%s", k, json_string_value(v)) < 0) {
				aas_mcp_bad_arg(c, "\"env\" values must be strings without NUL (\"%s\" is not).", k);
				res = aas_mcp_arg_fail(c);
				goto out;
			}
			envv[n++] = kv;
		}
		o.env = envv;
	}
	o.timeout_s = timeout;
	if (in) {
		o.stdin_data = in;
		o.stdin_len = strlen(in);
	}
	if (c->progress && c->ctx->notify) {
		struct run_progress p = { c, { 0, 0 }, false };
		saas_exec_callbacks cb = SAAS_EXEC_CALLBACKS_INIT;
		cb.output = run_chunk;
		cb.userdata = &p;
		rc = saas_exec_stream(&x, c->ctx->client, id, cmd, &o, &cb, 0);
	} else {
		rc = saas_exec(&x, c->ctx->client, id, cmd, &o, 0);
	}
	if (rc < 0) {
		res = aas_mcp_fail_saas(c, rc);
		goto out;
	}
	data = saas__wire_drop_nulls(saas__wire_execution(x));
	if (x->status == SAAS_EXEC_TIMEDOUT || x->status == SAAS_EXEC_FAILED) {
		char *text = json_dumps(data, JSON_COMPACT);
		if (x->status == SAAS_EXEC_TIMEDOUT)
			res = aas_mcp_failf(c, "The command timed out after %lld s and was killed, with everything it started. run_command waits for the command to "
			         "finish: start servers and other long-running processes in the background with `&` "
			         "(e.g. `cmd >/tmp/out.log 2>&1 &`), or pass a larger timeout_seconds (at most %d). "
			         "What it printed: %s",
			      (long long)(timeout ? timeout : SAAS_EXEC_TIMEOUT_DEFAULT), SAAS_EXEC_TIMEOUT_MAX,
			      text ? text : "");
		else
			res = aas_mcp_failf(c, "The command could not run: %s. get_sandbox shows whether the sandbox is still ready; "
			         "create_sandbox makes a new one.", x->error && *x->error ? x->error : "unknown error");
		free(text);
		json_decref(data);
		goto out;
	}
	res = aas_mcp_ok(data);
out:
	for (size_t i = 0; envv && envv[i]; i++)
		free((char *)envv[i]);
	free(envv);
	saas_execution_free(x);
	return res;
}

json_t *aas_mcp_tool_write(struct call *c)
{
	saas_file_write_options o = SAAS_FILE_WRITE_OPTIONS_INIT;
	const char *id, *path, *content, *enc, *mode;
	const json_t *cv = json_object_get(c->args, "content");
	unsigned char *bytes = NULL;
	size_t len;
	json_t *res;
	int rc;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id) || !aas_mcp_arg_str(c, "path", true, &path) ||
	    !aas_mcp_arg_str(c, "encoding", false, &enc) || !aas_mcp_arg_str(c, "mode", false, &mode))
		return aas_mcp_arg_fail(c);
	if (!json_is_string(cv))
		return aas_mcp_bad_arg(c, "\"content\" is required and must be a string (use encoding \"base64\" for binary)."),
		       aas_mcp_arg_fail(c);
	content = json_string_value(cv);
	len = json_string_length(cv);
	if (mode) {
		/* The schema's ^[0-7]{1,4}$: strtoul() alone would take " 755", "+755" and "-0". */
		size_t n = strlen(mode);
		if (n < 1 || n > 4 || strspn(mode, "01234567") != n)
			return aas_mcp_bad_arg(c, "\"mode\" must be octal permission bits such as \"0644\" or \"755\"."),
			       aas_mcp_arg_fail(c);
		o.mode = (unsigned int)strtoul(mode, NULL, 8);
	}
	if (enc && strcmp(enc, "base64") == 0) {
		if (saas_base64_decode((void **)&bytes, &len, content, len) < 0)
			return aas_mcp_bad_arg(c, "\"content\" is not valid base64."), aas_mcp_arg_fail(c);
		rc = saas_file_write(c->ctx->client, id, path, bytes, len, &o);
	} else if (!enc || strcmp(enc, "utf-8") == 0 || strcmp(enc, "utf8") == 0) {
		rc = saas_file_write(c->ctx->client, id, path, content, len, &o);
	} else {
		return aas_mcp_bad_arg(c, "\"encoding\" must be \"utf-8\" or \"base64\"."), aas_mcp_arg_fail(c);
	}
	if (rc < 0)
		res = aas_mcp_fail_saas(c, rc);
	else
		res = aas_mcp_ok(json_pack("{s:s,s:s,s:I}", "sandbox_id", id, "path", path, "bytes", (json_int_t)len));
	saas_free(bytes);
	return res;
}

json_t *aas_mcp_tool_read(struct call *c)
{
	const char *id, *path;
	int64_t max = READ_DEFAULT;
	void *data = NULL;
	size_t len = 0;
	json_t *o;
	int rc;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id) || !aas_mcp_arg_str(c, "path", true, &path) ||
	    !aas_mcp_arg_int(c, "max_bytes", 1, READ_MAX, &max))
		return aas_mcp_arg_fail(c);
	if ((rc = saas_file_read(&data, &len, c->ctx->client, id, path, max)) < 0) {
		if (rc == SAAS_ETOOBIG)
			return aas_mcp_failf(c, "read_file: %s is larger than max_bytes (%lld). Pass a larger max_bytes (at most "
			                        "%lld), or read part of it with run_command (head -c, tail, split).",
			                     path, (long long)max, (long long)READ_MAX);
		return aas_mcp_fail_saas(c, rc);
	}
	o = json_pack("{s:s,s:s,s:I}", "sandbox_id", id, "path", path, "bytes", (json_int_t)len);
	aas_mcp_set_bytes(o, "content", "encoding", data, len);
	saas_free(data);
	return aas_mcp_ok(o);
}

json_t *aas_mcp_tool_list_files(struct call *c)
{
	const char *id, *path;
	int64_t depth = 0, max = 0;
	saas_file_list *l = NULL;
	json_t *data, *res;
	int rc;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id) || !aas_mcp_arg_str(c, "path", false, &path) ||
	    !aas_mcp_arg_int(c, "max_depth", 1, SAAS_LIST_DEPTH_MAX, &depth) ||
	    !aas_mcp_arg_int(c, "max_entries", 1, SAAS_LIST_ENTRIES_MAX, &max))
		return aas_mcp_arg_fail(c);
	if ((rc = saas_file_list_get(&l, c->ctx->client, id, path, (unsigned)depth, (unsigned)max, 0)) < 0)
		return aas_mcp_fail_saas(c, rc);
	if ((data = saas__wire_file_list(l)))
		json_object_set_new(data, "sandbox_id", json_string(id));
	res = aas_mcp_ok(saas__wire_drop_nulls(data));
	saas_file_list_free(l);
	return res;
}

json_t *aas_mcp_tool_expose(struct call *c)
{
	const char *id;
	int64_t port = 0;
	char *url = NULL;
	json_t *res;
	int rc;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id) || !aas_mcp_arg_int(c, "port", 1, 65535, &port))
		return aas_mcp_arg_fail(c);
	if (!port)
		return aas_mcp_bad_arg(c, "\"port\" is required."), aas_mcp_arg_fail(c);
	if ((rc = saas_port_expose(&url, c->ctx->client, id, (unsigned)port, 0)) < 0)
		return aas_mcp_fail_saas(c, rc);
	res = aas_mcp_ok(saas__wire_port(id, (unsigned int)port, url));
	saas_free(url);
	return res;
}

json_t *aas_mcp_tool_unexpose(struct call *c)
{
	const char *id;
	int64_t port = 0;
	int rc;

	if (!aas_mcp_arg_str(c, "sandbox_id", true, &id) || !aas_mcp_arg_int(c, "port", 1, 65535, &port))
		return aas_mcp_arg_fail(c);
	if (!port)
		return aas_mcp_bad_arg(c, "\"port\" is required."), aas_mcp_arg_fail(c);
	if ((rc = saas_port_unexpose(c->ctx->client, id, (unsigned)port)) < 0)
		return aas_mcp_fail_saas(c, rc);
	if (c->ctx->ended)
		c->ctx->ended(id, (unsigned)port);
	return aas_mcp_ok(json_pack("{s:s,s:I,s:b}", "sandbox_id", id, "port", (json_int_t)port, "exposed", 0));
}
