/*
 * The remote provider: the client calls over aas-server's REST API (v1), as
 * libvirt's remote driver serves the same API over its wire protocol.
 * client.c has already checked every argument, so each operation here only
 * builds a request and turns the answer back into the library's structs.
 * Money comes from the integer *_micro fields, never the decimal strings.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remote/http.h"
#include "wire/wire.h"

#define EXEC_MARGIN_MS SAAS_REMOTE_EXEC_MARGIN_MS

static struct saas_remote *R(saas_client *c)
{
	return c->provider;
}

/* ---- answers to structs: lib/wire ---- */

/*
 * An answer through its decoder (lib/wire), with the library's error detail:
 * a malformed answer is the server's protocol error, named by its member.
 */
int saas__remote_decoded(int rc, const char *bad)
{
	if (rc == SAAS_ENOMEM)
		return saas__oom();
	if (rc < 0)
		return saas__error(SAAS_EPROTOCOL, SAAS_ERRCLASS_HTTP, 200, "the server's answer has no valid %s",
		                   bad ? bad : "JSON");
	return rc;
}

static int decoded(int rc, const char *bad)
{
	return saas__remote_decoded(rc, bad);
}

/* ---- requests ---- */

/* "/v1/sandboxes/ID" + suffix, the id escaped. */
char *saas__remote_path(const char *collection, const char *id, const char *suffix)
{
	char *eid = saas__url_escape(id), *path = NULL;

	if (!eid)
		return NULL;
	if (asprintf(&path, "/v1/%s/%s%s", collection, eid, suffix ? suffix : "") < 0) {
		saas__oom();
		path = NULL;
	}
	free(eid);
	return path;
}

static char *sandbox_path(const char *collection, const char *id, const char *suffix)
{
	return saas__remote_path(collection, id, suffix);
}

/* A request whose answer, if wanted, is a sandbox. */
static int sandbox_call(saas_client *c, const char *method, char *path, json_t *body, bool idempotent,
                        saas_sandbox **out)
{
	struct saas_http_req req = { 0 };
	const char *bad = NULL;
	json_t *ans = NULL;
	int rc;

	if (!path) {
		json_decref(body);
		return SAAS_ENOMEM;
	}
	req.method = method;
	req.path = path;
	req.body = body;
	req.idempotent = idempotent;
	rc = saas__http(R(c), &req, &ans);
	if (rc == SAAS_OK && out)
		rc = decoded(saas__wire_sandbox_decode(out, ans, &bad), bad);
	json_decref(ans);
	json_decref(body);
	free(path);
	return rc;
}

static int get_json(saas_client *c, const char *path, json_t **ans)
{
	struct saas_http_req req = { 0 };

	req.method = "GET";
	req.path = path;
	req.idempotent = true;
	return saas__http(R(c), &req, ans);
}

static int remote_account(saas_client *c, saas_account_info **out)
{
	const char *bad = NULL;
	json_t *ans = NULL;
	int rc;

	if ((rc = get_json(c, "/v1/account", &ans)) == SAAS_OK)
		rc = decoded(saas__wire_account_decode(out, ans, &bad), bad);
	json_decref(ans);
	return rc;
}

static void format_time(char *buf, size_t size, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	if (strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
		buf[0] = '\0';
	else
		snprintf(buf + strlen(buf), size - strlen(buf), ".%03dZ", (int)(ms % 1000));
}

static int remote_usage(saas_client *c, int64_t from_ms, int64_t to_ms, saas_usage **out)
{
	char from[40] = "", to[40] = "", path[160];
	const char *bad = NULL;
	json_t *ans = NULL;
	int rc;

	if (from_ms)
		format_time(from, sizeof(from), from_ms);
	if (to_ms)
		format_time(to, sizeof(to), to_ms);
	/* RFC 3339 needs no escaping but ':', which a query value may hold as is. */
	snprintf(path, sizeof(path), "/v1/usage?from=%s&to=%s", from, to);
	if ((rc = get_json(c, path, &ans)) == SAAS_OK)
		rc = decoded(saas__wire_usage_decode(out, ans, &bad), bad);
	json_decref(ans);
	return rc;
}

static int remote_sandbox_metrics(saas_client *c, const char *id, int64_t start_ms, int64_t end_ms,
                                  saas_metric_list **out)
{
	char start[40] = "", end[40] = "", suffix[120], *path;
	const char *bad = NULL;
	json_t *ans = NULL;
	int rc;

	if (start_ms)
		format_time(start, sizeof(start), start_ms);
	if (end_ms)
		format_time(end, sizeof(end), end_ms);
	snprintf(suffix, sizeof(suffix), "/metrics?start=%s&end=%s", start, end);
	if (!(path = saas__remote_path("sandboxes", id, suffix)))
		return SAAS_ENOMEM;
	if ((rc = get_json(c, path, &ans)) == SAAS_OK)
		rc = decoded(saas__wire_metric_list_decode(out, ans, &bad), bad);
	json_decref(ans);
	free(path);
	return rc;
}

/* The body member of a validated network: a mode's name, or the policy as an object. */
static json_t *network_json(const struct saas__network *net)
{
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;

	/* As a name where one says it all: a server from before policies still understands it. */
	if (net->mode != SAAS_NETWORK_POLICY)
		return json_string(saas_network_mode_name(net->mode));
	spec.mode = net->mode;
	spec.allow = (const char *const *)net->allow;
	spec.deny = (const char *const *)net->deny;
	return saas__wire_network_spec(&spec);
}

static int remote_sandbox_create(saas_client *c, const saas_create_options *o, const struct saas__network *net,
                                 saas_sandbox **out)
{
	json_t *body = json_object();
	char *path = saas__strdup("/v1/sandboxes");

	if (!body || !path) {
		json_decref(body);
		free(path);
		return saas__oom();
	}
	if (o->size)
		json_object_set_new(body, "size", json_string(o->size));
	if (o->image)
		json_object_set_new(body, "image", json_string(o->image));
	if (net)
		json_object_set_new(body, "network", network_json(net));
	if (o->timeout_s)
		json_object_set_new(body, "timeout", json_integer((json_int_t)o->timeout_s));
	if (o->metadata)
		json_object_set_new(body, "metadata", saas__wire_pairs(o->metadata));
	if (o->envs)
		json_object_set_new(body, "envs", saas__wire_pairs(o->envs));
	if (o->on_timeout == SAAS_ON_TIMEOUT_PAUSE)
		json_object_set_new(body, "on_timeout", json_string("pause"));
	if (o->auto_resume)
		json_object_set_new(body, "auto_resume", json_true());
	return sandbox_call(c, "POST", path, body, false, out);
}

static int remote_sandbox_get(saas_client *c, const char *id, unsigned int flags, saas_sandbox **out)
{
	char *path = sandbox_path("sandboxes", id, NULL), *recorded = NULL;

	/* The server reads the counters as it is asked (docs/rest.md); the flag is its query. */
	if (path && (flags & SAAS_GET_RECORDED)) {
		if (asprintf(&recorded, "%s?counters=recorded", path) < 0)
			recorded = NULL;
		free(path);
		path = recorded;
	}
	return sandbox_call(c, "GET", path, NULL, true, out);
}

static int remote_sandbox_list(saas_client *c, const char *cursor, unsigned int limit, const char *const *metadata,
                               unsigned int flags, saas_sandbox_list **out)
{
	char *ecur = cursor ? saas__url_escape(cursor) : NULL, *path = NULL;
	const char *status = flags & SAAS_LIST_ACTIVE ? "active" : flags & SAAS_LIST_DESTROYED ? "destroyed" : "all";
	const char *bad = NULL;
	saas__buf q = SAAS__BUF_INIT;
	char *emeta = NULL;
	json_t *ans = NULL;
	int rc = SAAS_OK;

	if (cursor && !ecur)
		return SAAS_ENOMEM;
	/* metadata=ESCAPED("K1=V1&K2=V2"), each key and value escaped within first (docs/rest.md). */
	for (size_t i = 0; rc == SAAS_OK && metadata && metadata[i]; i++) {
		const char *eq = strchr(metadata[i], '=');
		char *key = strndup(metadata[i], (size_t)(eq - metadata[i]));
		char *k = key ? saas__url_escape(key) : NULL, *v = saas__url_escape(eq + 1);
		rc = k && v ? saas__buf_printf(&q, "%s%s=%s", i ? "&" : "", k, v) : SAAS_ENOMEM;
		free(key);
		free(k);
		free(v);
	}
	if (rc == SAAS_OK && q.data && !(emeta = saas__url_escape(q.data)))
		rc = SAAS_ENOMEM;
	if (rc < 0 || asprintf(&path, "/v1/sandboxes?status=%s&limit=%u%s%s%s%s%s", status, limit,
	                       flags & SAAS_LIST_RECORDED ? "&counters=recorded" : "", ecur ? "&cursor=" : "",
	                       ecur ? ecur : "", emeta ? "&metadata=" : "", emeta ? emeta : "") < 0) {
		free(ecur);
		free(emeta);
		saas__buf_free(&q);
		return saas__oom();
	}
	free(ecur);
	free(emeta);
	saas__buf_free(&q);
	if ((rc = get_json(c, path, &ans)) == SAAS_OK)
		rc = decoded(saas__wire_sandbox_list_decode(out, ans, &bad), bad);
	json_decref(ans);
	free(path);
	return rc;
}

static int remote_sandbox_extend(saas_client *c, const char *id, int64_t seconds, unsigned int flags,
                                 saas_sandbox **out)
{
	json_t *body = json_pack("{s:I}", (flags & SAAS_EXTEND_FROM_NOW) ? "timeout" : "seconds", (json_int_t)seconds);

	if (!body)
		return saas__oom();
	return sandbox_call(c, "POST", sandbox_path("sandboxes", id, "/extend"), body, false, out);
}

static int remote_sandbox_destroy(saas_client *c, const char *id, saas_sandbox **out)
{
	return sandbox_call(c, "DELETE", sandbox_path("sandboxes", id, NULL), NULL, true, out);
}

int saas__remote_exec_body(const char *command, const saas_exec_options *o, unsigned int flags, json_t **out)
{
	json_t *body = json_object(), *env = NULL;

	if (!body || json_object_set_new(body, "command", json_string(command)) < 0)
		goto oom;
	if (o->cwd && json_object_set_new(body, "cwd", json_string(o->cwd)) < 0)
		goto oom;
	if (o->env) {
		if (!(env = json_object()) || json_object_set_new(body, "env", env) < 0)
			goto oom;
		for (const char *const *e = o->env; *e; e++) {
			const char *eq = strchr(*e, '=');
			char *name = strndup(*e, (size_t)(eq - *e));
			int bad = !name || json_object_set_new(env, name, json_string(eq + 1)) < 0;
			free(name);
			if (bad)
				goto oom;
		}
	}
	if (o->stdin_len) {
		/* Always base64: stdin is bytes. */
		char *b = saas_base64_encode(o->stdin_data, o->stdin_len);
		int bad = !b || json_object_set_new(body, "stdin_base64", json_string(b)) < 0;
		free(b);
		if (bad)
			goto oom;
	}
	if (o->timeout_s && json_object_set_new(body, "timeout", json_integer((json_int_t)o->timeout_s)) < 0)
		goto oom;
	if (o->max_output && json_object_set_new(body, "max_output", json_integer((json_int_t)o->max_output)) < 0)
		goto oom;
	if ((flags & SAAS_EXEC_BACKGROUND) && json_object_set_new(body, "background", json_true()) < 0)
		goto oom;
	if ((flags & SAAS_EXEC_STDIN_OPEN) && json_object_set_new(body, "stdin_open", json_true()) < 0)
		goto oom;
	*out = body;
	return SAAS_OK;
oom:
	json_decref(body);
	return saas__oom();
}

static int remote_exec(saas_client *c, const char *id, const char *command, const saas_exec_options *o,
                       unsigned int flags, saas_execution **out)
{
	struct saas_http_req req = { 0 };
	char *path = sandbox_path("sandboxes", id, "/exec");
	const char *bad = NULL;
	json_t *body = NULL, *ans = NULL;
	int64_t t = o->timeout_s ? o->timeout_s : SAAS_EXEC_TIMEOUT_DEFAULT;
	int rc;

	if (!path)
		return SAAS_ENOMEM;
	if ((rc = saas__remote_exec_body(command, o, flags, &body)) < 0)
		goto out;
	req.method = "POST";
	req.path = path;
	req.body = body;
	if (!(flags & SAAS_EXEC_BACKGROUND) && t * 1000 + EXEC_MARGIN_MS > R(c)->timeout_ms)
		req.timeout_ms = (long)(t * 1000 + EXEC_MARGIN_MS);
	if ((rc = saas__http(R(c), &req, &ans)) < 0)
		goto out;
	rc = decoded(saas__wire_execution_decode(out, ans, &bad), bad);
out:
	json_decref(ans);
	json_decref(body);
	free(path);
	return rc;
}

static int remote_execution_get(saas_client *c, const char *id, saas_execution **out)
{
	char *path = sandbox_path("executions", id, NULL);
	const char *bad = NULL;
	json_t *ans = NULL;
	int rc;

	if (!path)
		return SAAS_ENOMEM;
	if ((rc = get_json(c, path, &ans)) == SAAS_OK)
		rc = decoded(saas__wire_execution_decode(out, ans, &bad), bad);
	json_decref(ans);
	free(path);
	return rc;
}

/* "/v1/sandboxes/ID/files?path=P" + extra. */
static char *files_path(const char *id, const char *path, const char *extra)
{
	char *eid = saas__url_escape(id), *epath = path ? saas__url_escape(path) : saas__strdup(""), *out = NULL;

	if (eid && epath && asprintf(&out, "/v1/sandboxes/%s/files?path=%s%s", eid, epath, extra ? extra : "") < 0) {
		saas__oom();
		out = NULL;
	}
	free(eid);
	free(epath);
	return out;
}

static int remote_file_write(saas_client *c, const char *id, const char *path, saas_read_fn reader, void *ud,
                             int64_t size, unsigned int mode)
{
	struct saas_http_req req = { 0 };
	char extra[32] = "", *p;
	json_t *ans = NULL;
	int rc;

	if (mode)
		snprintf(extra, sizeof(extra), "&mode=%04o", mode);
	if (!(p = files_path(id, path, extra)))
		return SAAS_ENOMEM;
	req.method = "PUT";
	req.path = p;
	req.reader = reader;
	req.reader_ud = ud;
	req.upload_size = size;
	req.idempotent = true;
	req.transfer = true;
	rc = saas__http(R(c), &req, &ans);
	json_decref(ans);
	free(p);
	return rc;
}

static int remote_file_read(saas_client *c, const char *id, const char *path, int64_t max, saas_write_fn writer,
                            void *ud, int64_t *size)
{
	struct saas_http_req req = { 0 };
	char *p = files_path(id, path, NULL);
	int rc;

	if (!p)
		return SAAS_ENOMEM;
	req.method = "GET";
	req.path = p;
	req.writer = writer;
	req.writer_ud = ud;
	req.max = max;
	req.size = size;
	req.idempotent = true;
	req.transfer = true;
	rc = saas__http(R(c), &req, NULL);
	free(p);
	return rc;
}

static int remote_file_list(saas_client *c, const char *id, const char *path, unsigned int depth,
                            unsigned int max_entries, saas_file_list **out)
{
	char extra[80], *p;
	const char *bad = NULL;
	json_t *ans = NULL;
	int rc;

	snprintf(extra, sizeof(extra), "&list=true&depth=%u&max_entries=%u", depth, max_entries);
	if (!(p = files_path(id, path, extra)))
		return SAAS_ENOMEM;
	if ((rc = get_json(c, p, &ans)) == SAAS_OK)
		rc = decoded(saas__wire_file_list_decode(out, ans, &bad), bad);
	json_decref(ans);
	free(p);
	return rc;
}

/* One of the files calls that move no bytes: METHOD on `p`, its JSON answer in *ans (may be NULL). */
static int files_call(saas_client *c, const char *method, char *p, bool idempotent, json_t **ans)
{
	struct saas_http_req req = { 0 };
	int rc;

	if (!p)
		return SAAS_ENOMEM;
	req.method = method;
	req.path = p;
	req.idempotent = idempotent;
	rc = saas__http(R(c), &req, ans);
	free(p);
	return rc;
}

static char *files_op_path(const char *id, const char *op, const char *path, const char *extra)
{
	char *eid = saas__url_escape(id), *epath = saas__url_escape(path), *out = NULL;

	if (eid && epath &&
	    asprintf(&out, "/v1/sandboxes/%s/files/%s?path=%s%s", eid, op, epath, extra ? extra : "") < 0) {
		saas__oom();
		out = NULL;
	}
	free(eid);
	free(epath);
	return out;
}

static int remote_file_mkdir(saas_client *c, const char *id, const char *path, int *created)
{
	json_t *ans = NULL, *v;
	int rc;

	/* Making a directory again is harmless: a retry may only turn "made" into "there". */
	if ((rc = files_call(c, "POST", files_op_path(id, "mkdir", path, NULL), true, &ans)) == SAAS_OK) {
		if (!json_is_boolean(v = json_object_get(ans, "created")))
			rc = decoded(SAAS_EPROTOCOL, "created");
		else
			*created = json_is_true(v);
	}
	json_decref(ans);
	return rc;
}

static int remote_file_remove(saas_client *c, const char *id, const char *path)
{
	json_t *ans = NULL;
	int rc;

	/* Not retried: a remove that went through and is sent again would say "not found". */
	rc = files_call(c, "DELETE", files_path(id, path, NULL), false, &ans);
	json_decref(ans);
	return rc;
}

static int remote_file_rename(saas_client *c, const char *id, const char *from, const char *to, unsigned int flags)
{
	char *eto = saas__url_escape(to), *extra = NULL;
	json_t *ans = NULL;
	int rc;

	if (!eto || asprintf(&extra, "&to=%s%s", eto, (flags & SAAS_FILE_RENAME_REPLACE) ? "&replace=true" : "") < 0) {
		free(eto);
		return saas__oom();
	}
	rc = files_call(c, "POST", files_op_path(id, "move", from, extra), false, &ans);
	json_decref(ans);
	free(eto);
	free(extra);
	return rc;
}

static int remote_port_expose(saas_client *c, const char *id, unsigned int port, char **url)
{
	struct saas_http_req req = { 0 };
	char *path = sandbox_path("sandboxes", id, "/ports");
	json_t *body = json_pack("{s:i}", "port", (int)port), *ans = NULL;
	int rc;

	if (!path || !body) {
		rc = saas__oom();
		goto out;
	}
	req.method = "POST";
	req.path = path;
	req.body = body;
	req.idempotent = false;
	if ((rc = saas__http(R(c), &req, &ans)) < 0)
		goto out;
	if (!json_is_string(json_object_get(ans, "url"))) {
		rc = decoded(SAAS_EPROTOCOL, "url");
		goto out;
	}
	if (!(*url = saas__strdup(json_string_value(json_object_get(ans, "url")))))
		rc = SAAS_ENOMEM;
out:
	json_decref(ans);
	json_decref(body);
	free(path);
	return rc;
}

static int remote_port_unexpose(saas_client *c, const char *id, unsigned int port)
{
	struct saas_http_req req = { 0 };
	char suffix[32], *path;
	json_t *ans = NULL;
	int rc;

	snprintf(suffix, sizeof(suffix), "/ports/%u", port);
	if (!(path = sandbox_path("sandboxes", id, suffix)))
		return SAAS_ENOMEM;
	req.method = "DELETE";
	req.path = path;
	req.idempotent = true; /* un-exposing twice is the same as once */
	rc = saas__http(R(c), &req, &ans);
	json_decref(ans);
	free(path);
	return rc;
}

static int remote_port_connect(saas_client *c, const char *id, unsigned int port, int *fd)
{
	(void)c;
	(void)fd;
	return saas__error(SAAS_ENOTSUP, SAAS_ERRCLASS_ARGS, 0,
	                   "a remote client cannot open tunnels: expose port %u of %s with saas_port_expose() "
	                   "and connect to its preview URL",
	                   port, id);
}

static void remote_free(saas_client *c)
{
	struct saas_remote *r = R(c);

	if (!r)
		return;
	for (size_t i = 0; i < r->npool; i++)
		curl_multi_cleanup(r->pool[i]);
	pthread_mutex_destroy(&r->mu);
	free(r->base);
	if (r->auth_header) {
		/* The key should not linger in freed memory. */
		memset(r->auth_header, 0, strlen(r->auth_header));
		free(r->auth_header);
	}
	free(r->user_agent);
	free(r->ca_file);
	free(r);
	c->provider = NULL;
}

static int remote_sandbox_network_set(saas_client *c, const char *id, const struct saas__network *net,
                                      saas_sandbox **out)
{
	saas_network_spec spec = SAAS_NETWORK_SPEC_INIT;
	json_t *body;

	spec.mode = net->mode;
	spec.allow = (const char *const *)net->allow;
	spec.deny = (const char *const *)net->deny;
	if (!(body = saas__wire_network_spec(&spec)))
		return saas__oom();
	/* Idempotent: a PUT of the same policy twice leaves one policy. */
	return sandbox_call(c, "PUT", sandbox_path("sandboxes", id, "/network"), body, true, out);
}

static int remote_sandbox_fork(saas_client *c, const char *id, unsigned int count, int64_t timeout_s,
                               const struct saas__network *net, saas_sandbox_list **out)
{
	struct saas_http_req req = { 0 };
	json_t *body = json_pack("{s:I}", "count", (json_int_t)count), *ans = NULL;
	char *path = sandbox_path("sandboxes", id, "/fork");
	const char *bad = NULL;
	int rc = SAAS_ENOMEM;

	if (!body || !path)
		goto out;
	if (timeout_s)
		json_object_set_new(body, "timeout", json_integer(timeout_s));
	if (net)
		json_object_set_new(body, "network", network_json(net));
	req.method = "POST";
	req.path = path;
	req.body = body;
	/* Not idempotent: a retry after a lost answer would make the children twice. */
	rc = saas__http(R(c), &req, &ans);
	if (rc == SAAS_OK) {
		saas_sandbox_list *list = NULL;
		rc = decoded(saas__wire_sandbox_list_decode(&list, ans, &bad), bad);
		if (out)
			*out = list;
		else
			saas_sandbox_list_free(list);
	}
out:
	json_decref(ans);
	json_decref(body);
	free(path);
	return rc;
}

static int remote_sandbox_pause(saas_client *c, const char *id, saas_sandbox **out)
{
	return sandbox_call(c, "POST", sandbox_path("sandboxes", id, "/pause"), NULL, false, out);
}

static int remote_sandbox_resume(saas_client *c, const char *id, saas_sandbox **out)
{
	return sandbox_call(c, "POST", sandbox_path("sandboxes", id, "/resume"), NULL, false, out);
}

static const struct saas__client_ops remote_ops = {
	.account = remote_account,
	.usage = remote_usage,
	.sandbox_create = remote_sandbox_create,
	.sandbox_get = remote_sandbox_get,
	.sandbox_list = remote_sandbox_list,
	.sandbox_extend = remote_sandbox_extend,
	.sandbox_destroy = remote_sandbox_destroy,
	.exec = remote_exec,
	.execution_get = remote_execution_get,
	.file_write = remote_file_write,
	.file_read = remote_file_read,
	.file_list = remote_file_list,
	.port_expose = remote_port_expose,
	.port_connect = remote_port_connect,
	.port_unexpose = remote_port_unexpose,
	.free = remote_free,
	.sandbox_network_set = remote_sandbox_network_set,
	.pty_open = saas__remote_pty_open,
	.exec_stream = saas__remote_exec_stream,
	.execution_follow = saas__remote_execution_follow,
	.execution_stdin = saas__remote_execution_stdin,
	.execution_signal = saas__remote_execution_signal,
	.execution_list_running = saas__remote_execution_list_running,
	.execution_cancel = saas__remote_execution_cancel,
	.sandbox_fork = remote_sandbox_fork,
	.sandbox_pause = remote_sandbox_pause,
	.sandbox_resume = remote_sandbox_resume,
	.execution_list = saas__remote_execution_list,
	.sandbox_metrics = remote_sandbox_metrics,
	.file_mkdir = remote_file_mkdir,
	.file_remove = remote_file_remove,
	.file_rename = remote_file_rename,
	.code_context_create = saas__remote_code_context_create,
	.code_context_list = saas__remote_code_context_list,
	.code_context_restart = saas__remote_code_context_restart,
	.code_context_delete = saas__remote_code_context_delete,
	.code_run = saas__remote_code_run,
};

/* ---- open ---- */

static char *str_printf(const char *fmt, ...) SAAS_PRINTF(1, 2);
static char *str_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The origin only: "http[s]://host[:port]" with at most a trailing '/'. */
static int check_base_url(const char *url, size_t *len)
{
	const char *host, *rest;

	if (!url || !*url)
		return saas__inval("base_url is missing; give the server's origin, e.g. http://127.0.0.1:8080");
	for (const unsigned char *p = (const unsigned char *)url; *p; p++)
		if (*p <= 0x20 || *p >= 0x7f)
			return saas__inval("base_url contains a space or a control character");
	if (strncmp(url, "http://", 7) == 0)
		host = url + 7;
	else if (strncmp(url, "https://", 8) == 0)
		host = url + 8;
	else
		return saas__inval("base_url must start with http:// or https://");
	rest = host + strcspn(host, "/?#");
	if (rest == host || *host == ':' || strchr(host, '@') != NULL)
		return saas__inval("base_url has no host (or holds credentials); give scheme://host[:port]");
	if (*rest && strcmp(rest, "/") != 0)
		return saas__inval("base_url must be the server's origin only (scheme://host[:port], e.g. "
		                   "http://127.0.0.1:8080), without \"%s\": the client adds /v1 itself",
		                   rest);
	*len = (size_t)(rest - url);
	return SAAS_OK;
}

SAAS_EXTERN(int) saas_client_open_remote(saas_client **out, const char *base_url, const char *api_key,
                                         const saas_remote_options *options, unsigned int flags)
{
	static const size_t sizes[] = { 0, sizeof(saas_remote_options) };
	saas_remote_options opts = SAAS_REMOTE_OPTIONS_INIT;
	const saas_remote_options *o = &opts;
	struct saas_remote *r = NULL;
	saas_client *c = NULL;
	saas_account_info *ai = NULL;
	size_t len = 0;
	int rc;

	saas__error_clear();
	if (!out)
		return saas__inval("out is NULL");
	*out = NULL;
	if ((rc = check_base_url(base_url, &len)) < 0)
		return rc;
	if ((rc = saas__options_read(&opts, options, sizes, SAAS_REMOTE_OPTIONS_VERSION, "remote")) < 0)
		return rc;
	if (flags)
		return saas__inval("unknown flags 0x%x", flags);
	if (o->retries > 10)
		return saas__inval("retries %u is over 10", o->retries);
	if (o->user_agent && !saas__valid_text(o->user_agent, 256))
		return saas__inval("user_agent is too long or not printable");
	if (!api_key || !*api_key)
		return saas__error(SAAS_EAUTH, SAAS_ERRCLASS_AUTH, 0, "no API key given");
	if (strlen(api_key) > 256 || !saas__valid_text(api_key, 256) || strchr(api_key, ' '))
		return saas__error(SAAS_EAUTH, SAAS_ERRCLASS_AUTH, 0, "invalid API key");
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return saas__error(SAAS_ENETWORK, SAAS_ERRCLASS_HTTP, 0, "curl_global_init failed: %s",
		                   curl_easy_strerror(curl_init_rc));

	if (!(c = calloc(1, sizeof(*c))) || !(r = calloc(1, sizeof(*r)))) {
		free(c);
		return saas__oom();
	}
	c->ops = &remote_ops;
	c->provider = r;
	pthread_mutex_init(&r->mu, NULL);
	r->connect_timeout_ms = o->connect_timeout_ms ? (long)o->connect_timeout_ms : 10000L;
	r->timeout_ms = o->timeout_ms ? (long)o->timeout_ms : 300000L;
	r->verify_tls = o->verify_tls;
	r->retries = o->retries;
	if (!(r->base = strndup(base_url, len)) || !(r->auth_header = str_printf("Authorization: Bearer %s", api_key)) ||
	    (o->ca_file && !(r->ca_file = strdup(o->ca_file))) ||
	    !(r->user_agent = o->user_agent ? strdup(o->user_agent) : str_printf("libsaas/%s", saas_version()))) {
		rc = saas__oom();
		goto fail;
	}
	/* Authenticate now, so that a wrong key fails here as it does locally. */
	if ((rc = remote_account(c, &ai)) < 0)
		goto fail;
	saas__strlcpy(c->account_id, ai->id, sizeof(c->account_id));
	saas_account_info_free(ai);
	*out = c;
	return SAAS_OK;
fail:
	saas_client_free(c);
	return rc;
}
